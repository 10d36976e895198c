"""Stage weight@gen: budget reserved before private rows are read, outputs, the gate, and the release join."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from pipelines.config import Paths, load_params, merged, parse_params, read_params
from pipelines.data.transform import Encoder
from pipelines.errors import BudgetExceededError, InputError
from pipelines.io import read_json, write_json, write_parquet
from pipelines.gates.weights import weight_gate
from support.project import ledger_rows, make_root, run_stages

FAST = {"epsilon": 1.0, "epochs": 1, "analysis_max_rows": 200}  # pinned: no budget stage needed; keyed noise


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """validate + prepare once, and a synthetic table decoded from uniform encoded rows (no training)."""
    # no steward key (OS-entropy noise): keyed weight noise is bound to the trained model, which this root lacks
    root = make_root(
        tmp_path_factory.mktemp("weights"),
        {"generators": ["dpwgan"], "weights": FAST, "privacy": {"noise_key_file": None}},
    )
    run_stages(root, "prepare")
    params = load_params(root / "params.yaml")
    from tasks import common

    encoder = Encoder(common.schema(params, root))
    rows = np.random.default_rng(0).uniform(size=(300, encoder.layout.width))
    write_parquet(common.paths(params, root).synthetic("dpwgan"), encoder.decode(rows))
    return root


def weight_rows(root) -> list[tuple]:
    """The ledger rows after prepare's (its row-loss test, rows 1 and 2): what the weight stage wrote."""
    return [r for r in ledger_rows(root) if r[1] != "prepare"]


def prepared_root(prepared, tmp_path, weights: dict, privacy: dict | None = None):
    """A copy of the prepared root with these `weights` (and `privacy`) settings."""
    root = tmp_path / "repo"
    shutil.copytree(prepared, root)
    return root, parse_params(merged(read_params(root / "params.yaml"), {"weights": weights, "privacy": privacy or {}}))


@pytest.mark.slow
def test_weight_stage_reserves_then_writes_weights_and_report(prepared, tmp_path):
    from tasks.weight import weight

    root, params = prepared_root(prepared, tmp_path, {})
    report = weight(params, "dpwgan", "test", root)
    assert weight_rows(root) == [(3, "weight@dpwgan", "planned"), (4, "weight@dpwgan", "spent")]
    from tasks import common

    p = common.paths(params, root)
    w = pd.read_parquet(p.weights("dpwgan"))["weight"]
    assert len(w) == 300 and w.mean() == pytest.approx(1.0) and (w > 0).all()
    saved = read_json(p.weights_report("dpwgan"))
    assert saved["epsilon"] == pytest.approx(1.0, rel=0.01) and saved["ledger_row_ids"] == [3, 4]
    assert saved["gate"]["passed"] == (saved["khat"] <= 0.7)
    assert 1 <= saved["ess"] <= 300
    assert {"wasserstein1", "mmd2", "auroc", "posterior_mahalanobis"} <= set(saved["analysis"]["weighted"])
    assert report["estimator"] == "priv_mlp"


@pytest.mark.integration
def test_weight_budget_refused_before_any_private_row_is_read(prepared, tmp_path, monkeypatch):
    from pipelines.data.encoded import EncodedTable
    from tasks.weight import weight

    root, params = prepared_root(
        prepared, tmp_path, {"estimator": "beta_noised", "epsilon": 2.0}, {"lifetime_epsilon": 1.0}
    )

    def forbidden(*a, **k):
        raise AssertionError("private rows were read before the budget check")

    monkeypatch.setattr(EncodedTable, "__array__", forbidden)
    monkeypatch.setattr(EncodedTable, "to_file", forbidden)
    with pytest.raises(BudgetExceededError, match="plans ε=2"):
        weight(params, "dpwgan", "test", root)
    assert weight_rows(root) == []
    assert not (root / "data" / "weights").exists()
    assert not list((root / "data" / "prepared").glob(".weight-*"))  # its scratch files are gone too


@pytest.mark.integration
def test_non_private_estimator_is_refused_outside_internal_releases(prepared, tmp_path, monkeypatch):
    from pipelines.data.encoded import EncodedTable
    from tasks.weight import weight

    root, params = prepared_root(prepared, tmp_path, {"estimator": "logreg"})
    monkeypatch.setattr(EncodedTable, "__array__", lambda *a, **k: pytest.fail("rows read"))
    with pytest.raises(BudgetExceededError, match="internal release"):
        weight(params, "dpwgan", "test", root)


def test_output_noise_that_cannot_release_a_weight_is_a_clear_error(prepared, tmp_path):
    """Breast cancer (31 columns, 455 + 300 rows, λ = 0.1): the add/remove Δ_w = R²/(nλ) = 32/(755·0.1) ≈ 0.42,
    so one weight needs a Laplace scale Δ_w/ε ≈ 0.85 > ρ_max = 0.5 at ε = 0.5."""
    from tasks.weight import weight

    root, params = prepared_root(prepared, tmp_path, {"estimator": "output_lapl", "epsilon": 0.5})
    with pytest.raises(InputError, match="weights.estimator: output_lapl cannot release even one weight.*Fix"):
        weight(params, "dpwgan", "test", root)
    assert weight_rows(root) == []


def test_bad_settings_name_the_key_and_the_fix():
    from pipelines.config import section

    with pytest.raises(InputError, match=r"'weights\.estimator': .*'logreg'.*got 'kde'.*Fix: .*one of"):
        section("weights", {"estimator": "kde"}, ["dpwgan"])
    with pytest.raises(InputError, match=r"'weights\.epsilom': unknown weights keys \['epsilom'\].*Fix:"):
        section("weights", {"epsilom": 1}, ["dpwgan"])
    with pytest.raises(InputError, match="calibration"):
        section("weights", {"estimator": "output_lapl", "calibration": "x.csv"}, ["dpwgan"])
    with pytest.raises(InputError, match=r"'weights\.generators': must be 'selected' or a list of generators"):
        section("weights", {"generators": ["aim"]}, ["dpwgan"])


@pytest.mark.slow
def test_release_joins_weights_and_refuses_a_failed_weight_gate(tmp_path):
    """train → check → evaluate → weight → release with a small DP-WGAN; then a gate bound no k̂ meets."""
    from tasks.check import check
    from tasks.evaluate import evaluate
    from tasks.release import release
    from tasks.train import train
    from tasks.weight import weight

    root = make_root(tmp_path, {"generators": ["dpwgan"], "weights": FAST, "privacy": {"release_epsilon": 2.0}})
    run_stages(root, "budget")  # dpwgan's share of the release ε beside the weights' pinned 1.0
    params = load_params(root / "params.yaml")
    train(params, "dpwgan", "test", root)
    evaluate(params, "dpwgan", root)  # evaluate before check: check reads its privacy-risk metrics
    check(params, "dpwgan", root)
    report = weight(params, "dpwgan", "test", root)
    assert report["gate"]["passed"]
    index = release(params, root)
    bundle = root / index["released"][0]["path"]
    table = pd.read_parquet(bundle / "synthetic.parquet")
    assert table["weight"].mean() == pytest.approx(1.0)
    manifest = read_json(bundle / "manifest.json")
    assert manifest["weights"]["estimator"] == "priv_mlp"
    assert manifest["weights"]["khat"] == pytest.approx(report["khat"])
    assert manifest["weights"]["ess"] == pytest.approx(report["ess"])
    assert manifest["weights"]["ledger_rows"] == report["ledger_row_ids"]

    strict = merged(read_params(root / "params.yaml"), {"weights": {"khat_bound": -10.0}})
    with pytest.raises(InputError, match=r"'weights\.khat_bound': must be a positive finite number"):
        parse_params(strict)  # out of range: no stage gets a configuration to run
    p = Paths("breast_cancer", root)  # weights whose k̂ exceeds the bound: the gate fails
    failed = weight_gate(report["khat"] + 1.0, report["khat"] + 0.5, report["estimator"], True, False)
    write_json(p.weights_report("dpwgan"), {**read_json(p.weights_report("dpwgan")), "gate": failed.to_dict()})
    index = release(params, root)  # the weights are refused, the table (whose own gates pass) is not
    [entry] = index["released"]
    assert index["refused"] == [] and "k̂" in entry["weights_withheld"][0]
    assert "weight" not in pd.read_parquet(root / entry["path"] / "synthetic.parquet").columns
    assert read_json(root / entry["path"] / "manifest.json")["weights"]["released"] is False
