"""Private support points' parameters (`pipelines.generators.support_points`)."""
from __future__ import annotations

from typing import Any

from pipelines.errors import ParamError
from pipelines.generators.params.shared import shared_defaults, shared_ranges
from pipelines.ranges import MAX_STEPS, OPEN_FRACTION, POSITIVE, STEPS, Range, check_ranges, each, ints, reals

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
    "accept_heuristic": False,       # true: release.select auto / private may pick it, its heuristic ε labelled
                                     # (pipelines/selection.py; the release is a finite MCMC chain's last state)
    **shared_defaults(0.2, encoding=False),  # seed, noise_seed, calibration (params/shared.py)
}
EXPANSIONS = ("kde_public", "kde_laplace", "kde_exponential", "repeat")


RANGES: dict[str, Range] = {   # each numeric key's range (pipelines/ranges.py); ε: pipelines/config.py
    "n_points": ints(1, 10**5),
    "norm": reals(ge=1, le=2, why="ℓ_p is a metric of negative type only there, so the energy distance is >= 0; "
                                  "the thesis uses p = 2"),
    "chains": ints(4, 256, why="§5.5: the split-R̂ gate compares several chains from random starts"),
    "burn_in": ints(0, MAX_STEPS), "steps": STEPS, "thin": ints(1, 10**6), "target_acceptance": OPEN_FRACTION,
    "rhat_max": reals(gt=1, why="R̂ is 1 at convergence"), "bandwidth": POSITIVE, "bandwidth_bounds": each(POSITIVE),
    "bandwidth_grid": ints(1, 10**4), "bandwidth_share": OPEN_FRACTION, "repeats": ints(1, 1000),
    "support_steps": STEPS, "lr": POSITIVE, **shared_ranges(encoding=False),
}


def check_params(params: dict[str, Any]) -> None:
    """A `support_points:` section over DEFAULTS: RANGES, the expansion, and the rules between keys (ParamError, a
    ValueError, naming the key)."""
    p = params
    check_ranges("support_points", p, RANGES, DEFAULTS, skip_null=True)
    if p["expansion"] not in EXPANSIONS:
        raise ParamError("support_points.expansion", f"must be one of {list(EXPANSIONS)}, got {p['expansion']!r}")
    if p["steps"] < 4 * p["thin"]:
        raise ParamError("support_points.steps", f"must be at least 4·thin (R̂ needs >= 4 draws per chain), got "
                         f"steps = {p['steps']}, thin = {p['thin']}")
    bounds = p["bandwidth_bounds"]
    if not (len(bounds) == 2 and bounds[0] < bounds[1]):
        raise ParamError("support_points.bandwidth_bounds", f"must be [lower, upper] with 0 < lower < upper, "
                         f"got {bounds}")
    if not isinstance(p["accept_heuristic"], bool):
        raise ParamError("support_points.accept_heuristic", f"must be true or false, got {p['accept_heuristic']!r}")
