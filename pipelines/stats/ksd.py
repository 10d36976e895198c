"""Kernel Stein Discrepancy (KSD) statistics for the α-LMDP penalty and goodness-of-fit tests.

The KSD between data x ~ p and a model q touches q only through its score s_q(x) = ∇ₓ log q(x);
for an energy model q ∝ exp(−E) that is s_q = −∇ₓE, free of the partition function (paper
section 3.5, Liu et al. 2016). Callers pass the score already evaluated at the data; to use a
statistic as a training penalty they compute it with ``create_graph=True``, and everything here
is plain differentiable torch, in the dtype of the inputs.

Kernel: RBF k(x, y) = exp(−‖x − y‖² / (2ℓ²)), with ℓ the median pairwise distance (Garreau et
al. 2018; paper section 5), computed without gradient. Row-wise functions accept leading batch
dimensions: ``x`` of shape (..., n, d) holds independent sets, and a bandwidth has the batch
shape (...) or is a scalar.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from scipy.stats import chi2, norm
from torch import Tensor

_CHUNK_ELEMENTS = 1 << 22  # bootstrap weights held at once: bounds memory for n up to a few 1000


def median_bandwidth(x: Tensor) -> Tensor:
    """Median heuristic ℓ = median{‖x_i − x_j‖ : i < j} of x (..., n, d), shape (...).

    Garreau et al. (2018), as in the paper's section 5; the average of the two middle distances
    when their count is even. Computed under no_grad on detached data, so the bandwidth is a
    constant of any penalty. Guard: a median of 0 (e.g. more than half the points tied) would
    give a degenerate kernel, so 1.0 is used instead; likewise when n < 2 (no pairs).
    """
    n = x.shape[-2]
    if n < 2:
        return torch.ones(x.shape[:-2], dtype=x.dtype, device=x.device)
    with torch.no_grad():
        x = x.detach()
        i, j = torch.triu_indices(n, n, offset=1, device=x.device)
        med = _median(torch.cdist(x, x, compute_mode="donot_use_mm_for_euclid_dist")[..., i, j])
        return torch.where(med > 0, med, torch.ones_like(med))


def _median(values: Tensor) -> Tensor:
    """Median over the last dimension: the mean of the two middle values when their count is even.

    ``torch.median`` gives the lower middle value; the upper one equals it when it is tied, else
    it is the smallest value above it (two elementwise passes, cheaper than a second selection).
    """
    m = values.shape[-1]
    lower = values.median(dim=-1).values
    if m % 2:
        return lower
    above = values > lower[..., None]
    tied = m - above.sum(-1) > m // 2
    upper = torch.where(above, values, torch.full_like(values, float("inf"))).amin(-1)
    return (lower + torch.where(tied, lower, upper)) / 2


def stein_kernel(x: Tensor, y: Tensor, score_x: Tensor, score_y: Tensor, bandwidth: Tensor | float) -> Tensor:
    """Stein kernel u_q(x, y) of eq. 15 for row-paired inputs (..., d) -> (...).

    u_q(x, y) = k s_xᵀs_y + s_xᵀ∇_y k + (∇_x k)ᵀ s_y + tr(∇_x∇_y k), with s_x = s_q(x). Eq. 15's
    "∇x′ s_q(x)ᵀ k" is a typo for s_q(x)ᵀ∇_{x′}k. For the RBF kernel, with δ = x − y:
    ∇_x k = −δ/ℓ² k,  ∇_y k = δ/ℓ² k,  ∂_{x_a}(δ_a/ℓ² k) = k/ℓ² − δ_a²/ℓ⁴ k, hence
    tr(∇_x∇_y k) = k (d/ℓ² − ‖δ‖²/ℓ⁴) and
    u_q = k [s_xᵀs_y + (s_x − s_y)ᵀδ/ℓ² + d/ℓ² − ‖δ‖²/ℓ⁴].
    ``bandwidth`` (ℓ) broadcasts against the output shape.
    """
    ell2 = _like(bandwidth, x) ** 2
    delta = x - y
    r2 = delta.pow(2).sum(-1)
    inner = (
        (score_x * score_y).sum(-1) + ((score_x - score_y) * delta).sum(-1) / ell2 + x.shape[-1] / ell2 - r2 / ell2**2
    )
    return torch.exp(-r2 / (2 * ell2)) * inner


def stein_kernel_matrix(x: Tensor, score: Tensor, bandwidth: Tensor | float) -> Tensor:
    """Matrix U_ij = u_q(x_i, x_j) of eq. 15 for x, score (..., n, d) -> (..., n, n).

    The closed form of :func:`stein_kernel` written with Gram matrices (memory O(n²), not
    O(n²d)): (s_i − s_j)ᵀ(x_i − x_j) = s_iᵀx_i + s_jᵀx_j − s_iᵀx_j − s_jᵀx_i.
    """
    ell2 = _like(bandwidth, x)[..., None, None] ** 2
    gram = x @ x.mT
    sq = gram.diagonal(dim1=-2, dim2=-1)
    r2 = (sq[..., :, None] + sq[..., None, :] - 2 * gram).clamp_min(0)
    sx = (score * x).sum(-1)
    cross = score @ x.mT
    drift = sx[..., :, None] + sx[..., None, :] - cross - cross.mT
    inner = score @ score.mT + drift / ell2 + x.shape[-1] / ell2 - r2 / ell2**2
    return torch.exp(-r2 / (2 * ell2)) * inner


def linear_terms(x: Tensor, score: Tensor, bandwidth: Tensor | float | None = None) -> Tensor:
    """Terms h_i = u_q(x_{2i−1}, x_{2i}), i = 1..⌊n/2⌋, of eqs. 16-17: (..., n, d) -> (..., ⌊n/2⌋).

    ``bandwidth`` None: the median heuristic on x (per set).
    """
    ell = median_bandwidth(x) if bandwidth is None else _like(bandwidth, x)
    stop = 2 * (x.shape[-2] // 2)
    return stein_kernel(
        x[..., 0:stop:2, :], x[..., 1:stop:2, :], score[..., 0:stop:2, :], score[..., 1:stop:2, :], ell[..., None]
    )


def linear_ksd(h: Tensor) -> Tensor:
    """Linear-time estimator Ŝ_l of eq. 16: the mean of the terms h (..., m) -> (...)."""
    return h.mean(-1)


def normalized_linear_ksd(h: Tensor) -> Tensor:
    """Normalised estimator Ŝ_l,n of eq. 17: (m − 1)(Σh)² / (m Σh²), m = len(h), (..., m) -> (...).

    Non-negative and, under the null, asymptotically χ²₁ (Lemma 3.1). Algebraically it equals
    t²/(1 + t²/(m − 1)) with t = √m·mean(h)/sd(h), so it is bounded by m − 1. Returns 0, with
    zero (finite) gradients, when m < 2 or Σh² = 0.
    """
    m = h.shape[-1]
    if m < 2:
        return h.sum(-1) * 0
    den = m * h.pow(2).sum(-1)
    ok = den > 0
    value = (m - 1) * h.sum(-1) ** 2 / torch.where(ok, den, torch.ones_like(den))
    return torch.where(ok, value, torch.zeros_like(value))


def linear_test_pvalue(h: Tensor) -> float:
    """One-sided p-value of the linear-time test (Liu et al. 2016): √m·mean(h)/sd(h) vs N(0, 1).

    h are the terms of eq. 16 for one set (m ≥ 2); a large positive Ŝ_l is evidence against q.
    """
    h = h.detach().double()
    if h.numel() < 2:
        raise ValueError("the linear-time test needs at least two terms (n >= 4 points)")
    t = h.numel() ** 0.5 * h.mean() / h.std()
    return float(norm.sf(t.item()))


def normalized_linear_pvalue(stat: Tensor | float) -> float:
    """p-value of Ŝ_l,n (eq. 17) against its asymptotic χ²₁ null (Lemma 3.1): the χ²₁ survival."""
    return float(chi2.sf(float(stat), df=1))


def ksd_u_statistic(x: Tensor, score: Tensor, bandwidth: Tensor | float | None = None) -> Tensor:
    """U-statistic Ŝ(p, q) = Σ_{i≠j} u_q(x_i, x_j) / (n(n − 1)) of eq. 14: (..., n, d) -> (...)."""
    ell = median_bandwidth(x) if bandwidth is None else _like(bandwidth, x)
    u = stein_kernel_matrix(x, score, ell)
    n = x.shape[-2]
    return (u.sum((-2, -1)) - u.diagonal(dim1=-2, dim2=-1).sum(-1)) / (n * (n - 1))


@dataclass(frozen=True)
class KSDTest:
    """Result of :func:`ksd_bootstrap_test`; ``statistic`` is the U-statistic of eq. 14."""

    statistic: float
    n: int
    bandwidth: float
    p_value: float
    n_bootstrap: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def ksd_bootstrap_test(
    x: Tensor | np.ndarray,
    score: Tensor | np.ndarray,
    n_bootstrap: int = 1000,
    seed: int = 0,
    bandwidth: float | None = None,
) -> KSDTest:
    """KSD goodness-of-fit test of x (n, d) against the model whose score at x is ``score``.

    Bootstrap of Liu et al. (2016): weights w = c/n with c ~ Mult(n; 1/n, …, 1/n), and
    S* = Σ_{i≠j} (w_i − 1/n)(w_j − 1/n) u_ij, which is on the scale of the U-statistic S_u of
    eq. 14; p = (1 + #{S* ≥ S_u}) / (1 + B) (the paper's appendix D.3 reports S_u and p).
    Detached float64 throughout; deterministic for a given ``seed``. 1-D inputs mean d = 1.
    """
    x, score = _as_points(x), _as_points(score)
    n = x.shape[0]
    ell = median_bandwidth(x) if bandwidth is None else _like(bandwidth, x)
    u = stein_kernel_matrix(x, score, ell).fill_diagonal_(0).numpy()
    statistic = u.sum() / (n * (n - 1))
    boot = _multinomial_bootstrap(u, n_bootstrap, seed)
    p = (1 + int(np.sum(boot >= statistic))) / (1 + n_bootstrap)
    return KSDTest(statistic=float(statistic), n=n, bandwidth=float(ell), p_value=p, n_bootstrap=n_bootstrap)


def _multinomial_bootstrap(u: np.ndarray, n_bootstrap: int, seed: int) -> np.ndarray:
    """S*_b = (w_b − 1/n)ᵀU(w_b − 1/n) for B multinomial weight vectors; U has a zero diagonal."""
    rng = np.random.default_rng(seed)
    n = u.shape[0]
    chunk = max(1, _CHUNK_ELEMENTS // n)
    out = []
    for start in range(0, n_bootstrap, chunk):
        w = _uniform_multinomial(rng, n, min(chunk, n_bootstrap - start)) / n - 1.0 / n
        out.append(np.einsum("bi,bi->b", w @ u, w))
    return np.concatenate(out) if out else np.empty(0)


def _uniform_multinomial(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """``size`` draws of Mult(n; 1/n, …, 1/n), as counts of n uniform indices per row."""
    draws = rng.integers(0, n, size=(size, n)) + n * np.arange(size)[:, None]
    return np.bincount(draws.ravel(), minlength=size * n).reshape(size, n)


def _as_points(a: Tensor | np.ndarray) -> Tensor:
    """Detached float64 (n, d) tensor from an array or tensor; 1-D input is one column."""
    t = torch.as_tensor(a).detach().to(torch.float64).cpu()
    return t[:, None] if t.ndim == 1 else t


def _like(value: Tensor | float, x: Tensor) -> Tensor:
    return torch.as_tensor(value, dtype=x.dtype, device=x.device)
