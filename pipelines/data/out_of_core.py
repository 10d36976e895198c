"""Validate and split a table larger than one process's memory, part by part on a Dask cluster.

With `orchestration.task_runner: dask` the validate and prepare stages read their table as a Dask dataframe: the
source in parts of about `orchestration.dask_blocksize` bytes (a CSV file, a Parquet file's row groups or a
directory of Parquet parts), the validated table in its row groups. A worker validates a part (`validate_part`),
or splits and encodes it; the stage's own process receives the parts in row order, at most a few ahead, and
writes them to the stage's usual files (`io.ParquetParts`). No process holds more than a few parts, and the files
are byte for byte those of the one-process path, so nothing downstream (the split, the noise keys, DVC's hashes)
depends on the runner.

The cluster (`client`): the Dask cluster the stage already runs on (a Prefect task on a Dask worker), else the
scheduler at `orchestration.dask_address`, else a local cluster of `dask_workers` single-threaded worker processes
with `dask_memory_limit` each, started for the stage.

The keyed split (`transform.train_holdout_split`) hashes each row with its occurrence index k among identical
rows, in table order, which is not a property of a part alone. `split` finds k with two shuffles: each row's
HMAC under the split key (128 bits: equal rows, equal keys) and position go to the part their key hashes to,
where k is counted in position order; the (position, k) pairs of repeated rows then return to their part by
position (`set_index` on the known part boundaries) and stay on the cluster (16 bytes per repeated row, which
Dask spills to disk past a worker's memory limit). Each part is then split as the one-process path splits the
whole table, so the sides are the same.

Memory: a worker holds the parts it works on (a few `dask_blocksize` parts as pandas frames, several times their
bytes on disk for text columns) and its share of the shuffles; the stage's process, the parts in flight and at
most a row group (`io.ROW_GROUP_ROWS`) per file it writes. Neither grows with the table (docs/performance.md,
"Validate and prepare out of core").
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines.config import Orchestration
from pipelines.data.header import CSV_SUFFIXES, ColumnMode, parquet_parts, read_header
from pipelines.data.readers import check_columns, conform_part, read_bundled
from pipelines.data.schema import Schema
from pipelines.data.transform import Encoder, keyed_uniforms, occurrence, row_bytes
from pipelines.data.validation import finish, merge_parts, validate_part
from pipelines.errors import InputError
from pipelines.io import ParquetParts

AHEAD = 2  # parts computed ahead of the one being written, per worker


@contextmanager
def client(orchestration: Orchestration) -> Iterator[Any]:
    """A Dask client (module docstring), closed (and a cluster it started, stopped) on exit."""
    import dask
    from distributed import Client, LocalCluster, get_worker, worker_client

    shuffles = logging.getLogger("distributed.shuffle._scheduler_plugin")  # a local scheduler: each shuffle
    with dask.config.set({"dataframe.convert-string": False}), _level(shuffles, logging.ERROR):
        try:
            get_worker()
        except ValueError:
            pass
        else:
            with worker_client() as c:
                yield c
            return
        if orchestration.dask_address:
            with Client(orchestration.dask_address) as c:
                yield c
            return
        with (
            LocalCluster(
                n_workers=orchestration.dask_workers,
                threads_per_worker=1,
                processes=True,
                memory_limit=orchestration.dask_memory_limit,
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as c,
        ):
            yield c


@contextmanager
def _level(logger: logging.Logger, level: int) -> Iterator[None]:
    """`logger` at `level` inside the block."""
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def in_order(c: Any, tasks: list[Any]) -> Iterator[Any]:
    """The results of the Dask `tasks` (delayed) in order, computing at most AHEAD per worker beyond the one
    yielded."""
    window = AHEAD * max(len(c.scheduler_info().get("workers", {})), 1)
    pending = iter(tasks)
    futures = deque(c.compute(t) for t in islice(pending, window))
    while futures:
        future = futures.popleft()
        result = future.result()
        future.release()
        futures.extend(c.compute(t) for t in islice(pending, 1))
        yield result


def _part_rows(c: Any, frame: Any) -> tuple[list[int], list[int]]:
    """Each part's row count and the position of its first row in the table (one pass over the parts)."""
    lengths = [int(n) for n in c.compute(frame.map_partitions(len)).result()]
    return lengths, np.cumsum([0, *lengths[:-1]]).tolist()


# -- validate ---------------------------------------------------------------------------------------------------
def read_parts(source: str, schema: Schema, columns: ColumnMode, blocksize: str) -> tuple[Any, str, tuple[str, ...]]:
    """(Dask dataframe of the source's schema columns as `readers.read_source` reads them, unconverted; the label;
    the ignored columns). A .csv.gz file cannot be split and is one part: give a large table as CSV or Parquet."""
    import dask.dataframe as dd

    names = [c.name for c in schema.read]
    if source.startswith("bundled:"):
        raw, label, ignored = read_bundled(source, schema, columns)
        return dd.from_pandas(raw, npartitions=1, sort=False), label, tuple(ignored)
    path = Path(source)
    ignored = check_columns(read_header(path), schema, source, columns)
    if path.is_dir() or path.name.lower().endswith(".parquet"):
        files = [str(p) for p in parquet_parts(path)] if path.is_dir() else [str(path)]
        frame = dd.read_parquet(files, columns=names, blocksize=blocksize, split_row_groups="infer")
    else:
        gz = path.name.lower().endswith(CSV_SUFFIXES[1])
        frame = dd.read_csv(
            str(path),
            dtype=str,
            keep_default_na=False,
            na_values=[""],
            usecols=names,
            blocksize=None if gz else blocksize,
        )
    return frame, source, tuple(ignored)


def _validated_part(raw: pd.DataFrame, first: int, schema: Schema, label: str) -> tuple[pd.DataFrame, dict]:
    """`validate_part` of the rows first, first+1, ... of the table (0-based positions, kept in messages)."""
    raw = raw.reset_index(drop=True)
    raw.index = pd.RangeIndex(first, first + len(raw))
    try:
        frame = conform_part(raw, schema, label)
    except InputError as e:
        raise InputError(
            f"{e.problem} (counted in rows {first + 1}-{first + len(raw)}, the first part of the "
            "table with such values)",
            file=e.file,
            column=e.column,
            fix=e.fix,
        ) from None
    return validate_part(frame, schema)


def validate(
    source: str, schema: Schema, columns: ColumnMode, orchestration: Orchestration, out: Path
) -> tuple[dict[str, Any], str, tuple[str, ...]]:
    """Validate the table at `source` in parts and write its clean rows to `out` (one Parquet file, the bytes
    `io.write_parquet` writes for `validation.validate_table`'s frame); returns (the report `validate_table`
    returns, the label, the ignored columns). Raises what `read_source` and `validate_table` raise, after the
    parts are read; write `out` inside `io.atomic_path`."""
    from dask import delayed

    frame, label, ignored = read_parts(source, schema, columns, orchestration.dask_blocksize)
    with client(orchestration) as c:
        lengths, firsts = _part_rows(c, frame)
        if not sum(lengths):
            raise InputError(
                "the table is empty (no data rows).",
                file=label,
                fix="point the source at a table with a header row and at least one row.",
            )
        tasks = [
            delayed(_validated_part)(part, first, schema, label) for part, first in zip(frame.to_delayed(), firsts)
        ]
        writer, parts = ParquetParts(out), []
        for clean, counts in in_order(c, tasks):
            writer.add(clean)
            parts.append(counts)
        writer.close(clean.iloc[:0])
    return finish(merge_parts(parts, schema), schema, label), label, ignored


# -- prepare: the keyed split ----------------------------------------------------------------------------------
def _keys(part: pd.DataFrame, first: int, columns: list[str], key: bytes) -> pd.DataFrame:
    """Each row's position and HMAC-SHA256(key, row bytes) as two 64-bit halves of its first 128 bits."""
    digests = [hmac.new(key, b, hashlib.sha256).digest() for b in row_bytes(part, columns)]
    return pd.DataFrame(
        {
            "hi": np.array([int.from_bytes(d[:8], "big") for d in digests], dtype=np.uint64),
            "lo": np.array([int.from_bytes(d[8:16], "big") for d in digests], dtype=np.uint64),
            "pos": np.arange(first, first + len(part), dtype=np.int64),
        }
    )


def _repeats(keys: pd.DataFrame) -> pd.DataFrame:
    """(pos, k) of the rows with k ≥ 1 among the rows of one key (every row of a key is in this part)."""
    keys = keys.sort_values("pos", kind="stable")
    k = keys.groupby(["hi", "lo"], sort=False).cumcount().to_numpy(dtype=np.int64)
    return pd.DataFrame({"pos": keys["pos"].to_numpy()[k > 0], "k": k[k > 0]})


def _split_part(
    part: pd.DataFrame,
    repeats: pd.DataFrame,
    first: int,
    columns: list[str],
    key: bytes,
    holdout_fraction: float,
    schema: Schema,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(train rows, holdout rows, encoded train rows) of one part, its rows' occurrence indices from `repeats`."""
    k = np.zeros(len(part), dtype=np.int64)
    if len(repeats):
        k[repeats.index.to_numpy(dtype=np.int64) - first] = repeats["k"].to_numpy()
    holdout = (
        keyed_uniforms(key, [occurrence(b, int(i)) for b, i in zip(row_bytes(part, columns), k)]) < holdout_fraction
    )
    part = part.reset_index(drop=True).astype({c.name: c.dtype for c in schema.columns})  # Dask reads str as string
    train = part[~holdout].reset_index(drop=True)
    encoder = Encoder(schema)
    return (
        train,
        part[holdout].reset_index(drop=True),
        pd.DataFrame(encoder.encode(train), columns=encoder.column_names()),
    )


def split(
    validated: Path, schema: Schema, key: bytes, holdout_fraction: float, orchestration: Orchestration, out: Path
) -> tuple[int, int]:
    """`transform.train_holdout_split` of the validated table in parts (module docstring), written to
    out/train.parquet, holdout.parquet and train_encoded.parquet as the one-process prepare writes them; returns
    (training rows, holdout rows). ValueError as `train_holdout_split`'s for an empty side."""
    import dask.dataframe as dd
    from dask import delayed

    columns = schema.names
    frame = dd.read_parquet(str(validated), split_row_groups=True)
    with client(orchestration) as c:
        lengths, firsts = _part_rows(c, frame)
        meta = pd.DataFrame({"hi": np.zeros(0, np.uint64), "lo": np.zeros(0, np.uint64), "pos": np.zeros(0, np.int64)})
        keys = dd.from_delayed(
            [delayed(_keys)(part, first, columns, key) for part, first in zip(frame.to_delayed(), firsts)],
            meta=meta,
            verify_meta=False,
        )
        repeats = keys.shuffle(["hi", "lo"], npartitions=len(lengths)).map_partitions(
            _repeats, meta=pd.DataFrame({"pos": np.zeros(0, np.int64), "k": np.zeros(0, np.int64)})
        )
        bounds = [*firsts, max(sum(lengths) - 1, 0)]
        # held on the cluster (16 bytes per repeated row, spilled to disk past the memory limit): each part's
        # task below reads its share, instead of each computing the shuffles again
        by_part = c.persist(repeats.set_index("pos", divisions=bounds, sorted=False)).to_delayed()
        tasks = [
            delayed(_split_part)(part, rep, first, columns, key, holdout_fraction, schema)
            for part, rep, first in zip(frame.to_delayed(), by_part, firsts)
        ]
        writers = {name: ParquetParts(out / f"{name}.parquet") for name in ("train", "holdout", "train_encoded")}
        for parts in in_order(c, tasks):
            for writer, part in zip(writers.values(), parts):
                writer.add(part)
    rows = writers["train"].rows, writers["holdout"].rows
    for writer, part in zip(writers.values(), parts):
        writer.close(part.iloc[:0])
    return rows
