"""The declared columns (the source's and the published table's) and the modelled ones every stage in between
sees: missing values as data, dates as numbers, identifiers never read.

A column the schema declares `missing: allowed` keeps its null rows. A null there is public structure like a bound (a
cause of death only for those who died, a joint income only for
joint applications), so it is modelled, not dropped. Every stage after reading sees the *modelled* columns
(`Schema.columns`), where a null is an ordinary value, so every generator, the calibration, the evaluation and the
attacks handle it with no code of their own:
- a categorical or binary column gets one more category, the null category (`schema.null_category`): a binary
  column with nulls becomes a categorical one of three;
- a numeric column gets an indicator column `<name>__missing` (binary: present / missing) right after it, and its
  value on a null row is set to its lower bound, a documented exact value (an atom: its own bin in MST's and
  AIM's public binning), so the value column's distribution over the present rows is untouched.
The schema makes the modelled columns (`schema.expand`); here, `to_modelled` maps a table with nulls (read from
the source, or a published synthetic table) to the modelled columns; `to_published` maps the modelled
synthetic rows back to the declared columns with real nulls, which is what a release bundle holds. Both are functions
of the public schema alone.

A `date` (`datetime`) column is modelled as its days (seconds) since 1970-01-01 UTC, an integer (continuous)
column on public calendar bins (`schema.calendar_edges`); one declared `after: <start>` as its gap to the start,
so every synthetic row respects the order; `to_published` turns them back into datetime64 values.

A column declared `derived: {from: <categorical column>, values: {...}}` (Adult's education_num, the number of its
education level; a code and its label) is read only to check each row against the documented mapping
(pipelines/data/validation.py: a row that breaks it follows the column's on_invalid) and is never modelled: no
generator sees it and no budget is spent on it, and `to_published` writes the mapping of the source's synthetic
value (`derived_values`), so every published row holds the documented function exactly, null where the source is.

An identifier column (`kind: id`) is never read or modelled: the published table gets fresh surrogate keys there
(`surrogate_keys`: "synthetic-1", "synthetic-2", ...), a reserved form that is no real identifier, in the
declared position.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipelines.data.schema import (
    DATE_KINDS,
    EPOCH,
    ID_KIND,
    INDICATOR_CATEGORIES,
    Column,
    Schema,
    indicator,
    null_category,
)

SURROGATE_PREFIX = "synthetic-"


def surrogate_keys(n: int, first: int = 0) -> list[str]:
    """n fresh identifiers of the rows `first`..`first` + n − 1, "synthetic-<first + 1>" ... "synthetic-<first + n>":
    a function of the row position alone."""
    return [f"{SURROGATE_PREFIX}{i}" for i in range(first + 1, first + n + 1)]


def epochs(s: pd.Series, kind: str) -> pd.Series:
    """Dates as days (kind date) or datetimes as seconds (datetime) since 1970-01-01 UTC, nulls NaN."""
    unit = pd.Timedelta(days=1) if kind == "date" else pd.Timedelta(seconds=1)
    return (pd.to_datetime(s) - pd.Timestamp(EPOCH)) / unit


def moments(values: pd.Series, col: Column) -> pd.Series:
    """`epochs` back to datetime64[s] (whole days for a date column), within the column's bounds."""
    v = values.astype("float64").clip(col.lower, col.upper)
    v = v.round() if col.kind == "date" else v
    unit = "D" if col.kind == "date" else "s"
    return (pd.Timestamp(EPOCH) + pd.to_timedelta(v, unit=unit)).astype("datetime64[s]")


def derived_values(frame: pd.DataFrame, col: Column) -> pd.Series:
    """The derived column `col`'s values in the rows of `frame` (declared columns holding its sources): the
    documented mapping of its source's category, null where the source is null or not one of its categories; or
    its formula (pipelines/data/formula.py), rounded to its `step` (to whole numbers for an integer column), null
    where it has no value. An integer column with a null is pandas' nullable Int64."""
    if col.formula is None:
        values = frame[col.derived_from].map(dict(col.derived))
    else:
        v = col.formula.evaluate(frame)
        v = col.on_grid(v) if col.step is not None else v
        values = pd.Series(np.rint(v) if col.kind == "integer" else v, index=frame.index)
    return values.astype("Int64" if col.dtype == "int64" and values.isna().any() else col.dtype)


def to_modelled(df: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """A frame of the declared columns (nulls allowed where declared) as the modelled columns: identifiers left
    out, dates as numbers (or gaps to their start), a null as the null category, or as the lower bound with its
    indicator set to "missing". Other columns' nulls are passed through, to meet the validation policies."""
    if schema.columns == schema.declared:
        return df
    out: dict[str, pd.Series] = {}
    for col in schema.read:
        if col.is_derived:  # checked by validation, never modelled
            continue
        s = df[col.name]
        if col.kind in DATE_KINDS:  # the number the model sees: since EPOCH, or the gap to its start (`after`)
            s = epochs(s, col.kind) - (epochs(df[col.after], col.kind) if col.after else 0.0)
        if not col.missing:
            out[col.name] = s
        elif col.is_numeric or col.kind in DATE_KINDS:
            null = s.isna()
            out[col.name] = s.astype("float64").mask(null, col.lower)
            out[indicator(col.name)] = pd.Series(
                null.map({False: INDICATOR_CATEGORIES[0], True: INDICATOR_CATEGORIES[1]}).to_numpy(object),
                index=s.index,
                dtype="str",
            )
        else:
            token = null_category(col)
            filled = s.astype(object).where(s.notna(), token)
            out[col.name] = filled if isinstance(token, str) else pd.Series(filled.to_numpy(object), index=s.index)
    return pd.DataFrame(out, index=df.index)


def to_published(df: pd.DataFrame, schema: Schema, first: int = 0) -> pd.DataFrame:
    """Modelled rows (a decoded synthetic table) as the declared columns: the null category and the values whose
    indicator says "missing" become nulls (integer columns as nullable Int64), indicators dropped, dates back to
    datetime64 within their bounds, identifier columns filled with `surrogate_keys` (`df` holds the table's rows
    `first`, `first` + 1, ...: a part of it). Other columns (e.g. a `weight` column) are kept after them."""
    if schema.columns == schema.declared:
        return df
    out: dict[str, pd.Series] = {}
    for col in schema.declared:
        if col.is_derived:  # after its sources, below
            continue
        if col.kind == ID_KIND:
            out[col.name] = pd.Series(surrogate_keys(len(df), first), index=df.index, dtype="str")
            continue
        s = df[col.name]
        if col.kind in DATE_KINDS:  # its start's date + the gap (`after`; the start is declared earlier)
            start = epochs(out[col.after], col.kind) if col.after else 0.0
            values = moments(s.astype("float64") + start, col)
            out[col.name] = values.mask(df[indicator(col.name)] == INDICATOR_CATEGORIES[1]) if col.missing else values
            continue
        if not col.missing:
            out[col.name] = s
        elif col.is_numeric:
            null = df[indicator(col.name)] == INDICATOR_CATEGORIES[1]
            out[col.name] = s.astype("Int64" if col.kind == "integer" else "float64").mask(null)
        else:
            token = null_category(col)
            out[col.name] = s.mask(s == token).astype("str" if isinstance(token, str) else "Int64")
    frame = pd.DataFrame(out, index=df.index)
    derived = {c.name: derived_values(frame, c) for c in schema.derived}
    declared = {c.name: out[c.name] if c.name in out else derived[c.name] for c in schema.declared}
    modelled = {c.name for c in schema.columns}
    return pd.DataFrame({**declared, **{c: df[c] for c in df.columns if c not in modelled}}, index=df.index)
