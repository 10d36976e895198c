"""What is computed from real rows outside the DP guarantee: the one place that states it.

Every artefact that holds a number read from real rows says so in words taken from here:
- evaluate: metrics.json `computed_on_real_data` (EVALUATION_METRICS) and the privacy-risk suite's
  `outside_dp` (PRIVACY_RISK_ATTACKS), which check@gen's risk gates copy into their evidence;
- check: the α-LMDP gate's `outside_dp` (ALPHA_LMDP_GATE);
- weight: weights.json `analysis.outside_dp` (WEIGHTED_ANALYSES);
- release: the public manifest's `computed_from_real_data_outside_dp_guarantee` (`release_statements`), with
  each public gate's `data_dependent` bit (`public_gates`) and the utility verdict word (`public_verdict`). With
  `release.non_dp_gates: advise` (default) no row-reading gate and no verdict reaches the manifest, the release
  decision is the DP release test's bit, and the list is empty (`DP_STATEMENT`).
And where a DP guarantee is claimed but not proven for the released output: MCMC_HEURISTIC, the guarantee of a
release any of whose events was not sampled exactly (`pipelines.privacy.events.exactly_sampled`: the support
points' exponential mechanism, run as a finite Metropolis-Hastings chain), which the ledger gate's label, hence
the manifest's `guarantee` and both reports, and the generator's privacy.json state (`sampler_facts`).
Only these statements live here; the numbers stay with the code that computes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.privacy.events import Event, exactly_sampled

EVALUATION_METRICS = (
    "every metric here uses the real train and/or holdout rows (marginal distances, "
    "TSTR/TRTR AUROC, dimension-wise probability and prediction, k-way marginal TV, "
    "PCA fitted on real training rows, Wasserstein scores, target accuracy, the "
    "scorecard, the utility verdict and its independent-marginals baseline, and every "
    "privacy-risk attack) and so do the plots; none is covered by "
    "the DP guarantee."
)
PRIVACY_RISK_ATTACKS = (
    "privacy-risk attacks (membership inference, attribute inference, singling out, linkability, "
    "inference, presence/attribute disclosure, exact-match and near-duplicate rates) computed on "
    "real training and holdout rows"
)
ALPHA_LMDP_GATE = "α-LMDP gate: KSD and MMD tests computed on real training rows of the protected columns"
WEIGHTED_ANALYSES = (
    "weighted analyses in weights.json (weighted Wasserstein-1 and MMD against the real holdout, "
    "AUROC on the real holdout of classifiers fitted with the weights, Bayesian logistic-regression "
    "posterior distance to the real training rows' posterior) computed on real rows"
)

MCMC_HEURISTIC = (
    "heuristic: the exponential mechanism's ε holds only for an exact sample; this release is the last "
    "state of a finite MCMC chain with no proven mixing bound"
)


def sampler_facts(events: Sequence[Event]) -> dict[str, Any]:
    """Whether every one of a release's `events` was sampled exactly ("exact_sampler") and, where not, the guarantee
    that holds instead ("guarantee": MCMC_HEURISTIC): the ε recorded is the exact mechanism's target."""
    exact = all(exactly_sampled(e) for e in events)
    return {"exact_sampler": exact, **({} if exact else {"guarantee": MCMC_HEURISTIC})}


UNAVAILABLE = "evaluation_unavailable"  # metrics.json / real_side.json: why the real side could not be evaluated


def unavailable_reason(error: Exception) -> str:
    """The steward's words for why the real-side evaluation could not run on these rows (a holdout with one target
    class or none, a degenerate column). Whether anything is published never depends on it: evaluate still writes
    the table, and the gates that read real rows fail with this reason (tasks/evaluate.py, tasks/check.py)."""
    return f"{type(error).__name__}: {error}"


PUBLIC_GATES = {"ledger"}  # gates that read only the privacy ledger (public metadata), never a row
DP_GATES = {"release_test"}  # gates whose bit is the output of a DP mechanism charged to the ledger
RELEASE_BIT = (
    "whether this table was released at all: the conjunction of the data-dependent gates' pass/fail bits listed here"
)
DP_STATEMENT = (
    "Every value in this bundle is public metadata or the output of a differentially private mechanism "
    "recorded in the ledger: whether it was released is the DP release test's bit and the ledger gate's; "
    "the gates and the utility verdict computed from real rows are in the steward report only."
)


def public_gates(gates: list[dict], weight_gate: dict[str, Any] | None, policy: str) -> list[dict[str, Any]]:
    """Each public gate's name and pass/fail bit, and whether that bit depends on real rows outside DP
    ("data_dependent"): the ledger gate reads only the ledger, the release test is a DP mechanism; the others read
    real rows and are listed only when they decide publication (`policy` "refuse"; "advise" keeps them in the
    steward report). The importance-weights gate (`weight_gate`, None when weights are not configured) reads only
    the DP weights (k̂ is post-processing) unless the estimator is non-private. No evidence is kept."""
    private = PUBLIC_GATES | DP_GATES
    out = [
        {"name": g["name"], "passed": bool(g["passed"]), "data_dependent": g["name"] not in private}
        for g in gates
        if policy == "refuse" or g["name"] in private
    ]
    if weight_gate is not None:
        out.append(
            {
                "name": weight_gate["name"],
                "passed": bool(weight_gate["passed"]),
                "data_dependent": not weight_gate["evidence"].get("private", False),
            }
        )
    return out


def public_verdict(gates: list[dict], policy: str) -> dict[str, Any] | None:
    """The utility verdict a public manifest shows: None with `policy` "advise" (steward report only) or where the
    gate did not run; with "refuse", check.json's `utility` gate: the verdict word, what the policy did with it
    ("refuse", "label" or "none") and that it reads real rows. None of its numbers; None where no verdict was
    reached (the real rows did not allow the evaluation: the gate failed without one)."""
    g = next((g for g in gates if g["name"] == "utility"), None) if policy == "refuse" else None
    if g is None or "verdict" not in g["evidence"]:
        return None
    return {"verdict": g["evidence"]["verdict"], "action": g["evidence"]["action"], "data_dependent": True}


def release_statements(gates: list[dict[str, Any]], verdict: dict[str, Any] | None = None) -> list[str]:
    """What a public manifest discloses that was computed from real rows outside DP: the bit of each data-dependent
    gate (`public_gates`), the utility verdict word (`public_verdict`), and then the release decision itself;
    nothing when neither is there (every public bit DP)."""
    if verdict is None and not any(g["data_dependent"] for g in gates):
        return []
    return (
        [
            f"the pass/fail bit of the '{g['name']}' gate, which reads real rows (its evidence is internal)"
            for g in gates
            if g["data_dependent"]
        ]
        + (
            [
                f"the utility verdict '{verdict['verdict']}' (fit / weak / inverted), which reads real rows: a "
                "data-dependent outcome published like a gate's pass/fail bit, its evidence internal"
            ]
            if verdict
            else []
        )
        + [RELEASE_BIT]
    )
