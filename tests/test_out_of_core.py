"""Validate and prepare in parts on a Dask cluster (pipelines/data/out_of_core.py): the same files, byte for
byte, the same report and the same errors as the one-process path, on tables read in several parts whose repeated
rows (the split's occurrence indices) fall in different parts."""

from __future__ import annotations

import json
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

import pipelines.io as io
from pipelines.config import Orchestration
from pipelines.data import out_of_core
from pipelines.data.readers import read_source
from pipelines.data.schema import Schema, load_schema
from pipelines.data.transform import Encoder, train_holdout_split
from pipelines.data.validation import validate_table
from pipelines.errors import InputError

TOY = {
    "name": "toy",
    "on_invalid": "drop",
    "columns": {
        "n": {"kind": "integer", "lower": 0, "upper": 10, "on_invalid": "clip"},
        "v": {"kind": "continuous", "lower": 0, "upper": 1},
        "c": {"kind": "categorical", "categories": ["a", "b", "?"]},
        "y": {"kind": "binary", "categories": [0, 1]},
    },
}
ROWS = 3000
KEY = b"out-of-core test split key, 32b."


def schema(tmp_path: Path, **column_changes: dict) -> Schema:
    doc = yaml.safe_load(yaml.safe_dump(TOY))
    for name, change in column_changes.items():
        doc["columns"][name].update(change)
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(doc))
    return load_schema(tmp_path / "toy.yaml")


def raw_table() -> pd.DataFrame:
    """3,000 rows drawn with replacement from 60 (every row repeats, across parts), as text: out-of-domain values of
    each kind (clipped, dropped), nulls, an unknown category and one with spaces."""
    rng = np.random.default_rng(0)
    base = pd.DataFrame(
        {
            "n": rng.integers(-2, 13, 60).astype(str),
            "v": np.round(rng.random(60) * 1.2, 1).astype(str),
            "c": rng.choice(["a", "b", "?", "zz", " b "], 60),
            "y": rng.choice(["0", "1", "2"], 60, p=[0.45, 0.45, 0.1]),
        }
    )
    base.loc[3, "v"], base.loc[7, "n"] = "", ""
    return base.sample(ROWS, replace=True, random_state=1).reset_index(drop=True)


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, memory_limit="1GiB"
    ) as c:
        yield c


def on(cluster, blocksize: str = "8kB") -> Orchestration:
    """The configuration of a run on `cluster` (its scheduler address), reading parts of `blocksize` bytes."""
    # parts of a few kB (below the configuration's 1MiB floor) split the small test tables into many parts
    return Orchestration.model_construct(
        task_runner="dask", dask_address=cluster.scheduler_address, dask_blocksize=blocksize
    )


def test_parquet_parts_write_the_bytes_of_one_write(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "ROW_GROUP_ROWS", 1000)
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(
        {
            "a": rng.integers(0, 5, 3500),
            "b": pd.Series(rng.choice(["x", "yy"], 3500), dtype="str"),
            "c": rng.random(3500),
        }
    )
    for rows, bounds in ((frame, (0, 300, 1700, 1700, 3100, 3500)), (frame.iloc[:0], (0, 0))):
        io.write_parquet(tmp_path / "whole.parquet", rows)
        parts = io.ParquetParts(tmp_path / "parts.parquet")
        for lo, hi in zip(bounds, bounds[1:]):
            parts.add(rows.iloc[lo:hi])
        parts.close(rows.iloc[:0])
        assert parts.rows == len(rows) and sha(tmp_path / "parts.parquet") == sha(tmp_path / "whole.parquet")
    parts = io.ParquetParts(tmp_path / "mixed.parquet")
    parts.add(frame.iloc[:10])
    with pytest.raises(ValueError, match="a part's columns or types differ"):
        parts.add(frame.iloc[10:20].astype({"a": float}))


def test_a_capped_read_is_the_row_sample_read_a_row_group_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "ROW_GROUP_ROWS", 1000)
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "a": np.arange(3500),
            "b": pd.Categorical(rng.choice(["x", "yy"], 3500)),
            "c": pd.Series(rng.choice(["p", "q", "r"], 3500), dtype="str"),
        }
    )
    io.write_parquet(tmp_path / "t.parquet", frame)
    assert pq.ParquetFile(tmp_path / "t.parquet").num_row_groups == 4
    assert io.row_sample(3500, None, 0) is None and io.row_sample(3500, 3500, 0) is None
    keep = io.row_sample(3500, 1200, [5, 1])
    assert len(set(keep)) == 1200 and np.all(np.diff(keep) > 0) and keep[-1] < 3500
    assert np.array_equal(keep, io.row_sample(3500, 1200, [5, 1]))  # seeded: the same rows again,
    assert not np.array_equal(keep, io.row_sample(3500, 1200, [5, 2]))  # another stream's differ
    assert {int(k) // 1000 for k in keep} == {0, 1, 2, 3}  # rows of every row group
    whole = pd.read_parquet(tmp_path / "t.parquet")
    monkeypatch.setattr(pd, "read_parquet", lambda *a, **k: pytest.fail("a capped read read the whole file"))
    capped = io.read_parquet_rows(tmp_path / "t.parquet", 1200, [5, 1])
    pd.testing.assert_frame_equal(capped, whole.iloc[keep].reset_index(drop=True))
    assert capped["a"].tolist() == keep.tolist()
    monkeypatch.undo()
    pd.testing.assert_frame_equal(io.read_parquet_rows(tmp_path / "t.parquet", 3500, 0), whole)  # at the cap: all


def test_a_table_is_taken_and_encoded_a_row_group_at_a_time(tmp_path, monkeypatch):
    from tasks.weight import encoded

    monkeypatch.setattr(io, "ROW_GROUP_ROWS", 1000)
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(
        {
            "n": rng.integers(0, 11, 3500),
            "v": rng.random(3500),
            "y": rng.integers(0, 2, 3500),
            "c": pd.Series(rng.choice(["a", "b", "?"], 3500), dtype="str"),
        }
    )[["n", "v", "c", "y"]]
    io.write_parquet(tmp_path / "t.parquet", frame)
    rows = np.array([0, 999, 1000, 2500, 3499])  # across four row groups
    taken = io.parquet_take(tmp_path / "t.parquet", rows)
    pd.testing.assert_frame_equal(taken, frame.iloc[rows].reset_index(drop=True))
    assert len(io.parquet_take(tmp_path / "t.parquet", rows[:0])) == 0
    encoder = Encoder(schema(tmp_path))
    matrix = encoded(tmp_path / "t.parquet", encoder, tmp_path / "t.npy")
    assert matrix.dtype == np.float32 and np.array_equal(np.asarray(matrix), encoder.encode(frame))
    assert np.array_equal(np.load(tmp_path / "t.npy"), encoder.encode(frame))  # a plain .npy file


def test_a_matrix_file_reads_like_the_array_it_holds(tmp_path):
    rng = np.random.default_rng(7)
    a = rng.normal(size=(2500, 6)).astype(np.float32)
    m = io.MatrixFile.write(tmp_path / "m.npy", [a[:700], a[700:2400], a[2400:]], 2500, 6)
    assert (m.shape, m.ndim, m.dtype, len(m[100:200]), m[2600:].shape) == ((2500, 6), 2, np.float32, 100, (0, 6))
    assert np.array_equal(np.asarray(m), a) and np.array_equal(np.asarray(m[100:2450]), a[100:2450])
    rows = np.array([0, 3, 1999, 2349])
    assert np.array_equal(m[100:].take(rows, axis=0), a[100:].take(rows, axis=0))
    assert np.array_equal(np.asarray(m, dtype=np.float64), a.astype(np.float64))
    blocks = list(io.row_blocks(m[1:], 1000))
    assert [len(b) for b in blocks] == [1000, 1000, 499] and np.array_equal(np.concatenate(blocks), a[1:])
    with pytest.raises(ValueError, match="2499 rows written, 2500 declared"):
        io.MatrixFile.write(tmp_path / "short.npy", [a[:-1]], 2500, 6)
    with pytest.raises(ValueError, match=r"a part of shape \(2500, 5\), expected \(k, 6\)"):
        io.MatrixFile.write(tmp_path / "narrow.npy", [a[:, :5]], 2500, 6)


@pytest.mark.integration
@pytest.mark.parametrize("estimator", ["priv_mlp", "output_norm"])
def test_the_weights_from_matrix_files_are_the_weights_from_arrays(tmp_path, monkeypatch, estimator):
    """The weight stage hands `estimate` its rows as MatrixFiles read from disk: the same lots and the same weights
    as from arrays; scored a block at a time, the same weights to float32 rounding."""
    from pipelines.data.layout import Block, Layout
    from pipelines.weights import estimators

    rng = np.random.default_rng(8)
    real, synthetic = rng.random((3000, 5)).astype(np.float32), rng.random((2800, 5)).astype(np.float32)
    files = [
        io.MatrixFile.write(tmp_path / f"{name}.npy", [rows], len(rows), 5)
        for name, rows in (("real", real), ("synthetic", synthetic))
    ]
    settings = {"noise_seed": 3, "max_steps": 40, "epsilon": 1.0}
    layout = Layout(tuple(Block(f"c{i}", "continuous", i, i + 1) for i in range(5)))
    plan = estimators.plan(estimator, settings, layout, 3000, 2800, 1.0, 1e-5)
    arrays, logit = estimators.estimate(plan, settings, real, synthetic)
    from_files, file_logit = estimators.estimate(plan, settings, *files)
    assert np.array_equal(from_files, arrays)
    if logit is not None:  # beta calibration scores the released rows through the logit
        from pipelines.weights import postprocess

        calibration = rng.random((300, 5)).astype(np.float32)
        assert np.array_equal(
            postprocess.calibrate(file_logit, calibration, files[1])[0],
            postprocess.calibrate(logit, calibration, synthetic)[0],
        )
    monkeypatch.setattr(io, "ROW_GROUP_ROWS", 1000)  # three blocks
    np.testing.assert_allclose(estimators.estimate(plan, settings, *files)[0], arrays, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["csv", "sorted csv", "parquet parts"])
def test_validate_in_parts_writes_the_one_process_file_and_report(tmp_path, cluster, form):
    """ "sorted csv": the rows sorted so that each kind of failure lies in other parts (the report lists the whole
    table's failures in the suite's order, whichever part found them)."""
    sch, raw = schema(tmp_path), raw_table()
    if form == "sorted csv":
        raw = raw.sort_values(["y", "c", "v"], kind="stable", ignore_index=True)
    if form != "parquet parts":
        source = tmp_path / "t.csv"
        raw.to_csv(source, index=False)
    else:
        source = tmp_path / "parts"
        source.mkdir()
        for i, lo in enumerate(range(0, ROWS, 1100)):  # three parts, read in name order
            raw.iloc[lo : lo + 1100].to_parquet(source / f"part-{i}.parquet", index=False)
    table = read_source(str(source), sch)
    clean, report = validate_table(table.frame, sch, table.label)
    io.write_parquet(tmp_path / "one.parquet", clean)
    parts, _, _ = out_of_core.read_parts(str(source), sch, "strict", "8kB")
    assert parts.npartitions >= 3
    got, label, ignored = out_of_core.validate(str(source), sch, "strict", on(cluster), tmp_path / "parts.parquet")
    assert (label, ignored) == (table.label, ())
    assert got == report and 0 < report["rows_out"] < ROWS and report["rows_clipped"] > 0
    assert sha(tmp_path / "parts.parquet") == sha(tmp_path / "one.parquet")


@pytest.mark.slow
def test_errors_in_parts_name_the_rows_of_the_whole_table(tmp_path, cluster):
    sch, raw = schema(tmp_path, v={"on_invalid": "fatal"}), raw_table()
    raw.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(InputError) as one:
        validate_table(read_source(str(tmp_path / "t.csv"), sch).frame, sch, str(tmp_path / "t.csv"))
    with pytest.raises(InputError) as parts:
        out_of_core.validate(str(tmp_path / "t.csv"), sch, "strict", on(cluster), tmp_path / "out.parquet")
    assert str(parts.value) == str(one.value) and "and on_invalid is fatal" in str(one.value)
    raw.loc[2499, "v"] = "not a number"  # data row 2,500 of the file, in its third 8 kB part
    raw.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(
        InputError,
        match=r"1 values of this continuous column are not numbers \(row 2500: "
        r"'not a number'.*\(counted in rows \d+-\d+, the first part",
    ) as e:
        out_of_core.validate(str(tmp_path / "t.csv"), schema(tmp_path), "strict", on(cluster), tmp_path / "out.parquet")
    assert e.value.column == "v"


@pytest.mark.integration
def test_split_in_parts_writes_the_one_process_files(tmp_path, cluster, monkeypatch):
    monkeypatch.setattr(io, "ROW_GROUP_ROWS", 500)  # the validated table in row groups of 500: its parts
    sch = schema(tmp_path)
    table = read_source(str(_csv(tmp_path)), sch)
    clean, _ = validate_table(table.frame, sch, table.label)
    io.write_parquet(tmp_path / "validated.parquet", clean)
    first_part = set(map(tuple, clean.iloc[:500].to_numpy().tolist()))
    assert any(tuple(r) in first_part for r in clean.iloc[1500:].to_numpy().tolist())  # copies in other parts
    train, holdout = train_holdout_split(pd.read_parquet(tmp_path / "validated.parquet"), 0.2, KEY, sch.names)
    (tmp_path / "one").mkdir()
    (tmp_path / "parts").mkdir()
    encoder = Encoder(sch)
    io.write_parquet(tmp_path / "one" / "train.parquet", train)
    io.write_parquet(tmp_path / "one" / "holdout.parquet", holdout)
    io.write_parquet(
        tmp_path / "one" / "train_encoded.parquet", pd.DataFrame(encoder.encode(train), columns=encoder.column_names())
    )
    rows = out_of_core.split(tmp_path / "validated.parquet", sch, KEY, 0.2, on(cluster), tmp_path / "parts")
    assert rows == (len(train), len(holdout)) and len(holdout) > 0
    for name in ("train", "holdout", "train_encoded"):
        assert sha(tmp_path / "parts" / f"{name}.parquet") == sha(tmp_path / "one" / f"{name}.parquet"), name


def _csv(tmp_path: Path) -> Path:
    raw_table().to_csv(tmp_path / "t.csv", index=False)
    return tmp_path / "t.csv"


@pytest.mark.slow
def test_validate_and_prepare_stages_on_dask_write_the_threads_files(tmp_path):
    """The stages with `orchestration.task_runner: dask` (a local cluster of two worker processes with a memory
    limit, started by the stage) write what they write in one process, and train@mst (its marginals counted on
    the cluster the stage starts) fits the same model with the same ledger events; a table that loses too many
    rows is stopped by prepare's DP row-loss test, which prepares nothing."""
    from pipelines.config import load_params
    from pipelines.generators.mst import MST
    from tasks.train import train
    from support.project import make_root, run_stages

    roots, fitted = {}, {}
    for runner in ("threads", "dask"):
        (tmp_path / runner).mkdir()
        roots[runner] = make_root(
            tmp_path / runner,
            {
                "generators": ["mst"],
                "weights": {"generators": []},
                "orchestration": {
                    "task_runner": runner,
                    "dask_workers": 2,
                    "dask_memory_limit": "1GiB",
                    "dask_blocksize": "1MiB",
                },
            },
        )
        run_stages(roots[runner], "budget")
        privacy = train(load_params(roots[runner] / "params.yaml"), "mst", root=roots[runner])
        model = MST.load(roots[runner] / "models" / "breast_cancer" / "mst")
        fitted[runner] = (privacy["events"], model.structure, model.sample(200, 0))
    files = [
        "data/raw/breast_cancer/validated.parquet",
        "reports/breast_cancer/validation.json",
        *(
            f"data/prepared/breast_cancer/{n}"
            for n in ("train.parquet", "holdout.parquet", "train_encoded.parquet", "layout.json")
        ),
    ]
    for name in files:
        assert sha(roots["dask"] / name) == sha(roots["threads"] / name), name
    assert fitted["dask"][:2] == fitted["threads"][:2]
    np.testing.assert_array_equal(fitted["dask"][2], fitted["threads"][2])
    root = make_root(
        tmp_path / "refused",
        {
            "orchestration": {"task_runner": "dask", "dask_workers": 1},
            "dataset": {"max_dropped_fraction": 0.0},
            "privacy": {"row_loss_epsilon": 1.0},
        },
    )  # margin 9.2 rows: a sure stop
    sch = yaml.safe_load((root / "schemas" / "breast_cancer.yaml").read_text())
    sch["columns"]["mean_radius"].update(upper=15.0, on_invalid="drop")
    (root / "schemas" / "breast_cancer.yaml").write_text(yaml.safe_dump(sch, sort_keys=False))
    run_stages(root, "validate")  # validate on Dask writes what it keeps; the counts are the steward's
    dropped = json.loads((root / "reports/breast_cancer/validation.json").read_text())["rows_dropped"]
    assert dropped > 100
    with pytest.raises(InputError, match=rf"DP row-loss test stopped the release: validation dropped {dropped}"):
        run_stages(root, "prepare")
    assert not (root / "data" / "prepared").exists()


def test_a_partitioned_table_is_its_parts_in_name_order_and_bad_directories_are_named(tmp_path):
    sch, raw = schema(tmp_path), raw_table()
    parts = tmp_path / "parts"
    parts.mkdir()
    for i, lo in enumerate(range(0, ROWS, 1000)):
        raw.iloc[lo : lo + 1000].to_parquet(parts / f"part-{i}.parquet", index=False)
    (parts / "_SUCCESS").write_text("")  # a writer's marker file is not a part
    pd.testing.assert_frame_equal(read_source(str(parts), sch).frame, read_source(str(_csv(tmp_path)), sch).frame)
    raw.iloc[:5].drop(columns="y").to_parquet(parts / "part-9.parquet", index=False)
    with pytest.raises(InputError, match=r"part-9\.parquet.*this part's columns \['n', 'v', 'c'\] differ"):
        read_source(str(parts), sch)
    (parts / "part-9.parquet").unlink()
    (parts / "year=2020").mkdir()
    with pytest.raises(InputError, match=r"parts.*subdirectories \(year=2020\).*Fix: write every part"):
        read_source(str(parts), sch)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"empty: the directory holds no \.parquet file"):
        read_source(str(tmp_path / "empty"), sch)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, params",
    [("mst", {"n_bins": 4, "iters": 50}), ("aim", {"n_bins": 4, "iters": 30, "max_rounds": 3, "final_iters": 30})],
)
def test_mst_and_aim_count_their_marginals_on_the_cluster_and_fit_the_same_model(
    name, params, tmp_path, cluster, monkeypatch
):
    """With a Dask client on the encoded table (the train stage's with `task_runner: dask`), each row group's counts
    are computed by a worker: the same counts, so the same noise draws give the same model and rows as in one
    process; a bad value in one row group is the one-process error."""
    from distributed import Client, get_task_stream

    from pipelines.data.encoded import EncodedTable
    from pipelines.generators.base import Budget
    from pipelines.generators.registry import make_generator
    from support.ledger import FakeSession
    from support.marginal import LAYOUT, encoded_table, toy_rows

    monkeypatch.setattr(io, "ROW_GROUP_ROWS", 1000)
    rows = toy_rows(3500)
    table = encoded_table(tmp_path, rows)
    assert pq.ParquetFile(table.path).num_row_groups == 4
    samples = []
    with Client(cluster) as client:
        for on_cluster in (None, client):
            gen = make_generator(name, LAYOUT, {**params, "noise_seed": 4}, "cpu")
            table = EncodedTable(table.path)
            table.client = on_cluster
            with get_task_stream(client) as stream:
                gen.fit(table, FakeSession(), Budget(1.0, 1e-5))
            assert table.reads == 2  # the 1-way counts, then the compressed domain's
            mapped = {str(t["key"]) for t in stream.data if str(t["key"]).startswith("_mapped_group")}
            assert len(mapped) == (8 if on_cluster else 0)  # two passes of 4 row groups, on the workers
            samples.append(gen.sample(500, 2))
        np.testing.assert_array_equal(samples[0], samples[1])
        bad = rows.copy()
        bad[2500, 4] = 1.5  # column c, in the third row group only
        (tmp_path / "bad").mkdir()
        table = encoded_table(tmp_path / "bad", bad)
        table.client = client
        with pytest.raises(ValueError, match="column 'c' has encoded values outside"):
            make_generator(name, LAYOUT, {**params, "noise_seed": 4}, "cpu").fit(
                table, FakeSession(), Budget(1.0, 1e-5)
            )
