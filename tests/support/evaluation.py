"""Tables for the evaluation tests: DEPENDENT, four columns that all move with one latent, its seeded rows and
their column-wise shuffle (the same 1-way marginals, no dependence), and a model that samples real rows."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipelines.data.schema import Column

DEPENDENT = [
    Column("x1", "continuous", 0.0, 1.0),
    Column("x2", "continuous", 0.0, 1.0),
    Column("b", "binary", categories=("no", "yes")),
    Column("c", "categorical", categories=("low", "mid", "high")),
]


def dependent(n: int, seed: int) -> pd.DataFrame:
    """Every column a noisy function of one latent z ~ U(0, 1): strong dependence between all four."""
    rng = np.random.default_rng(seed)
    z = rng.random(n)
    flip = rng.random(n) < 0.05
    return pd.DataFrame(
        {
            "x1": np.clip(z + rng.normal(0, 0.05, n), 0, 1),
            "x2": np.clip(1 - z + rng.normal(0, 0.05, n), 0, 1),
            "b": np.where((z > 0.5) ^ flip, "yes", "no"),
            "c": np.array(["low", "mid", "high"])[np.minimum((z * 3).astype(int), 2)],
        }
    )


def shuffled(df: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Each column permuted independently: the same 1-way marginals, no dependence at all."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({c: rng.permutation(df[c].to_numpy()) for c in df.columns})


class RowsModel:
    """A trained generator's sampling interface that draws real rows (encoded) with the generator it is given."""

    def __init__(self, train: pd.DataFrame, encoder) -> None:
        self.rows, self.table_layout = encoder.encode(train), encoder.layout

    def sample(self, n: int, rng) -> np.ndarray:
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(int(rng))
        return self.rows[rng.integers(0, len(self.rows), n)]
