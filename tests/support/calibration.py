"""The marginal calibration's test tables on MIXED: its cliques, rows that depend strongly on the target, rows a
poor generator emits, and the largest total variation distance of a table's marginals from the truth."""

from __future__ import annotations

import numpy as np

from pipelines.marginal.calibrate import marginals
from pipelines.marginal.measure import marginal

from support.generators import MIXED

CLIQUES = marginals(MIXED, "target")  # 5 columns and 4 pairs with `outcome`: m = 9


def real_table(n: int, seed: int) -> np.ndarray:
    """MIXED rows with strong dependence on the target: income, age, smoker and region all move with outcome."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    age = np.where(y, rng.beta(5, 2, n), rng.beta(2, 5, n))
    income = np.where(y, rng.beta(2, 2, n) * 0.5 + 0.5, rng.beta(2, 6, n))
    smoker = rng.random(n) < np.where(y, 0.7, 0.2)
    region = np.eye(3)[np.where(y, rng.choice(3, n, p=[0.7, 0.2, 0.1]), rng.choice(3, n, p=[0.1, 0.3, 0.6]))]
    return np.column_stack([age, income, smoker, *region.T, y]).astype(np.float32)


def wrong_table(n: int, seed: int) -> np.ndarray:
    """Independent, wrongly shaped columns on the full support (what a poor generator emits)."""
    rng = np.random.default_rng(seed)
    region = np.eye(3)[rng.integers(0, 3, n)]
    return np.column_stack([rng.random(n), rng.random(n), rng.random(n) < 0.5, *region.T, rng.random(n) < 0.6]).astype(
        np.float32
    )


def tv_of(rows: np.ndarray, truth: list[np.ndarray], disc) -> float:
    """The largest total variation distance between `rows`' marginals on CLIQUES and the probability tables `truth`."""
    codes, index = disc.codes(rows), {n: i for i, n in enumerate(disc.names)}
    return max(
        0.5 * float(np.abs(marginal(codes, disc.shape, [index[c] for c in q]) / len(rows) - t).sum())
        for q, t in zip(CLIQUES, truth)
    )
