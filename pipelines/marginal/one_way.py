"""The 1-way measurements MST and AIM start from, with each numeric bin's shape (McKenna et al. 2021 measure every
1-way marginal first; their model then holds nothing of a value's place inside its bin).

Cells. A numeric column's 1-way marginal is counted on a finer partition than the model's bins: each bin is cut in
s parts (`Discretizer.splits`, the generator's `sub_bins`; an integer bin of m < s values in m, an atom or a folded
null in one; `NumericBins.sub_cells`), so the column's fine cells are its bins' parts. Every other column's cells
are its own.

Sensitivity (add/remove one record). The fine cells of a column are still a partition of the rows: a record lies
in exactly one of them, so adding or removing it changes one fine count by 1 and no other, ‖ΔM‖₂ = 1, and the
measurement ỹ = M_fine(D) + N_ℤ(0, σ²) per fine cell is the same DiscreteGaussianEvent(σ, 1) as the coarse one
(`measure`): cutting the bins costs no budget. A privacy unit of k rows moves at most k fine counts of a column by
1 each, as it does the coarse ones, so the unit's conversion of that event (`pipelines.privacy.unit`, L2 shift ≤ k)
holds unchanged.

What the model gets (post-processing of ỹ). Bin k's count is the sum of its s_k parts, Σ_i ỹ_{k,i} =
M_k(D) + noise of variance s_k·σ²; it is given to the estimation as the weighted query (1/√s_k)·M_k measured with
noise σ (mbi's `LinearMeasurement` with query weights, as `compress.py`'s merged cell), so its noise is weighed
exactly. A bin's shape is its parts' noisy counts shrunk toward their mean (`measure.shrunk_shares`: positive-part
James–Stein, so a bin whose parts differ by no more than the noise makes them differ is decoded uniformly).
Sampling draws a bin from the model, a part of it by its shape and a point uniformly inside the part
(`Discretizer.decode`): values keep the measured shape inside their bin, at the price of √s_k more noise on the
bin's own 1-way count, which is why the public rule cuts bins only where they hold many σ of rows
(`params.mst.public_sub_bins`).

Long code lists are compressed on their noisy 1-way counts (`Compression`), a numeric column with cut bins never.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipelines.marginal.compress import Compression
from pipelines.marginal.measure import Codes, Passes, chunk_passes, draw, measure, shrunk_shares
from pipelines.privacy.events import Event


@dataclass(frozen=True)
class Cells:
    """The partition the 1-way measurements count: `passes` over the rows' fine codes (`Discretizer.fine_codes`) and
    each model column's parts per cell (`Discretizer.splits`)."""

    passes: Passes
    splits: tuple[np.ndarray, ...]

    @classmethod
    def coarse(cls, codes: Codes, shape: Sequence[int]) -> "Cells":
        """The model's own cells: every cell one part."""
        return cls(chunk_passes(codes), tuple(np.ones(int(n), dtype=np.int64) for n in shape))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(s.sum()) for s in self.splits)


@dataclass(frozen=True)
class WithinBins:
    """Per model column (its index) whose bins are cut: each cell's parts' shares, () for a cell decoded uniformly
    (one part, or no shape: `shrunk_shares` None). A `bins.PartSampler`."""

    shares: dict[int, tuple[tuple[float, ...], ...]]

    @classmethod
    def measured(cls, fine: Sequence[np.ndarray], splits: Sequence[np.ndarray], sigma: float) -> "WithinBins":
        """The shapes of the noisy fine 1-way counts `fine` (σ per cell; 0: exact) of the columns with cut cells."""
        out = {}
        for j, (y, split) in enumerate(zip(fine, splits)):
            if (split > 1).any():
                parts = np.split(np.asarray(y, dtype=np.float64).ravel(), np.cumsum(split)[:-1])
                out[j] = tuple(
                    () if p.size < 2 or (s := shrunk_shares(p, sigma)) is None else tuple(map(float, s)) for p in parts
                )
        return cls(out)

    def parts(self, column: int, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        """A part for each of the cells `codes` of `column`, drawn by its cell's shares (−1: uniform); None: the
        column has no cut cells. One uniform draw per row from the sampling's generator `rng`."""
        table = self.shares.get(column)
        if table is None:
            return None
        u, out = rng.random(len(codes)), np.full(len(codes), -1, dtype=np.int64)
        for k in np.unique(codes):
            if k < len(table) and table[k]:
                rows = codes == k
                out[rows] = draw(table[k], u[rows])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {str(j): [list(p) for p in table] for j, table in self.shares.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "WithinBins | None":
        if d is None:
            return None
        return cls({int(j): tuple(tuple(float(v) for v in p) for p in table) for j, table in d.items()})


@dataclass
class OneWay:
    """The 1-way step's outputs: the noisy counts on the fine cells (`fine`, the release), the model's
    measurements [((column,), y, σ, query weights | None)] on the compressed domain, their events, the compression
    and the bins' shapes (all four post-processing of `fine`)."""

    fine: list[np.ndarray]
    measurements: list[tuple]
    events: list[Event]
    compression: Compression
    within: WithinBins


def coarse(y: np.ndarray, split: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """A column's noisy fine counts `y` as the model's measurement (module docstring): each cell's parts summed
    and scaled by 1/√s_k, with the query weights 1/√s_k; `y` itself (no weights) when no cell is cut."""
    y = np.asarray(y, dtype=np.float64).ravel()
    if (split == 1).all():
        return y, None
    weights = 1.0 / np.sqrt(split)
    return np.add.reduceat(y, np.concatenate(([0], np.cumsum(split)[:-1]))) * weights, weights


def measure_one_way(
    cells: Cells, names: Sequence[str], sigma: float, rng: np.random.Generator | None, compress_above: int | None
) -> OneWay:
    """Every column's 1-way marginal on `cells`, counted in one pass over the rows and measured at σ (`measure`:
    one DiscreteGaussianEvent(σ, 1) per column; σ = 0: exact, non-private), then the module docstring's
    post-processing: the compression (`Compression.from_one_way`, columns above `compress_above` cells whose
    cells are not cut), the model's measurements and the bins' shapes."""
    counts = cells.passes.count(cells.shape, [(i,) for i in range(len(names))])
    fine, events = [], []
    for i, n in enumerate(names):
        y, ev = measure(counts[(i,)], sigma, rng, query=f"1-way {n}")
        fine.append(y)
        events.append(ev)
    model = [coarse(y, split) for y, split in zip(fine, cells.splits)]
    cut = {j for j, (_, w) in enumerate(model) if w is not None}
    compression = Compression.from_one_way([y for y, _ in model], sigma, compress_above, exempt=cut)
    measurements = []
    for i, (n, (y, weights)) in enumerate(zip(names, model)):
        if weights is None:
            y, weights = compression.one_way(i, y)
        measurements.append(((n,), y, sigma, weights))
    return OneWay(fine, measurements, events, compression, WithinBins.measured(fine, cells.splits, sigma))
