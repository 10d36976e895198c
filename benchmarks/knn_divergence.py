"""k-nearest-neighbour estimate of the KL divergence between two samples (Wang, Kulkarni & Verdú 2009, IEEE
Trans. Inf. Theory 55(5), eq. 5), the estimator the Diesendruck thesis cites for Tables 3.2 and A.1 ([134])."""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree


def kl_divergence_knn(p_samples: np.ndarray, q_samples: np.ndarray, k: int = 1) -> float:
    """D̂(P‖Q) = (d/n) Σ_i log(ν_k(i) / ρ_k(i)) + log(m / (n − 1)) for x_1..x_n ~ P and y_1..y_m ~ Q in R^d, where
    ρ_k(i) is the distance from x_i to its k-th nearest neighbour among the other x's and ν_k(i) the distance to
    its k-th nearest neighbour among the y's. Consistent as n, m → ∞; can be negative on finite samples.
    Rows with ρ_k(i) = 0 (duplicates) are refused: the estimator needs continuous distributions."""
    x, y = np.atleast_2d(np.asarray(p_samples, dtype=float)), np.atleast_2d(np.asarray(q_samples, dtype=float))
    n, d = x.shape
    m = y.shape[0]
    if y.shape[1] != d or n <= k or m < k:
        raise ValueError(
            f"need samples of equal dimension with more than k={k} rows of P and at least k of Q; "
            f"got {x.shape} and {y.shape}"
        )
    rho = cKDTree(x).query(x, k=k + 1)[0][:, k]
    nu = cKDTree(y).query(x, k=k)[0]
    nu = nu if k == 1 else nu[:, k - 1]
    if np.any(rho == 0) or np.any(nu == 0):
        raise ValueError("duplicate points: the k-NN divergence estimator needs continuous samples")
    return float(d * np.mean(np.log(nu / rho)) + np.log(m / (n - 1)))
