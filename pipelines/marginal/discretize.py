"""Schema-only discretisation of an encoded table into integer codes, and uniform-in-bin decoding.

Nothing is learnt from rows: the bins are a function of the layout (block kinds and widths) and of public
column facts (schema bounds, optional public bin edges), so the discretiser costs no privacy budget.

- categorical block (one-hot): code = argmax, one code per declared category; decoded to the one-hot row.
- binary block: code = x >= 0.5; decoded to 0.0 / 1.0.
- numeric block (encoded u = (v - lower)/(upper - lower) in [0, 1]):
  * without public column facts: `n_bins` equal-width bins over [0, 1] (= equal width over the schema
    bounds), decoded by a uniform draw inside the bin (midpoint decoding collapses every value of a bin
    onto one point, which detection classifiers and 3-way marginals punish: issue 18);
  * with `columns[name] = {kind, lower, upper, bins?}` (the schema's entry): edges in schema units, either
    the public `bins` edges (clipped to the bounds, bounds added) or `n_bins` equal-width bins; integer
    columns get integer-aligned bins (bin k = the integers in [ceil(e_k), ceil(e_{k+1}) - 1], the last one
    including `upper`; one bin per integer when the range has at most `n_bins` values) and decode to a
    uniform integer of the bin, so a public edge list such as [0, 1, ...] keeps the value 0 exact.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from pipelines.data.layout import Layout


def _numeric_edges(n_bins: int, spec: dict[str, Any] | None) -> dict[str, Any]:
    """One numeric column's bins: {'kind': 'unit', 'edges': [...]} (encoded units) or, with schema facts,
    {'kind': 'continuous'|'integer', 'lower', 'upper', 'edges'} in schema units (integer: 'lo'/'hi' per bin)."""
    if spec is None:
        return {"kind": "unit", "edges": np.linspace(0.0, 1.0, n_bins + 1).tolist()}
    lower, upper, kind = float(spec["lower"]), float(spec["upper"]), spec.get("kind", "continuous")
    if spec.get("bins") is not None:
        inner = sorted({float(e) for e in spec["bins"] if lower < float(e) < upper})
        edges = [lower, *inner, upper]
    else:
        edges = np.linspace(lower, upper, n_bins + 1).tolist()
    if kind != "integer":
        return {"kind": "continuous", "lower": lower, "upper": upper, "edges": edges}
    lo_i, hi_i = int(math.ceil(lower)), int(math.floor(upper))
    if spec.get("bins") is None and hi_i - lo_i + 1 <= n_bins:
        starts = list(range(lo_i, hi_i + 1))
    else:
        starts = sorted({int(math.ceil(e)) for e in edges[:-1]} | {lo_i})
        starts = [s for s in starts if lo_i <= s <= hi_i]
    his = [s - 1 for s in starts[1:]] + [hi_i]
    return {"kind": "integer", "lower": lower, "upper": upper, "lo": starts, "hi": his}


class Discretizer:
    """Encoded rows (layout.width floats in [0, 1]) <-> integer codes, one column per layout block."""

    def __init__(self, layout: Layout, n_bins: int = 32, columns: dict[str, dict[str, Any]] | None = None) -> None:
        if int(n_bins) < 2:
            raise ValueError(f"n_bins must be >= 2, got {n_bins}")
        self.layout, self.n_bins, columns = layout, int(n_bins), columns or {}
        self.bins: dict[str, dict[str, Any]] = {}
        for b in layout.blocks:
            if b.kind in ("continuous", "integer"):
                self.bins[b.column] = _numeric_edges(self.n_bins, columns.get(b.column))

    @property
    def names(self) -> list[str]:
        return [b.column for b in self.layout.blocks]

    def size(self, column: str) -> int:
        b = self.layout.block(column)
        if b.kind == "categorical":
            return b.width
        if b.kind == "binary":
            return 2
        spec = self.bins[column]
        return len(spec["lo"]) if spec["kind"] == "integer" else len(spec["edges"]) - 1

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.size(c) for c in self.names)

    # -- encoded -> codes -------------------------------------------------------------------------
    def codes(self, X: np.ndarray) -> np.ndarray:
        """(rows, n_columns) int64 codes of encoded rows (values outside [0, 1] are clipped first)."""
        X = np.asarray(X, dtype=np.float64)
        out = np.empty((X.shape[0], len(self.layout.blocks)), dtype=np.int64)
        for j, b in enumerate(self.layout.blocks):
            if b.kind == "categorical":
                out[:, j] = X[:, b.start:b.stop].argmax(1)
            elif b.kind == "binary":
                out[:, j] = (X[:, b.start] >= 0.5).astype(np.int64)
            else:
                out[:, j] = self._numeric_codes(b.column, np.clip(X[:, b.start], 0.0, 1.0))
        return out

    def _numeric_codes(self, column: str, u: np.ndarray) -> np.ndarray:
        spec, k = self.bins[column], self.size(column)
        if spec["kind"] == "unit":
            return np.minimum(np.searchsorted(np.asarray(spec["edges"]), u, side="right") - 1, k - 1).clip(0)
        v = spec["lower"] + u * (spec["upper"] - spec["lower"])
        if spec["kind"] == "integer":
            return (np.searchsorted(np.asarray(spec["lo"]), np.rint(v), side="right") - 1).clip(0, k - 1)
        return np.minimum(np.searchsorted(np.asarray(spec["edges"]), v, side="right") - 1, k - 1).clip(0)

    # -- codes -> encoded -------------------------------------------------------------------------
    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Encoded float32 rows in [0, 1]: one-hot / 0-1 for discrete blocks, a uniform draw inside the bin
        for numeric ones (a uniform integer of the bin for integer columns with schema facts)."""
        codes = np.asarray(codes, dtype=np.int64)
        out = np.zeros((codes.shape[0], self.layout.width), dtype=np.float64)
        for j, b in enumerate(self.layout.blocks):
            c = codes[:, j]
            if b.kind == "categorical":
                out[np.arange(len(c)), b.start + c] = 1.0
            elif b.kind == "binary":
                out[:, b.start] = c
            else:
                out[:, b.start] = self._numeric_values(b.column, c, rng)
        return out.astype(np.float32)

    def _numeric_values(self, column: str, c: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        spec = self.bins[column]
        if spec["kind"] == "integer":
            lo, hi = np.asarray(spec["lo"])[c], np.asarray(spec["hi"])[c]
            v = lo + np.floor(rng.random(len(c)) * (hi - lo + 1))
        else:
            e = np.asarray(spec["edges"])
            v = e[c] + rng.random(len(c)) * (e[c + 1] - e[c])
        if spec["kind"] == "unit":
            return np.clip(v, 0.0, 1.0)
        return np.clip((v - spec["lower"]) / (spec["upper"] - spec["lower"]), 0.0, 1.0)

    # -- persistence ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"n_bins": self.n_bins, "bins": self.bins}

    @classmethod
    def from_dict(cls, layout: Layout, d: dict[str, Any]) -> "Discretizer":
        out = cls(layout, d["n_bins"])
        out.bins = {k: dict(v) for k, v in d["bins"].items()}
        return out


def columns_from_schema(schema: Any) -> dict[str, dict[str, Any]]:
    """Public numeric column facts {name: {kind, lower, upper, bins}} from a loaded schema (bins may be None)."""
    return {c.name: {"kind": c.kind, "lower": c.lower, "upper": c.upper,
                     "bins": list(getattr(c, "bins", None) or []) or None}
            for c in schema.columns if c.is_numeric}
