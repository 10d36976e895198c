"""Public bins of the numeric columns: the one binning every generator uses.

Nothing is learnt from rows: the bins are a function of the layout alone (block kinds and widths, and each numeric
block's public facts `lower`, `upper`, `bins` that `Encoder` copies from the schema), so neither the discretiser
nor the binned encoding costs privacy budget.

A numeric block (encoded u = (v − lower)/(upper − lower) in [0, 1]) gets `NumericBins`:
- without public facts (a layout built by hand): `n_bins` equal-width bins over [0, 1], in encoded units;
- with facts: edges in schema units, either the public `bins` edges (clipped to the bounds, bounds added) or
  `n_bins` equal-width bins over [lower, upper]; integer columns get integer-aligned bins (bin k = the integers in
  [ceil(e_k), ceil(e_{k+1}) − 1], the last one including `upper`; one bin per integer when the range has at most
  `n_bins` values), so a public edge list such as [0, 1, ...] keeps the value 0 exact.
Documented exact values (the schema's `atoms`, e.g. 0 for "no cost") get bins of their own: an integer atom a
adds the starts a and a + 1 (bin [a, a]); a continuous atom is a zero-width bin before the others (codes
0..len(atoms) − 1), which an encoded value within `ATOM_TOLERANCE` of the range of it falls in and which decodes to
exactly a. Without them a column whose rows are 40 % zeros decodes to no zero at all (a uniform draw inside the
bin [0, e₁)): a detection classifier then tells every synthetic row apart (as on the RAND health-insurance table).
A value inside its bin is an offset o in [0, 1]: continuous v = e_k + o·(e_{k+1} − e_k); integer v = lo_k +
min(⌊o·m_k⌋, m_k − 1) for the m_k = hi_k − lo_k + 1 integers of the bin (so a bin of one value, e.g. 40 hours a
week, decodes to exactly that value whatever o is). A uniform o is a uniform draw inside the bin.

Users: `Discretizer` (encoded rows <-> integer codes; MST and AIM) and `BinnedEncoding` (a numeric block as a
one-hot over its bins plus an offset, a long code list as a one-hot over its buckets plus the code's place: the deep
generators' `numeric_encoding: bins` and `code_lists: buckets`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Protocol

import numpy as np

from pipelines.data.code_lists import CodeBuckets, is_long
from pipelines.data.layout import Block, Layout
from pipelines.data.schema import ATOM_TOLERANCE, NUMERIC_KINDS, Column, indicator


class PartSampler(Protocol):
    """Parts of the bins (`Discretizer.splits`) drawn from a measured shape (`one_way.WithinBins`)."""

    def parts(self, column: int, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        """A part of its cell for each of the cells `codes` of model column `column` (−1: a cell without a shape,
        decoded uniformly); None: no shape for the column."""
        ...


@dataclass(frozen=True)
class NumericBins:
    """One numeric column's bins. kind 'unit': `edges` in encoded units (no public facts); 'continuous':
    `edges` in schema units, after one zero-width bin per value of `atoms` (schema units); 'integer': bin k holds
    the integers lo[k]..hi[k] (schema units)."""

    kind: str
    edges: tuple[float, ...] = ()
    lo: tuple[int, ...] = ()
    hi: tuple[int, ...] = ()
    lower: float = 0.0
    upper: float = 1.0
    atoms: tuple[float, ...] = ()

    @property
    def size(self) -> int:
        return len(self.lo) if self.kind == "integer" else len(self.atoms) + len(self.edges) - 1

    @property
    def point_masses(self) -> bool:
        """True when every bin holds one value (integer bins of width 1): the offset carries nothing."""
        return self.kind == "integer" and self.lo == self.hi

    def codes(self, u: np.ndarray) -> np.ndarray:
        """int64 bin index of encoded values `u` (clipped into [0, 1] first)."""
        v = self._schema_units(np.clip(np.asarray(u, dtype=np.float64), 0.0, 1.0))
        if self.kind == "integer":
            return (np.searchsorted(np.asarray(self.lo), np.rint(v), side="right") - 1).clip(0, self.size - 1)
        k = len(self.atoms)
        codes = np.minimum(np.searchsorted(np.asarray(self.edges), v, side="right") - 1, self.size - k - 1).clip(0) + k
        for i, a in enumerate(self.atoms):
            codes[np.abs(v - a) <= ATOM_TOLERANCE * (self.upper - self.lower)] = i
        return codes

    def offsets(self, u: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """Each encoded value's position in [0, 1] inside its bin `codes` (integers: the centre of its cell)."""
        v = self._schema_units(np.clip(np.asarray(u, dtype=np.float64), 0.0, 1.0))
        if self.kind == "integer":
            lo, hi = np.asarray(self.lo)[codes], np.asarray(self.hi)[codes]
            return np.clip((np.clip(np.rint(v), lo, hi) - lo + 0.5) / (hi - lo + 1), 0.0, 1.0)
        e, k = np.asarray(self.edges), len(self.atoms)
        regular = np.maximum(codes - k, 0)
        return np.where(codes < k, 0.5, np.clip((v - e[regular]) / (e[regular + 1] - e[regular]), 0.0, 1.0))

    def values(self, codes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Encoded values in [0, 1] of the points at `offsets` inside bins `codes` (module docstring)."""
        codes, o = np.asarray(codes, dtype=np.int64), np.clip(np.asarray(offsets, dtype=np.float64), 0.0, 1.0)
        if self.kind == "integer":
            lo, hi = np.asarray(self.lo)[codes], np.asarray(self.hi)[codes]
            v = lo + np.minimum(np.floor(o * (hi - lo + 1)), hi - lo)
        else:
            e, k = np.asarray(self.edges), len(self.atoms)
            regular = np.maximum(codes - k, 0)
            v = np.where(
                codes < k,
                np.asarray((*self.atoms, 0.0))[np.minimum(codes, k)],
                e[regular] + o * (e[regular + 1] - e[regular]),
            )
        if self.kind == "unit":
            return np.clip(v, 0.0, 1.0)
        return np.clip((v - self.lower) / (self.upper - self.lower), 0.0, 1.0)

    def splits(self, sub_bins: int) -> np.ndarray:
        """Each bin's sub-cells when a bin is cut in `sub_bins` (`sub_cells`): 1 for an atom (one value), min(
        `sub_bins`, m) for an integer bin of m values (a bin of one value is not cut)."""
        if self.kind == "integer":
            return np.minimum(np.asarray(self.hi) - np.asarray(self.lo) + 1, sub_bins).astype(np.int64)
        return np.asarray([1] * len(self.atoms) + [sub_bins] * (len(self.edges) - 1), dtype=np.int64)

    def sub_cells(self, codes: np.ndarray, offsets: np.ndarray, split: np.ndarray) -> np.ndarray:
        """The sub-cell i < s of each value at `offsets` inside bins `codes` cut in s = `split` parts: equal offset
        intervals, i = ⌊o·s⌋; for an integer bin of m values the integer j = ⌊o·m⌋ (its place) is in part
        ⌊j·s/m⌋, so each part holds whole integers (`sub_offsets` decodes inside exactly those)."""
        o = np.clip(np.asarray(offsets, dtype=np.float64), 0.0, 1.0)
        if self.kind == "integer":
            m = np.asarray(self.hi)[codes] - np.asarray(self.lo)[codes] + 1
            return (np.minimum(np.floor(o * m).astype(np.int64), m - 1) * split) // m
        return np.minimum(np.floor(o * split).astype(np.int64), split - 1)

    def sub_offsets(self, codes: np.ndarray, sub: np.ndarray, u: np.ndarray, split: np.ndarray) -> np.ndarray:
        """Offsets in [0, 1] inside sub-cell `sub` of bins `codes` cut in `split` parts, at `u` in [0, 1) inside the
        part (`sub_cells`' inverse): (i + u)/s; an integer bin's part i holds the integers ⌈i·m/s⌉ .. ⌈(i+1)·m/s⌉ − 1
        of its m, and the offset falls on one of them (`values`)."""
        if self.kind == "integer":
            m = np.asarray(self.hi)[codes] - np.asarray(self.lo)[codes] + 1
            first, stop = -(-sub * m // split), -(-(sub + 1) * m // split)
            return (first + u * (stop - first)) / m
        return (sub + u) / split

    def _schema_units(self, u: np.ndarray) -> np.ndarray:
        return u if self.kind == "unit" else self.lower + u * (self.upper - self.lower)

    def to_dict(self) -> dict[str, Any]:
        """The saved form (as MST's saved discretisers hold it): edges for 'unit'/'continuous', lo/hi for 'integer'."""
        if self.kind == "unit":
            return {"kind": "unit", "edges": list(self.edges)}
        bounds = {"kind": self.kind, "lower": self.lower, "upper": self.upper}
        if self.kind == "integer":
            return {**bounds, "lo": list(self.lo), "hi": list(self.hi)}
        return {**bounds, "edges": list(self.edges), **({"atoms": list(self.atoms)} if self.atoms else {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "NumericBins":
        return cls(
            d["kind"],
            tuple(float(e) for e in d.get("edges", ())),
            tuple(int(v) for v in d.get("lo", ())),
            tuple(int(v) for v in d.get("hi", ())),
            float(d.get("lower", 0.0)),
            float(d.get("upper", 1.0)),
            tuple(float(a) for a in d.get("atoms", ())),
        )


def numeric_bins(block: Block, n_bins: int, edges: Iterable[float] | None = None) -> NumericBins:
    """The numeric edge rule (module docstring) for one numeric `block`: its public facts, `edges` (schema units)
    overriding the block's own public `bins`, else `n_bins` equal-width bins."""
    if block.lower is None or block.upper is None:
        if edges is not None:
            raise ValueError(
                f"column '{block.column}': public bin edges need the column's public bounds, which this "
                f"layout lacks. Fix: build the layout with the schema's Encoder (pipelines.data.transform)"
            )
        return NumericBins("unit", tuple(np.linspace(0.0, 1.0, n_bins + 1).tolist()))
    lower, upper = float(block.lower), float(block.upper)
    public = block.bins if edges is None else tuple(float(e) for e in edges)
    if public is not None:
        cuts = [lower, *sorted({float(e) for e in public if lower < float(e) < upper}), upper]
    else:
        cuts = np.linspace(lower, upper, n_bins + 1).tolist()
    atoms = block.atoms or ()
    if block.kind != "integer":
        return NumericBins("continuous", tuple(cuts), lower=lower, upper=upper, atoms=tuple(atoms))
    lo_i, hi_i = int(math.ceil(lower)), int(math.floor(upper))
    if public is None and hi_i - lo_i + 1 <= n_bins:
        starts = list(range(lo_i, hi_i + 1))
    else:
        isolated = {int(a) for a in atoms} | {int(a) + 1 for a in atoms}
        starts = [s for s in sorted({int(math.ceil(e)) for e in cuts[:-1]} | {lo_i} | isolated) if lo_i <= s <= hi_i]
    return NumericBins(
        "integer", lo=tuple(starts), hi=tuple([s - 1 for s in starts[1:]] + [hi_i]), lower=lower, upper=upper
    )


def column_bins(column: Column, n_bins: int) -> NumericBins:
    """A numeric schema column's public bins: `numeric_bins` of the block `Encoder` makes of it (its bounds, its
    declared `bins` and `atoms`), `n_bins` equal-width where it declares no edges. The schema alone, no rows."""
    facts = {"lower": column.lower, "upper": column.upper, "bins": column.bins, "atoms": column.atoms}
    return numeric_bins(Block(column.name, column.kind, 0, 1, **facts), n_bins)


def equal_width_columns(layout: Layout, bins: dict[str, Iterable[float]] | None = None) -> int:
    """How many numeric columns of `layout` an `n_bins` count cuts (`numeric_bins`): those with public edges neither
    of their own (the schema's) nor in `bins` (params). A function of the layout alone."""
    return sum(b.kind in NUMERIC_KINDS and b.bins is None and b.column not in (bins or {}) for b in layout.blocks)


def _check_n_bins(n_bins: int) -> int:
    if int(n_bins) < 2:
        raise ValueError(f"n_bins must be >= 2, got {n_bins}")
    return int(n_bins)


class Discretizer:
    """Encoded rows (layout.width floats in [0, 1]) <-> integer codes, one column per layout block.

    categorical block: code = argmax, decoded to the one-hot row; binary: code = x >= 0.5, decoded to 0/1; numeric:
    its `NumericBins` from the layout's public facts (`bins`: {column: [edges in schema units]} overrides a
    column's edges), decoded by a uniform draw inside the bin (midpoint decoding collapses every value of a bin
    onto one point, which detection classifiers and 3-way marginals punish).

    With `fold_missing` (MST and AIM), a numeric column's missingness indicator (`<name>__missing`, the block
    `pipelines.data.declared` puts after it) is not a column of its own: the numeric column gets one more cell,
    after its bins, for "missing" (code = its bins' count), which decodes to the value the modelled table holds on
    a null row (the lower bound, encoded 0) with the indicator set; every other code decodes with the indicator
    clear. This is how a marginal model sees a null (one value of the column, as Private-PGM's own data handling
    does), and it is exact both ways: a present value at the lower bound keeps its own bin. Without it a column
    with nulls is two columns bound by a rule (null ⇔ lower bound), each measured and each a candidate of AIM's
    rounds, and the rounds at small n̂·ε go to that rule and to the indicators' pairs instead of the target
    (docs/aim-mst.md "A numeric null is a cell of its column"). Public: a function of the layout alone."""

    def __init__(
        self,
        layout: Layout,
        n_bins: int = 32,
        bins: dict[str, Iterable[float]] | None = None,
        fold_missing: bool = False,
        sub_bins: int = 1,
    ) -> None:
        self.layout, self.n_bins, bins = layout, _check_n_bins(n_bins), dict(bins or {})
        self.fold_missing, self.sub_bins = bool(fold_missing), int(sub_bins)
        if self.sub_bins < 1:
            raise ValueError(f"sub_bins must be >= 1, got {sub_bins}")
        numeric = {b.column: b for b in layout.blocks if b.kind in NUMERIC_KINDS}
        unknown = sorted(set(bins) - set(numeric))
        if unknown:
            raise ValueError(
                f"bins given for {unknown}, which are not numeric columns of the layout; numeric "
                f"columns: {sorted(numeric)}"
            )
        self.bins: dict[str, NumericBins] = {c: numeric_bins(b, self.n_bins, bins.get(c)) for c, b in numeric.items()}
        by_name = {b.column: b for b in layout.blocks}  # the schema reserves `<name>__missing` for the indicator
        self.folded: dict[str, Block] = {
            c: by_name[indicator(c)] for c in numeric if self.fold_missing and indicator(c) in by_name
        }
        folded = {b.column for b in self.folded.values()}
        self.blocks: tuple[Block, ...] = tuple(b for b in layout.blocks if b.column not in folded)

    @property
    def names(self) -> list[str]:
        return [b.column for b in self.blocks]

    def size(self, column: str) -> int:
        b = self.layout.block(column)
        if b.kind == "categorical":
            return b.width
        return 2 if b.kind == "binary" else self.bins[column].size + (column in self.folded)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.size(c) for c in self.names)

    def codes(self, X: np.ndarray) -> np.ndarray:
        """(rows, n_columns) int64 codes of encoded rows (values outside [0, 1] are clipped first). X is read block by
        block in its own dtype (a float64 copy of a long code list's one-hot rows would be the largest array)."""
        X = np.asarray(X)
        out = np.empty((X.shape[0], len(self.blocks)), dtype=np.int64)
        for j, b in enumerate(self.blocks):
            if b.kind == "categorical":
                out[:, j] = X[:, b.start : b.stop].argmax(1)
            elif b.kind == "binary":
                out[:, j] = (X[:, b.start] >= 0.5).astype(np.int64)
            else:
                out[:, j] = self.bins[b.column].codes(X[:, b.start])
                if b.column in self.folded:  # the null cell, after the bins
                    out[X[:, self.folded[b.column].start] >= 0.5, j] = self.bins[b.column].size
        return out

    def splits(self) -> list[np.ndarray]:
        """Per model column, each cell's sub-cells in the finer partition `fine_codes` counts: a numeric column's
        bins split in `sub_bins` (`NumericBins.splits`), every other cell (a category, a folded null) in one."""
        out = []
        for b in self.blocks:
            split = np.ones(self.size(b.column), dtype=np.int64)
            if b.kind in NUMERIC_KINDS and self.sub_bins > 1:
                nb = self.bins[b.column]
                split[: nb.size] = nb.splits(self.sub_bins)
            out.append(split)
        return out

    def fine_codes(self, X: np.ndarray) -> np.ndarray:
        """The rows' codes in the finer partition of `splits`: cell k of a column with splits s is the fine codes
        s_0 + ... + s_{k−1} + i, i the value's part of its bin (`NumericBins.sub_cells` of its offset). Each row
        still lies in exactly one fine cell of each column. `sub_bins` 1: `codes`."""
        X, codes = np.asarray(X), self.codes(X)
        if self.sub_bins == 1:
            return codes
        out = codes.copy()
        for j, (b, split) in enumerate(zip(self.blocks, self.splits())):
            if b.kind not in NUMERIC_KINDS:
                continue
            nb, c = self.bins[b.column], codes[:, j]
            binned = np.minimum(c, nb.size - 1)  # a folded null cell (c = nb.size) is one cell: split 1, part 0
            first = np.concatenate(([0], np.cumsum(split)[:-1]))
            out[:, j] = first[c] + nb.sub_cells(binned, nb.offsets(X[:, b.start], binned), split[c])
        return out

    def decode(self, codes: np.ndarray, rng: np.random.Generator, within: PartSampler | None = None) -> np.ndarray:
        """Encoded float32 rows in [0, 1]: one-hot / 0-1 for discrete blocks, a draw inside the bin for numeric ones
        (`NumericBins.values` at an offset: uniform, or from `within`'s DP-measured shape of the bin where it has
        one for the column; a uniform offset is a uniform integer of the bin for integer bins); a folded null cell
        as the lower bound (0) with its indicator set."""
        codes = np.asarray(codes, dtype=np.int64)
        out = np.zeros((codes.shape[0], self.layout.width), dtype=np.float32)  # values rounded as astype would
        splits = self.splits() if within is not None else []
        for j, b in enumerate(self.blocks):
            c = codes[:, j]
            if b.kind == "categorical":
                out[np.arange(len(c)), b.start + c] = 1.0
            elif b.kind == "binary":
                out[:, b.start] = c
            else:
                nb, offsets = self.bins[b.column], rng.random(len(c))
                sub = None if within is None else within.parts(j, c, rng)
                if sub is not None:  # a part drawn from the bin's measured shape, the offset uniform inside it
                    binned, split = np.minimum(c, nb.size - 1), splits[j]
                    inside = nb.sub_offsets(binned, np.maximum(sub, 0), offsets, split[c])
                    offsets = np.where(sub >= 0, inside, offsets)
                if b.column not in self.folded:
                    out[:, b.start] = nb.values(c, offsets)
                    continue
                null = c == nb.size
                out[:, b.start] = np.where(null, 0.0, nb.values(np.minimum(c, nb.size - 1), offsets))
                out[:, self.folded[b.column].start] = null
        return out

    def to_dict(self) -> dict[str, Any]:
        """The saved form; `fold_missing` only when set, so a discretiser without it keeps its bytes."""
        out: dict[str, Any] = {"n_bins": self.n_bins, "bins": {c: nb.to_dict() for c, nb in self.bins.items()}}
        if self.sub_bins > 1:
            out["sub_bins"] = self.sub_bins
        return {**out, "fold_missing": True} if self.fold_missing else out

    @classmethod
    def from_dict(cls, layout: Layout, d: dict[str, Any]) -> "Discretizer":
        """The saved discretiser (authoritative: it is what the model was fitted on)."""
        out = cls(
            layout, d["n_bins"], fold_missing=bool(d.get("fold_missing", False)), sub_bins=int(d.get("sub_bins", 1))
        )
        out.bins = {c: NumericBins.from_dict(v) for c, v in d["bins"].items()}
        return out


BIN_SUFFIX, OFFSET_SUFFIX = ".bin", ".offset"
BUCKET_SUFFIX, CODE_SUFFIX = ".bucket", ".code"  # a long code list's blocks in the model layout


def long_lists(layout: Layout) -> list[Block]:
    """The layout's long code lists a model may see as buckets: categorical blocks of more than
    `code_lists.LONG_LIST_ABOVE` categories, neither the target nor protected (those keep every code)."""
    return [
        b for b in layout.blocks if b.kind == "categorical" and is_long(b.width) and not b.is_target and not b.protected
    ]


class BinnedEncoding:
    """The public map from a table's layout to a binned model layout, and back.

    Each numeric block (continuous or integer) not in `scaled` becomes a categorical block `<column>.bin`, one-hot
    over the column's `NumericBins` (the Discretizer's bins for `n_bins`: one binning for every generator), then a
    continuous block `<column>.offset`, the value's position in [0, 1] inside its bin; the offset block is left
    out when every bin holds one value (it would carry nothing). Discrete blocks and the numeric columns in
    `scaled` (e.g. PPEM's protected x′, which needs a numeric value) are copied unchanged; a binned target column's
    bin block is the target (its offset block is not). `decode` takes each
    bin block's argmax and puts the value at the offset inside that bin, so a one-value bin (hours = 40) decodes
    exactly, and encoding then decoding an encoded row gives back its bin and its value (to float32 rounding).

    With `code_lists`, a long code list (a categorical block of more than `code_lists.LONG_LIST_ABOVE` categories,
    neither the target nor protected) is treated the same way over its public buckets of consecutive codes
    (`pipelines.data.code_lists.CodeBuckets`): a categorical block `<column>.bucket`, one-hot over the buckets, then
    a continuous block `<column>.code`, the code's place inside its bucket; `decode` gives the bucket's code at that
    place. A 5,000-code diagnosis column is then 65 model columns instead of 5,000.

    It is a function of the layout's public facts and `n_bins` alone, never of rows: it spends no privacy budget,
    and a mechanism trained on the encoded rows keeps its guarantee (add/remove-one rows map to add/remove-one
    rows). Its model `layout` is the one the method trains on, so every sensitivity is derived for it.
    """

    def __init__(self, layout: Layout, n_bins: int, scaled: Iterable[str] = (), code_lists: bool = False) -> None:
        self.table_layout, scaled = layout, set(scaled)
        self.discretizer = Discretizer(layout, n_bins)
        self.binned = {c: nb for c, nb in self.discretizer.bins.items() if c not in scaled}
        self.listed = {b.column: CodeBuckets(b.width) for b in long_lists(layout)} if code_lists else {}
        blocks, start = [], 0
        self._pairs: list[tuple[Block, list[Block]]] = []  # each table block with its model blocks
        for b in layout.blocks:
            if b.column in self.listed:
                nb = self.listed[b.column].count
                pieces = [
                    Block(b.column + BUCKET_SUFFIX, "categorical", start, start + nb),
                    Block(b.column + CODE_SUFFIX, "continuous", start + nb, start + nb + 1),
                ]
            elif b.column not in self.binned:
                pieces = [replace(b, start=start, stop=start + b.width)]
            else:
                nb, facts = self.binned[b.column], {"protected": b.protected, "is_target": b.is_target}
                pieces = [Block(b.column + BIN_SUFFIX, "categorical", start, start + nb.size, **facts)]
                if not nb.point_masses:
                    pieces.append(
                        Block(
                            b.column + OFFSET_SUFFIX,
                            "continuous",
                            start + nb.size,
                            start + nb.size + 1,
                            protected=b.protected,
                        )
                    )
            self._pairs.append((b, pieces))
            blocks += pieces
            start = pieces[-1].stop
        self.layout = Layout(tuple(blocks))

    def encode(self, X: np.ndarray) -> np.ndarray:
        """Rows of the table layout (encoded, in [0, 1]) as float32 rows of the model layout."""
        X = self._matrix(X, self.table_layout, "encode")
        out = np.zeros((len(X), self.layout.width), dtype=np.float64)
        for b, group in self._pairs:
            if b.column in self.listed:
                cb, codes = self.listed[b.column], X[:, b.start : b.stop].argmax(1)
                out[np.arange(len(X)), group[0].start + cb.bucket[codes]] = 1.0
                out[:, group[1].start] = cb.offsets(codes)
                continue
            if b.column not in self.binned:
                out[:, group[0].start : group[0].stop] = X[:, b.start : b.stop]
                continue
            nb, u = self.binned[b.column], X[:, b.start]
            codes = nb.codes(u)
            out[np.arange(len(X)), group[0].start + codes] = 1.0
            if len(group) > 1:
                out[:, group[1].start] = nb.offsets(u, codes)
        return out.astype(np.float32)

    def decode(self, X: np.ndarray) -> np.ndarray:
        """Rows of the model layout (exact rows: `project_to_layout`) as float32 rows of the table layout: each
        bin block's argmax, the value at its offset inside that bin; other blocks copied."""
        X = self._matrix(X, self.layout, "decode")
        out = np.zeros((len(X), self.table_layout.width), dtype=np.float32)  # values rounded as astype would
        for b, group in self._pairs:
            if b.column in self.listed:
                buckets = X[:, group[0].start : group[0].stop].argmax(1)
                codes = self.listed[b.column].codes_at(buckets, X[:, group[1].start])
                out[np.arange(len(X)), b.start + codes] = 1.0
                continue
            if b.column not in self.binned:
                out[:, b.start : b.stop] = X[:, group[0].start : group[0].stop]
                continue
            codes = X[:, group[0].start : group[0].stop].argmax(1)
            offsets = X[:, group[1].start] if len(group) > 1 else np.full(len(X), 0.5)
            out[:, b.start] = self.binned[b.column].values(codes, offsets)
        return out

    @staticmethod
    def _matrix(X: np.ndarray, layout: Layout, what: str) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != layout.width:
            raise ValueError(f"BinnedEncoding.{what}: expected a (rows, {layout.width}) matrix, got shape {X.shape}")
        return X
