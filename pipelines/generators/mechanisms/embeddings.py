"""Characteristic-function embeddings and the mean pairwise distance, each released once with the
Gaussian mechanism (PEARL, ../shared/papers/pearl-private-embeddings.txt: §3 Prop. 1 and eq. 6,
§5.1 and appendix D).

Neighbouring relation (privacy rule 7, docs/architecture.md): D' = D plus or minus one record. Both releases are
noisy SUMS. Their denominators are the training row count n, public by docs/architecture.md
departure 1 (the noise is calibrated to the planned n, as DP-SGD's q = B/n is), and, for class
embeddings, the noisy class counts released inside the same Gaussian event. Each event's `query`
says which. Records are rows of the encoded table (numeric in [0, 1], binary 0/1, one-hot blocks).
The actual number of rows read may differ from n̂: the embedding's Δ₂ does not depend on it, and the
distance's pair sum runs over at most n̂ rows chosen by a per-row hash priority (`capped_rows`), so its
Δ₂ = (n̂ − 1)D holds for any row count.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import torch
from torch import Tensor

from pipelines.data.layout import Block
from pipelines.privacy.events import GaussianEvent
from pipelines.privacy.mechanisms import gaussian_mechanism

NUMERIC_OR_BINARY = ("continuous", "integer", "binary")
# Floor of the released length scale, as a fraction of the diameter: a post-processing clamp that
# keeps ω = u/ℓ finite when the noisy mean distance comes out ≤ 0.
MIN_LENGTH_SCALE = 1e-2


def cf_features(x: Tensor, freqs: Tensor) -> Tensor:
    """[cos(ω_j·x)]_j ⧺ [sin(ω_j·x)]_j, shape (n, 2k): the real and imaginary parts of e^{iω_j·x}, the
    summand of the empirical CF (eq. 4) at the k frequencies `freqs` (k, d). Every row has L2 norm √k."""
    proj = x @ freqs.T
    return torch.cat([torch.cos(proj), torch.sin(proj)], dim=-1)


# -- the embedding (eq. 6) ---------------------------------------------------------------------------


def embedding_sensitivity(k: int, conditional: bool) -> float:
    """L2 sensitivity of `embedding_sums` under add/remove-one: √(2k) with labels, √k without.

    A record (x, y) contributes v(x, y) = e_y ⊗ [√k, cos(ω·x), sin(ω·x)] (without labels: the
    cos/sin part alone), so adding or removing it moves the sum by exactly ±v, and
    ‖v‖² = (√k)² + Σ_j (cos² + sin²)(ω_j·x) = k + k = 2k (resp. k): the bound holds with equality for
    every record, every frequency set and any input values, with no clipping. The count coordinate
    is weighted √k so that class counts and class sums carry equal parts (k each) of ‖v‖².
    Divided by the public n, the mean embedding's sensitivity is √k/n; the paper's Prop. 1 gives
    2√k/n for replace-one neighbours (two records differ, triangle inequality, |e^{ia}| = 1).
    """
    return math.sqrt(2 * k) if conditional else math.sqrt(k)


def embedding_event(k: int, conditional: bool, n: int, noise_multiplier: float) -> GaussianEvent:
    """The GaussianEvent of releasing `embedding_sums` with noise std z·Δ₂ (z = `noise_multiplier`)."""
    delta2 = embedding_sensitivity(k, conditional)
    query = (
        f"PEARL CF embedding, k={k}: per-class sums of [√k, cos ω·x, sin ω·x]; class embeddings = "
        f"noisy sums ÷ noisy class counts (this event), proportions ÷ their total"
        if conditional
        else f"PEARL CF embedding, k={k}: Σ_i [cos ω·x_i, sin ω·x_i] ÷ public row count n={n}"
    )
    return GaussianEvent(noise_multiplier * delta2, delta2, query)


def embedding_sums(
    x: Tensor, labels: Tensor | None, n_classes: int, freqs: Tensor, chunk: int = 4096, weights: Tensor | None = None
) -> np.ndarray:
    """Σ_i v(x_i, y_i) (`embedding_sensitivity`): row c = [√k·N_c, Σ_{y_i=c} cos(ω·x_i), Σ_{y_i=c} sin(ω·x_i)]
    (C, 2k + 1); without labels one row Σ_i [cos, sin], shape (1, 2k). Accumulated in float64.
    `weights` w_i scale each record's v (importance-weighted sums,
    `pipelines.generators.mechanisms.weighted_embedding`)."""
    k = freqs.shape[0]
    w = torch.ones(x.shape[0], dtype=torch.float64, device=x.device) if weights is None else weights.double()
    if labels is None:
        total = torch.zeros(1, 2 * k, dtype=torch.float64, device=x.device)
        for i in range(0, x.shape[0], chunk):
            total += w[i : i + chunk] @ cf_features(x[i : i + chunk], freqs).double()
        return total.cpu().numpy()
    total = torch.zeros(n_classes, 2 * k, dtype=torch.float64, device=x.device)
    for i in range(0, x.shape[0], chunk):
        onehot = torch.nn.functional.one_hot(labels[i : i + chunk], n_classes).double() * w[i : i + chunk, None]
        total += onehot.T @ cf_features(x[i : i + chunk], freqs).double()
    counts = torch.bincount(labels, weights=w, minlength=n_classes)[:, None]
    return torch.cat([math.sqrt(k) * counts, total], dim=1).cpu().numpy()


def release_embedding(
    x: Tensor,
    labels: Tensor | None,
    n_classes: int,
    freqs: Tensor,
    noise_multiplier: float,
    rng: np.random.Generator,
    n: int | None = None,
) -> tuple[np.ndarray, GaussianEvent]:
    """Eq. 6 on sums: `embedding_sums` + N(0, (zΔ₂)² I), and its event. `n`: the public training row count n̂
    the event names (default: the rows of `x`, when their count is public); Δ₂ does not depend on it."""
    event = embedding_event(freqs.shape[0], labels is not None, x.shape[0] if n is None else n, noise_multiplier)
    return gaussian_mechanism(
        embedding_sums(x, labels, n_classes, freqs), event.l2_sensitivity, event.sigma, rng, event.query
    )


def class_embeddings(noisy_sums: np.ndarray, n: int, conditional: bool) -> tuple[np.ndarray, np.ndarray]:
    """Post-processing of released sums into (class proportions p̂, embeddings φ̂_c (C, 2k)).

    With labels (rows [√k·Ñ_c, S̃_c]): Ñ_c = first column / √k, p̂_c = max(Ñ_c, 0) / Σ_c max(Ñ_c, 0)
    (uniform if every Ñ_c ≤ 0), φ̂_c = S̃_c / max(Ñ_c, 1). Without labels: p̂ = (1,), φ̂ = S̃ / n.
    """
    sums = np.asarray(noisy_sums, dtype=float)
    if not conditional:
        return np.ones(1), sums / n
    counts = sums[:, 0] / math.sqrt((sums.shape[1] - 1) // 2)
    positive = np.clip(counts, 0.0, None)
    proportions = positive / positive.sum() if positive.sum() > 0 else np.full(len(counts), 1 / len(counts))
    return proportions, sums[:, 1:] / np.maximum(counts, 1.0)[:, None]


# -- auxiliary information: the mean pairwise distance (§5.1, appendix D) -----------------------------


def encoded_diameter(blocks: list[Block] | tuple[Block, ...]) -> float:
    """Largest L2 distance D between two encoded records over `blocks`, from the layout alone: a numeric
    or binary column differs by at most 1, a one-hot block by at most √2 (two different categories), so
    D = √(#numeric + #binary + 2·#categorical) ≤ √d (App. D bounds each distance by √d on [0, 1]^d)."""
    kinds = [b.kind for b in blocks]
    unknown = sorted(set(kinds) - set(NUMERIC_OR_BINARY) - {"categorical"})
    if unknown:
        raise ValueError(f"unknown block kinds {unknown}")
    return math.sqrt(sum(2 if kind == "categorical" else 1 for kind in kinds))


def pairwise_distance_sum(x: Tensor, diameter: float, chunk: int = 2048) -> float:
    """T = Σ_{i<j} min(‖x_i − x_j‖₂, D) over every row of `x`, App. D's numerator. The clip at D changes nothing
    on valid encoded records and bounds every term by D for any input. O(n²d), in row blocks. The released
    statistic applies it to `capped_rows` only (`capped_distance_sum`)."""
    total = 0.0
    for i in range(0, x.shape[0], chunk):
        dist = torch.cdist(x[i : i + chunk], x[i:]).clamp_(max=diameter)
        dist[:, : dist.shape[0]] = torch.triu(dist[:, : dist.shape[0]], diagonal=1)
        total += float(dist.double().sum())
    return total


def row_priorities(x: Tensor) -> np.ndarray:
    """Each row's priority: the sha256 digest (32 bytes, compared lexicographically) of the row's float32 bytes,
    a function of that row's values alone (not of its position, nor of the other rows)."""
    rows = np.ascontiguousarray(x.detach().to("cpu", torch.float32).numpy())
    return np.array([hashlib.sha256(row.tobytes()).digest() for row in rows], dtype="S32")


def capped_rows(x: Tensor, n: int) -> Tensor:
    """The m = min(rows, n) rows of `x` of smallest `row_priorities`, in priority order (ties only between rows
    with equal float32 bytes, which are interchangeable). With n = n̂ the public row count this caps the pair
    sum's size whatever the number of rows actually read (`distance_sum_sensitivity`)."""
    order = np.argsort(row_priorities(x), kind="stable")[: min(int(n), x.shape[0])]
    return x[torch.as_tensor(order, dtype=torch.long, device=x.device)]


def capped_distance_sum(x: Tensor, n: int, diameter: float) -> float:
    """T_n̂ = `pairwise_distance_sum` over `capped_rows(x, n)`: the statistic the mean-distance release adds
    noise to, L2 sensitivity (n − 1)D under add/remove-one for ANY number of rows of `x`."""
    return pairwise_distance_sum(capped_rows(x, n), diameter)


def distance_sum_sensitivity(n: int, diameter: float) -> float:
    """L2 sensitivity (n̂ − 1)D of `capped_distance_sum` under add/remove-one, n = n̂ the public row count, whatever
    the actual row count N of the table read (which may differ from n̂).

    Let S(D) be the m = min(N, n̂) rows of smallest priority; a row's priority depends on that row alone, so
    adding a record x leaves every other row's rank order unchanged. Every pair term lies in [0, D].
    - N ≥ n̂: |S| = n̂ on D and on D' = D + x. Either x ranks after S(D)'s last row and S(D') = S(D) (T equal),
      or x enters and S(D)'s last row leaves: T loses that row's n̂ − 1 terms and gains x's n̂ − 1 terms with
      the same n̂ − 1 other rows, so |ΔT| ≤ (n̂ − 1)D. Removing a record is the same pair read backwards
      (a swap, or no change when the removed row was not selected).
    - N < n̂: S(D) = D and S(D') = D' (N + 1 ≤ n̂ rows): adding x adds N ≤ n̂ − 1 terms, so ΔT ∈ [0, (n̂ − 1)D].
    Hence Δ₂ = (n̂ − 1)D, attained when x lies at distance ≥ D from the other selected rows (opposite corners)
    and enters the selection. The sum over all N rows would move by N·D, unbounded in the private N; a bound
    nD on it holds only for tables of at most n + 1 rows. The released mean T̃ / (n̂(n̂−1)/2) divides by the
    public pair count: noise std z·2D/n̂ for noise multiplier z (App. D: 2√d/n for replace-one on [0, 1]^d).
    """
    if n < 2:
        raise ValueError(f"the mean pairwise distance needs a public row count of at least 2, got {n}")
    return (n - 1) * diameter


def distance_event(n: int, diameter: float, noise_multiplier: float) -> GaussianEvent:
    """The GaussianEvent of releasing `capped_distance_sum` with noise std z·Δ₂."""
    delta2 = distance_sum_sensitivity(n, diameter)
    query = (
        f"PEARL mean pairwise distance: Σ_(i<j) min(‖x_i − x_j‖, {diameter:.6g}) over the min(rows, n) rows of "
        f"smallest sha256 row priority ÷ public n(n−1)/2, n={n}"
    )
    return GaussianEvent(noise_multiplier * delta2, delta2, query)


def release_mean_distance(
    x: Tensor, diameter: float, noise_multiplier: float, rng: np.random.Generator, n: int | None = None
) -> tuple[float, GaussianEvent]:
    """The DP mean pairwise distance ℓ̂ = clip(T̃ / (n(n−1)/2), MIN_LENGTH_SCALE·D, D) and its event, with n the
    public training row count n̂ (default: the rows of `x`, when their count is public) and T̃ the noisy
    `capped_distance_sum`: Δ₂ = (n̂ − 1)D whatever the number of rows of `x` (`distance_sum_sensitivity`)."""
    n = x.shape[0] if n is None else int(n)
    if n < 2:
        raise ValueError(f"the mean pairwise distance needs at least 2 rows, got {n}")
    planned = distance_event(n, diameter, noise_multiplier)
    noisy, event = gaussian_mechanism(
        np.array(capped_distance_sum(x, n, diameter)), planned.l2_sensitivity, planned.sigma, rng, planned.query
    )
    return mean_distance(float(noisy), n, diameter), event


def mean_distance(distance_sum: float, n: int, diameter: float) -> float:
    """Post-processing: a (noisy) pair sum over the public n(n−1)/2 pairs, clamped to [MIN_LENGTH_SCALE·D, D]."""
    return float(np.clip(distance_sum / (n * (n - 1) / 2), MIN_LENGTH_SCALE * diameter, diameter))
