"""The public manifest of one generator's release (manifest.json in its bundle): DP or public values only.

Built from the stages' outputs (train's privacy.json, check's checks.json, evaluate's metrics.json, the weights'
release entry), the ledger's state when the release is bundled and the budget stage's allocation; the release id
is a content hash of the params, the model, the synthetic table and the released weights, so an unchanged release
keeps its id. tasks/release.py reads those inputs and writes the bundle.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from pipelines.data.schema import ROW_UNIT_NAME, PrivacyUnit
from pipelines.evaluation.outside_dp import DP_STATEMENT, public_gates, public_verdict, release_statements
from pipelines.reporting.report_words import unit_statement
from pipelines.io import sha256_text

LIBRARIES = (
    "torch",
    "opacus",
    "dp-accounting",
    "prefect",
    "dvc",
    "pandas",
    "pyarrow",
    "numpy",
    "scikit-learn",
    "great-expectations",
    "SQLAlchemy",
)


def library_versions() -> dict[str, str]:
    """Python's and the LIBRARIES' installed versions (the manifest's `libraries`)."""
    return {"python": platform.python_version(), **{name: version(name) for name in LIBRARIES}}


@dataclass(frozen=True)
class LedgerState:
    """What the manifest states of the data set's ledger when the release is bundled: the population whose lifetime
    budget the table shares and its tables, ε spent by every effective event (PLD and RDP, at the release's δ), the
    lifetime budget, and the chain's head."""

    population: str
    population_tables: list[str]
    spent: float
    spent_rdp: float
    delta: float
    lifetime_epsilon: float
    head: dict[str, Any]


def noise_seed_statement(keys: list[str]) -> str | None:
    """The manifest's plain sentence on the sections whose DP noise came from a fixed `noise_seed` (None: none)."""
    if not keys:
        return None
    return (
        f"The DP noise of {', '.join(keys)} was derived from a fixed noise seed written in the configuration, "
        "not from OS entropy or the steward's secret key: anyone who knows the configuration can regenerate "
        "that noise and subtract it, so this release has no differential-privacy guarantee against them. It is "
        "an internal release (privacy.internal_release: true) and must never leave the organisation."
    )


def release_budget(allocation: dict[str, Any], spent: float, lifetime: float) -> dict[str, Any]:
    """The release's budget for the manifest (all public: params and the budget stage's data-independent allocation,
    `allocation`, its release.json): `release_epsilon` (the configured ε of this release run),
    `epsilon_release_planned` (its planned events composed, PLD), `epsilon_allocated` ({generator or "weights": the ε
    it planned at}), and the data set's lifetime: `epsilon_lifetime_spent` (every ledger event so far, PLD) and
    `epsilon_lifetime_remaining`."""
    return {
        "release_epsilon": float(allocation["release_epsilon"]),
        "epsilon_release_planned": allocation["epsilon_composed"],
        "epsilon_allocated": {n: float(a["epsilon"]) for n, a in allocation["parts"].items()},
        "epsilon_lifetime_spent": spent,
        "epsilon_lifetime_remaining": max(lifetime - spent, 0.0),
    }


def discovery_statement(discovery: dict[str, Any]) -> dict[str, Any]:
    """Which parts of the schema were discovered, by which mechanism, at what ε and δ, and their ledger rows (the
    discover stage's output, pipelines/data/discovery.py): the rest of the schema is the steward's documentation."""
    steps = discovery["steps"]
    parts = [f"{s['column']}.{key}" for s in steps for key in s["keys"]]
    epsilon, delta = sum(s["epsilon"] for s in steps), sum(s["delta"] for s in steps)
    return {
        "parts": parts,
        "epsilon": epsilon,
        "delta": delta,
        "ledger_rows": discovery["ledger_row_ids"],
        "statement": f"{', '.join(parts)} were not in the table's documentation: they were found on the table by DP "
        "mechanisms (categories: partition selection, rare values published only as '(other)'; atoms: partition "
        "selection over the exact values; bounds: a noisy histogram over powers of two) at "
        f"ε = {epsilon:.3g}, δ = {delta:.3g} in all, charged to the ledger once and counted in "
        "epsilon_dataset_total.",
    }


def public_manifest(
    dataset: str,
    generator: str,
    *,
    privacy: dict[str, Any],
    checks: dict[str, Any],
    metrics: dict[str, Any],
    weights: dict[str, Any] | None,
    hashes: dict[str, str],
    unit: PrivacyUnit | None,
    max_rows: int,
    ledger: LedgerState,
    allocation: dict[str, Any],
    internal_release: bool,
    noise_seeded: list[str],
    libraries: dict[str, str],
    discovery: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The public manifest of `generator`'s release of `dataset` (module docstring). `privacy`, `checks` and
    `metrics`: train@gen's, check@gen's and evaluate@gen's outputs; `weights`: the release's weights entry
    (pipelines.weights.release.for_release; None: not weighted); `hashes`: the schema's, the params', the model's and
    the synthetic table's (the released weights' hash is added when they pass their gate); `unit` and `max_rows`: the
    schema's privacy unit; `noise_seeded`: the params keys whose noise came from a fixed noise_seed; `discovery`: the
    discover stage's output when the schema leaves parts of its domain to discovery (`discovery_statement`)."""
    hashes = dict(hashes)
    if weights is not None and weights["passed"]:  # refused weights are withheld; the table may still be released
        hashes["weights"] = weights["hash"]
    content = hashes["params"] + hashes["model"] + hashes["synthetic"] + hashes.get("weights", "")
    ledger_evidence = next(g["evidence"] for g in checks["gates"] if g["name"] == "ledger")
    tested = next(g for g in checks["gates"] if g["name"] == "release_test")  # the DP publish decision
    policy = checks["non_dp_gates"]  # release.non_dp_gates when check@gen ran
    gates = public_gates(checks["gates"], None if weights is None else weights["gate"], policy)
    verdict = public_verdict(checks["gates"], policy)
    outside = release_statements(gates, verdict)
    return {
        "dataset": dataset,
        "generator": generator,
        "drawn_by": privacy.get("drawn_by", generator),
        "release_id": f"{generator}-{sha256_text(content)[:12]}",
        "audience": "internal only" if internal_release else "public",
        "guarantee": ledger_evidence.get("label", "refused: the ledger gate failed"),
        "privacy": {
            "unit": ROW_UNIT_NAME if unit is None else unit.to_dict(),  # what one ε protects
            "unit_statement": unit_statement(None if unit is None else unit.column, max_rows),
            "population": ledger.population,
            "population_tables": ledger.population_tables,
            "epsilon_generator": privacy["epsilon_pld"],
            "epsilon_generator_rdp": privacy["epsilon_rdp"],
            "epsilon_dataset_total": ledger.spent,
            "epsilon_dataset_total_rdp": ledger.spent_rdp,
            "delta": ledger.delta,
            "lifetime_budget": ledger.lifetime_epsilon,
            **release_budget(allocation, ledger.spent, ledger.lifetime_epsilon),
            "ledger_rows": privacy["ledger_row_ids"] + tested["evidence"]["ledger_row_ids"],
            "release_test": {
                "epsilon": tested["evidence"]["epsilon"],
                "query": tested["evidence"]["query"],
                "ledger_rows": tested["evidence"]["ledger_row_ids"],
            },
            "ledger_head": ledger.head,
            "events": privacy["events"],
            "run_id": privacy["run_id"],
            "rows_public": privacy["rows_public"],
            "rows_public_source": privacy["rows_public_source"],
            "calibration": privacy.get("calibration"),
            **({"discovered_domain": discovery_statement(discovery)} if discovery else {}),
        },  # None: the samples are not calibrated
        "gates": gates,
        "rows": metrics["n_synthetic"],
        "utility_verdict": verdict,
        "weights": None
        if weights is None
        else {
            **weights["manifest"],
            "released": weights["passed"],
            **({} if weights["passed"] else {"withheld_because": weights["gate"]["evidence"]["refused_because"]}),
        },
        "computed_from_real_data_outside_dp_guarantee": outside,
        "every_public_value_private": not outside,
        **({"statement": DP_STATEMENT} if not outside else {}),
        "noise_seed_used": noise_seeded,
        "noise_seed_statement": noise_seed_statement(noise_seeded),
        "hashes": hashes,
        "libraries": libraries,
    }
