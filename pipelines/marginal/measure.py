"""Count marginals of discretised rows and their Gaussian measurement.

Sensitivity (add/remove one record). The marginal on a clique r is the vector of counts M_r(D)[c] =
#{x in D : x_r = c} over the cells c of r. A record x lies in exactly one cell (x_r), so adding or removing it
changes one coordinate by 1 and no other: ||M_r(D) - M_r(D')||_2 = ||.||_1 = 1. Hence Δ₂ = 1 and the Gaussian
mechanism M_r(D) + N(0, σ² I) is the Gaussian mechanism of noise multiplier σ (a GaussianEvent(σ, 1)).
Measuring m marginals each with its own σ_i composes exactly into one Gaussian of multiplier
(Σ σ_i⁻²)^(-1/2) (pipelines.privacy.accountant._group): the joint query has Δ₂ = √m when all σ_i are equal.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pipelines.privacy.events import GaussianEvent, NonPrivateEvent
from pipelines.privacy.mechanisms import gaussian_mechanism

COUNT_L2_SENSITIVITY = 1.0


def marginal(codes: np.ndarray, shape: Sequence[int], clique: Sequence[int]) -> np.ndarray:
    """Counts of `codes` (rows × columns int matrix) on the columns `clique`, shaped (shape[c] for c in clique)."""
    clique = tuple(int(c) for c in clique)
    dims = tuple(int(shape[c]) for c in clique)
    if not clique:
        return np.asarray(float(codes.shape[0]))
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in clique), dims) if codes.shape[0] else np.zeros(0, int)
    return np.bincount(flat, minlength=int(np.prod(dims))).reshape(dims).astype(np.float64)


def measure(codes: np.ndarray, shape: Sequence[int], clique: Sequence[int], sigma: float,
            rng: np.random.Generator | None, query: str = "") -> tuple[np.ndarray, GaussianEvent | NonPrivateEvent]:
    """M_clique(D) + N(0, σ² I) with its GaussianEvent(σ, Δ₂ = 1); σ = 0 (ε = inf) returns the exact counts
    and a NonPrivateEvent."""
    exact = marginal(codes, shape, clique)
    if sigma == 0:
        return exact, NonPrivateEvent("epsilon: inf")
    return gaussian_mechanism(exact, COUNT_L2_SENSITIVITY, sigma, rng, query=query)
