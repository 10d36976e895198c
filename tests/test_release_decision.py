"""Whether a release happens at all is published: it is decided by DP mechanisms alone, never by an exact function of
the real rows. Here the real-side evaluation cannot run (the holdout holds one target class, so no AUROC is
defined), and the table the DP gates passed is published all the same; the steward report says why the evaluation
did not run."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pipelines.config import load_params
from pipelines.data.transform import split_uniforms
from pipelines.evaluation.outside_dp import UNAVAILABLE


@pytest.mark.slow
def test_a_single_class_holdout_does_not_stop_a_release(tmp_path, bc_raw):
    from tasks.baseline import baseline
    from tasks.budget import budget
    from tasks.check import check
    from tasks.evaluate import evaluate
    from tasks.common import split_key
    from tasks.prepare import prepare
    from tasks.release import release
    from tasks.train import train
    from tasks.validate import validate
    from support.project import make_root

    root = make_root(
        tmp_path,
        {
            "dataset": {"source": "raw.csv"},
            "generators": ["aim"],
            "weights": {"generators": []},
            "release": {"select": "all", "test_epsilon": 0.1, "non_dp_gates": "advise"},
        },
    )
    params = load_params(root / "params.yaml")
    raw = bc_raw.assign(target=1)
    raw.to_csv(root / "raw.csv", index=False)
    validate(params, root)
    rows = pd.read_parquet(root / "data/raw/breast_cancer/validated.parquet")
    key, _ = split_key(params, root)
    # the one malignant row: the first whose keyed side, with its target set to 0, is the training side
    lone = next(
        i
        for i in range(len(rows))
        if split_uniforms(rows.iloc[[i]].assign(target=0), list(rows.columns), key)[0] >= 0.2
    )
    raw.loc[raw.index[lone], "target"] = 0
    raw.to_csv(root / "raw.csv", index=False)
    validate(params, root)
    prepare(params, root)
    holdout = pd.read_parquet(root / "data/prepared/breast_cancer/holdout.parquet")
    assert holdout["target"].nunique() == 1 and len(holdout) > 50
    budget(params, root)
    baseline(params, root)
    assert (
        "single target class"
        in json.loads((root / "data/baseline/breast_cancer/real_side.json").read_text())[UNAVAILABLE]
    )
    train(params, "aim", "single-class", root)
    metrics = evaluate(params, "aim", root)
    assert "single target class" in metrics[UNAVAILABLE] and metrics["n_synthetic"] == 455
    assert (root / "data/synthetic/breast_cancer/aim.parquet").exists()
    checks = check(params, "aim", root)
    failed = {g["name"] for g in checks["gates"] if not g["passed"]}
    assert {"membership_inference", "utility"} <= failed and checks["deciding_gates"] == ["ledger", "release_test"]
    index = release(params, root)
    assert [r["generator"] for r in index["released"]] == ["aim"] and index["refused"] == []
    steward = (root / index["steward_reports"]["aim"] / "steward_report.md").read_text()
    assert "Evaluation against the real rows: not run" in steward and "single target class" in steward
    manifest = json.loads((root / index["released"][0]["path"] / "manifest.json").read_text())
    assert UNAVAILABLE not in json.dumps(manifest) and manifest["every_public_value_private"]


@pytest.mark.slow
@pytest.mark.parametrize("side", ["holdout", "train"])
def test_an_empty_side_of_the_split_does_not_stop_a_release(tmp_path, bc_raw, side):
    """30 rows whose keyed uniforms all lie above 0.05 (below 0.95), split at holdout_fraction 0.05 (0.95), leave
    the holdout (the training side) empty. Neither is a stop: the DP mechanisms run on what they get (AIM measures
    zero rows plus noise at the public n̂), the real-side evaluation and the weights' analyses say they could not run,
    and the DP gates decide."""
    from tasks.baseline import baseline
    from tasks.budget import budget
    from tasks.check import check
    from tasks.evaluate import evaluate
    from tasks.common import split_key
    from tasks.prepare import prepare
    from tasks.release import release
    from tasks.train import train
    from tasks.validate import validate
    from tasks.weight import weight
    from support.project import make_root

    fraction = 0.05 if side == "holdout" else 0.95
    root = make_root(
        tmp_path,
        {
            "dataset": {"source": "raw.csv", "holdout_fraction": fraction},
            "generators": ["aim"],
            "weights": {"generators": ["aim"], "epochs": 1},
            "release": {"select": "all", "test_epsilon": 0.1, "non_dp_gates": "advise"},
        },
    )
    params = load_params(root / "params.yaml")
    bc_raw.to_csv(root / "raw.csv", index=False)
    validate(params, root)
    rows = pd.read_parquet(root / "data/raw/breast_cancer/validated.parquet")
    u = split_uniforms(rows, list(rows.columns), split_key(params, root)[0])
    chosen = (u >= fraction) if side == "holdout" else (u < fraction)
    bc_raw[chosen].iloc[:30].to_csv(root / "raw.csv", index=False)
    validate(params, root)
    summary = prepare(params, root)
    assert summary[f"rows_{side}"] == 0 and summary["rows_train"] + summary["rows_holdout"] == 30
    budget(params, root)
    baseline(params, root)
    train(params, "aim", f"empty-{side}", root)
    metrics = evaluate(params, "aim", root)
    assert UNAVAILABLE in metrics
    assert UNAVAILABLE in weight(params, "aim", f"empty-{side}", root)["analysis"]  # the weights still computed
    check(params, "aim", root)
    index = release(params, root)
    tested = {g["name"]: g for g in json.loads((root / "reports/breast_cancer/aim/checks.json").read_text())["gates"]}
    assert [r["generator"] for r in index["released"]] == (["aim"] if tested["release_test"]["passed"] else [])
    assert tested["ledger"]["passed"]
