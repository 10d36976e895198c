"""Stage 6: the release gates for one trained and evaluated generator; writes checks.json.

Runs after evaluate@gen. Two gates decide publication and their bits are public: the ledger gate (reads only the
ledger) and the DP release test (pipelines/privacy/release_test.py, ε = `release.test_epsilon`, charged to the
ledger as check@<gen>). The others read real rows outside any DP mechanism: a generator's own gates, the
privacy-risk gates (params.yaml `risk_gates`, over the attack results in metrics.json) and the utility gate
(`utility_gate`'s policy on evaluate's verdict; docs/privacy-risk.md). With `release.non_dp_gates: advise`
(default) they are findings for the steward report only; with `refuse` they also block publication, and the
manifest then lists their bits as outside the DP guarantee (`pipelines.gates.policy.decide`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipelines.config import Config
from pipelines.data.encoded import EncodedTable
from pipelines.gates import policy
from pipelines.gates.evaluation import evaluation_gates
from pipelines.gates.ledger import ledger_gate
from pipelines.gates.release import GateResult
from pipelines.gates.release_test import release_test_gate, release_test_receipt
from pipelines.generators.registry import load_generator
from pipelines.io import parquet_row_groups, read_json, sha256_file, sha256_text, write_json
from pipelines.privacy.ledger import LedgerSession
from pipelines.privacy.noise import NoiseSource, binding_facts
from pipelines.privacy.paid import Binding, Receipt, paid
from pipelines.privacy.release_test import ReleaseTest, near_counts, planned_event, release_test
from tasks import common, unselected
from tasks.artifacts import publish


def gate_summary(gate: GateResult) -> dict[str, Any]:
    """The p-values a reader of the artefact table wants next to pass/fail."""
    ev = gate.evidence
    return {f"{test}_p_value": ev[test]["p_value"] for test in ("ksd", "mmd") if test in ev}


def paid_release_test(ctx: common.StageContext, generator: str) -> GateResult:
    """The DP release test of `generator`'s table, a paid step (`paid`): `planned_event` reserved in the ledger
    (stage check@<gen>) before any row is read, the noisy bit, the event recorded. Run again on the same table, rows
    and settings (`inputs`, a hash: what the bit is a function of, nothing run-specific such as the model's run id or
    ledger rows), it returns the bit already paid for (`Paths.release_test`) instead of spending twice; its keyed
    noise is bound to the same `inputs`, so two runs of one release draw one bit."""
    config, p, sch, priv = ctx.config, ctx.paths, ctx.schema, ctx.config.privacy
    s, fraction = config.release.model_dump(), config.dataset.holdout_fraction
    radius = config.evaluate.attacks.near_duplicate_distance
    n_rows = len(EncodedTable(p.prepared / "train_encoded.parquet"))
    facts = {
        "synthetic": sha256_file(p.synthetic(generator)),
        **{side: sha256_file(p.prepared / f"{side}.parquet") for side in ("train", "holdout")},
        "settings": {k: s[k] for k in ("test_epsilon", "test_excess_max", "test_confidence")},
        "radius": radius,
        "holdout_fraction": fraction,
        "n_public": n_rows,  # the key as the paid bits were hashed with: renaming it would re-spend them
        **common.unit_facts(sch),
    }
    inputs = sha256_text(json.dumps(facts, sort_keys=True))

    def test(session: LedgerSession, noise: NoiseSource) -> ReleaseTest:
        counts = near_counts(
            *(
                parquet_row_groups(path)
                for path in (p.prepared / "train.parquet", p.prepared / "holdout.parquet", p.synthetic(generator))
            ),
            sch.columns,
            radius,
        )  # a row group at a time: the counts of the whole tables
        rng = noise.streams(private=True, seed=0).numpy("check:release_test")
        return release_test(counts, n_rows, fraction, s, rng, sch.max_rows)

    def receipt(result: ReleaseTest, session: LedgerSession) -> dict[str, Any]:
        return release_test_receipt(result, inputs, [*session.reservation.row_ids, *session.row_ids])

    binding = Binding(
        ctx.noise_key,
        f"{p.dataset}/check@{generator}",
        lambda: inputs,
        binding_facts(ctx.hashes("check", generator), s["test_epsilon"], priv.delta),
        config.generator(generator).get("noise_seed"),
    )
    done = paid(
        ctx.ledger,
        ctx.account(f"check@{generator}", "check"),
        binding,
        test,
        planned=[planned_event(s["test_epsilon"], fraction, sch.max_rows)],
        actual=lambda r: [r.event],
        receipt=Receipt(p.release_test(generator), inputs, receipt, within="evidence"),
    )
    return release_test_gate(done.value, done.reused)


def check(config: Config, generator: str, root: Path = Path("."), run_id: str | None = None) -> dict[str, Any]:
    """The check stage of `generator` (module docstring); writes checks.json and returns its content."""
    return run(common.StageContext(config, root, run_id), generator)


def run(ctx: common.StageContext, generator: str) -> dict[str, Any]:
    """`check` in its stage context."""
    config, p, priv = ctx.config, ctx.paths, ctx.config.privacy
    skipped = unselected.write("check", p, generator)
    if skipped is not None:  # not selected: nothing to check, nothing to release (tasks/release.py reads `selected`)
        return skipped
    privacy = read_json(p.model(generator) / "privacy.json")
    head, head_file = common.released_head(p)  # deleting ledger rows up to it fails the gate
    gates = [
        ledger_gate(
            ctx.ledger,
            p.dataset,
            priv.delta,
            priv.lifetime_epsilon,
            privacy["ledger_row_ids"],
            priv.internal_release,
            expect_head=head,
            head_source=head_file,
        )
    ]
    gates.append(paid_release_test(ctx, generator))
    model = load_generator(generator, p.model(generator))
    gates += model.release_gates(
        EncodedTable(p.prepared / "train_encoded.parquet")
    )  # read only by a gate that needs it
    gates += evaluation_gates(read_json(p.metrics(generator)), config.risk_gates, config.utility_gate)
    result = {
        "generator": generator,
        "dataset": p.dataset,
        **policy.decide(gates, config.release.non_dp_gates),
        "gates": [g.to_dict() for g in gates],
        "hashes": ctx.hashes("check", generator),
    }
    write_json(p.checks(generator), result)
    publish(
        f"{p.dataset}-{generator}-checks",
        markdown=(f"## Gates for `{generator}`: {'PASSED' if result['passed'] else 'FAILED'}"),
        table=[{"gate": g.name, "passed": g.passed, **gate_summary(g)} for g in gates],
    )
    return result
