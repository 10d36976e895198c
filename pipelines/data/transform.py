"""Encode a validated frame as a float32 matrix and decode any matrix back, from the schema alone.

There is no ``fit``: the transform is a function of the public schema only (privacy rule 1), so two
different tables with the same schema are encoded by the identical map.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from pipelines.data.layout import Block, Layout
from pipelines.data.schema import Schema


class Encoder:
    """Schema-driven encoder. Numeric: clip to [lower, upper] then scale to [0, 1]; binary: index of
    the value in the category list (0 or 1); categorical: one-hot over the schema's categories."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        blocks, start = [], 0
        for c in schema.columns:
            width = len(c.categories) if c.kind == "categorical" else 1
            blocks.append(Block(column=c.name, kind=c.kind, start=start, stop=start + width,
                                protected=c.name in schema.protected, is_target=c.name == schema.target))
            start += width
        self._layout = Layout(tuple(blocks))

    @property
    def layout(self) -> Layout:
        return self._layout

    def encode(self, df: pd.DataFrame) -> np.ndarray:
        """(n, layout.width) float32 matrix; ValueError on missing columns, nulls or unknown categories
        (validate the table first)."""
        missing = [c for c in self.schema.names if c not in df.columns]
        if missing:
            raise ValueError(f"cannot encode: columns {missing} of schema '{self.schema.name}' are missing")
        n = len(df)
        X = np.zeros((n, self._layout.width), dtype=np.float64)
        for c, b in zip(self.schema.columns, self._layout.blocks):
            s = df[c.name]
            if s.isna().any():
                raise ValueError(f"cannot encode column '{c.name}': it has nulls (validate the table first)")
            if c.is_numeric:
                v = np.clip(s.to_numpy(dtype=np.float64), c.lower, c.upper)
                X[:, b.start] = (v - c.lower) / (c.upper - c.lower)
                continue
            codes = pd.Categorical(s, categories=list(c.categories)).codes
            if (codes < 0).any():
                raise ValueError(f"cannot encode column '{c.name}': values outside the schema's categories, "
                                 f"e.g. {s[codes < 0].iloc[0]!r} (validate the table first)")
            if c.kind == "binary":
                X[:, b.start] = codes
            else:
                X[np.arange(n), b.start + codes] = 1.0
        return X.astype(np.float32)

    def decode(self, X: np.ndarray) -> pd.DataFrame:
        """Frame satisfying the schema, in the dtypes ``read_table`` gives a clean table: numeric values
        clipped to [0, 1] and rescaled (integers rounded), binary thresholded at 0.5, categorical argmax."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self._layout.width:
            raise ValueError(f"cannot decode: expected a 2-d matrix with {self._layout.width} columns "
                             f"(schema '{self.schema.name}'), got shape {X.shape}")
        if not np.isfinite(X).all():
            raise ValueError("cannot decode: the matrix contains NaN or infinite values")
        out = {}
        for c, b in zip(self.schema.columns, self._layout.blocks):
            if c.is_numeric:
                v = c.lower + np.clip(X[:, b.start], 0.0, 1.0) * (c.upper - c.lower)
                values = np.clip(np.rint(v) if c.kind == "integer" else v, c.lower, c.upper)
            else:
                idx = (X[:, b.start] >= 0.5).astype(int) if c.kind == "binary" else X[:, b.start:b.stop].argmax(1)
                values = np.asarray(c.categories, dtype=object)[idx]
            out[c.name] = pd.Series(values, dtype=c.dtype)
        return pd.DataFrame(out)


def train_holdout_split(df: pd.DataFrame, holdout_fraction: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Seeded split into (train, holdout), each keeping the original row order, index reset.

    The holdout has round(n * holdout_fraction) rows; the split depends only on n and the seed.
    """
    if not 0.0 < holdout_fraction < 1.0:
        raise ValueError(f"holdout_fraction must be in (0, 1), got {holdout_fraction}")
    n = len(df)
    n_holdout = round(n * holdout_fraction)
    if not 0 < n_holdout < n:
        raise ValueError(f"holdout_fraction {holdout_fraction} of {n} rows leaves an empty train or holdout set")
    holdout = np.zeros(n, dtype=bool)
    holdout[np.random.default_rng(seed).permutation(n)[:n_holdout]] = True
    return df[~holdout].reset_index(drop=True), df[holdout].reset_index(drop=True)
