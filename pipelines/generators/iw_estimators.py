"""Importance-weighted MMD² estimators (Diesendruck thesis, ../shared/papers/diesendruck-iw-gan-support-points-
thesis.txt, §3.2, Table 3.1) for training a generator towards a target P from samples of a modified M·P.

x_1..x_n are real rows drawn from M·P with weights w_i (w_i = 1/M(x_i) for IW and MIW, any w_i ∝ 1/M(x_i)
for SNIW); y_1..y_m are generated rows; k is a kernel with values in [0, K].

  uniform  eq. 3.2: the unbiased (U-statistic) MMD², every w_i = 1 (the unweighted MMD-GAN).
  iw       eq. 3.3: real-real terms weighted w_i·w_j, real-generated terms w_i, both over the counts.
  sniw     eq. 3.5: the same weights self-normalised (over Σ_{i≠j} w_i w_j and Σ_i w_i): M known up to a constant.
  miw      eq. 3.4: the median over `groups` random equal groups of eq. 3.3 on each group (median of means).
  id       §3.2.5: row i duplicated ⌈w_i⌉ times (`duplicate_indices`), then eq. 3.2 on batches of the copies.

Sample averages of other losses (the MMD-GAN's reconstruction term) are weighted the same way
(Table 3.1, last row): `weighted_mean`.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from pipelines.generators.params.iw_mmd_gan import ESTIMATORS


def gaussian_kernel(a: Tensor, b: Tensor, bandwidths: list[float] | tuple[float, ...]) -> Tensor:
    """Mixture of Gaussian kernels (1/B) Σ_h exp(−‖a_i − b_j‖² / 2h²), shape (len(a), len(b)); values in (0, 1]
    (K = 1). MMD-GAN (Li et al. 2017) uses the mixture over bandwidths h ∈ {1, 2, 4, 8, 16} on its codes."""
    sq = torch.cdist(a, b).pow(2)
    return sum(torch.exp(-sq / (2 * h * h)) for h in bandwidths) / len(bandwidths)


def _off_diagonal_sum(k: Tensor, wa: Tensor | None = None) -> Tensor:
    """Σ_{i≠j} w_i w_j k_ij (w ≡ 1 without `wa`)."""
    if wa is None:
        return k.sum() - k.diagonal().sum()
    return wa @ k @ wa - (wa * wa * k.diagonal()).sum()


def mmd2_iw(k_xx: Tensor, k_yy: Tensor, k_xy: Tensor, w: Tensor | None = None) -> Tensor:
    """Eq. 3.3 (eq. 3.2 when `w` is None): (1/n(n−1)) Σ_{i≠j} w_i w_j k(x_i, x_j) + (1/m(m−1)) Σ_{i≠j} k(y_i, y_j)
    − (2/nm) Σ_i Σ_j w_i k(x_i, y_j), with w_i = 1/M(x_i). Unbiased for MMD²(P, Q); needs n, m ≥ 2."""
    n, m = k_xy.shape
    cross = k_xy.sum() if w is None else (w[:, None] * k_xy).sum()
    return (_off_diagonal_sum(k_xx, w) / (n * (n - 1)) + _off_diagonal_sum(k_yy) / (m * (m - 1))
            - 2 * cross / (n * m))


def mmd2_sniw(k_xx: Tensor, k_yy: Tensor, k_xy: Tensor, w: Tensor) -> Tensor:
    """Eq. 3.5: Σ_{i≠j} w_i w_j k(x_i, x_j) / Σ_{i≠j} w_i w_j + (1/m(m−1)) Σ_{i≠j} k(y_i, y_j)
    − 2 Σ_i Σ_j w_i k(x_i, y_j) / (m Σ_i w_i), for w_i ∝ 1/M(x_i) (any positive scale cancels)."""
    m = k_yy.shape[0]
    pair_norm = w.sum() ** 2 - (w * w).sum()
    return (_off_diagonal_sum(k_xx, w) / pair_norm + _off_diagonal_sum(k_yy) / (m * (m - 1))
            - 2 * (w[:, None] * k_xy).sum() / (m * w.sum()))


def mmd2_miw(k_xx: Tensor, k_yy: Tensor, k_xy: Tensor, w: Tensor, groups: int, generator: torch.Generator) -> Tensor:
    """Eq. 3.4: median over `groups` groups of eq. 3.3 on each group. The real and the generated rows are each
    split uniformly at random into `groups` equal groups (⌊n/groups⌋ and ⌊m/groups⌋ rows; the rest is dropped);
    group g pairs the g-th real group with the g-th generated group. Needs ≥ 2 rows per group."""
    n, m = k_xy.shape
    a, b = n // groups, m // groups
    if a < 2 or b < 2:
        raise ValueError(f"the median-of-means estimator needs at least 2 real and 2 generated rows per group; "
                         f"got {n} real and {m} generated rows for {groups} groups: lower iw_mmd_gan.groups or "
                         f"raise batch_size")
    px = torch.randperm(n, generator=generator, device=generator.device)[:a * groups].view(groups, a).to(k_xy.device)
    py = torch.randperm(m, generator=generator, device=generator.device)[:b * groups].view(groups, b).to(k_xy.device)
    values = torch.stack([mmd2_iw(k_xx[i][:, i], k_yy[j][:, j], k_xy[i][:, j], w[i]) for i, j in zip(px, py)])
    return torch.quantile(values, 0.5)   # the midpoint of the two middle values for even `groups` (torch.median: lower)


def duplicate_indices(w: np.ndarray) -> np.ndarray:
    """§3.2.5 importance duplication: row i repeated ⌈w_i⌉ times (rows with w_i = 0 dropped). Uniform batches
    of these indices draw row i with probability ⌈w_i⌉ / Σ_j ⌈w_j⌉."""
    w = np.asarray(w, dtype=float)
    return np.repeat(np.arange(len(w)), np.ceil(w - 1e-12).clip(0).astype(int))


def weighted_mmd2(estimator: str, x: Tensor, y: Tensor, w: Tensor | None, bandwidths: list[float],
                  groups: int = 1, generator: torch.Generator | None = None) -> Tensor:
    """The estimator's MMD² between real rows `x` (weights `w`) and generated rows `y` under `gaussian_kernel`.
    `id` batches are already drawn from the duplicated rows, so they use eq. 3.2, like `uniform`."""
    k_xx, k_yy, k_xy = gaussian_kernel(x, x, bandwidths), gaussian_kernel(y, y, bandwidths), \
        gaussian_kernel(x, y, bandwidths)
    if estimator in ("uniform", "id"):
        return mmd2_iw(k_xx, k_yy, k_xy)
    if estimator == "iw":
        return mmd2_iw(k_xx, k_yy, k_xy, w)
    if estimator == "sniw":
        return mmd2_sniw(k_xx, k_yy, k_xy, w)
    if estimator == "miw":
        return mmd2_miw(k_xx, k_yy, k_xy, w, groups, generator)
    raise ValueError(f"unknown estimator {estimator!r}; known: {ESTIMATORS}")


def weighted_mean(estimator: str, values: Tensor, w: Tensor | None) -> Tensor:
    """Table 3.1's sample average of per-row `values` of real rows: mean(w·v) (iw, miw), Σ w·v / Σ w (sniw),
    mean(v) (uniform; id, whose batches are already duplicated)."""
    if estimator in ("uniform", "id"):
        return values.mean()
    if estimator == "sniw":
        return (w * values).sum() / w.sum()
    return (w * values).mean()

