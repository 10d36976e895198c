"""Deterministic, atomic artefact writers: a failed stage leaves no partial output behind."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:  # pandas loads where a table is written: reading a configuration needs only hashes and JSON
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
    parts = [f"{p.relative_to(directory).as_posix()}:{sha256_file(p)}"
             for p in sorted(directory.rglob("*")) if p.is_file()]
    return sha256_text("\n".join(parts))


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling path; move it onto `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
    """Yield a temporary sibling directory; it replaces `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def write_json(path: Path, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


ROW_GROUP_ROWS = 65_536   # rows per Parquet row group: what a reader in row groups holds at once (a smaller table is
                          # one group, byte-identical to pyarrow's default)


def write_parquet(path: Path, df: pd.DataFrame) -> None:
    """Parquet without the index, in row groups of ROW_GROUP_ROWS; no timestamps are embedded, so equal frames give
    equal bytes."""
    with atomic_path(path) as tmp:
        df.reset_index(drop=True).to_parquet(tmp, engine="pyarrow", index=False, row_group_size=ROW_GROUP_ROWS)
