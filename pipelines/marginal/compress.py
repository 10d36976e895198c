"""Domain compression by the noisy 1-way counts (McKenna, Miklau & Sheldon 2021, §4, Private-PGM's MST
`compress_domain`): a column with thousands of documented codes, most of them rare, modelled on the codes its own
DP measurement shows and one cell for the rest.

For a column whose domain exceeds `compress_above` cells, with noisy 1-way counts y (noise σ per cell):
    supported S = {c : y_c ≥ SUPPORT_SIGMAS·σ};  code c ↦ its rank in S if c ∈ S, else |S| (the merged cell).
Columns at or below the threshold, and those whose every cell is supported, keep their domain. The mapping is a
function of the DP measurement and public parameters only: post-processing, no budget (the paper's argument).
Every later step (MST's tree and 2-way measurements, AIM's rounds, the estimation) runs on the compressed codes,
so the model's cliques hold |S| + 1 cells of the column instead of its whole list.

The 1-way measurement is re-expressed on the compressed domain (Private-PGM's weighted query: mbi's
`LinearMeasurement.compress`): the merged cell's measurement is the sum of its m noisy counts, noise variance
m·σ², so it and its query are divided by √m and every coordinate keeps noise σ (`one_way`).

A sampled row in the merged cell is decoded to one of the merged codes by their own noisy 1-way counts shrunk
toward their mean (`measure.shrunk_shares`, positive-part James–Stein: post-processing of the same measurement),
uniformly when they differ by no more than the noise (the paper's `reverse_data`), from the sampling's seeded
generator (`expand`). Codes whose counts stand above the noise get more of the cell, and where the merged codes'
counts are all below it (most rare codes), the draw stays close to uniform rather than following noise.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from pipelines.marginal.measure import draw, shrunk_shares


SUPPORT_SIGMAS = 3.0  # a cell is supported when its noisy count is at least 3σ (the paper's threshold)


@dataclass(frozen=True)
class Compression:
    """Per compressed column (index into the layout's columns): the supported original codes, ascending; every
    other code of that column is in the merged cell |S|. `sizes`: the original domain sizes; `rare`: the merged
    codes' shares (ascending codes) where their noisy counts give them (module docstring)."""

    supported: dict[int, tuple[int, ...]]
    sizes: tuple[int, ...]
    rare: dict[int, tuple[float, ...]] = field(default_factory=dict)

    @classmethod
    def from_one_way(
        cls, one_way: Sequence[np.ndarray], sigma: float, threshold: int | None, exempt: Collection[int] = ()
    ) -> "Compression":
        """The mapping of the module docstring from each column's noisy 1-way counts (`threshold` None or σ = 0,
        exact counts: nothing compressed; columns `exempt` never)."""
        supported, rare = {}, {}
        for j, y in enumerate(one_way):
            y = np.asarray(y).ravel()
            keep = np.flatnonzero(y >= SUPPORT_SIGMAS * sigma)
            if threshold is not None and sigma > 0 and y.size > threshold and keep.size < y.size and j not in exempt:
                supported[j] = tuple(int(c) for c in keep)
                merged = shrunk_shares(np.delete(y, keep), sigma)
                if merged is not None:
                    rare[j] = tuple(float(v) for v in merged)
        return cls(supported, tuple(int(np.asarray(y).size) for y in one_way), rare)

    @property
    def shape(self) -> tuple[int, ...]:
        """The compressed domain sizes."""
        return tuple(len(self.supported[j]) + 1 if j in self.supported else n for j, n in enumerate(self.sizes))

    def mapping(self, j: int) -> np.ndarray:
        """Original code → compressed code of compressed column j."""
        out = np.full(self.sizes[j], len(self.supported[j]), dtype=np.int64)
        out[list(self.supported[j])] = np.arange(len(self.supported[j]))
        return out

    def codes(self, codes: np.ndarray) -> np.ndarray:
        """Rows of original codes on the compressed domain."""
        out = np.array(codes, dtype=np.int64, copy=True)
        for j in self.supported:
            out[:, j] = self.mapping(j)[out[:, j]]
        return out

    def one_way(self, j: int, y: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Column j's noisy 1-way counts on the compressed domain and the query's weights (module docstring): the
        supported cells as measured, then the merged cell's sum / √m with weight 1/√m; None: not compressed."""
        if j not in self.supported:
            return np.asarray(y, dtype=np.float64), None
        y = np.asarray(y, dtype=np.float64).ravel()
        merged = np.ones(y.size, dtype=bool)
        merged[list(self.supported[j])] = False
        scale = 1.0 / np.sqrt(merged.sum()) if merged.any() else 1.0
        weights = np.ones(len(self.supported[j]) + 1)
        weights[-1] = scale
        return np.append(y[~merged], y[merged].sum() * scale), weights

    def expand(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Compressed codes back to original codes: a supported cell to its code, the merged cell to one of the
        merged codes drawn by their `rare` shares (uniformly without them) from `rng` (the sampling's generator)."""
        out = np.array(codes, dtype=np.int64, copy=True)
        for j, keep in self.supported.items():
            merged = np.setdiff1d(np.arange(self.sizes[j]), keep)
            col = out[:, j]
            rare = col == len(keep)
            decoded = np.empty_like(col)
            decoded[~rare] = np.asarray(keep, dtype=np.int64)[col[~rare]] if keep else 0
            if rare.any() and j in self.rare:
                decoded[rare] = merged[draw(self.rare[j], rng.random(int(rare.sum())))]
            elif rare.any():
                decoded[rare] = merged[rng.integers(0, merged.size, int(rare.sum()))]
            out[:, j] = decoded
        return out

    def to_dict(self) -> dict:
        out = {"supported": {str(j): list(v) for j, v in self.supported.items()}, "sizes": list(self.sizes)}
        if self.rare:
            out["rare"] = {str(j): list(v) for j, v in self.rare.items()}
        return out

    @classmethod
    def from_dict(cls, d: dict | None) -> "Compression | None":
        if d is None:
            return None
        rare = {int(j): tuple(float(x) for x in v) for j, v in d.get("rare", {}).items()}
        return cls({int(j): tuple(v) for j, v in d["supported"].items()}, tuple(d["sizes"]), rare)
