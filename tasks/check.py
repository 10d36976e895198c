"""Stage 6: the release gates for one trained and evaluated generator; writes checks.json.

Runs after evaluate@gen. Two gates decide publication and their bits are public: the ledger gate (reads only the
ledger) and the DP release test (pipelines/privacy/release_test.py, ε = `release.test_epsilon`, charged to the
ledger as check@<gen>). The others read real rows outside any DP mechanism: a generator's own gates, the
privacy-risk gates (params.yaml `risk_gates`, over the attack results in metrics.json) and the utility gate
(`utility_gate`'s policy on evaluate's verdict; docs/privacy-risk.md). With `release.non_dp_gates: advise`
(default) they are findings for the steward report only; with `refuse` they also block publication, and the
manifest then lists their bits as outside the DP guarantee."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from pipelines.evaluation import verdict
from pipelines.config import Config
from pipelines.data.encoded import EncodedTable
from pipelines.evaluation.attacks.gates import GATES as RISK_GATES, risk_gates
from pipelines.evaluation.outside_dp import EVALUATION_METRICS, UNAVAILABLE
from pipelines.generators.registry import load_generator
from pipelines.io import parquet_row_groups, read_json, sha256_file, sha256_text, write_json
from pipelines.gates.release import GateResult, ledger_gate
from pipelines.privacy.noise import NoiseSource, binding_facts, load_noise_key
from pipelines.privacy.release_test import near_counts, planned_event, release_test
from tasks import common, unselected
from tasks.artifacts import publish


def gate_summary(gate: GateResult) -> dict[str, Any]:
    """The p-values a reader of the artefact table wants next to pass/fail."""
    ev = gate.evidence
    return {f"{test}_p_value": ev[test]["p_value"] for test in ("ksd", "mmd") if test in ev}


DP_GATES = ("ledger", "release_test")  # the gates whose bits may be public (the ledger's metadata, a DP mechanism)


def release_test_gate(config: Config, generator: str, root: Path, run_id: str | None = None) -> GateResult:
    """The DP release test of `generator`'s table: `planned_event` reserved in the ledger (stage check@<gen>)
    before any row is read, the noisy bit, the event recorded. Run again on the same table, rows and settings
    (`inputs`, a hash: what the bit is a function of, nothing run-specific such as the model's run id or ledger
    rows), it returns the bit already paid for (`Paths.release_test`) instead of spending twice; its keyed noise
    is bound to the same `inputs`, so two runs of one release draw one bit."""
    p, sch, priv = common.paths(config, root), common.schema(config, root), config.privacy
    s, fraction = config.release.model_dump(), config.dataset.holdout_fraction
    radius = config.evaluate.attacks.near_duplicate_distance
    n_rows = len(EncodedTable(p.prepared / "train_encoded.parquet"))
    facts = {"synthetic": sha256_file(p.synthetic(generator)),
             **{side: sha256_file(p.prepared / f"{side}.parquet") for side in ("train", "holdout")},
             "settings": {k: s[k] for k in ("test_epsilon", "test_excess_max", "test_confidence")},
             "radius": radius, "holdout_fraction": fraction,
             "n_public": n_rows,  # the key as the paid bits were hashed with: renaming it would re-spend them
             **common.unit_facts(sch)}
    inputs = sha256_text(json.dumps(facts, sort_keys=True))
    led = common.ledger(config, root)
    prior = common.paid_before(p.release_test(generator), inputs, led, p.dataset, within="evidence")
    if prior is not None:  # the same table, rows and settings, still in the ledger
        return GateResult(prior["name"], prior["passed"], {**prior["evidence"], "reused": True})
    session = led.session(p.dataset, run_id or f"check-{uuid.uuid4().hex[:12]}", f"check@{generator}",
                          priv.delta, priv.lifetime_epsilon,
                          internal=priv.internal_release)
    session.reserve([planned_event(s["test_epsilon"], fraction, sch.max_rows)])  # nothing read before the budget
    noise = NoiseSource.keyed(load_noise_key(priv.noise_key_file, root), lambda: inputs,
                              f"{p.dataset}/check@{generator}",
                              binding_facts(common.hashes(config, "check", sch, generator), s["test_epsilon"],
                                            priv.delta)).overridden(config.generator(generator).get("noise_seed"))
    counts = near_counts(*(parquet_row_groups(path) for path in (p.prepared / "train.parquet", p.prepared /
                                                                    "holdout.parquet", p.synthetic(generator))),
                         sch.columns, radius)   # a row group at a time: the counts of the whole tables
    rng = noise.streams(private=True, seed=0).numpy("check:release_test")
    result = release_test(counts, n_rows, fraction, s, rng, sch.max_rows)
    rows = session.record([result.event])
    gate = GateResult("release_test", result.passed, {**result.evidence(), "inputs": inputs, "reused": False,
                                                      "ledger_row_ids": [*session.reservation.row_ids, *rows]})
    write_json(p.release_test(generator), {**gate.to_dict(), "ledger_row_hashes": led.row_hashes(
        p.dataset, gate.evidence["ledger_row_ids"])})
    return gate


def evaluation_gates(metrics: dict[str, Any], config: Config) -> list[GateResult]:
    """The privacy-risk gates (`risk_gates`) and the utility gate over evaluate's results. Where the real rows did not
    allow the evaluation (metrics.json's `evaluation_unavailable`: a holdout with one target class, say), each of them
    fails with that reason: under `release.non_dp_gates: advise` a finding in the steward report that decides
    nothing, under `refuse` a refusal (nothing unevaluated is published on the gates' word)."""
    reason = metrics.get(UNAVAILABLE)
    if reason is None:
        return [*risk_gates(metrics["privacy_risk"], config.risk_gates.model_dump()),
                verdict.utility_gate(metrics["utility_verdict"], config.utility_gate.model_dump())]
    return [GateResult(name, False, {"reason": f"not evaluated: {reason}", "outside_dp": EVALUATION_METRICS})
            for name in (*RISK_GATES, "utility")]


def check(config: Config, generator: str, root: Path = Path("."), run_id: str | None = None) -> dict[str, Any]:
    p, sch = common.paths(config, root), common.schema(config, root)
    priv = config.privacy
    skipped = unselected.write("check", p, generator)
    if skipped is not None:  # not selected: nothing to check, nothing to release (tasks/release.py reads `selected`)
        return skipped
    privacy = read_json(p.model(generator) / "privacy.json")
    head, head_file = common.released_head(p)  # deleting ledger rows up to it fails the gate
    gates = [ledger_gate(common.ledger(config, root), p.dataset, priv.delta,
                         priv.lifetime_epsilon, privacy["ledger_row_ids"],
                         priv.internal_release, expect_head=head, head_source=head_file)]
    gates.append(release_test_gate(config, generator, root, run_id))
    model = load_generator(generator, p.model(generator))
    gates += model.release_gates(EncodedTable(p.prepared / "train_encoded.parquet"))  # read only by a gate that needs it
    gates += evaluation_gates(read_json(p.metrics(generator)), config)
    policy = config.release.non_dp_gates
    deciding = gates if policy == "refuse" else [g for g in gates if g.name in DP_GATES]
    result = {"generator": generator, "dataset": p.dataset, "passed": all(g.passed for g in deciding),
              "non_dp_gates": policy, "deciding_gates": [g.name for g in deciding],
              "gates": [g.to_dict() for g in gates], "hashes": common.hashes(config, "check", sch, generator)}
    write_json(p.checks(generator), result)
    publish(f"{p.dataset}-{generator}-checks", markdown=(
        f"## Gates for `{generator}`: {'PASSED' if result['passed'] else 'FAILED'}"),
        table=[{"gate": g.name, "passed": g.passed, **gate_summary(g)} for g in gates])
    return result
