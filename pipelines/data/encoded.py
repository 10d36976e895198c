"""`EncodedTable`: the prepared, encoded training matrix as every generator and the weight stage read it.

It is the contract between the prepare stage (which writes `train_encoded.parquet` and, beside it, `layout.json`
with the public row count) and every private fit: its length is the public n̂, and the private rows are read only
when a fit converts it to an array, after the ledger granted the fit's reservation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from pipelines.errors import InputError
from pipelines.io import MatrixFile, parquet_matrix, parquet_matrix_file, read_json, sha256_file


class EncodedTable:
    """The encoded training matrix, read from disk only when a generator converts it to an array.

    len() is the PUBLIC training row count n̂ (`rows_public` in the layout.json beside the file, written by
    prepare: the schema's documented count or a noisy count recorded in the ledger), not the number of rows
    in the file, which is private under add/remove-one. Generators plan, size q = B/n̂ and divide by n̂ while
    the array they read may have a different number of rows (`n_actual`, internal only). A generator can
    thus plan its spend and the ledger can refuse it before a single private value is read.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        layout = self.path.parent / "layout.json"
        summary = read_json(layout) if layout.exists() else {}
        if not isinstance(summary.get("rows_public"), int) or summary["rows_public"] < 1:
            raise InputError(
                "the prepared data has no public row count 'rows_public'.",
                file=str(layout),
                fix="re-run the prepare stage (`dvc repro -f prepare`), which writes it.",
            )
        self.n_rows = summary["rows_public"]
        self.n_rows_source = str(summary.get("rows_public_source", ""))
        footer = pq.read_metadata(self.path)
        self.n_actual = footer.num_rows  # private: never in a public artefact
        self.width = footer.num_columns  # the encoded layout's width (public)
        self.reads = 0
        self.client: Any = None  # a Dask client: `RowChunks.map` reads the row groups on its workers

    def __len__(self) -> int:
        """n̂, the public training row count (not the file's row count)."""
        return self.n_rows

    def content_hash(self) -> str:
        """sha256 of the file (keys the DP noise to this data; call only after the reservation)."""
        return sha256_file(self.path)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """Every row as one matrix (float32 unless `dtype`), filled a row group at a time (`io.parquet_matrix`)."""
        self.reads += 1
        out = np.dtype(dtype or np.float32)
        return parquet_matrix(self.path, self.width, lambda part: part.to_numpy(dtype=out), out)

    def to_file(self, out: Path) -> MatrixFile:
        """Every row (float32) written to the .npy file `out` a row group at a time, and read from there by row
        (`io.MatrixFile`): the rows without holding them."""
        self.reads += 1
        return parquet_matrix_file(self.path, self.width, lambda part: part.to_numpy(dtype=np.float32), out)

    def chunks(self, rows: int) -> Iterator[np.ndarray]:
        """The rows as float32 matrices of at most `rows` rows, read from the file's row groups one at a time (one
        read: a pass over the file)."""
        self.reads += 1
        for batch in pq.ParquetFile(self.path).iter_batches(batch_size=rows):
            yield batch.to_pandas().to_numpy(dtype=np.float32, copy=True)


def _mapped_group(path: Path, group: int, check: Callable[[np.ndarray], None], fn: Callable[[np.ndarray], Any]) -> Any:
    """`fn` of row group `group` of the encoded table at `path` (float32 rows), checked first (`RowChunks.map`, on
    a worker)."""
    rows = pq.ParquetFile(path).read_row_group(group).to_pandas().to_numpy(dtype=np.float32, copy=True)
    check(rows)
    return fn(rows)


class RowChunks:
    """Training rows a fit reads a chunk at a time, each chunk checked by `check` (the generator's input check) as
    it is read: an `EncodedTable` from its Parquet row groups (never the whole file), anything else as one matrix
    sliced into chunks. Each iteration is one pass over the rows; np.asarray gives them all at once; `map` is one
    pass that applies a function to each chunk, on the table's Dask cluster when it has one (`EncodedTable.client`:
    the train stage's with `orchestration.task_runner: dask`)."""

    def __init__(self, X: Any, check: Callable[[np.ndarray], None], rows: int) -> None:
        self.X, self.check, self.rows = X, check, int(rows)

    def map(self, fn: Callable[[np.ndarray], Any]) -> Iterator[Any]:
        """`fn` of each checked chunk, in row order. On a Dask cluster a chunk is a row group, read, checked and
        mapped by a worker (`fn` and `check` travel to it: module-level functions and public objects only, never a
        noise stream), at most a few row groups per worker at once (`out_of_core.in_order`); here, `rows` rows."""
        client = getattr(self.X, "client", None)
        if client is None:
            yield from (fn(chunk) for chunk in self)
            return
        from dask import delayed

        from pipelines.data.out_of_core import in_order

        self.X.reads += 1
        groups = pq.ParquetFile(self.X.path).num_row_groups
        yield from in_order(
            client, [delayed(_mapped_group, pure=False)(self.X.path, g, self.check, fn) for g in range(groups)]
        )

    def __iter__(self) -> Iterator[np.ndarray]:
        if isinstance(self.X, EncodedTable):
            chunks = self.X.chunks(self.rows)
        else:
            whole = np.asarray(self.X, dtype=np.float32)
            chunks = (whole[i : i + self.rows] for i in range(0, max(len(whole), 1), self.rows))
        for chunk in chunks:
            self.check(chunk)
            yield chunk

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.concatenate(list(self)).astype(dtype or np.float32, copy=False)
