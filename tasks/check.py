"""Stage 4: the release gates for one trained generator; writes checks.json."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task

from pipelines.io import read_json, write_json
from pipelines.privacy.gates import ledger_gate
from tasks import common
from tasks.artifacts import publish


@task(name="check")
def check(params: dict[str, Any], generator: str, root: Path = Path(".")) -> dict[str, Any]:
    p, sch = common.paths(params, root), common.schema(params, root)
    priv = params["privacy"]
    privacy = read_json(p.model(generator) / "privacy.json")
    gates = [ledger_gate(common.ledger(params, root), p.dataset, float(priv["delta"]),
                         float(priv["lifetime_epsilon"]), privacy["ledger_row_ids"])]
    result = {"generator": generator, "dataset": p.dataset, "passed": all(g.passed for g in gates),
              "gates": [g.to_dict() for g in gates], "hashes": common.hashes(params, "check", sch, generator)}
    write_json(p.checks(generator), result)
    publish(f"{p.dataset}-{generator}-checks", markdown=(
        f"## Gates for `{generator}`: {'PASSED' if result['passed'] else 'FAILED'}"),
        table=[{"gate": g.name, "passed": g.passed} for g in gates])
    return result
