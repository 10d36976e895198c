"""Kernel MMD two-sample permutation test (Gretton et al. 2012), as in the paper's section 5.2.1.

Tests whether real and generated values of the α-LMDP-protected attributes share a distribution.
Kernel: the project's Gaussian kernel (:mod:`pipelines.stats.mmd`) k(x, y) = exp(−‖x − y‖² / (2ℓ²)) on exact
distances, with ℓ the median pairwise distance of the pooled sample (the convention of :mod:`pipelines.stats.ksd`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import Tensor

from pipelines.stats.ksd import _as_points, _like, median_bandwidth
from pipelines.stats.mmd import gaussian_kernel

_CHUNK_ELEMENTS = 1 << 22  # permutation label entries held at once


@dataclass(frozen=True)
class MMDTest:
    """Result of :func:`mmd_permutation_test`; ``statistic`` is the unbiased MMD²_u."""

    statistic: float
    n_x: int
    n_y: int
    bandwidth: float
    p_value: float
    n_permutations: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def mmd_permutation_test(
    x: Tensor | np.ndarray,
    y: Tensor | np.ndarray,
    n_permutations: int = 1000,
    seed: int = 0,
    bandwidth: float | None = None,
) -> MMDTest:
    """Permutation test of H0: x (n, d) and y (m, d) come from one distribution (n, m ≥ 2).

    Statistic: MMD²_u = Σ_{i≠j} k(x_i, x_j)/(n(n−1)) + Σ_{i≠j} k(y_i, y_j)/(m(m−1))
    − 2 Σ_{i,j} k(x_i, y_j)/(nm) (Gretton et al. 2012, eq. 3). Each permutation relabels the
    pooled sample; all are evaluated from one pooled Gram matrix. p = (1 + #{perm ≥ obs})/(1 + B),
    ties up to rounding (e.g. the swapped split when n = m) counting as ≥.
    Float64, deterministic for a given ``seed``; 1-D inputs mean d = 1.
    """
    x, y = _as_points(x), _as_points(y)
    n, m = x.shape[0], y.shape[0]
    if min(n, m) < 2:
        raise ValueError("MMD²_u needs at least two points in each sample")
    pooled = torch.cat([x, y])
    ell = median_bandwidth(pooled) if bandwidth is None else _like(bandwidth, pooled)
    gram = gaussian_kernel(pooled, pooled, (ell,), exact=True).fill_diagonal_(0).numpy()
    observed = _mmd_from_labels(gram, np.repeat([[1.0, 0.0]], [n, m], axis=1), n)[0]
    permuted = _permutation_statistics(gram, n, n_permutations, seed)
    tie = 1e-12 * abs(observed)  # relabellings equal to the observed one up to rounding count as ≥
    p = (1 + int(np.sum(permuted >= observed - tie))) / (1 + n_permutations)
    return MMDTest(
        statistic=float(observed), n_x=n, n_y=m, bandwidth=float(ell), p_value=p, n_permutations=n_permutations
    )


def _permutation_statistics(gram: np.ndarray, n: int, n_permutations: int, seed: int) -> np.ndarray:
    """MMD²_u for ``n_permutations`` random splits of the pooled sample into sizes n and N − n."""
    rng = np.random.default_rng(seed)
    total = gram.shape[0]
    chunk = max(1, _CHUNK_ELEMENTS // total)
    out = []
    for start in range(0, n_permutations, chunk):
        size = min(chunk, n_permutations - start)
        first = np.argsort(rng.random((size, total)), axis=1)[:, :n]
        labels = np.zeros((size, total))
        np.put_along_axis(labels, first, 1.0, axis=1)
        out.append(_mmd_from_labels(gram, labels, n))
    return np.concatenate(out) if out else np.empty(0)


def _mmd_from_labels(gram: np.ndarray, labels: np.ndarray, n: int) -> np.ndarray:
    """MMD²_u for rows of 0/1 labels a (1 = x) given the zero-diagonal pooled Gram matrix K.

    Σ_{x,x} = aᵀKa, Σ_{x,·} = aᵀK1, Σ_{x,y} = Σ_{x,·} − Σ_{x,x},
    Σ_{y,y} = 1ᵀK1 − 2Σ_{x,·} + Σ_{x,x}.
    """
    m = gram.shape[0] - n
    xx = np.einsum("bi,bi->b", labels @ gram, labels)
    x_any = labels @ gram.sum(1)
    yy = gram.sum() - 2 * x_any + xx
    return xx / (n * (n - 1)) + yy / (m * (m - 1)) - 2 * (x_any - xx) / (n * m)
