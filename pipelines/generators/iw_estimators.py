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
(Table 3.1, last row): `weighted_mean`. The kernel and eqs. 3.2/3.3/3.5 are the project's one kernel and MMD²
(pipelines/stats/mmd.py); this module adds the median of means and the dispatch by estimator.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from pipelines.generators.params.iw_mmd_gan import ESTIMATORS
from pipelines.stats.mmd import gaussian_kernel, mmd2_iw, mmd2_sniw


def mmd2_miw(k_xx: Tensor, k_yy: Tensor, k_xy: Tensor, w: Tensor, groups: int, generator: torch.Generator) -> Tensor:
    """Eq. 3.4: median over `groups` groups of eq. 3.3 on each group. The real and the generated rows are each
    split uniformly at random into `groups` equal groups (⌊n/groups⌋ and ⌊m/groups⌋ rows; the rest is dropped);
    group g pairs the g-th real group with the g-th generated group. Needs ≥ 2 rows per group."""
    n, m = k_xy.shape
    a, b = n // groups, m // groups
    if a < 2 or b < 2:
        raise ValueError(
            f"the median-of-means estimator needs at least 2 real and 2 generated rows per group; "
            f"got {n} real and {m} generated rows for {groups} groups: lower iw_mmd_gan.groups or "
            f"raise batch_size"
        )
    px = torch.randperm(n, generator=generator, device=generator.device)[: a * groups].view(groups, a).to(k_xy.device)
    py = torch.randperm(m, generator=generator, device=generator.device)[: b * groups].view(groups, b).to(k_xy.device)
    values = torch.stack([mmd2_iw(k_xx[i][:, i], k_yy[j][:, j], k_xy[i][:, j], w[i]) for i, j in zip(px, py)])
    return torch.quantile(values, 0.5)  # the midpoint of the two middle values for even `groups` (torch.median: lower)


def duplicate_indices(w: np.ndarray) -> np.ndarray:
    """§3.2.5 importance duplication: row i repeated ⌈w_i⌉ times (rows with w_i = 0 dropped). Uniform batches
    of these indices draw row i with probability ⌈w_i⌉ / Σ_j ⌈w_j⌉."""
    w = np.asarray(w, dtype=float)
    return np.repeat(np.arange(len(w)), np.ceil(w - 1e-12).clip(0).astype(int))


def estimator_mmd2(
    estimator: str,
    x: Tensor,
    y: Tensor,
    w: Tensor | None,
    bandwidths: list[float],
    groups: int = 1,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The estimator's MMD² between real rows `x` (weights `w`) and generated rows `y` under `gaussian_kernel`.
    `id` batches are already drawn from the duplicated rows, so they use eq. 3.2, like `uniform`."""
    k_xx, k_yy, k_xy = (
        gaussian_kernel(x, x, bandwidths),
        gaussian_kernel(y, y, bandwidths),
        gaussian_kernel(x, y, bandwidths),
    )
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
