"""Read a raw table (bundled data set, CSV or Parquet) into the schema's columns and types.

Only structural problems are raised here (missing file, bad format, missing/extra columns, numbers
that do not parse); out-of-domain values are left for ``validation.validate_table`` to count and
handle by policy. A file's columns are checked against the schema from its header alone
(``header.read_header``) before any cell is read, and only the schema's columns are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
import numpy as np
import pandas as pd

from pipelines.data.header import ColumnMode, parquet_parts, read_header
from pipelines.data.schema import DATE_KINDS, Column, Schema
from pipelines.errors import InputError

BUNDLED_DIR = Path(__file__).parent / "bundled"
BUNDLED = ("adult", "breast_cancer", "flights")
# Cells that mean "no value" in a numeric column (categorical columns treat only empty cells as null,
# so that a category spelled like one of these stays a category).
_NUMERIC_NULLS = ("", "NA", "N/A", "NaN", "nan", "null", "NULL", "None")
_EXAMPLES = 5


@dataclass(frozen=True)
class SourceTable:
    """A raw table read into the schema's columns, the label naming its file, and the names of the table's
    columns outside the schema that were left unread (``columns="schema"``; empty under "strict")."""

    frame: pd.DataFrame
    label: str
    ignored: tuple[str, ...]


def read_table(source: str, schema: Schema) -> tuple[pd.DataFrame, str]:
    """(frame, label) of ``read_source(source, schema)``: a table with exactly the schema's columns."""
    table = read_source(source, schema)
    return table.frame, table.label


def read_source(source: str, schema: Schema, columns: ColumnMode = "strict") -> SourceTable:
    """Read ``source`` into a frame with exactly the schema's declared columns in schema order, but for the
    identifiers (`kind: id`: checked in the header, never read), nulls kept (`validation.validate_table`
    models or drops them).

    ``source`` is ``bundled:<name>`` (see ``BUNDLED``), a path to a .csv, .csv.gz or .parquet file, or a directory
    of .parquet parts (``header.parquet_parts``).
    ``columns="strict"`` refuses a table with columns the schema lacks; ``"schema"`` reads only the schema's
    columns (CSV ``usecols``: the parser splits each line into fields but keeps and converts only those;
    Parquet ``columns=``: the other column chunks are not read) and returns the others' names.
    Numeric columns come back as float64 (integer columns as int64 when every value is a whole number
    and none is null); categorical/binary columns as str (string categories, whitespace stripped) or
    int64 (integer categories; object when some value is not an integer).
    """
    if source.startswith("bundled:"):
        raw, label, ignored = read_bundled(source, schema, columns)
    else:
        label = source
        ignored = check_columns(read_header(source), schema, label, columns)
        raw = _read_file(Path(source), read_names(schema))
    return SourceTable(_conform(raw, schema, label), label, tuple(ignored))


def read_names(schema: Schema) -> list[str]:
    """The columns whose values are read: the schema's read columns and, when the schema declares a privacy unit,
    its id column (read only to bound each unit's rows and keep them on one side of the split:
    pipelines/data/units.py)."""
    return [c.name for c in schema.read] + ([schema.unit.column] if schema.unit is not None else [])


def check_columns(header: list[str], schema: Schema, label: str, columns: ColumnMode) -> list[str]:
    """The header's columns outside the schema (allowed only under ``columns="schema"``); InputError for a
    schema column the table lacks, or for extra columns under "strict"."""
    names = schema.declared_names
    missing = [c for c in names if c not in header]
    if missing:
        raise InputError(
            f"missing columns {missing} required by schema '{schema.name}'.",
            file=label,
            column=missing[0],
            fix="add the columns to the table, or remove them from the schema.",
        )
    extra = [c for c in header if c not in names]
    if extra and columns == "strict":
        raise InputError(
            f"extra columns {extra} not in schema '{schema.name}'.",
            file=label,
            column=extra[0],
            fix="drop them from the table, or add them to the schema, or set 'columns: schema' "
            "under 'dataset:' in the params file to read only the schema's columns (the "
            "others are then named in the validation report; their values are not kept).",
        )
    return extra


def read_bundled(source: str, schema: Schema, columns: ColumnMode) -> tuple[pd.DataFrame, str, list[str]]:
    """(the schema's read columns of the bundled table `source`, unconverted; its label; the columns it ignored)."""
    raw, label = _bundled(source.removeprefix("bundled:"))
    raw = raw.rename(columns=str)
    ignored = check_columns(list(raw.columns), schema, label, columns)
    return raw[read_names(schema)], label, ignored


def _bundled(name: str) -> tuple[pd.DataFrame, str]:
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        frame = load_breast_cancer(as_frame=True).frame
        frame.columns = [c.replace(" ", "_") for c in frame.columns]
        return frame, "bundled:breast_cancer (sklearn.datasets.load_breast_cancer)"
    if name in ("adult", "flights"):
        return _read_csv(BUNDLED_DIR / f"{name}.csv.gz"), f"bundled:{name} (pipelines/data/bundled/{name}.csv.gz)"
    raise InputError(
        f"unknown bundled data set '{name}'.",
        file=f"bundled:{name}",
        fix=f"use one of {', '.join('bundled:' + b for b in BUNDLED)}, or a .csv/.parquet path.",
    )


def _read_file(path: Path, names: list[str]) -> pd.DataFrame:
    """Only the columns ``names`` of a file (or a partitioned Parquet table's parts, in order) whose header
    ``read_header`` has checked."""
    if path.is_dir():
        return pd.concat([_read_file(part, names) for part in parquet_parts(path)], ignore_index=True)
    if path.name.lower().endswith(".parquet"):
        try:
            return pd.read_parquet(path, columns=names)
        except Exception as e:  # pyarrow raises several unrelated types for a corrupt file
            raise InputError(
                f"not a readable Parquet file ({type(e).__name__}: {e}).",
                file=str(path),
                fix="re-export the table as Parquet, or as CSV with a header row.",
            ) from e
    return _read_csv(path, names)


def _read_csv(path: Path, names: list[str] | None = None) -> pd.DataFrame:
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""], usecols=names)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise InputError(
            f"not a readable CSV file ({e}).",
            file=str(path),
            fix="write a UTF-8, comma-separated file with one header row.",
        ) from e


def _conform(raw: pd.DataFrame, schema: Schema, label: str) -> pd.DataFrame:
    if raw.shape[0] == 0:
        raise InputError(
            "the table is empty (no data rows).",
            file=label,
            fix="point the source at a table with a header row and at least one row.",
        )
    return conform_part(raw.reset_index(drop=True), schema, label)


def conform_part(raw: pd.DataFrame, schema: Schema, label: str) -> pd.DataFrame:
    """The schema's read columns of `raw` (rows of a table indexed by their positions in it, counted from 0) in
    their schema types (`read_source`); an InputError names the table's rows it cannot read."""
    frame = pd.DataFrame({c.name: _convert(raw[c.name], c, label) for c in schema.read}, index=raw.index)
    if schema.unit is not None:
        frame[schema.unit.column] = raw[schema.unit.column].astype("string")
    return frame


def _convert(s: pd.Series, col: Column, label: str) -> pd.Series:
    """One column in its schema type; the index (the rows' positions in the table) is kept for error messages."""
    if col.kind in DATE_KINDS:
        return _parse_dates(s, col, label)
    if col.is_numeric:
        values = _parse_numbers(s, col, label)
        whole = values.notna().all() and (values % 1 == 0).all()
        return values.astype("int64") if col.kind == "integer" and whole else values
    if col.dtype == "str":
        text = s.astype("str").str.strip()
        return text.mask(text == "")
    return _int_categories(s)


def _parse_numbers(s: pd.Series, col: Column, label: str) -> pd.Series:
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        return s.astype("float64")
    return _parsed(
        s,
        lambda t: pd.to_numeric(t, errors="coerce").astype("float64"),
        col,
        label,
        "numbers",
        "correct or empty those cells (empty cells are nulls), or declare the column categorical in the schema.",
    )


def _parse_dates(s: pd.Series, col: Column, label: str) -> pd.Series:
    """ISO dates / datetimes (or a datetime column of a Parquet file) as datetime64[s]; empty cells null."""
    if pd.api.types.is_datetime64_any_dtype(s):
        return s.dt.tz_convert(None) if s.dt.tz is not None else s.astype("datetime64[s]")
    values = _parsed(
        s,
        lambda t: pd.to_datetime(t, errors="coerce", format="ISO8601", utc=True).dt.tz_convert(None),
        col,
        label,
        f"ISO {col.kind}s",
        "write them as 2001-05-17 (or 2001-05-17T08:30:00), or empty those cells (nulls).",
    )
    return values.astype("datetime64[s]")


def _parsed(s: pd.Series, parse, col: Column, label: str, what: str, fix: str) -> pd.Series:
    """`parse` (coercing what it cannot read to null) of the stripped text cells, empty and null-marker cells null;
    an InputError naming the first cells it could not read."""
    text = s.astype("str").str.strip()
    null = text.isna() | text.isin(_NUMERIC_NULLS)
    values = parse(text.mask(null))
    bad = values.isna() & ~null
    if bad.any():
        rows = np.flatnonzero(bad.to_numpy())
        examples = ", ".join(f"row {int(text.index[r]) + 1}: {text.iloc[r]!r}" for r in rows[:_EXAMPLES])
        raise InputError(
            f"{len(rows)} values of this {col.kind} column are not {what} ({examples}; data rows count from 1).",
            file=label,
            column=col.name,
            fix=fix,
        )
    return values


def _int_categories(s: pd.Series) -> pd.Series:
    """Cast values to int where they are whole numbers; other values stay as they are (later: unknown)."""
    text = s if pd.api.types.is_numeric_dtype(s) else s.astype("str").str.strip()
    values = pd.to_numeric(text, errors="coerce")
    whole = values.notna() & (values % 1 == 0)
    if whole.all():
        return values.astype("int64")
    out = text.astype(object)
    out[whole] = [int(v) for v in values[whole]]
    return out
