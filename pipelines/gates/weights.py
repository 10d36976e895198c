"""The importance weights' gate (paper §3.5: release the weights only when PSIS k̂ ≤ the bound)."""

from __future__ import annotations

from pipelines.gates.release import GateResult, gate


@gate("importance_weights", dp=True)
def weight_gate(khat: float, khat_bound: float, estimator: str, private: bool, internal: bool) -> GateResult:
    """The `importance_weights` gate: passes when PSIS k̂ ≤ `khat_bound` (the paper's reliability criterion) and
    the estimator is DP, or `internal` (privacy.internal_release) allows a non-private one; the evidence names
    every reason for a refusal. k̂ is computed from the released DP weights alone, so the gate is post-processing of
    the weights' mechanism."""
    return GateResult(
        "importance_weights",
        bool(khat <= khat_bound) and (private or internal),
        {
            "khat": khat,
            "khat_bound": khat_bound,
            "private": private,
            "internal_release": internal,
            "label": "DP"
            if private
            else ("NON-PRIVATE (internal release only)" if internal else "NON-PRIVATE: refused"),
            "refused_because": [
                why
                for bad, why in (
                    (
                        khat > khat_bound,
                        f"PSIS k̂ = {khat:.3g} > {khat_bound}: the synthetic distribution misses "
                        f"regions of the real one; importance-weighted estimates are unreliable",
                    ),
                    (
                        not private and not internal,
                        f"{estimator} is not differentially private (set "
                        f"privacy.internal_release: true for an internal release only)",
                    ),
                )
                if bad
            ],
        },
    )
