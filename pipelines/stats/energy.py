"""The energy distance (Diesendruck thesis, ../shared/papers/diesendruck-iw-gan-support-points-thesis.txt,
eq. 5.5), its sensitivity (eq. 5.10), and point sets whose energy to a fixed reference is updated
incrementally when one point moves (the Metropolis-Hastings sampler of `energy_sampler`).

Points live in [0, 1]^d (the encoded table: numerics scaled by schema bounds, one-hot blocks, binaries),
distances are ℓ_p norms with 1 ≤ p ≤ 2: for those p the ℓ_p metric is of negative type, so the energy
distance is non-negative and zero only for equal empirical distributions (Székely & Rizzo); for p > 2 and
d ≥ 3 it can be negative and support points are not defined by it.
"""

from __future__ import annotations

import math

import numpy as np


def check_norm(p: float) -> float:
    """p as a float, refused outside [1, 2] (module docstring)."""
    p = float(p)
    if not 1.0 <= p <= 2.0:
        raise ValueError(
            f"the energy distance's norm p must lie in [1, 2] (ℓ_p is a metric of negative type "
            f"only there, so e ≥ 0), got p = {p}; the thesis uses p = 2"
        )
    return p


def distances(a: np.ndarray, b: np.ndarray, p: float) -> np.ndarray:
    """‖a_i − b_j‖_p over the last axis, broadcasting a (..., 1, d) against b (..., m, d)."""
    diff = np.abs(a - b)
    if p == 2.0:
        return np.sqrt(np.einsum("...k,...k->...", diff, diff))
    if p == 1.0:
        return diff.sum(-1)
    return (diff**p).sum(-1) ** (1.0 / p)


def distance_sum(a: np.ndarray, b: np.ndarray, p: float, max_floats: int = 1 << 22) -> float:
    """Σ_i Σ_j ‖a_i − b_j‖_p over row chunks of `a` whose temporaries hold at most `max_floats` floats (32 MB):
    p = 2 through ‖a_i‖² + ‖b_j‖² − 2⟨a_i, b_j⟩ (one matrix product per chunk, as `EnergyChains._to_reference`),
    other p by broadcasting (chunk, len(b), d). Memory stays bounded whatever N (chunks of a fixed number of
    rows would not be: their temporaries grow with len(b)·d)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    per_row = len(b) if p == 2.0 else len(b) * a.shape[1]
    chunk, total = max(1, max_floats // max(1, per_row)), 0.0
    b_sq = (b * b).sum(1)
    for i in range(0, len(a), chunk):
        rows = a[i : i + chunk]
        if p == 2.0:
            total += np.sqrt(np.maximum((rows * rows).sum(1)[:, None] + b_sq[None, :] - 2.0 * (rows @ b.T), 0.0)).sum()
        else:
            total += distances(rows[:, None, :], b[None, :, :], p).sum()
    return float(total)


def energy_distance(x: np.ndarray, y: np.ndarray, p: float = 2.0) -> float:
    """Eq. 5.5: e_{N,n}(X, Y) = 2/(Nn) ΣΣ‖x_i − y_j‖ − 1/N² ΣΣ‖x_i − x_j‖ − 1/n² ΣΣ‖y_i − y_j‖."""
    p = check_norm(p)
    x, y = np.asarray(x, float), np.asarray(y, float)
    n_x, n_y = len(x), len(y)
    return 2.0 * distance_sum(x, y, p) / (n_x * n_y) - distance_sum(x, x, p) / n_x**2 - distance_sum(y, y, p) / n_y**2


def energy_sensitivity(n_rows: int, dim: int, p: float) -> float:
    """Eq. 5.10: Δ = 2·d^{1/p}·(2N − 1)/N², the largest change of e(X, Y) over neighbouring data sets X
    of N rows in [0, 1]^d, for every candidate set Y (of any size n).

    D = d^{1/p} is the ℓ_p diameter of [0, 1]^d.
    Replace-one (the thesis, eq. 5.7-5.9): the cross term 2/(Nn)·Σ_j(‖x'_N − y_j‖ − ‖x_N − y_j‖) moves by at
    most 2D/N; the within term 1/N²·(two sums of N − 1 differences, the diagonal being 0) by at most
    2D(N − 1)/N²; together 2D(2N − 1)/N².
    Add/remove-one (this project's relation, privacy rule 7, docs/architecture.md): let X have m rows and X' = X ∪ {x₀};
    a₀ = mean_j ‖x₀ − y_j‖, A = mean_{i,j} ‖x_i − y_j‖, c₀ = mean_i ‖x₀ − x_i‖, B = 1/m² ΣΣ‖x_i − x_k‖. Then
        (m + 1)²·(e(X', Y) − e(X, Y)) = 2(m + 1)(a₀ − A) − 2m·c₀ + (2m + 1)·B.
    Below: a₀ ≥ 0, A ≤ D, c₀ ≤ D, B ≥ 0 give ≥ −2(2m + 1)D. Above: the triangle inequality gives
    a₀ ≤ c₀ + A, so the sum is ≤ 2c₀ + (2m + 1)B ≤ (2m + 3)D ≤ 2(2m + 1)D. With M = m + 1 rows in the larger
    set, |Δe| ≤ 2D(2M − 1)/M²: eq. 5.10 again, attained (X = {1}^{M−1}, Y = {0}^n, x₀ = 0, d = 1). It
    decreases in M, so for a data set of N rows both neighbours (N − 1 and N + 1 rows) are covered by
    M = N. N is the public row count (docs/architecture.md, departure 1).
    """
    if n_rows < 1 or dim < 1:
        raise ValueError(f"the energy sensitivity needs N >= 1 rows and d >= 1 dimensions, got N = {n_rows}, d = {dim}")
    return 2.0 * diameter(dim, p) * (2 * n_rows - 1) / n_rows**2


class EnergyChains:
    """C candidate sets Y_c of n points (C, n, d) and their energies e(X, Y_c) to a fixed reference X (N, d).

    Cached: each point's cross sum Σ_i ‖x_i − y_cj‖ (C, n) and the within distances ‖y_cj − y_ck‖ (C, n, n).
    Moving point j of each chain changes N cross and n − 1 within distances, so `propose` costs O((N + n)·d)
    per chain instead of the O((N + n)²·d) of recomputing eq. 5.5; the X–X term is a constant.
    """

    def __init__(self, reference: np.ndarray, start: np.ndarray, p: float, n_ref: int | None = None) -> None:
        """`n_ref`: the cross term's divisor N, the public training row count n̂ (default: the rows of
        `reference`). With a fixed public N, adding or removing a row moves the score by at most
        2·diameter/N ≤ `energy_sensitivity(N, ...)`, whatever the actual number of rows."""
        self.p = check_norm(p)
        self.x = np.asarray(reference, float)
        self.y = np.array(start, dtype=float)
        if self.y.ndim != 3 or self.y.shape[2] != self.x.shape[1]:
            raise ValueError(f"start must be (chains, n, d) with d = {self.x.shape[1]}, got {self.y.shape}")
        self.n_ref, self.n = (len(self.x) if n_ref is None else int(n_ref)), self.y.shape[1]
        self.xx = distance_sum(self.x, self.x, self.p) / self.n_ref**2
        self.x_sq = (self.x * self.x).sum(1)
        self.cross = np.stack([self._to_reference(yc).sum(1) for yc in self.y])
        self.within = distances(self.y[:, :, None, :], self.y[:, None, :, :], self.p)

    def _to_reference(self, y: np.ndarray) -> np.ndarray:
        """‖y_c − x_i‖_p (C, N); for p = 2 through ‖y‖² + ‖x‖² − 2⟨y, x⟩ (one matrix product)."""
        if self.p == 2.0:
            sq = (y * y).sum(1)[:, None] + self.x_sq[None, :] - 2.0 * (y @ self.x.T)
            return np.sqrt(np.maximum(sq, 0.0))
        return distances(y[:, None, :], self.x[None, :, :], self.p)

    @property
    def energy(self) -> np.ndarray:
        """e(X, Y_c) per chain (C,), from the cached sums."""
        return 2.0 * self.cross.sum(1) / (self.n_ref * self.n) - self.xx - self.within.sum((1, 2)) / self.n**2

    def propose(self, j: np.ndarray, y_new: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Energy change per chain if point j[c] of chain c moved to y_new[c] (C, d); also the new cross sums
        (C,) and within distances (C, n) that `accept` stores."""
        chains = np.arange(len(j))
        cross_new = self._to_reference(y_new).sum(1)
        within_new = distances(y_new[:, None, :], self.y, self.p)
        within_new[chains, j] = 0.0
        delta = (
            2.0 * (cross_new - self.cross[chains, j]) / (self.n_ref * self.n)
            - 2.0 * (within_new.sum(1) - self.within[chains, j].sum(1)) / self.n**2
        )
        return delta, cross_new, within_new

    def accept(
        self, mask: np.ndarray, j: np.ndarray, y_new: np.ndarray, cross_new: np.ndarray, within_new: np.ndarray
    ) -> None:
        """Apply the proposals of the chains where `mask` is true."""
        c = np.flatnonzero(mask)
        jc = j[c]
        self.y[c, jc] = y_new[c]
        self.cross[c, jc] = cross_new[c]
        self.within[c, jc, :] = within_new[c]
        self.within[c, :, jc] = within_new[c]


def diameter(dim: int, p: float) -> float:
    """d^{1/p}, the ℓ_p diameter of [0, 1]^d."""
    return math.pow(dim, 1.0 / check_norm(p))
