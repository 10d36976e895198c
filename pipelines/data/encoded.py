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
import pandas as pd
import pyarrow.parquet as pq

from pipelines.errors import InputError
from pipelines.io import read_json, sha256_file


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
            raise InputError("the prepared data has no public row count 'rows_public'.", file=str(layout),
                             fix="re-run the prepare stage (`dvc repro -f prepare`), which writes it.")
        self.n_rows = summary["rows_public"]
        self.n_rows_source = str(summary.get("rows_public_source", ""))
        self.n_actual = pq.read_metadata(self.path).num_rows  # private: never in a public artefact
        self.reads = 0

    def __len__(self) -> int:
        """n̂, the public training row count (not the file's row count)."""
        return self.n_rows

    def content_hash(self) -> str:
        """sha256 of the file (keys the DP noise to this data; call only after the reservation)."""
        return sha256_file(self.path)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        self.reads += 1
        return pd.read_parquet(self.path).to_numpy(dtype=dtype or np.float32, copy=True)

    def chunks(self, rows: int) -> Iterator[np.ndarray]:
        """The rows as float32 matrices of at most `rows` rows, read from the file's row groups one at a time (one
        read: a pass over the file)."""
        self.reads += 1
        for batch in pq.ParquetFile(self.path).iter_batches(batch_size=rows):
            yield batch.to_pandas().to_numpy(dtype=np.float32, copy=True)


class RowChunks:
    """Training rows a fit reads a chunk at a time, each chunk checked by `check` (the generator's input check) as
    it is read: an `EncodedTable` from its Parquet row groups (never the whole file), anything else as one matrix
    sliced into chunks. Each iteration is one pass over the rows; np.asarray gives them all at once."""

    def __init__(self, X: Any, check: Callable[[np.ndarray], None], rows: int) -> None:
        self.X, self.check, self.rows = X, check, int(rows)

    def __iter__(self) -> Iterator[np.ndarray]:
        if isinstance(self.X, EncodedTable):
            chunks = self.X.chunks(self.rows)
        else:
            whole = np.asarray(self.X, dtype=np.float32)
            chunks = (whole[i:i + self.rows] for i in range(0, max(len(whole), 1), self.rows))
        for chunk in chunks:
            self.check(chunk)
            yield chunk

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.concatenate(list(self)).astype(dtype or np.float32, copy=False)
