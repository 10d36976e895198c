"""Gower distance on schema-driven features, and nearest-neighbour search under it.

Gower (1971): d(x, y) = (1/p) Σ_j d_j, with d_j = |x_j − y_j| / (upper_j − lower_j) for a numeric column
(schema bounds, clipped) and d_j = 1[x_j ≠ y_j] for a categorical or binary one, so d ∈ [0, 1]. It is the L1
distance of ``utility.featurise`` rows with each one-hot block halved (two different one-hot vectors are at L1
distance 2), divided by p. Nothing is learnt from the data. A long code list (more than
`code_lists.LONG_LIST_ABOVE` categories) is featurised by its buckets of consecutive codes, so two of its codes
that share a bucket count as equal: an approximation of d_j on such a column only.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree
from sklearn.neighbors import NearestNeighbors

from pipelines.evaluation.fidelity import NUMERIC_KINDS
from pipelines.evaluation.utility import featurise, one_hot_width

KD_TREE_MAX_DIM = 40  # features above which `within` compares every pair (a KD-tree prunes little in more dimensions)


def gower_features(frame: pd.DataFrame, columns: Sequence[Any]) -> np.ndarray:
    """Rows whose L1 distance is the Gower distance (module docstring): the featurised row, each one-hot block
    halved, divided by len(columns)."""
    return featurise(frame, columns) * feature_weights(columns) / max(len(columns), 1)


def one_hot(col: Any) -> bool:
    """Whether `featurise` gives the column a one-hot block (categorical), not one feature (numeric, binary)."""
    return not (col.kind in NUMERIC_KINDS or col.kind == "binary")


def feature_weights(columns: Sequence[Any]) -> np.ndarray:
    """Each featurised column's Gower weight: 1 for a numeric or binary column, 0.5 in a one-hot block."""
    return np.concatenate([np.full(one_hot_width(c), 0.5) if one_hot(c) else np.ones(1) for c in columns])


def nearest(targets: np.ndarray, pool: np.ndarray, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(distances, indices), each (len(targets), k): the k rows of `pool` nearest to each target in L1
    (the Gower distance on ``gower_features`` rows), nearest first."""
    nn = NearestNeighbors(n_neighbors=k, metric="manhattan", algorithm="brute", n_jobs=1).fit(pool)
    return nn.kneighbors(targets)


def within(targets: np.ndarray, pool: np.ndarray, radius: float, columns: Sequence[Any]) -> np.ndarray:
    """Whether each `targets` row has a `pool` row at L1 distance ≤ `radius` (`gower_features` rows of `columns`),
    exactly as `nearest(targets, pool)[0][:, 0] <= radius` but without its all-pairs cost (`Near`)."""
    return Near([pool], radius, columns).within(targets)


class Near:
    """The pool rows of `within`, kept as its search needs them and given in parts (`gower_features` matrices), so a
    pool too long to featurise whole is held compactly; `within(targets)` then answers for any targets, a part at a
    time (each target's answer depends on the pool alone).

    Two rows that differ in a categorical column are at least 1/p apart (p = len(columns): two one-hot entries of
    0.5/p each). When that exceeds `radius`, only rows equal on every one-hot block can be within it, so each row's
    one-hot pattern becomes one coordinate, the index of its pattern among the pool's (distinct patterns are ≥ 1 >
    radius apart; a target whose pattern no pool row has gets −1, ≥ 1 from every index), beside the other features
    (rows of one pattern add an exact 0 to the L1 sum), and a KD-tree (SciPy's: a nearest-row query bounded by the
    radius, 9× scikit-learn's radius count on 100,000 Adult rows a side) finds each row's nearest pool row if one is
    that close. Otherwise, or above KD_TREE_MAX_DIM features, every pair is compared."""

    def __init__(self, parts: Iterable[np.ndarray], radius: float, columns: Sequence[Any]) -> None:
        self.radius, self.columns = radius, columns
        self.blocks = feature_weights(columns) < 1
        self.by_pattern = bool(self.blocks.any()) and 1.0 / len(columns) > radius
        features, codes = [], []
        for part in parts:
            features.append(part[:, ~self.blocks] if self.by_pattern else part)
            if self.by_pattern:
                codes.append(_records(one_hot_codes(part, columns)))
        self.pool = np.concatenate(features) if features else np.zeros((0, len(self.blocks)))
        if self.by_pattern:
            self.patterns, index = np.unique(np.concatenate(codes), return_inverse=True)
            self.pool = np.column_stack([self.pool, index.reshape(-1).astype(float)])
        self.tree = cKDTree(self.pool) if len(self.pool) and self.pool.shape[1] <= KD_TREE_MAX_DIM else None

    def within(self, targets: np.ndarray) -> np.ndarray:
        """Whether each row of `targets` (`gower_features` rows) has a pool row within the radius."""
        if len(targets) == 0 or len(self.pool) == 0:
            return np.zeros(len(targets), bool)
        if self.by_pattern:
            codes = _records(one_hot_codes(targets, self.columns))
            index = np.minimum(self.patterns.searchsorted(codes), len(self.patterns) - 1)
            index = np.where(self.patterns[index] == codes, index, -1).astype(float)
            targets = np.column_stack([targets[:, ~self.blocks], index])
        if self.tree is not None:  # each target's nearest pool row, searched no farther than the radius
            found, _ = self.tree.query(targets, k=1, p=1, distance_upper_bound=self.radius * (1 + 1e-9) + 1e-300)
            return found <= self.radius  # inf where no pool row is within the bound
        return nearest(targets, self.pool)[0][:, 0] <= self.radius


def _records(codes: np.ndarray) -> np.ndarray:
    """Each row of an integer matrix as one record (ordered field by field), so that rows sort and search as
    values."""
    codes = np.ascontiguousarray(codes)
    return codes.view([(f"c{i}", codes.dtype) for i in range(codes.shape[1])]).reshape(-1)


def one_hot_codes(features: np.ndarray, columns: Sequence[Any]) -> np.ndarray:
    """Each row's one-hot blocks (`gower_features` of `columns`) as one integer per categorical column: the index
    of the block's set entry, −1 for an all-zero block (a value outside the list). Two rows have equal codes exactly
    when their one-hot blocks are equal; a small integer matrix where the blocks are wide floats (memory)."""
    widths = [one_hot_width(c) if one_hot(c) else 1 for c in columns]
    starts = np.cumsum([0, *widths[:-1]])
    blocks = [features[:, s : s + w] for s, w, c in zip(starts, widths, columns) if one_hot(c)]
    return np.column_stack([np.where(b.max(axis=1) > 0, b.argmax(axis=1), -1) for b in blocks]).astype(np.int32)
