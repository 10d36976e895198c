"""Private bandwidths for expanding private support points by kernel density estimation (Diesendruck thesis,
§5.6.1, eq. 5.37): GMM(x | Ỹ, σ) = 1/n Σ_j N(x | ỹ_j, σ² I_d), records and centres in [0, 1]^d.

Both mechanisms choose σ on a public grid inside public bounds [σ_lo, σ_hi] (params, never the data), given
centres Ỹ that are already private (post-processing of an earlier release). Each is its own ledger event.
- `laplace_bandwidth`: the bounded MLE plus Laplace noise (§5.7.1.5). The MLE lies in [σ_lo, σ_hi] whatever
  the data, so Δ₁ = σ_hi − σ_lo (the thesis: bandwidth in (0, 1/8] gives Δ = 1/8); the noisy value is
  clamped back into the bounds (post-processing; the thesis floors it). The noise is exact:
  the MLE is rounded exactly to the lattice γℤ, γ = Δ₁/M (M = BANDWIDTH_LATTICE_STEPS), which moves it by at
  most M points, plus discrete Laplace noise of scale M/ε points (ε-DP; continuous Laplace's noise scale Δ₁/ε).
- `exponential_bandwidth`: the exponential mechanism over the grid with the log-likelihood as score (§5.6.1,
  third option); the range bound R is derived in `likelihood_range`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from fractions import Fraction

from pipelines.privacy.events import DiscreteLaplaceEvent, PureEpsilonEvent
from pipelines.privacy.mechanisms import exponential_mechanism, lattice_laplace_mechanism

BANDWIDTH_LATTICE_STEPS = 1024  # M: lattice points across [σ_lo, σ_hi] (module docstring)


def bandwidth_grid(lower: float, upper: float, size: int) -> np.ndarray:
    """`size` bandwidths, geometrically spaced from `lower` to `upper` inclusive (public)."""
    if not (0 < lower < upper and size >= 2):
        raise ValueError(
            f"bandwidth bounds must satisfy 0 < lower < upper with a grid of >= 2 values, got "
            f"lower = {lower}, upper = {upper}, size = {size}"
        )
    return np.geomspace(lower, upper, size)


def kde_log_likelihoods(x: np.ndarray, centres: np.ndarray, sigmas: np.ndarray) -> np.ndarray:
    """ℓ_g(x_i) = log GMM(x_i | Ỹ, σ_g) (eq. 5.37), shape (len(sigmas), len(x))."""
    x, centres, sigmas = np.asarray(x, float), np.asarray(centres, float), np.asarray(sigmas, float)
    sq = ((x * x).sum(1)[:, None] + (centres * centres).sum(1)[None, :] - 2.0 * x @ centres.T).clip(min=0.0)
    var = (sigmas * sigmas)[:, None]
    return (
        logsumexp(-sq[None] / (2 * var[:, :, None]), axis=2)
        - math.log(len(centres))
        - 0.5 * x.shape[1] * np.log(2 * math.pi * var)
    )


def mle_bandwidth(x: np.ndarray, centres: np.ndarray, grid: np.ndarray) -> float:
    """The bounded maximum-likelihood bandwidth: argmax over the grid of Σ_i ℓ_σ(x_i)."""
    return float(grid[int(np.argmax(kde_log_likelihoods(x, centres, grid).sum(1)))])


def laplace_bandwidth_event(lower: float, upper: float, epsilon: float) -> DiscreteLaplaceEvent:
    """The event of `laplace_bandwidth`: discrete Laplace of scale M/ε lattice points on a shift of ≤ M points
    (Δ₁ = σ_hi − σ_lo on the lattice Δ₁/M: module docstring), i.e. ε-DP."""
    m = BANDWIDTH_LATTICE_STEPS
    return DiscreteLaplaceEvent(
        m / float(epsilon), m, 1, 1, f"bandwidth in [{lower:.6g}, {upper:.6g}] on the lattice (upper - lower)/{m}"
    )


def laplace_bandwidth(
    x: np.ndarray, centres: np.ndarray, grid: np.ndarray, epsilon: float, rng: np.random.Generator
) -> tuple[float, DiscreteLaplaceEvent]:
    """ε-DP bandwidth: bounded MLE + (σ_hi − σ_lo)/M·Lap_ℤ(M/ε) on the lattice, clamped to [σ_lo, σ_hi]."""
    lower, upper = float(grid[0]), float(grid[-1])
    event = laplace_bandwidth_event(lower, upper, epsilon)
    unit = (Fraction(upper) - Fraction(lower)) / BANDWIDTH_LATTICE_STEPS  # exact: |σ − σ'| ≤ M·unit
    noisy = lattice_laplace_mechanism(np.array([mle_bandwidth(x, centres, grid)]), unit, event, rng)
    return float(np.clip(noisy[0], lower, upper)), event


def likelihood_range(grid: np.ndarray, dim: int) -> float:
    """R with max_g ℓ_g(x₀) − min_g ℓ_g(x₀) ≤ R for every record x₀ ∈ [0, 1]^d and every centre set.

    Each kernel lies between its peak and its value at the diameter (‖x − ỹ‖² ≤ d), and so does their mean:
    ℓ_σ(x₀) ∈ [L(σ) − d/(2σ²), L(σ)] with L(σ) = −(d/2)·log(2πσ²). Hence R = max_g L(σ_g) − min_g (L(σ_g) − d/(2σ_g²)).
    """
    peak = -0.5 * dim * np.log(2 * np.pi * grid**2)
    return float(peak.max() - (peak - dim / (2 * grid**2)).min())


def exponential_bandwidth(
    x: np.ndarray, centres: np.ndarray, grid: np.ndarray, epsilon: float, rng: np.random.Generator
) -> tuple[float, PureEpsilonEvent]:
    """ε-DP bandwidth: σ_g drawn with probability ∝ exp(ε·u_g/R), u_g = Σ_i ℓ_g(x_i) the log-likelihood.

    Privacy (add/remove-one): adding x₀ adds v_g = ℓ_g(x₀) to every score. Then
    p'(g)/p(g) = e^{εv_g/R}·Σ_h e^{εu_h/R} / Σ_h e^{ε(u_h + v_h)/R} ∈ [e^{ε(v_g − max v)/R}, e^{ε(v_g − min v)/R}],
    and max v − min v ≤ R (`likelihood_range`): ε-DP. A common shift of all scores cancels, so the range R,
    not twice the largest |v_g|, calibrates the mechanism; it is `exponential_mechanism` with Δ = R/2.
    """
    scores = kde_log_likelihoods(x, centres, grid).sum(1)
    index, event = exponential_mechanism(scores, likelihood_range(grid, np.asarray(x).shape[1]) / 2.0, epsilon, rng)
    return float(grid[index]), event
