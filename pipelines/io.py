"""Deterministic, atomic artefact writers (a failed stage leaves no partial output behind), and the readers of a
table too large to read whole (`read_parquet_rows`, `MatrixFile`)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

if TYPE_CHECKING:  # pandas loads where a table is written: reading a configuration needs only hashes and JSON
    import numpy as np
    import pandas as pd


def canonical_json(obj: Any) -> str:
    """Deterministic JSON for hashing: sorted keys, no whitespace, ASCII only (floats via repr)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_tree(directory: Path) -> str:
    """Content hash of a directory (relative paths + file hashes, sorted)."""
    directory = Path(directory)
    parts = [
        f"{p.relative_to(directory).as_posix()}:{sha256_file(p)}" for p in sorted(directory.rglob("*")) if p.is_file()
    ]
    return sha256_text("\n".join(parts))


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling path; move it onto `path` only if the block succeeds (directories created for
    it are removed again when the block fails)."""
    path = Path(path)
    with _new_parents(path):
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            yield Path(tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


@contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling directory; it replaces `path` only if the block succeeds (directories created
    for it are removed again when the block fails)."""
    path = Path(path)
    with _new_parents(path):
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        try:
            yield tmp
            if path.exists():
                shutil.rmtree(path)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)


@contextmanager
def _new_parents(path: Path) -> Iterator[None]:
    """`path`'s parent directories made; those this made are removed again, while empty, when the block fails: a
    failed stage leaves no directory behind either."""
    missing = [d for d in path.parents if not d.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        for d in missing:  # deepest first
            try:
                d.rmdir()  # only while empty: another writer's files stay
            except OSError:
                break
        raise


def write_json(path: Path, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


ROW_GROUP_ROWS = 65_536  # rows per Parquet row group: what a reader in row groups holds at once (a smaller table is
# one group, byte-identical to pyarrow's default)


def write_parquet(path: Path, df: pd.DataFrame) -> None:
    """Parquet without the index, in row groups of ROW_GROUP_ROWS; no timestamps are embedded, so equal frames give
    equal bytes."""
    with atomic_path(path) as tmp:
        df.reset_index(drop=True).to_parquet(tmp, engine="pyarrow", index=False, row_group_size=ROW_GROUP_ROWS)


def row_sample(n: int, max_rows: int | None, seed: int | Sequence[int]) -> np.ndarray | None:
    """The rows a reader capped at `max_rows` keeps of a table of `n` rows: None (every row) when `n` ≤ `max_rows` or
    the cap is None, else `max_rows` distinct row indices drawn uniformly without replacement by a generator seeded
    by `seed`, in ascending (table) order. The same `n`, cap and seed give the same rows."""
    import numpy as np

    if max_rows is None or n <= max_rows:
        return None
    return np.sort(np.random.default_rng(seed).choice(n, size=max_rows, replace=False))


def parquet_rows(path: Path) -> int:
    """The row count of the Parquet file at `path`, from its footer (no row read)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def parquet_row_groups(path: Path) -> Iterator[pd.DataFrame]:
    """The Parquet table at `path` as frames of one row group each, in order: a pass over every row that holds one
    row group at a time."""
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    for group in range(file.num_row_groups):
        yield file.read_row_group(group).to_pandas()


def parquet_matrix(
    path: Path, width: int, rows_of: Callable[[pd.DataFrame], np.ndarray], dtype: Any = None
) -> np.ndarray:
    """One (rows, `width`) matrix (float32 unless `dtype`) of the Parquet table at `path`, `rows_of` each row group
    (a row-wise conversion), filled a row group at a time: no frame of the whole table beside it."""
    import numpy as np

    out = np.empty((parquet_rows(path), width), dtype=dtype or np.float32)
    start = 0
    for part in parquet_row_groups(path):
        out[start : start + len(part)] = rows_of(part)
        start += len(part)
    return out


def parquet_matrix_file(path: Path, width: int, rows_of: Callable[[pd.DataFrame], np.ndarray], out: Path) -> MatrixFile:
    """`parquet_matrix` (float32) written to the .npy file `out` a row group at a time, and read from there by row
    (`MatrixFile`): the matrix without holding it."""
    return MatrixFile.write(out, map(rows_of, parquet_row_groups(path)), parquet_rows(path), width)


class MatrixFile:
    """A (rows, width) matrix kept on disk, an .npy file, that reads like an ndarray without being held: `len`,
    `shape`, `ndim`, `dtype`, `m[lo:hi]` (a row range, itself a MatrixFile: no read), `m.take(rows, axis=0)` and
    `np.asarray(m)` (the rows read, as an ndarray). Each read maps or reads the file, copies the rows asked for and
    lets go of the file, so a process holds only those rows: a memory map kept open would count every page it ever
    touched in the process's resident memory. `write` makes one from parts, a part at a time."""

    ndim = 2

    def __init__(self, path: Path, start: int = 0, stop: int | None = None) -> None:
        import numpy as np

        self.path = Path(path)
        with open(self.path, "rb") as f:
            major, _ = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            (self._rows, self.width), fortran, self.dtype = read(f)
            self._offset = f.tell()
        if fortran:
            raise ValueError(f"{self.path.name}: a Fortran-ordered matrix; MatrixFile reads rows of C order")
        self.start, self.stop = start, self._rows if stop is None else stop

    @classmethod
    def write(cls, path: Path, parts: Iterable[np.ndarray], rows: int, width: int, dtype: Any = None) -> MatrixFile:
        """The .npy file at `path` of `rows` rows, from `parts` (arrays of `width` columns, in row order, converted
        to `dtype`, float32 unless given), written a part at a time."""
        import numpy as np

        out = np.dtype(dtype or np.float32)
        written = 0
        with open(path, "wb") as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": np.lib.format.dtype_to_descr(out), "fortran_order": False, "shape": (rows, width)}
            )
            for part in parts:
                block = np.ascontiguousarray(part, dtype=out)
                if block.ndim != 2 or block.shape[1] != width:
                    raise ValueError(f"{Path(path).name}: a part of shape {block.shape}, expected (k, {width})")
                block.tofile(f)
                written += len(block)
        if written != rows:
            raise ValueError(f"{Path(path).name}: {written} rows written, {rows} declared")
        return cls(path)

    def __len__(self) -> int:
        return self.stop - self.start

    @property
    def shape(self) -> tuple[int, int]:
        return len(self), self.width

    def __getitem__(self, rows: slice) -> MatrixFile:
        lo, hi, step = rows.indices(len(self))
        if step != 1:
            raise ValueError("a MatrixFile reads row ranges of step 1")
        return MatrixFile(self.path, self.start + lo, self.start + max(hi, lo))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        import numpy as np

        rows = np.fromfile(
            self.path,
            dtype=self.dtype,
            count=len(self) * self.width,
            offset=self._offset + self.start * self.width * self.dtype.itemsize,
        )
        return rows.reshape(len(self), self.width).astype(dtype or self.dtype, copy=False)

    def take(self, indices: np.ndarray, axis: int = 0) -> np.ndarray:
        """Rows `indices` (of this range) as an ndarray, read through a memory map that is closed again."""
        import numpy as np

        if axis != 0:
            raise ValueError("a MatrixFile takes rows (axis 0)")
        indices = np.asarray(indices, dtype=np.int64)
        if not len(indices):  # nothing to map (a file of no rows cannot be mapped)
            return np.empty((0, self.width), dtype=self.dtype)
        mapped = np.memmap(self.path, dtype=self.dtype, mode="r", offset=self._offset, shape=(self._rows, self.width))
        rows = np.array(mapped[self.start + indices])
        del mapped  # the last reference: the map closes, and the pages it touched leave this process
        return rows


def row_blocks(rows: np.ndarray | MatrixFile, size: int | None = None) -> Iterator[np.ndarray]:
    """The rows of an ndarray or a `MatrixFile` as ndarrays of at most `size` (ROW_GROUP_ROWS) rows, in order: a
    pass that holds one block (a MatrixFile reads each from disk)."""
    import numpy as np

    size = size or ROW_GROUP_ROWS
    for lo in range(0, len(rows), size):
        yield np.asarray(rows[lo : lo + size])


def blockwise(score: Callable[[np.ndarray], np.ndarray], rows: np.ndarray | MatrixFile) -> np.ndarray:
    """`score` (one value per row) of every row, applied to one `row_blocks` block at a time and concatenated (float64):
    the memory of one block and its scores, whatever the rows."""
    import numpy as np

    return np.concatenate([np.zeros(0), *(np.asarray(score(block), dtype=float) for block in row_blocks(rows))])


def read_parquet_rows(path: Path, max_rows: int | None, seed: int | Sequence[int]) -> pd.DataFrame:
    """The Parquet table at `path`, or above `max_rows` rows its `row_sample` (`parquet_take`: a 0..k−1 index, read a
    row group at a time). Below the cap it is `pd.read_parquet(path)`."""
    import pandas as pd

    keep = row_sample(parquet_rows(path), max_rows, seed)
    return pd.read_parquet(path) if keep is None else parquet_take(path, keep)


def parquet_take(path: Path, rows: np.ndarray) -> pd.DataFrame:
    """Rows `rows` (ascending indices) of the Parquet table at `path`, indexed 0..k−1, read a row group at a time:
    the process holds the rows taken and one row group, however long the table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    parts, start = [file.schema_arrow.empty_table()], 0
    for group in range(file.num_row_groups):
        n = file.metadata.row_group(group).num_rows
        lo, hi = rows.searchsorted([start, start + n])
        if hi > lo:
            parts.append(file.read_row_group(group).take(rows[lo:hi] - start))
        start += n
    return pa.concat_tables(parts).to_pandas().reset_index(drop=True)


class ParquetColumns:
    """A Parquet table read a column at a time: `t[name]` reads that column when asked (a string column as a
    categorical Series: its codes and one copy of each value), `len(t)` and `t.columns` read the footer. What a
    function needs that looks at one column at a time (the release's summaries of its synthetic table), holding one
    column, not the table."""

    def __init__(self, path: Path) -> None:
        import pyarrow.parquet as pq

        self.path = Path(path)
        self._schema = pq.ParquetFile(self.path).schema_arrow
        self.columns = list(self._schema.names)

    def __len__(self) -> int:
        return parquet_rows(self.path)

    def __getitem__(self, name: str) -> pd.Series:
        import pyarrow as pa
        import pyarrow.parquet as pq

        kind = self._schema.field(name).type
        strings = pa.types.is_string(kind) or pa.types.is_large_string(kind)
        table = pq.read_table(self.path, columns=[name], read_dictionary=[name] if strings else None)
        return table.column(name).to_pandas().rename(name)


class ParquetParts:
    """One Parquet file written from frames that arrive in row order (a table too large for one process, part by
    part): the same bytes as `write_parquet` of their concatenation, holding at most ROW_GROUP_ROWS rows besides
    the part being added. Row groups of exactly ROW_GROUP_ROWS are flushed as they fill, the rest at `close`.
    Write it inside `atomic_path` (or `atomic_dir`): an unfinished file is never left at its name."""

    def __init__(self, path: Path) -> None:
        self.path, self.rows = Path(path), 0
        self._writer: Any = None
        self._pending: list[Any] = []  # pyarrow tables not yet written, fewer than ROW_GROUP_ROWS rows in all

    def add(self, df: pd.DataFrame) -> None:
        import pyarrow as pa

        table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
        if self._writer is None:
            import pyarrow.parquet as pq

            self._writer = pq.ParquetWriter(self.path, table.schema)
        elif not table.schema.equals(self._writer.schema, check_metadata=True):
            raise ValueError(
                f"{self.path.name}: a part's columns or types differ from the first part's "
                f"({table.schema} against {self._writer.schema})"
            )
        self.rows += table.num_rows
        self._pending.append(table)
        pending = pa.concat_tables(self._pending)
        full = pending.num_rows // ROW_GROUP_ROWS * ROW_GROUP_ROWS
        if full:
            self._writer.write_table(pending.slice(0, full), row_group_size=ROW_GROUP_ROWS)
        self._pending = [pending.slice(full)] if pending.num_rows > full else []

    def close(self, empty: pd.DataFrame) -> None:
        """Write the last row group; `empty`: the frame (no rows, the parts' columns) written when no part came."""
        import pyarrow as pa

        if self._writer is None:
            self.add(empty)
        if self._pending or not self.rows:  # pandas writes one empty row group for a table of no rows
            last = self._pending or [pa.Table.from_pandas(empty.reset_index(drop=True), preserve_index=False)]
            self._writer.write_table(pa.concat_tables(last), row_group_size=ROW_GROUP_ROWS)
            self._pending = []
        self._writer.close()
