"""Count marginals of discretised rows and their discrete Gaussian measurement.

Sensitivity (add/remove one record). The marginal on a clique r is the vector of counts M_r(D)[c] =
#{x in D : x_r = c} over the cells c of r. A record x lies in exactly one cell (x_r), so adding or removing it
changes one coordinate by 1 and no other: ||M_r(D) - M_r(D')||_2 = ||.||_1 = 1. The counts are integers, so the
measurement adds discrete Gaussian noise N_ℤ(0, σ²) per cell, drawn exactly (a float Gaussian's
low-order bits would reveal the counts): the other cells' noise has the same law under D and D', so one
measurement is one 1-D discrete Gaussian with shift 1, a DiscreteGaussianEvent(σ, 1), and m measurements compose
as m of them (exactly, by their PLD; zCDP m/2σ² as for the continuous Gaussian, CKS20 Prop. 5). The noisy counts
are integers (returned as float64 for the estimators).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, Union

import numpy as np

from pipelines.privacy.events import DiscreteGaussianEvent, NonPrivateEvent
from pipelines.privacy.mechanisms import discrete_gaussian_mechanism

COUNT_L2_SENSITIVITY = 1.0
COUNT_SENSITIVITY = 1  # one cell moves by one (module docstring)


Codes = Union[np.ndarray, "Passes"]  # the rows' codes: a matrix, or passes over chunks of them


def marginal(codes: np.ndarray, shape: Sequence[int], clique: Sequence[int]) -> np.ndarray:
    """Counts of `codes` (rows × columns int matrix) on the columns `clique`, shaped (shape[c] for c in clique)."""
    clique = tuple(int(c) for c in clique)
    dims = tuple(int(shape[c]) for c in clique)
    if not clique:
        return np.asarray(float(codes.shape[0]))
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in clique), dims) if codes.shape[0] else np.zeros(0, int)
    return np.bincount(flat, minlength=int(np.prod(dims))).reshape(dims).astype(np.float64)


class Passes:
    """Passes over the rows' integer codes: `rows` (a matrix, or `pipelines.data.encoded.RowChunks`: the training
    table in row groups, on a Dask cluster when it has one) with each of `fns` applied in turn to each chunk (a
    generator's discretiser, AIM's and MST's compression). `count` is one pass: every chunk's counts (`marginals`)
    added up, where the chunk is mapped (`RowChunks.map`: each row group's counts computed by a worker, the sums
    here); the counts are integers, so the totals are the same whatever the order of the chunks or where each was
    counted."""

    def __init__(self, rows: Any, fns: Sequence[Callable[[np.ndarray], np.ndarray]] = ()) -> None:
        self.rows, self.fns = rows, tuple(fns)

    def then(self, fn: Callable[[np.ndarray], np.ndarray]) -> "Passes":
        """These passes with `fn` applied to each chunk after the others."""
        return Passes(self.rows, (*self.fns, fn))

    def count(self, shape: Sequence[int], cliques: Iterable[Sequence[int]]) -> dict[tuple[int, ...], np.ndarray]:
        """`marginals` of the codes, in one pass over the rows."""
        cliques = _unique(cliques)
        counted = partial(count_chunk, fns=self.fns, shape=tuple(int(n) for n in shape), cliques=cliques)
        return _summed(
            [counted(self.rows)] if isinstance(self.rows, np.ndarray) else self.rows.map(counted), shape, cliques
        )


def count_chunk(
    chunk: np.ndarray,
    fns: Sequence[Callable[[np.ndarray], np.ndarray]],
    shape: Sequence[int],
    cliques: Sequence[Sequence[int]],
) -> dict[tuple[int, ...], np.ndarray]:
    """The counts (`marginals`) of one chunk of rows after `fns` (`Passes`)."""
    for fn in fns:
        chunk = fn(chunk)
    return marginals([chunk], shape, cliques)


def chunk_passes(codes: Codes) -> Passes:
    """`codes` as `Passes`: a matrix is one chunk."""
    return codes if isinstance(codes, Passes) else Passes(codes)


def marginals(
    chunks: Iterable[np.ndarray], shape: Sequence[int], cliques: Iterable[Sequence[int]]
) -> dict[tuple[int, ...], np.ndarray]:
    """The counts (`marginal`) of every clique, in ONE pass over the code chunks: each chunk's counts added to the
    totals, so memory is the cliques' cells and one chunk, whatever the number of rows (float64 sums of integer
    counts: exact below 2^53)."""
    cliques = _unique(cliques)
    return _summed(({q: marginal(chunk, shape, q) for q in cliques} for chunk in chunks), shape, cliques)


def _unique(cliques: Iterable[Sequence[int]]) -> list[tuple[int, ...]]:
    """The cliques as tuples of column indices, each once, in their first order."""
    return list(dict.fromkeys(tuple(int(c) for c in q) for q in cliques))


def _summed(
    parts: Iterable[dict[tuple[int, ...], np.ndarray]], shape: Sequence[int], cliques: list[tuple[int, ...]]
) -> dict[tuple[int, ...], np.ndarray]:
    """The sum over `parts` (each chunk's counts of `cliques`), one part at a time: zeros where there are none."""
    totals = {q: np.zeros(tuple(int(shape[c]) for c in q)) for q in cliques}
    for part in parts:
        for q in cliques:
            totals[q] += part[q]
    return totals


def measurement_event(sigma: float, query: str = "") -> DiscreteGaussianEvent:
    """The event of one `measure` at σ: DiscreteGaussianEvent(σ, 1, 1, `query`) (module docstring)."""
    return DiscreteGaussianEvent(float(sigma), COUNT_SENSITIVITY, 1, query)


def measure(
    exact: np.ndarray, sigma: float, rng: np.random.Generator | None, query: str = ""
) -> tuple[np.ndarray, DiscreteGaussianEvent | NonPrivateEvent]:
    """M_clique(D) + N_ℤ(0, σ²) per cell (exact discrete Gaussian) with its `measurement_event`, for the exact counts
    `exact` = M_clique(D) (`marginal`, `marginals`); σ = 0 (ε = inf) returns them and a NonPrivateEvent."""
    if sigma == 0:
        return exact, NonPrivateEvent("epsilon: inf")
    event = measurement_event(sigma, query)
    noisy, _ = discrete_gaussian_mechanism(exact, event.sensitivity, event.sigma, rng, event.count, query)
    return noisy.astype(np.float64), event


def shrunk_shares(y: np.ndarray, sigma: float) -> np.ndarray | None:
    """Shares of the cells of a noisy count vector `y` (σ per cell; 0: exact), for decoding a sampled cell into
    finer cells the model does not hold (a numeric bin's parts, a merged cell's codes; post-processing): the
    deviations d = y − ȳ from their mean shrunk by λ = max(0, 1 − (m − 1)σ²/Σd²) over the m cells (positive-part
    James–Stein toward the mean; (m − 1)σ² is E[Σd²] when the cells differ by noise alone), p ∝ max(ȳ + λd, 0).
    None (decode uniformly) when λ = 0 or nothing is positive."""
    y = np.asarray(y, dtype=np.float64).ravel()
    d = y - y.mean()
    spread = float((d**2).sum())
    shrink = 1.0 if sigma == 0 else (max(0.0, 1.0 - (y.size - 1) * sigma**2 / spread) if spread > 0 else 0.0)
    w = np.maximum(y.mean() + shrink * d, 0.0)
    return w / w.sum() if shrink > 0 and w.sum() > 0 else None


def draw(shares: Sequence[float], u: np.ndarray) -> np.ndarray:
    """Indices into `shares` (non-negative, summing to 1 up to rounding) at uniform draws `u` in [0, 1): the inverse
    of their cumulative sum."""
    cdf = np.cumsum(shares)
    return np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), len(cdf) - 1)
