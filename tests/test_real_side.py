"""The baseline stage (tasks/baseline.py, issue 20): what evaluate@gen computes from real rows alone, cached once per
data set, gives exactly the metrics evaluate computes without it, and so does either stage with a part in a second
process (`runtime.beside`, issue 32); a cache of other rows or settings is refused."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from pipelines import runtime
from pipelines.config import load_params, merged, parse_params, read_params
from pipelines.errors import InputError
from pipelines.io import row_sample
from pipelines.evaluation.verdict import independent_marginals
from test_pipeline import PROJECT, make_root, run_stages

# small but every branch: row caps below the table sizes (the capped subsamples' seeded draws, the read cap's
# samples of the training and synthetic rows), n ≠ n̂
SMALL_EVAL = {"evaluate": {"n_samples": 300, "read_max_rows": 280, "max_rows": 200, "ot_max_rows": 150,
                           "kway_subsets": 10, "mmd_max_rows": 200, "mmd_permutations": 20, "detection_max_rows": 200,
                           "classifier_max_rows": 250, "utility_max_rows": 250, "range_queries": 200,
                           "attacks": {"max_rows": 100, "n_attacks": 50, "bootstrap": 20}},
              "utility_gate": {"bootstrap": 20, "baseline_draws": 2}}


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
    monkeypatch.setattr(evaluate, "synthetic_table", lambda params, gen, root, n: (synth.iloc[:n], {"success": True}))

    cache = root / "data/baseline/breast_cancer/real_side.json"
    _, pngs_without, without = evaluate.measure(params, "dpwgan", root)
    assert not cache.exists()
    baseline(params, root)
    stored = json.loads(cache.read_text())
    assert {"utility", "paper", "scorecard", "attacks"} <= set(stored) and "steward-internal" in stored["internal"]
    _, pngs_with, with_cache = evaluate.measure(params, "dpwgan", root)
    assert json.dumps(with_cache, sort_keys=True, default=str) == json.dumps(without, sort_keys=True, default=str)
    assert with_cache["utility"]["n_synth"] == with_cache["utility"]["n_train_real"] == 250  # the utility's row cap
    assert (with_cache["n_synthetic"], with_cache["n_measured"]) == (300, 280)     # every row published, 280 read
    read = inputs(params, root)
    assert (len(read.train), len(read.holdout)) == (280, len(pd.read_parquet(root / "data/prepared/breast_cancer/"
                                                                             "holdout.parquet")))
    assert read.train.equals(train.iloc[row_sample(len(train), 280, [0, 0])].reset_index(drop=True))
    assert pngs_with == pngs_without

    monkeypatch.setattr(runtime, "BESIDE_MIN_ROWS", 0)            # a large table on 2 cores: the attacks, and the
    monkeypatch.setattr(runtime, "available_cores", lambda: 2)    # baseline's utility, in a second process
    monkeypatch.setattr(runtime, "_concurrent", 1)
    _, pngs_beside, beside_metrics = evaluate.measure(params, "dpwgan", root)
    assert json.dumps(beside_metrics, sort_keys=True, default=str) == json.dumps(without, sort_keys=True, default=str)
    assert pngs_beside == pngs_without
    baseline(params, root)
    assert json.loads(cache.read_text()) == stored

    other = parse_params(merged(read_params(root / "params.yaml"), {"evaluate": {"seed": 1}}))  # the cache: seed 0
    with pytest.raises(InputError, match=r"real_side\.json.*other rows or settings.*Fix:.*synthrelease stage baseline"):
        evaluate.measure(other, "dpwgan", root)


def test_evaluate_depends_on_the_baseline_stage_and_the_flow_runs_it():
    stages = yaml.safe_load((PROJECT / "dvc.yaml").read_text())["stages"]
    out = stages["baseline"]["outs"][0]
    assert out in stages["evaluate"]["do"]["deps"] and out.startswith("data/")  # never under releases/
    assert stages["baseline"]["params"] == stages["evaluate"]["do"]["params"]   # what the cache's hash covers
    flow = (PROJECT / "flows/release.py").read_text()
    assert "wait_for=[trained[gen], real_side]" in flow
