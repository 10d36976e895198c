"""Private support points' parameters (`pipelines.generators.support_points`)."""
from __future__ import annotations

from typing import Any

from pipelines.errors import ParamError
from pipelines.stats.energy import check_norm
from pipelines.generators.params.shared import shared_defaults

DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,                  # total ε of every release below; "inf" releases the exact support points
    "n_points": 20,                  # n, points per private set (§5.7.2: 5-20 % of N)
    "norm": 2.0,                     # p of the energy distance, in [1, 2]; the thesis uses 2
    "chains": 4,                     # MH chains from uniform random starts (§5.5); >= 4
    "burn_in": 5000,                 # MH steps with step-size adaptation (§5.7.1.3: 5000)
    "steps": 10000,                  # MH steps after burn-in, step size frozen
    "thin": 10,                      # keep every thin-th energy for the R̂ diagnostic
    "target_acceptance": 0.3,        # §5.7.1.3
    "rhat_max": 1.05,                # the gate's bound on split-R̂
    "expansion": "kde_public",       # kde_public | kde_laplace | kde_exponential | repeat (§5.6)
    "bandwidth": 0.05,               # kde_public: the public bandwidth, in encoded units
    "bandwidth_bounds": [0.01, 0.125],  # kde_laplace / kde_exponential: public [σ_lo, σ_hi] (§5.7.1.5: (0, 1/8])
    "bandwidth_grid": 32,            # grid size for the bounded MLE and the exponential mechanism
    "bandwidth_share": 0.1,          # kde_laplace / kde_exponential: the bandwidth's share of ε
    "repeats": 1,                    # repeat: k private sets
    "support_steps": 300,            # epsilon: inf, Adam steps for Y* (§5.7.1.2: 300, lr 0.01)
    "lr": 0.01,
    **shared_defaults(0.2, encoding=False),  # seed, noise_seed, calibration (params/shared.py)
}
EXPANSIONS = ("kde_public", "kde_laplace", "kde_exponential", "repeat")


def check_params(params: dict[str, Any]) -> None:
    """The value ranges of a `support_points:` section over DEFAULTS (ParamError, a ValueError, naming the key)."""
    p = params
    try:
        check_norm(p["norm"])
    except ValueError as e:
        raise ParamError("support_points.norm", f"is refused: {e}") from None
    if p["expansion"] not in EXPANSIONS:
        raise ParamError("support_points.expansion", f"must be one of {list(EXPANSIONS)}, got {p['expansion']!r}")
    for key in ("n_points", "chains", "burn_in", "steps", "thin", "repeats", "bandwidth_grid", "support_steps"):
        least = 0 if key == "burn_in" else 1
        if isinstance(p[key], bool) or not isinstance(p[key], int) or p[key] < least:
            raise ParamError(f"support_points.{key}", f"must be an integer >= {least}, got {p[key]!r}")
    if p["chains"] < 4:
        raise ParamError("support_points.chains", f"must be >= 4 (§5.5: the split-R̂ gate compares several chains "
                         f"from random starts), got {p['chains']}")
    if p["steps"] < 4 * p["thin"]:
        raise ParamError("support_points.steps", f"must be at least 4·thin (R̂ needs >= 4 draws per chain), got "
                         f"steps = {p['steps']}, thin = {p['thin']}")
    if not float(p["bandwidth"]) > 0:
        raise ParamError("support_points.bandwidth", f"must be > 0, got {p['bandwidth']}")
    lo, hi = (float(v) for v in p["bandwidth_bounds"])
    if not 0 < lo < hi:
        raise ParamError("support_points.bandwidth_bounds", f"must be [lower, upper] with 0 < lower < upper, "
                         f"got {p['bandwidth_bounds']}")
    for key, low, high in (("bandwidth_share", 0, 1), ("target_acceptance", 0, 1)):
        if not low < float(p[key]) < high:
            raise ParamError(f"support_points.{key}", f"must lie strictly between {low} and {high}, got {p[key]}")
    if not float(p["rhat_max"]) > 1:
        raise ParamError("support_points.rhat_max", f"must exceed 1, got {p['rhat_max']}")
