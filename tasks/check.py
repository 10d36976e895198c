"""Stage 6: the release gates for one trained and evaluated generator; writes checks.json.

Runs after evaluate@gen: the privacy-risk gates (params.yaml `risk_gates`) read the attack results in
metrics.json, and the utility gate applies `utility_gate`'s policy to evaluate's utility verdict
(docs/privacy-risk.md)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from prefect import task

from pipelines.evaluation import verdict
from pipelines.config import risk_thresholds, utility_settings
from pipelines.evaluation.attacks.gates import risk_gates
from pipelines.generators.registry import load_generator
from pipelines.io import read_json, write_json
from pipelines.privacy.gates import GateResult, ledger_gate
from tasks import common, unselected
from tasks.artifacts import publish


def gate_summary(gate: GateResult) -> dict[str, Any]:
    """The p-values a reader of the artefact table wants next to pass/fail."""
    ev = gate.evidence
    return {f"{test}_p_value": ev[test]["p_value"] for test in ("ksd", "mmd") if test in ev}


@task(name="check")
def check(params: dict[str, Any], generator: str, root: Path = Path(".")) -> dict[str, Any]:
    p, sch = common.paths(params, root), common.schema(params, root)
    priv = params["privacy"]
    skipped = unselected.write("check", p, generator)
    if skipped is not None:  # not selected: nothing to check, nothing to release (tasks/release.py reads `selected`)
        return skipped
    privacy = read_json(p.model(generator) / "privacy.json")
    head, head_file = common.released_head(params, root)  # deleting ledger rows up to it fails the gate
    gates = [ledger_gate(common.ledger(params, root), p.dataset, float(priv["delta"]),
                         float(priv["lifetime_epsilon"]), privacy["ledger_row_ids"],
                         bool(priv.get("internal_release", False)), expect_head=head, head_source=head_file)]
    model = load_generator(generator, p.model(generator))
    if hasattr(model, "release_gates"):  # a generator's own gates (e.g. PPEM's α-LMDP tests) may read real rows (rule 6)
        gates += model.release_gates(pd.read_parquet(p.prepared / "train_encoded.parquet").to_numpy())
    metrics = read_json(p.metrics(generator))
    gates += risk_gates(metrics["privacy_risk"], risk_thresholds(params.get("risk_gates")))
    gates.append(verdict.utility_gate(metrics["utility_verdict"], utility_settings(params.get("utility_gate"))))
    result = {"generator": generator, "dataset": p.dataset, "passed": all(g.passed for g in gates),
              "gates": [g.to_dict() for g in gates], "hashes": common.hashes(params, "check", sch, generator)}
    write_json(p.checks(generator), result)
    publish(f"{p.dataset}-{generator}-checks", markdown=(
        f"## Gates for `{generator}`: {'PASSED' if result['passed'] else 'FAILED'}"),
        table=[{"gate": g.name, "passed": g.passed, **gate_summary(g)} for g in gates])
    return result
