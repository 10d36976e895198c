"""Private domain discovery: the parts of a column's domain the documentation does not give, found under DP.

Neighbouring relation: add/remove one privacy unit. The discover stage keeps at most k = `max_rows` rows per unit
(pipelines/data/units.py; one row per unit without a declared unit) before either mechanism reads a value, so a
unit moves at most k rows.

Categories (`select_partitions`): Laplace partition selection (Korolova, Kenthapadi, Mishra & Ntoulas 2009;
Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo & Gipson 2020, §3; Desfontaines, Voss, Gipson & Mandayam 2022,
"Differentially private partition selection"). For each value v present in the rows, c_v = the number of distinct
units holding v. A unit holds at most k values, so the vector (c_v) moves by an integer vector of L1 norm ≤ k
whose coordinates move by ≤ 1. Release v iff c_v + Z_v ≥ τ, Z_v ~ Lap_ℤ(t) i.i.d., t = k/ε, drawn exactly; only
the set of released values is output (sorted; no count). Why it is (ε, δ)-DP, δ = k·p^(τ−1)/(1 + p), p = e^(−1/t):

- let D' = D ∪ U and let m ≤ k of U's values be absent from D (each has c_v = 1 in D'). On the values present in
  both, the noisy counts are an ε-DP release (discrete Laplace, L1 shift ≤ k − m ≤ k; thresholding is
  post-processing). A value absent from D is released from D' only when 1 + Z_v ≥ τ, with probability
  P(Z ≥ τ − 1) = p^(τ−1)/(1 + p); so q, the chance that D' releases any of them, is ≤ m·p^(τ−1)/(1 + p) ≤ δ.
- D' against D: an output set holding an absent value has probability 0 under D and ≤ q in all under D'; any
  other output is e^ε-close. So P_D'(S) ≤ e^ε P_D(S) + δ.
- D against D': with m ≥ 1 the shared counts move by ≤ k − m, so they are (ε − 1/t)-DP, and an output S (no
  absent value) has P_D'(S) = P_shared,D'(S)·(1 − q) ≥ e^(−(ε − 1/t))·P_D(S)·(1 − q) ≥ e^(−ε) P_D(S) whenever
  (1 − q)·e^(1/t) ≥ 1, which holds because q ≤ δ ≤ 1 − e^(−1/t) (checked: `partition_threshold` refuses a δ above
  it). With m = 0 the release is ε-DP. So P_D(S) ≤ e^ε P_D'(S).

τ is the smallest integer with k·p^(τ−1)/(1 + p) ≤ δ (`partition_threshold`); the event is ApproxDPEvent(ε, δ) at
the unit (recorded as such: k is in ε and δ already).

Step (`grid_step`): the granularity of a numeric column (amounts in multiples of 25, times to a tenth of an hour), by
magnitude (a child's age in tenths of a year below 1, in whole years from 1). Each kept row adds 1 to one cell: its
magnitude band (|v| below 10^MIN_DECADE, or the decade [10^i, 10^(i+1)) it lies in, i in [MIN_DECADE, MAX_DECADE), the
last taking every larger value) × the coarsest grid of the public STEP_LADDER it lies on (or a last bin: none). The
cells are a partition of the rows, so a unit moves the histogram by an integer vector of L1 norm ≤ k: Lap_ℤ(k/ε) on
every cell makes it ε-DP (DiscreteLaplaceEvent, dims = the bands × the ladder's bins). The rest is post-processing. The
ladder is a divisibility chain, so a band's rows off the grid of s are those in its bins of every finer step and in
"none"; a band's step is the coarsest s for which each of those bins' noisy count stays below a limit and the bins of s
and coarser hold at least that limit, one of them at least the empty-cell threshold. The limit is the larger of
STEP_TOLERANCE of the band's noisy total and the empty-cell threshold for these cells (an empty cell passes it with
probability below FALSE_BIN/cells), so noise alone rarely rules a step out. A band with no step takes its nearest band's
that has one (the finer on a tie); the steps are published as pieces (from magnitude, step), equal neighbours merged.
None when no band has a step. The same noisy bins give the band's rounding (`rounding: discover`): the share of its
rows whose coarsest grid is each multiple g of the band's step on the ladder, for every g whose bin holds at least the
limit (the step's own share is the rest, rows on no kept grid included), as pieces (from magnitude, [[grid, share],
...]); [] for a band too thin for its noisy total to reach the empty-cell threshold, or where a documented step
changes inside the band. Post-processing of the same histogram: no further budget.

Bounds (`approximate_bounds`): the approximate bounds of Google's differential-privacy library (ApproxBounds,
algorithms/approx-bounds.h: a histogram over powers of two). Finer bins spread the rows thinner under the same
threshold, so the bound moves inwards past more of the tail; a power of two per bin keeps the rows clipped to
those in bins too sparse to pass it. The grid is fixed before any row is read: edges 0 and
±2^i·(1 + j/SUBDIVISIONS) for i in [MIN_EXPONENT, MAX_EXPONENT), j in [0, SUBDIVISIONS) (a bin's width is at most
1/SUBDIVISIONS of its magnitude); a value outside the grid counts in the outermost bin. Each kept row adds 1 to
its bin's count, so a unit moves the histogram by an integer vector of L1 norm ≤ k: every bin gets Lap_ℤ(t),
t = k/ε, and the histogram is ε-DP (DiscreteLaplaceEvent with dims = the number of bins). The lower bound is the
lower edge of the lowest bin whose noisy count is ≥ τ_b, the upper bound the upper edge of the highest such bin
(post-processing). τ_b = the smallest integer with B·p^τ_b/(1 + p) ≤ FALSE_BIN (B bins, p = e^(−1/t)): an empty
bin passes it with probability below FALSE_BIN/B, so a bound set by a bin with no row has probability below
FALSE_BIN. Rows beyond the bounds (the rarest extremes, which no DP bound can follow) are clipped or dropped by
the column's on_invalid policy and counted by validation like any other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipelines.privacy.events import ApproxDPEvent, DiscreteLaplaceEvent
from pipelines.privacy.mechanisms import discrete_laplace_mechanism

MIN_EXPONENT = -20  # the grid's smallest magnitude 2^-20 ≈ 1e-6
MAX_EXPONENT = 60  # and largest 2^60 ≈ 1.2e18
SUBDIVISIONS = 1  # bins per power of two, as ApproxBounds: a bound is the power of two next to the rows' extreme bins
FALSE_BIN = 1e-3  # the chance that some empty bin passes the bounds' threshold
PARTITION_MECHANISM = "laplace_partition_selection"
# The public ladder of granularities a value may have, each dividing the next (a value on the grid of one is on the
# grid of every finer one): `grid_step` picks the coarsest that nearly every row lies on.
STEP_LADDER = (0.0001, 0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 25.0, 100.0, 500.0, 1000.0, 5000.0, 10000.0)
STEP_TOLERANCE = 0.01  # the share of a band's rows (noisy) a discovered step may leave off its grid
MIN_DECADE, MAX_DECADE = -6, 18  # the granularity's magnitude bands: below 1e-6, then decades up to 1e18
ON_GRID = 1e-6  # |v/s − round(v/s)| below this: v is on the grid of s


def partition_threshold(epsilon: float, delta: float, max_rows: int = 1) -> int:
    """τ: the smallest integer ≥ 1 with k·p^(τ−1)/(1 + p) ≤ δ, p = e^(−ε/k) (module docstring); ValueError when δ
    is not in (0, 1 − p], where the proof's second direction needs it."""
    k, p = int(max_rows), math.exp(-float(epsilon) / max_rows)
    if not (0 < delta <= 1 - p):
        raise ValueError(f"partition selection needs 0 < δ ≤ 1 − e^(−ε/k) = {1 - p:.3g}, got δ = {delta}")
    return 1 + max(0, math.ceil(math.log(k / (delta * (1 + p))) / (float(epsilon) / k) - 1e-12))


def partition_event(epsilon: float, delta: float, max_rows: int = 1) -> ApproxDPEvent:
    """The unit-level event of `select_partitions` at (ε, δ) for units of `max_rows` rows."""
    return ApproxDPEvent(float(epsilon), float(delta), PARTITION_MECHANISM)


def select_partitions(
    unit_counts: dict[Any, int],
    epsilon: float,
    delta: float,
    max_rows: int,
    rng: np.random.Generator,
    limit: int | None = None,
) -> tuple[list[Any], ApproxDPEvent]:
    """The values whose count of distinct units plus Lap_ℤ(k/ε) is ≥ `partition_threshold` (module docstring),
    sorted, and the event to record; with `limit`, the `limit` of them with the largest noisy counts (the noisy
    counts of released values are part of the same (ε, δ) release, so ranking by them is post-processing).
    `unit_counts`: each present value's number of distinct units, after each unit was bounded to `max_rows` rows."""
    tau = partition_threshold(epsilon, delta, max_rows)
    values = sorted(unit_counts, key=str)
    counts = np.asarray([int(unit_counts[v]) for v in values], dtype=np.int64)
    noisy, _ = discrete_laplace_mechanism(counts, 1, max_rows / float(epsilon), rng, query="partition selection")
    passed = [(c, v) for v, c in zip(values, noisy.tolist()) if c >= tau]
    if limit is not None:
        passed = sorted(passed, key=lambda cv: -cv[0])[:limit]
    return sorted((v for _, v in passed), key=str), partition_event(epsilon, delta, max_rows)


def grid_edges() -> np.ndarray:
    """The bounds' public grid (module docstring): strictly increasing edges, symmetric about 0."""
    magnitudes = np.asarray(
        [2.0**i * (1 + j / SUBDIVISIONS) for i in range(MIN_EXPONENT, MAX_EXPONENT) for j in range(SUBDIVISIONS)]
        + [2.0**MAX_EXPONENT]
    )
    return np.concatenate([-magnitudes[::-1], [0.0], magnitudes])


def bounds_threshold(epsilon: float, max_rows: int = 1) -> int:
    """τ_b: the smallest integer with B·p^τ_b/(1 + p) ≤ FALSE_BIN, p = e^(−ε/k), B the grid's bins."""
    bins, p = len(grid_edges()) - 1, math.exp(-float(epsilon) / max_rows)
    return max(1, math.ceil(math.log(bins / (FALSE_BIN * (1 + p))) / (float(epsilon) / max_rows) - 1e-12))


@dataclass(frozen=True)
class Bounds:
    """A column's discovered bounds (None when no bin passed the threshold: too few rows for ε)."""

    lower: float | None
    upper: float | None
    threshold: int


def approximate_bounds(
    values: np.ndarray, epsilon: float, max_rows: int, rng: np.random.Generator
) -> tuple[Bounds, DiscreteLaplaceEvent]:
    """The ε-DP bounds of `values` (finite numbers, at most `max_rows` per unit) on the public grid (module
    docstring), and the event to record."""
    edges = grid_edges()
    bins = len(edges) - 1
    index = np.clip(np.searchsorted(edges, np.asarray(values, dtype=np.float64), side="right") - 1, 0, bins - 1)
    counts = np.bincount(index, minlength=bins).astype(np.int64)
    noisy, event = discrete_laplace_mechanism(
        counts, int(max_rows), max_rows / float(epsilon), rng, dims=bins, query="approximate bounds histogram"
    )
    tau = bounds_threshold(epsilon, max_rows)
    passed = np.flatnonzero(noisy >= tau)
    if not passed.size:
        return Bounds(None, None, tau), event
    return Bounds(float(edges[passed[0]]), float(edges[passed[-1] + 1]), tau), event


def step_bins(values: np.ndarray, ladder: tuple[float, ...] = STEP_LADDER) -> np.ndarray:
    """Each value's bin for `grid_step`: the index of the coarsest step of `ladder` whose grid it lies on, or
    len(ladder) when it lies on none."""
    v = np.asarray(values, dtype=np.float64)
    out = np.full(v.shape, len(ladder), dtype=np.int64)
    for i, s in enumerate(ladder):  # finest first: a coarser grid overwrites
        q = v / s
        out[np.abs(q - np.rint(q)) < ON_GRID] = i
    return out


def magnitude_bands(values: np.ndarray) -> np.ndarray:
    """Each value's magnitude band for `grid_step`: 0 for |v| < 10^MIN_DECADE, else 1 + the decade of |v| above it
    (the last band takes every larger value)."""
    v = np.abs(np.asarray(values, dtype=np.float64))
    with np.errstate(divide="ignore"):
        decade = np.floor(np.log10(np.maximum(v, 10.0**MIN_DECADE) * (1 + 1e-12)))
    band = np.clip(decade - MIN_DECADE + 1, 1, MAX_DECADE - MIN_DECADE).astype(np.int64)
    return np.where(v < 10.0**MIN_DECADE, 0, band)


def band_starts() -> np.ndarray:
    """The smallest magnitude of each band of `magnitude_bands`."""
    return np.array([0.0, *(10.0**i for i in range(MIN_DECADE, MAX_DECADE))])


@dataclass(frozen=True)
class Granularity:
    """A column's discovered granularity (module docstring): `step` as [from magnitude, step] pieces (None: no
    grid), `rounding` as [from magnitude, [[grid, share], ...]] pieces (None: no step to round to)."""

    step: list[list[float]] | None
    rounding: list[list[Any]] | None


def grid_step(
    values: np.ndarray,
    epsilon: float,
    max_rows: int,
    rng: np.random.Generator,
    integer: bool = False,
    step: tuple[tuple[float, float], ...] | None = None,
) -> tuple[Granularity, DiscreteLaplaceEvent]:
    """The ε-DP granularity of `values` (finite numbers, at most `max_rows` per unit; module docstring) on
    STEP_LADDER (its whole-number steps for an `integer` column), and the event to record. `step`: a documented
    step (pieces), which the rounding shares are then measured against in place of the discovered one."""
    ladder = tuple(s for s in STEP_LADDER if s >= 1) if integer else STEP_LADDER
    width, bands = len(ladder) + 1, len(band_starts())
    cells = magnitude_bands(values) * width + step_bins(values, ladder)
    counts = np.bincount(cells, minlength=bands * width).astype(np.int64)
    noisy, event = discrete_laplace_mechanism(
        counts, int(max_rows), max_rows / float(epsilon), rng, dims=len(counts), query="granularity histogram"
    )
    p = math.exp(-float(epsilon) / max_rows)
    empty = math.ceil(math.log(len(counts) / (FALSE_BIN * (1 + p))) / (float(epsilon) / max_rows) - 1e-12)
    rows = noisy.reshape(bands, width)
    found = [_coarsest(row, ladder, empty) for row in rows]
    have = {b: s for b, s in enumerate(found) if s is not None}
    starts = band_starts()
    pieces = None
    if have:
        steps = [have[min(have, key=lambda h: (abs(h - b), have[h]))] for b in range(bands)]
        pieces = _merged([[float(starts[b]), float(s)] for b, s in enumerate(steps)])
    base = pieces if step is None else [list(p) for p in step]
    if base is None:
        return Granularity(None, None), event
    rounding = [[float(starts[b]), _shares(rows[b], ladder, _band_step(base, b), empty)] for b in range(bands)]
    return Granularity(pieces, _merged(rounding)), event


def _merged(pieces: list[list[Any]]) -> list[list[Any]]:
    """[from, value] pieces with each run of equal values merged into its first piece."""
    return [p for i, p in enumerate(pieces) if i == 0 or p[1] != pieces[i - 1][1]]


def _band_step(pieces: list[list[float]], band: int) -> float | None:
    """The step of `pieces` over magnitude band `band`; None where a piece starts inside the band."""
    starts = band_starts()
    low, high = starts[band], starts[band + 1] if band + 1 < len(starts) else math.inf
    if any(low < f < high for f, _ in pieces):
        return None
    return float([s for f, s in pieces if f <= low][-1])


def _shares(noisy: np.ndarray, ladder: tuple[float, ...], step: float | None, empty: int) -> list[list[float]]:
    """One band's rounding (module docstring) from its noisy bins (`ladder`'s, then none) at its `step`: [[step,
    share], [grid, share], ...] over the multiples of `step` on the ladder that hold the limit; [] when the band's
    noisy total is below `empty`, no coarser grid holds the limit, or `step` is None."""
    total = float(max(int(noisy.sum()), 0))
    if step is None or total < empty:
        return []
    limit = max(empty, STEP_TOLERANCE * total)
    coarser = [
        (g, float(noisy[i]))
        for i, g in enumerate(ladder)
        if g > step * (1 + 1e-9) and abs(g / step - round(g / step)) < 1e-9 and noisy[i] >= limit
    ]
    if not coarser:
        return []
    shares = np.asarray([max(total - sum(c for _, c in coarser), 0.0), *(c for _, c in coarser)]) / total
    shares = np.round(shares / shares.sum(), 4)
    return [[float(step), float(shares[0])], *([g, float(q)] for (g, _), q in zip(coarser, shares[1:]))]


def _coarsest(noisy: np.ndarray, ladder: tuple[float, ...], empty: int) -> float | None:
    """One band's step from its noisy bins (`ladder`'s, then none): the coarsest s whose finer bins and none each
    stay below the limit while s and the coarser bins hold at least it (module docstring)."""
    limit = max(empty, STEP_TOLERANCE * max(int(noisy.sum()), 0))
    best = None
    finer_ok = noisy[-1] < limit  # the rows on no grid of the ladder, then those of every finer step: few enough
    for i in range(len(ladder)):
        if not finer_ok:
            break
        if noisy[i:-1].sum() >= limit and noisy[i:-1].max() >= empty:  # enough rows on the grid of ladder[i] or a
            best = float(ladder[i])  # coarser one, one of whose bins holds what an empty bin rarely passes
        finer_ok = noisy[i] < limit
    return best


def step_event(epsilon: float, max_rows: int, integer: bool = False) -> DiscreteLaplaceEvent:
    """The event `grid_step` records at ε for units of `max_rows` rows."""
    bins = sum(s >= 1 for s in STEP_LADDER) + 1 if integer else len(STEP_LADDER) + 1
    return DiscreteLaplaceEvent(
        scale=max_rows / float(epsilon),
        sensitivity=int(max_rows),
        dims=bins * len(band_starts()),
        query="granularity histogram",
    )
