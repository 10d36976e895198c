"""Gower distance on schema-driven features, and nearest-neighbour search under it.

Gower (1971): d(x, y) = (1/p) Σ_j d_j, with d_j = |x_j − y_j| / (upper_j − lower_j) for a numeric column
(schema bounds, clipped) and d_j = 1[x_j ≠ y_j] for a categorical or binary one, so d ∈ [0, 1]. It is the L1
distance of ``utility.featurise`` rows with each one-hot block halved (two different one-hot vectors are at L1
distance 2), divided by p. Nothing is learnt from the data. A long code list (more than
`code_lists.LONG_LIST_ABOVE` categories) is featurised by its buckets of consecutive codes, so two of its codes
that share a bucket count as equal: an approximation of d_j on such a column only.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
from sklearn.neighbors import NearestNeighbors

from pipelines.evaluation.fidelity import NUMERIC_KINDS
from pipelines.evaluation.utility import featurise, one_hot_width


def gower_features(frame: pd.DataFrame, columns: Sequence[Any]) -> np.ndarray:
    """Rows whose L1 distance divided by len(columns) is the Gower distance (module docstring)."""
    weights = np.concatenate([np.ones(1) if c.kind in NUMERIC_KINDS or c.kind == "binary"
                              else np.full(one_hot_width(c), 0.5) for c in columns])
    return featurise(frame, columns) * weights / max(len(columns), 1)


def nearest(targets: np.ndarray, pool: np.ndarray, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(distances, indices), each (len(targets), k): the k rows of `pool` nearest to each target in L1
    (the Gower distance on ``gower_features`` rows), nearest first."""
    nn = NearestNeighbors(n_neighbors=k, metric="manhattan", algorithm="brute", n_jobs=1).fit(pool)
    return nn.kneighbors(targets)
