"""The marginal methods' toy table: LAYOUT (a categorical, a binary, a numeric column and a binary target), its
seeded dependent rows, and the same rows as the prepared encoded table that the train stage reads in chunks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.data.encoded import EncodedTable
from pipelines.data.layout import Block, Layout
from pipelines.io import write_parquet

LAYOUT = Layout(
    (
        Block("a", "categorical", 0, 3),
        Block("b", "binary", 3, 4),
        Block("c", "continuous", 4, 5),
        Block("y", "binary", 5, 6, is_target=True),
    )
)


def toy_rows(n: int, seed: int = 0) -> np.ndarray:
    """`n` seeded encoded rows of LAYOUT: b depends on a, c on a and b, the target y on b."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = (rng.random(n) < 0.3 + 0.2 * (a == 1)).astype(float)
    c = np.clip(0.2 * a + 0.3 * b + 0.1 * rng.random(n), 0, 1)
    y = (rng.random(n) < 0.2 + 0.5 * b).astype(float)
    X = np.zeros((n, 6), np.float32)
    X[np.arange(n), a] = 1
    X[:, 3], X[:, 4], X[:, 5] = b, c, y
    return X


def encoded_table(tmp_path: Path, rows: np.ndarray) -> EncodedTable:
    """`rows` written as the prepare stage writes them (train_encoded.parquet in its row groups, and layout.json
    with the public row count) under `tmp_path`, opened as the train stage opens them."""
    frame = pd.DataFrame(rows, columns=[f"x{i}" for i in range(rows.shape[1])])
    write_parquet(tmp_path / "train_encoded.parquet", frame)
    (tmp_path / "layout.json").write_text(json.dumps({"rows_public": len(rows), "rows_public_source": "test"}))
    return EncodedTable(tmp_path / "train_encoded.parquet")
