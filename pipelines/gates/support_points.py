"""The support points' own gate: convergence of the MH chains that sample the exponential mechanism (§5.5)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pipelines.evaluation.outside_dp import MCMC_HEURISTIC
from pipelines.gates.release import GateResult, gate


@gate("mh_convergence")
def mh_convergence_gate(
    diagnostics: Mapping[str, Any],
    rhat_max: float,
    n_points: int,
    width: int,
    epsilon_per_set: float,
    sensitivity: float,
) -> GateResult:
    """Fails when the split-R̂ of the chains' energy traces (`diagnostics`, measured during training) exceeds
    `rhat_max`. Its `guarantee` evidence is MCMC_HEURISTIC with the exact mechanism's terms: sets of `n_points`
    points in [0, 1]^`width`, ε = `epsilon_per_set` per set, sensitivity Δ = `sensitivity`."""
    bound = float(rhat_max)
    rhat = float(diagnostics["rhat"])
    passed = bool(math.isfinite(rhat) and rhat <= bound)
    return GateResult(
        "mh_convergence",
        passed,
        {
            **diagnostics,
            "rhat_max": bound,
            "refused_because": []
            if passed
            else [f"the MH chains disagree: split-R̂ = {rhat:.4f} > rhat_max = {bound} (run more burn_in/steps)"],
            "guarantee": (
                f"{MCMC_HEURISTIC}. The exact mechanism π_X(Ỹ) ∝ exp(−ε·e(X, Ỹ)/(2Δ)) over sets of "
                f"{n_points} points in [0, 1]^{width} is ε-DP with ε = "
                f"{epsilon_per_set:.6g} per set, Δ = {sensitivity:.6g} "
                f"(eq. 5.10); R̂ is evidence of convergence, not a proof of it."
            ),
            "outside_dp": (
                "support_points MH convergence gate: split-R̂, ESS, acceptance rates and adapted step "
                "sizes of the chains' energy traces e(X, Ỹ_t), computed from the real training rows "
                "during training"
            ),
        },
    )
