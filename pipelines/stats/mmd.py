"""The project's one Gaussian kernel and one unbiased MMD², in float64 or float32 as given (torch).

    k(a, b) = (1/B) Σ_h exp(−‖a − b‖² / 2h²)       a mixture over bandwidths h (B = 1: the plain Gaussian kernel)

    MMD²_u  = Σ_{i≠j} k(x_i, x_j) / n(n−1) + Σ_{i≠j} k(y_i, y_j) / m(m−1) − 2 Σ_{i,j} k(x_i, y_j) / nm
              (Gretton et al. 2012, eq. 3; the Diesendruck thesis' eq. 3.2)

with its importance-weighted forms (thesis §3.2, Table 3.1): eq. 3.3 weights the x-terms by w_i·w_j and w_i over
the counts; eq. 3.5 self-normalises them (over Σ_{i≠j} w_i w_j and Σ_i w_i), so only the weights' ratios matter.
Users: IW-MMD-GAN's training losses (pipelines/generators/iw_estimators.py), the weighted MMD² of the importance
weights' analyses (pipelines/evaluation/weighted.py; eq. 3.5 is appendix B.1's estimator there) and the MMD
permutation test (pipelines/stats/two_sample.py, its Gram matrix).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def gaussian_kernel(a: Tensor, b: Tensor, bandwidths: Sequence[float | Tensor], exact: bool = False) -> Tensor:
    """The mixture of Gaussian kernels above, shape (len(a), len(b)); values in (0, 1] (K = 1). MMD-GAN (Li et al.
    2017) uses h ∈ {1, 2, 4, 8, 16} on its codes. `exact`: squared distances summed coordinate by coordinate
    (a statistic's Gram matrix, where a relabelling must give the same entries); otherwise torch's matrix-product
    form (‖a‖² + ‖b‖² − 2a·b, faster, rounding of order 1e-16·‖a‖² in float64: the training losses)."""
    sq = torch.cdist(
        a, b, compute_mode="donot_use_mm_for_euclid_dist" if exact else "use_mm_for_euclid_dist_if_necessary"
    ).pow(2)
    return sum(torch.exp(-sq / (2 * h * h)) for h in bandwidths) / len(bandwidths)


def off_diagonal_sum(k: Tensor, wa: Tensor | None = None) -> Tensor:
    """Σ_{i≠j} w_i w_j k_ij (w ≡ 1 without `wa`)."""
    if wa is None:
        return k.sum() - k.diagonal().sum()
    return wa @ k @ wa - (wa * wa * k.diagonal()).sum()


def mmd2_iw(k_xx: Tensor, k_yy: Tensor, k_xy: Tensor, w: Tensor | None = None) -> Tensor:
    """Eq. 3.3 (MMD²_u, eq. 3.2, when `w` is None): (1/n(n−1)) Σ_{i≠j} w_i w_j k(x_i, x_j)
    + (1/m(m−1)) Σ_{i≠j} k(y_i, y_j) − (2/nm) Σ_i Σ_j w_i k(x_i, y_j), with w_i = 1/M(x_i). Unbiased for MMD²(P, Q);
    needs n, m ≥ 2."""
    n, m = k_xy.shape
    cross = k_xy.sum() if w is None else (w[:, None] * k_xy).sum()
    return off_diagonal_sum(k_xx, w) / (n * (n - 1)) + off_diagonal_sum(k_yy) / (m * (m - 1)) - 2 * cross / (n * m)


def mmd2_sniw(k_xx: Tensor, k_yy: Tensor, k_xy: Tensor, w: Tensor) -> Tensor:
    """Eq. 3.5: Σ_{i≠j} w_i w_j k(x_i, x_j) / Σ_{i≠j} w_i w_j + (1/m(m−1)) Σ_{i≠j} k(y_i, y_j)
    − 2 Σ_i Σ_j w_i k(x_i, y_j) / (m Σ_i w_i), for w_i ∝ 1/M(x_i) (any positive scale cancels; w ≡ 1 gives
    MMD²_u)."""
    m = k_yy.shape[0]
    pair_norm = w.sum() ** 2 - (w * w).sum()
    return (
        off_diagonal_sum(k_xx, w) / pair_norm
        + off_diagonal_sum(k_yy) / (m * (m - 1))
        - 2 * (w[:, None] * k_xy).sum() / (m * w.sum())
    )
