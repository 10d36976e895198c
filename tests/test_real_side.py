"""The baseline stage (tasks/baseline.py): what evaluate@gen computes from real rows alone, cached once per
data set, gives exactly the metrics evaluate computes without it, and so does either stage with a part in a second
process (`runtime.beside`); a cache of other rows or settings is refused."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from pipelines import runtime
from pipelines.config import load_params, merged, parse_params, read_params
from pipelines.errors import InputError
from pipelines.io import row_sample, write_parquet
from pipelines.evaluation.verdict import independent_marginals
from support.project import PROJECT, make_root, run_stages
from support.evaluation import RowsModel

# small but every branch: row caps below the table sizes (the capped subsamples' seeded draws, the read cap's
# samples of the training and synthetic rows), n ≠ n̂
SMALL_EVAL = {
    "evaluate": {
        "n_samples": 300,
        "read_max_rows": 280,
        "max_rows": 200,
        "ot_max_rows": 150,
        "kway_subsets": 10,
        "mmd_max_rows": 200,
        "mmd_permutations": 20,
        "detection_max_rows": 200,
        "classifier_max_rows": 250,
        "utility_max_rows": 250,
        "range_queries": 200,
        "attacks": {"max_rows": 100, "n_attacks": 50, "bootstrap": 20},
    },
    "utility_gate": {"bootstrap": 20, "baseline_draws": 2},
}


def fake_table(synth: pd.DataFrame, n: int, out, keep) -> tuple[pd.DataFrame, dict]:
    """`evaluate.synthetic_table` for a given table: its first `n` rows written to `out`, the rows `keep` returned."""
    write_parquet(out, synth.iloc[:n])
    return (synth.iloc[:n] if keep is None else synth.iloc[keep]).reset_index(drop=True), {"success": True}


@pytest.mark.slow
def test_evaluate_metrics_are_identical_with_and_without_the_real_side_cache(tmp_path, monkeypatch):
    import tasks.evaluate as evaluate
    from tasks.baseline import baseline, inputs

    root = make_root(tmp_path, SMALL_EVAL)
    run_stages(root, "prepare")
    params = load_params(root / "params.yaml")
    train = pd.read_parquet(root / "data/prepared/breast_cancer/train.parquet")
    synth = independent_marginals(train, 300, 7)
    synth.iloc[:30] = train.iloc[:30].to_numpy()  # some copies, so the attacks have something to find
    monkeypatch.setattr(
        evaluate, "synthetic_table", lambda params, gen, root, n, out, keep: fake_table(synth, n, out, keep)
    )
    out = tmp_path / "synthetic.parquet"

    cache = root / "data/baseline/breast_cancer/real_side.json"
    pngs_without, without = evaluate.measure(params, "dpwgan", root, out)
    assert not cache.exists()
    baseline(params, root)
    stored = json.loads(cache.read_text())
    assert {"utility", "paper", "scorecard", "attacks"} <= set(stored) and "steward-internal" in stored["internal"]
    pngs_with, with_cache = evaluate.measure(params, "dpwgan", root, out)
    assert json.dumps(with_cache, sort_keys=True, default=str) == json.dumps(without, sort_keys=True, default=str)
    assert with_cache["utility"]["n_synth"] == with_cache["utility"]["n_train_real"] == 250  # the utility's row cap
    assert (with_cache["n_synthetic"], with_cache["n_measured"]) == (300, 280)  # every row published, 280 read
    read = inputs(params, root)
    assert (len(read.train), len(read.holdout)) == (
        280,
        len(pd.read_parquet(root / "data/prepared/breast_cancer/holdout.parquet")),
    )
    assert read.train.equals(train.iloc[row_sample(len(train), 280, [0, 0])].reset_index(drop=True))
    assert pngs_with == pngs_without

    monkeypatch.setattr(runtime, "BESIDE_MIN_ROWS", 0)  # a large table on 2 cores: the attacks, and the
    monkeypatch.setattr(runtime, "available_cores", lambda: 2)  # baseline's utility, in a second process
    monkeypatch.setattr(runtime, "_concurrent", 1)
    pngs_beside, beside_metrics = evaluate.measure(params, "dpwgan", root, out)
    assert json.dumps(beside_metrics, sort_keys=True, default=str) == json.dumps(without, sort_keys=True, default=str)
    assert pngs_beside == pngs_without
    baseline(params, root)
    assert json.loads(cache.read_text()) == stored

    other = parse_params(merged(read_params(root / "params.yaml"), {"evaluate": {"seed": 1}}))  # the cache: seed 0
    with pytest.raises(InputError, match=r"real_side\.json.*other rows or settings.*Fix:.*synthrelease stage baseline"):
        evaluate.measure(other, "dpwgan", root, out)


def test_evaluate_depends_on_the_baseline_stage_and_the_flow_runs_it():
    stages = yaml.safe_load((PROJECT / "dvc.yaml").read_text())["stages"]
    out = stages["baseline"]["outs"][0]
    assert out in stages["evaluate"]["do"]["deps"] and out.startswith("data/")  # never under releases/
    assert stages["baseline"]["params"] == stages["evaluate"]["do"]["params"]  # what the cache's hash covers
    flow = (PROJECT / "flows/release.py").read_text()
    assert "wait_for=[trained[gen], real_side]" in flow


@pytest.mark.slow
def test_the_synthetic_table_is_sampled_and_written_in_parts_and_the_measured_rows_kept(tmp_path, monkeypatch):
    import tasks.evaluate as evaluate
    from pipelines.data.transform import Encoder
    from tasks import common

    root = make_root(tmp_path, {})
    run_stages(root, "prepare")
    params = load_params(root / "params.yaml")
    encoder = Encoder(common.schema(params, root))
    model = RowsModel(pd.read_parquet(root / "data/prepared/breast_cancer/train.parquet"), encoder)
    monkeypatch.setattr(evaluate, "load_generator", lambda name, path: model)
    one = evaluate.synthetic_table(params, "aim", root, 250, tmp_path / "one.parquet", None)[0]
    whole = encoder.decode(model.sample(250, params.evaluate.seed))  # one part: `sample(n, seed)`, as before
    pd.testing.assert_frame_equal(one, whole)
    write_parquet(tmp_path / "whole.parquet", whole)
    assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()

    monkeypatch.setattr(evaluate, "SAMPLE_PART_ROWS", 100)  # three parts, one generator's stream
    keep = row_sample(250, 40, [0, 2])
    kept, conformance = evaluate.synthetic_table(params, "aim", root, 250, tmp_path / "parts.parquet", keep)
    rng = np.random.default_rng(params.evaluate.seed)
    drawn = pd.concat([encoder.decode(model.sample(m, rng)) for m in (100, 100, 50)], ignore_index=True)
    written = pd.read_parquet(tmp_path / "parts.parquet")
    pd.testing.assert_frame_equal(written, drawn)
    pd.testing.assert_frame_equal(kept, drawn.iloc[keep].reset_index(drop=True))
    assert conformance["success"] and len(kept) == 40 and {int(k) // 100 for k in keep} == {0, 1, 2}
    write_parquet(tmp_path / "drawn.parquet", drawn)
    assert (tmp_path / "parts.parquet").read_bytes() == (tmp_path / "drawn.parquet").read_bytes()
