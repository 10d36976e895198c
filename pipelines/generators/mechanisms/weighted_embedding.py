"""The importance-weighted kernel mean embedding, released once with the Gaussian mechanism (the private mode
of `iw_mmd_gan`; Diesendruck thesis §3.2, Table 3.1, with the kernel of §3.3.1 approximated by random features).

Kernel: the Gaussian mixture k(x, x') = (1/B) Σ_b exp(−‖x − x'‖² / 2h_b²) over public bandwidths h_b. Random
Fourier features (Rahimi & Recht 2007): for ω ~ N(0, h⁻² I), E cos(ω·(x − x')) = exp(−‖x − x'‖²/2h²), so with
k frequencies ω_j = u_j / h_{j mod B}, u_j ~ N(0, I) drawn from the public seed,
    k(x, x') ≈ (1/k) φ(x)·φ(x'),   φ(x) = [cos ω_j·x, sin ω_j·x]_j ∈ R^{2k}   (`embeddings.cf_features`),
and MMD²(P, Q) ≈ (1/k) ‖μ_P − μ_Q‖², μ_P = E_P φ(X).

Released statistic (privacy rule 7, docs/architecture.md: a noisy SUM over a public or a noisy normaliser), weights
w(x) ∈ [0, w_max] a public function of the row (`pipelines.generators.iw_weights`):
  IW (M known, Table 3.1 "Average" column):   S = Σ_i w(x_i) φ(x_i),  μ̂_P = S̃ / n   (n public, departure 1)
  SNIW (M known up to a constant):             [√k·Σ_i w(x_i), Σ_i w(x_i) φ(x_i)] in ONE Gaussian event,
                                               μ̂_P = S̃ / W̃ (W̃ the noisy weight total; floor 1, post-processing)
  uniform: IW with w ≡ 1 (w_max = 1).
Median of means (eq. 3.4) and importance duplication (§3.2.5) need the rows themselves at every step; they
have no one-shot release here and are non-private only.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from pipelines.generators.mechanisms.embeddings import class_embeddings, embedding_sensitivity, embedding_sums
from pipelines.privacy.events import GaussianEvent
from pipelines.privacy.mechanisms import gaussian_mechanism


def random_frequencies(k: int, d: int, bandwidths: list[float] | tuple[float, ...], seed: int) -> Tensor:
    """ω_j = u_j / h_{j mod B}, u_j ~ N(0, I_d) from the public `seed`: (k, d) frequencies whose features
    estimate the Gaussian mixture kernel (module docstring). Drawn without data."""
    if k < 1 or not bandwidths or any(not (h > 0 and math.isfinite(h)) for h in bandwidths):
        raise ValueError(f"need k >= 1 frequencies and positive finite bandwidths, got k={k}, bandwidths={bandwidths}")
    u = torch.randn(k, d, generator=torch.Generator().manual_seed(int(seed)), dtype=torch.float64)
    h = torch.as_tensor([bandwidths[j % len(bandwidths)] for j in range(k)], dtype=torch.float64)
    return u / h[:, None]


def weighted_embedding_sensitivity(k: int, self_normalised: bool, w_max: float) -> float:
    """L2 sensitivity of the released sum under add/remove-one: w_max·√(2k) (SNIW), w_max·√k (IW).

    Adding or removing record x moves the sum by exactly w(x)·v(x), v(x) = [√k, cos ω·x, sin ω·x] (SNIW) or
    [cos ω·x, sin ω·x] (IW). ‖v(x)‖² = k + Σ_j (cos² + sin²)(ω_j·x) = 2k (resp. k) for every x and every
    frequency set (`embeddings.embedding_sensitivity`), and 0 ≤ w(x) ≤ w_max for every possible row because the
    weight function is clipped to [0, w_max] (a public bound, never computed from the data). So
    ‖w(x) v(x)‖ ≤ w_max·‖v(x)‖, with equality for any record of maximal weight.
    """
    if not (w_max > 0 and math.isfinite(w_max)):
        raise ValueError(f"w_max must be positive and finite, got {w_max}")
    return w_max * embedding_sensitivity(k, self_normalised)


def weighted_embedding_event(
    k: int, self_normalised: bool, n: int, w_max: float, noise_multiplier: float
) -> GaussianEvent:
    """The GaussianEvent of releasing the weighted sums with noise std z·Δ₂ (z = `noise_multiplier`)."""
    delta2 = weighted_embedding_sensitivity(k, self_normalised, w_max)
    query = (
        f"IW-MMD RFF embedding, k={k}, weights in [0, {w_max:.6g}]: "
        f"[√k·Σ w(x_i), Σ w(x_i)(cos ω·x_i, sin ω·x_i)]; "
        f"mean embedding = noisy sum ÷ noisy weight total (this event)"
        if self_normalised
        else f"IW-MMD RFF embedding, k={k}, weights in [0, {w_max:.6g}]: Σ w(x_i)(cos ω·x_i, sin ω·x_i) ÷ public "
        f"row count n={n}"
    )
    return GaussianEvent(noise_multiplier * delta2, delta2, query)


def weighted_embedding_sums(x: Tensor, w: Tensor, freqs: Tensor, self_normalised: bool) -> np.ndarray:
    """The exact statistic: (1, 2k + 1) [√k·Σ w_i, Σ w_i φ(x_i)] (SNIW) or (1, 2k) Σ w_i φ(x_i) (IW)."""
    labels = torch.zeros(x.shape[0], dtype=torch.long, device=x.device) if self_normalised else None
    return embedding_sums(x, labels, 1, freqs, weights=w)


def release_weighted_embedding(
    x: Tensor,
    w: Tensor,
    freqs: Tensor,
    self_normalised: bool,
    w_max: float,
    noise_multiplier: float,
    rng: np.random.Generator,
    n: int | None = None,
) -> tuple[np.ndarray, GaussianEvent]:
    """The weighted sums + N(0, (zΔ₂)² I), and the event. Refuses weights outside [0, w_max] (the sensitivity
    would not hold). `n`: the public training row count n̂ the event names (default: the rows of `x`)."""
    if w.numel() and not bool(((w >= 0) & (w <= w_max)).all()):
        raise ValueError(
            f"importance weights must lie in [0, w_max = {w_max}] for the release's sensitivity to hold; "
            f"clip the weight function to its public bound"
        )
    event = weighted_embedding_event(
        freqs.shape[0], self_normalised, x.shape[0] if n is None else n, w_max, noise_multiplier
    )
    return gaussian_mechanism(
        weighted_embedding_sums(x, w, freqs, self_normalised), event.l2_sensitivity, event.sigma, rng, event.query
    )


def mean_embedding(sums: np.ndarray, n: int, self_normalised: bool) -> np.ndarray:
    """Post-processing of (noisy) sums into μ̂_P (2k,): S / W (floor 1) for SNIW, S / n for IW."""
    return class_embeddings(sums, n, self_normalised)[1][0]
