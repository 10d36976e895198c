"""MST and AIM read the training table a row chunk at a time: the marginals they need are counted in one
pass per phase over the Parquet row groups (`measure.marginals`, `encoded.RowChunks`), never the whole matrix, with
the same counts, the same noise and so the same model as from the whole matrix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipelines.data.encoded import RowChunks
from pipelines.generators.base import Budget
from pipelines.generators.registry import make_generator
from pipelines.io import ROW_GROUP_ROWS
from pipelines.marginal.measure import marginal, marginals

from support.marginal import LAYOUT, toy_rows
from support.ledger import FakeSession
from support.marginal import encoded_table


def test_counts_over_chunks_are_the_counts_of_the_whole():
    codes = np.random.default_rng(0).integers(0, [3, 2, 5], size=(1000, 3))
    chunks = [codes[i : i + 128] for i in range(0, 1000, 128)]  # 8 chunks, the last of 104 rows
    counts = marginals(chunks, (3, 2, 5), [(0,), (0, 2), (1, 2), (0, 2)])  # a clique given twice: counted once
    assert sorted(counts) == [(0,), (0, 2), (1, 2)]
    for q, m in counts.items():
        np.testing.assert_array_equal(m, marginal(codes, (3, 2, 5), q))
    assert counts[(0, 2)].sum() == 1000 and counts[(0, 2)].shape == (3, 5)
    assert marginals([], (3, 2, 5), [(1,)])[(1,)].tolist() == [0.0, 0.0]  # no rows: zero counts


@pytest.mark.integration
def test_an_encoded_table_is_read_in_its_row_groups_and_each_chunk_is_checked(tmp_path: Path):
    rows = toy_rows(2 * ROW_GROUP_ROWS + 10)
    table = encoded_table(tmp_path, rows)
    chunks = list(table.chunks(ROW_GROUP_ROWS))
    assert [len(c) for c in chunks] == [ROW_GROUP_ROWS, ROW_GROUP_ROWS, 10] and table.reads == 1
    np.testing.assert_array_equal(np.concatenate(chunks), np.asarray(rows, dtype=np.float32))
    whole = np.asarray(table)  # the matrix, filled group by group
    assert whole.dtype == np.float32 and table.reads == 2
    np.testing.assert_array_equal(whole, np.asarray(rows, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(table, dtype=float), np.asarray(rows, dtype=np.float32).astype(float))
    seen = []
    assert (
        sum(len(c) for c in RowChunks(table, lambda c: seen.append(len(c)), ROW_GROUP_ROWS)) == len(rows)
        and len(seen) == 3
    )
    bad = rows.copy()
    bad[-1, 4] = 1.5  # column c, in the last chunk only
    (tmp_path / "bad").mkdir()
    gen = make_generator("mst", LAYOUT, {"n_bins": 4, "iters": 20, "noise_seed": 0}, "cpu")
    with pytest.raises(ValueError, match="column 'c' has encoded values outside"):
        gen.fit(encoded_table(tmp_path / "bad", bad), FakeSession(), Budget(1.0, 1e-5))


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, params",
    [("mst", {"n_bins": 4, "iters": 50}), ("aim", {"n_bins": 4, "iters": 30, "max_rounds": 3, "final_iters": 30})],
)
def test_mst_and_aim_fit_the_same_model_from_row_groups_as_from_the_whole_matrix(name, params, tmp_path: Path):
    rows = toy_rows(3000)
    samples = []
    for chunk_rows in (ROW_GROUP_ROWS, 256):  # one chunk; 12 chunks
        gen = make_generator(name, LAYOUT, {**params, "noise_seed": 4}, "cpu")
        gen.chunk_rows = chunk_rows
        gen.fit(encoded_table(tmp_path, rows), FakeSession(), Budget(1.0, 1e-5))
        samples.append(gen.sample(500, 2))
    np.testing.assert_array_equal(samples[0], samples[1])
