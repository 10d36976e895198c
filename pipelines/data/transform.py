"""Encode a validated frame as a float32 matrix and decode any matrix back, from the schema alone.

There is no ``fit``: the transform is a function of the public schema only (privacy rule 1), so two
different tables with the same schema are encoded by the identical map.
"""

from __future__ import annotations


import hashlib
import hmac
from typing import Any

import numpy as np
import pandas as pd

from pipelines.data.layout import Block, Layout
from pipelines.data.rules import indexed
from pipelines.data.schema import ATOM_TOLERANCE, INDICATOR_CATEGORIES, Schema, indicator


class Encoder:
    """Schema-driven encoder. Numeric: clip to [lower, upper] then scale to [0, 1]; binary: index of
    the value in the category list (0 or 1); categorical: one-hot over the schema's categories. The layout's
    numeric blocks carry the schema's public facts (bounds, optional `bins` edges) for the public binning."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        blocks, start = [], 0
        for c in schema.columns:
            width = len(c.categories) if c.kind == "categorical" else 1
            facts = {"lower": c.lower, "upper": c.upper, "bins": c.bins, "atoms": c.atoms} if c.is_numeric else {}
            blocks.append(
                Block(
                    column=c.name,
                    kind=c.kind,
                    start=start,
                    stop=start + width,
                    protected=c.name in schema.protected,
                    is_target=c.name == schema.target,
                    **facts,
                )
            )
            start += width
        self._layout = Layout(
            tuple(blocks),
            schema.related,
            tuple(indexed(r, {c.name: c.categories for c in schema.columns}) for r in schema.rules),
        )

    @property
    def layout(self) -> Layout:
        return self._layout

    def column_names(self) -> list[str]:
        """The encoded matrix's column names: `column=category` for each one-hot column, else the column."""
        names = []
        for b in self._layout.blocks:
            if b.kind == "categorical":
                names += [f"{b.column}={c}" for c in self.schema.column(b.column).categories]
            else:
                names.append(b.column)
        return names

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
                raise ValueError(
                    f"cannot encode column '{c.name}': values outside the schema's categories, "
                    f"e.g. {s[codes < 0].iloc[0]!r} (validate the table first)"
                )
            if c.kind == "binary":
                X[:, b.start] = codes
            else:
                X[np.arange(n), b.start + codes] = 1.0
        return X.astype(np.float32)

    def decode(self, X: np.ndarray, rng: np.random.Generator | None = None) -> pd.DataFrame:
        """Frame satisfying the schema, in the dtypes ``read_table`` gives a clean table: numeric values
        clipped to [0, 1] and rescaled (integers rounded, a `step` kept: the nearest multiple of it within
        the bounds, and with `rng` a column's `rounding` drawn (pipelines/data/rounding.py); values within
        `ATOM_TOLERANCE` of a schema atom set to it), binary
        thresholded at 0.5, categorical argmax; a numeric value whose `<name>__missing` indicator says missing set
        to the lower bound (what a published null is modelled as)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self._layout.width:
            raise ValueError(
                f"cannot decode: expected a 2-d matrix with {self._layout.width} columns "
                f"(schema '{self.schema.name}'), got shape {X.shape}"
            )
        if not np.isfinite(X).all():
            raise ValueError("cannot decode: the matrix contains NaN or infinite values")
        out = {}
        for c, b in zip(self.schema.columns, self._layout.blocks):
            if c.is_numeric:
                v = c.lower + np.clip(X[:, b.start], 0.0, 1.0) * (c.upper - c.lower)
                values = np.clip(np.rint(v) if c.kind == "integer" else v, c.lower, c.upper)
                # the float32 encoding moved an atom by < 1e-7 of the range: snap it back (after the grid, which
                # must not move an atom off its exact value)
                atoms = [(a, np.abs(v - a) <= ATOM_TOLERANCE * (c.upper - c.lower)) for a in c.atoms or ()]
                if c.step is not None:  # the multiples of its magnitude's step within the bounds
                    values = c.on_grid(values, rng)
                for a, at in atoms:
                    values[at] = a
            else:
                idx = (X[:, b.start] >= 0.5).astype(int) if c.kind == "binary" else X[:, b.start : b.stop].argmax(1)
                values = np.asarray(c.categories, dtype=object)[idx]
            out[c.name] = pd.Series(values, dtype=c.dtype)
        for c in self.schema.columns:  # a numeric value on a row its indicator marks missing: the lower bound, as
            flag = out.get(indicator(c.name))  # `declared.to_modelled` codes a null, so metrics see what is published
            if c.is_numeric and flag is not None:
                out[c.name] = out[c.name].mask(flag == INDICATOR_CATEGORIES[1], c.lower).astype(c.dtype)
        return pd.DataFrame(out)


def _canonical_cell(value: Any) -> str:
    """A value's canonical text: integers (also integral numpy/pandas ints) in decimal, floats by their exact
    hexadecimal form (so 0.1 and 0.1000000000000000055 agree, and -0.0 == 0.0), anything else by str()."""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return str(int(v)) if v.is_integer() else v.hex()
    return str(value)


def row_bytes(df: pd.DataFrame, columns: list[str]) -> list[bytes]:
    """Each row's canonical bytes: its values in `columns` order, each as ``<length>:<text>`` (length-prefixed,
    so no value can imitate a separator). A function of the row's values alone, not of its position."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"cannot split: columns {missing} are missing from the table")
    cells = [[_canonical_cell(v) for v in df[c].tolist()] for c in columns]
    return ["".join(f"{len(s)}:{s}" for s in row).encode("utf-8") for row in zip(*cells)] if cells else []


def occurrence_bytes(rows: list[bytes]) -> list[bytes]:
    """Each row's bytes with its occurrence index k among identical rows (in table order) appended as
    ``0x1f<k>`` when k ≥ 1; the first copy (every row of a table without repeats) keeps its bytes. No two entries
    are equal, and no entry equals another row's bytes: a row's bytes parse as exactly `columns` length-prefixed
    cells, which a trailing 0x1f<k> breaks."""
    seen: dict[bytes, int] = {}
    out = []
    for b in rows:
        k = seen.get(b, 0)
        seen[b] = k + 1
        out.append(occurrence(b, k))
    return out


def occurrence(row: bytes, k: int) -> bytes:
    """The bytes of the k-th copy of a row (`occurrence_bytes`)."""
    return row if k == 0 else row + b"\x1f" + str(k).encode()


def split_uniforms(df: pd.DataFrame, columns: list[str], key: bytes) -> np.ndarray:
    """u_i = first 64 bits of HMAC-SHA256(key, occurrence_bytes(row_bytes)_i) / 2^64 ∈ [0, 1), one per row."""
    return keyed_uniforms(key, occurrence_bytes(row_bytes(df, columns)))


def keyed_uniforms(key: bytes, messages: list[bytes]) -> np.ndarray:
    """First 64 bits of HMAC-SHA256(key, m) / 2^64 ∈ [0, 1) for each message m (`split_uniforms`)."""
    if len(key) < 16:
        raise ValueError(f"the split key must have at least 128 bits, got {8 * len(key)}")
    digests = (hmac.new(key, m, hashlib.sha256).digest()[:8] for m in messages)
    return np.fromiter((int.from_bytes(d, "big") for d in digests), dtype=np.float64, count=len(messages)) / 2.0**64


def train_holdout_split(
    df: pd.DataFrame, holdout_fraction: float, key: bytes | int, columns: list[str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split into (train, holdout), each keeping the original row order, index reset.

    Row i goes to the holdout iff u_i < holdout_fraction, u_i = HMAC-SHA256(key, row_i's canonical bytes and
    its occurrence index k among identical rows) as a uniform number in [0, 1) (`split_uniforms`; `columns`: the
    schema's column order, default the frame's). The k-th copy of a row gets the side s(row, k), a function of
    the row, k and the key alone. Adding or removing one row therefore changes the multiset of (row, side) pairs
    by exactly that row's pair: a distinct row moves no other row; removing one of m identical copies leaves
    copies 0..m−2 with sides s(row, 0..m−2), so the training set loses at most one copy of that row (copies
    are interchangeable, whichever was removed). Neighbouring tables (add/remove one) give neighbouring training
    sets, and every per-generator guarantee carries over. Repeated rows are spread over both sides as
    independent rows are (a side chosen by a row's content alone would send every copy to the same side, so no
    holdout row would ever equal a training row and the exact-copy gate's chance baseline would be 0), so the holdout
    is exchangeable with the training rows and its size Binomial(n, holdout_fraction).

    `key` is the secret split key (`tasks.common.split_key`: derived from the steward's noise key, else a
    random salt kept with the internal artefacts); with a key nobody else knows, a row's side is
    unpredictable. An integer is a PUBLIC seed (its sha256 is the key) for tests and benchmarks only: with it
    anyone can recompute which rows were held out.
    """
    if not 0.0 < holdout_fraction < 1.0:
        raise ValueError(f"holdout_fraction must be in (0, 1), got {holdout_fraction}")
    if not isinstance(key, (bytes, bytearray)):
        key = hashlib.sha256(f"synthrelease public split seed {int(key)}".encode()).digest()
    cols = list(df.columns) if columns is None else list(columns)
    holdout = split_uniforms(df, cols, bytes(key)) < holdout_fraction
    return df[~holdout].reset_index(drop=True), df[holdout].reset_index(drop=True)
