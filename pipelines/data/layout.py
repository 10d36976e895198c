"""Column layout of an encoded table: which slice of the matrix holds which schema column."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from pipelines.data.rules import Rule, broken_rows


@dataclass(frozen=True)
class Block:
    """One schema column's slice [start, stop) of the encoded matrix.

    kind: 'continuous' | 'integer' (one value in [0,1]), 'binary' (one value in {0,1}),
    'categorical' (one-hot, stop - start = number of schema categories).
    lower, upper, bins, atoms: a numeric block's public facts from the schema (`Encoder`): its bounds (the encoded
    value is (v - lower)/(upper - lower)), its optional public bin edges and exact values, so the public binning
    (`pipelines.data.bins`) is a function of the layout alone; None in a layout built without a schema.
    """

    column: str
    kind: str
    start: int
    stop: int
    protected: bool = False
    is_target: bool = False
    lower: float | None = None
    upper: float | None = None
    bins: tuple[float, ...] | None = None
    atoms: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        for key in ("bins", "atoms"):  # JSON gives a list: keep the block hashable and equal to the original
            if getattr(self, key) is not None:
                object.__setattr__(self, key, tuple(float(e) for e in getattr(self, key)))

    def to_dict(self) -> dict:
        """The block's fields; `atoms` only when set, so a layout without them keeps its bytes (and hashes)."""
        d = asdict(self)
        return d if self.atoms is not None else {k: v for k, v in d.items() if k != "atoms"}

    @property
    def width(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Layout:
    """The blocks in column order, the schema's public `related` column pairs (pipelines.data.schema) and its
    public `rules` on category positions (`rules.indexed`)."""

    blocks: tuple[Block, ...]
    related: tuple[tuple[str, str], ...] = ()
    rules: tuple[Rule, ...] = ()

    @property
    def width(self) -> int:
        return self.blocks[-1].stop if self.blocks else 0

    def block(self, column: str) -> Block:
        for b in self.blocks:
            if b.column == column:
                return b
        raise KeyError(column)

    def broken(self, rows: np.ndarray) -> np.ndarray:
        """Which encoded rows (exact rows of this layout) break one of its rules."""
        if not self.rules:
            return np.zeros(len(rows), dtype=bool)
        codes = {}
        for column in dict.fromkeys(c for r in self.rules for c in r.columns):
            b = self.block(column)
            codes[column] = (
                rows[:, b.start : b.stop].argmax(1)
                if b.kind == "categorical"
                else (rows[:, b.start] >= 0.5).astype(np.int64)
            )
        return broken_rows(pd.DataFrame(codes), self.rules).to_numpy()

    def to_dict(self) -> dict:
        """The width and blocks; `related` and `rules` only when set, so a layout without them keeps its bytes."""
        out = {"width": self.width, "blocks": [b.to_dict() for b in self.blocks]}
        if self.related:
            out["related"] = [list(p) for p in self.related]
        if self.rules:
            out["rules"] = [r.to_dict() for r in self.rules]
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "Layout":
        rules = tuple(
            Rule(
                tuple((c, tuple(v)) for c, v in r["if"].items()),
                tuple((c, tuple(v)) for c, v in r["then"].items()),
                r["on_invalid"],
            )
            for r in d.get("rules", ())
        )
        return cls(tuple(Block(**b) for b in d["blocks"]), tuple(tuple(p) for p in d.get("related", ())), rules)


def sub_layout(blocks: list[Block]) -> Layout:
    """The blocks re-indexed from column 0, in order: the layout of the columns they cover, taken alone."""
    out, start = [], 0
    for b in blocks:
        out.append(replace(b, start=start, stop=start + b.width))
        start += b.width
    return Layout(tuple(out))


def project_to_layout(x: np.ndarray, layout: Layout) -> np.ndarray:
    """Rows in the encoded domain: numerics clipped into [0, 1], binaries thresholded at 0.5, one-hot blocks
    set to their argmax (the decoder's rule, `Encoder.decode`), float32: the one discretiser of every generator's
    samples
    (`PrivateGenerator.sample`), so a sample is an exact row of the layout."""
    out = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    for b in layout.blocks:
        if b.kind == "binary":
            out[:, b.start] = out[:, b.start] >= 0.5
        elif b.kind == "categorical":
            block = np.zeros((len(out), b.width))
            block[np.arange(len(out)), out[:, b.start : b.stop].argmax(1)] = 1.0
            out[:, b.start : b.stop] = block
    return out.astype(np.float32)
