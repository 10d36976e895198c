"""The column names of a raw table, read from its header alone: no data cell is read or decoded.

CSV (.csv, .csv.gz): the first line, as bytes, decoded as UTF-8 and parsed by the csv module; the lines
after it are never decoded or parsed. Parquet: the schema in the file's footer metadata
(``pyarrow.parquet.read_schema``); no data page is read. ``synthrelease init`` writes a schema from this,
and ``readers.read_source`` checks the table's columns against the schema with it before reading cells.
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path
from typing import Literal

from pipelines.errors import InputError

CSV_SUFFIXES = (".csv", ".csv.gz")
PARQUET_SUFFIXES = (".parquet",)
# params `dataset.columns`: "strict" refuses a table with columns the schema lacks; "schema" reads only the
# schema's columns and names the others (never their values) in the validation report
ColumnMode = Literal["strict", "schema"]


def parquet_parts(path: Path) -> list[Path]:
    """The files of a partitioned Parquet table (a directory of .parquet files with the same columns, as Spark or
    `dask.dataframe.to_parquet` write it), in name order: the table's row order; InputError for a directory
    without one, or with subdirectories (Hive partitioning keeps column values in directory names: write the
    columns into the files instead)."""
    subdirs = sorted(p.name for p in path.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    if subdirs:
        raise InputError(
            f"the partitioned table has subdirectories ({', '.join(subdirs[:3])}).",
            file=str(path),
            fix="write every part as a .parquet file directly in the directory, each with all the "
            "table's columns (no Hive partitioning by directory name).",
        )
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(PARQUET_SUFFIXES))
    if not files:
        raise InputError(
            "the directory holds no .parquet file.",
            file=str(path),
            fix="point the source at a .csv or .parquet file, or a directory of .parquet parts.",
        )
    return files


def read_header(path: str | Path) -> list[str]:
    """The table's column names in file order; InputError (file, problem, fix) for a missing or unsupported
    file, an unreadable header, or an empty or duplicated column name. A directory is a partitioned Parquet
    table (`parquet_parts`): every part must have the first part's columns."""
    path = Path(path)
    if path.is_dir():
        first, *rest = parquet_parts(path)
        names = _parquet_header(first)
        for part in rest:
            if _parquet_header(part) != names:
                raise InputError(
                    f"this part's columns {_parquet_header(part)} differ from the first part's {names}.",
                    file=str(part),
                    fix="write every part with the same columns.",
                )
        return _checked_names(names, path)
    if not path.is_file():
        raise InputError(
            "file not found.",
            file=str(path),
            fix="check the path (relative paths start at the project root), or use bundled:<name>.",
        )
    name = path.name.lower()
    if name.endswith(CSV_SUFFIXES):
        names = _csv_header(path)
    elif name.endswith(PARQUET_SUFFIXES):
        names = _parquet_header(path)
    else:
        raise InputError(
            f"unsupported file type '{path.suffix}'.",
            file=str(path),
            fix="provide a .csv, .csv.gz or .parquet file, or a directory of .parquet parts.",
        )
    return _checked_names(names, path)


def _checked_names(names: list[str], path: Path) -> list[str]:
    """`names`, or an InputError for an empty or duplicated column name."""
    empty = [i + 1 for i, n in enumerate(names) if not n.strip()]
    if empty:
        raise InputError(
            f"header field {empty[0]} is an empty column name.",
            file=str(path),
            fix="give every column a name in the header row.",
        )
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(
            f"the header names columns {dupes} more than once.",
            file=str(path),
            column=dupes[0],
            fix="give every column a distinct name in the header row.",
        )
    return names


def _csv_header(path: Path) -> list[str]:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            first = f.readline()
        line = first.decode("utf-8-sig")
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise InputError(
            f"cannot read the header row ({type(e).__name__}: {e}).",
            file=str(path),
            fix="write a UTF-8, comma-separated file whose first line is the header row.",
        ) from e
    if not line.strip():
        raise InputError(
            "the table is empty (no header row).",
            file=str(path),
            fix="write a comma-separated file whose first line names the columns.",
        )
    try:
        rows = list(csv.reader([line]))
    except csv.Error as e:
        raise InputError(
            f"the header row is not valid CSV ({e}).",
            file=str(path),
            fix="write the header on one line, column names separated by commas (quote a name that contains a comma).",
        ) from e
    return rows[0]


def _parquet_header(path: Path) -> list[str]:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception as e:  # pyarrow raises several unrelated types for a corrupt footer
        raise InputError(
            f"not a readable Parquet file ({type(e).__name__}: {e}).",
            file=str(path),
            fix="re-export the table as Parquet, or as CSV with a header row.",
        ) from e
    meta = schema.pandas_metadata or {}
    index = {c for c in meta.get("index_columns", []) if isinstance(c, str)}  # a pandas index, not a column
    return [n for n in schema.names if n not in index]
