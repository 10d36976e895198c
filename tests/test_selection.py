"""release.select: the public rule, the budget stage's selection, and a release that trains and publishes one
table while the other candidates' stages spend and publish nothing."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from pipelines.config import RELEASE_DEFAULTS, load_params, merged, parse_params, read_params
from pipelines.errors import InputError
from pipelines.generators.names import GENERATORS
from pipelines.selection import PREFERENCE, select
from test_pipeline import PROJECT, ledger_rows, make_root, run_stages


def test_the_rule_ranks_every_registered_generator():
    assert sorted(PREFERENCE) == sorted(GENERATORS)


@pytest.mark.parametrize("candidates, chosen", [
    (["dpwgan", "ppem", "dp_auto_gan", "pearl", "iw_mmd_gan", "support_points", "mst", "aim"], "aim"),
    (["dpwgan", "mst"], "mst"), (["support_points", "dpwgan", "pearl"], "pearl"), (["ppem"], "ppem")])
def test_auto_selects_one_generator_by_the_public_rule(candidates, chosen):
    params = {**read_params(PROJECT / "params.yaml"), "generators": candidates}  # release.select: auto, the default
    s = select(parse_params(params), 455)
    assert s.mode == "auto" and s.selected == (chosen,) and s.candidates == tuple(candidates)
    assert s.facts == {"rows_public": 455, "release_epsilon": 1.0} and chosen in s.reason
    assert select(parse_params(merged(params, {"release": {"select": "all"}})), 455).selected == tuple(candidates)


def test_an_unknown_select_mode_is_refused_with_its_key(tmp_path):
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    params["release"] = {"select": "best"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(InputError, match=r"'release\.select'.*Fix:"):
        load_params(tmp_path / "params.yaml")


def test_the_bundled_configurations_select_as_documented():
    assert load_params(PROJECT / "params.yaml").release.model_dump() == RELEASE_DEFAULTS == {
        "select": "auto", "test_epsilon": 0.1, "test_excess_max": 0.05, "test_confidence": 0.99,
        "non_dp_gates": "advise"}
    compare = load_params(PROJECT / "params" / "compare.yaml")
    assert compare.release.model_dump() == {**RELEASE_DEFAULTS, "select": "all", "test_epsilon": 0.02}
    # the default lists what auto publishes, AIM; compare lists every generator but the private selection
    assert load_params(PROJECT / "params.yaml").generators == ("aim",)
    assert sorted(compare.generators) == sorted(set(GENERATORS) - {"private_selection"})


@pytest.mark.parametrize("key,value", [("test_epsilon", 0), ("test_excess_max", 1.5), ("test_confidence", 1.0),
                                       ("non_dp_gates", "ignore")])
def test_a_bad_release_test_setting_is_refused_with_its_key(tmp_path, key, value):
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    params["release"][key] = value
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(InputError, match=rf"'release\.{key}'.*Fix:"):
        load_params(tmp_path / "params.yaml")


@pytest.mark.slow
def test_auto_release_trains_weights_and_publishes_only_the_selected_table(tmp_path):
    from tasks.baseline import baseline
    from tasks.check import check
    from tasks.evaluate import evaluate
    from tasks.release import release
    from tasks.train import train
    from tasks.weight import weight
    root = make_root(tmp_path, {"generators": ["dpwgan", "aim"], "release": {"select": "auto"},
                                "weights": {"generators": "selected"}})
    run_stages(root, "budget")
    params = load_params(root / "params.yaml")
    alloc = root / "data/allocation/breast_cancer"
    summary = json.loads((alloc / "release.json").read_text())
    assert summary["selection"]["selected"] == ["aim"] and set(summary["parts"]) == {"aim", "weights", "release_test"}
    assert 0.999 <= summary["epsilon_composed"] <= 1.0  # the whole release ε: AIM and its weights, composed
    left = json.loads((alloc / "dpwgan.json").read_text())
    assert left == {"part": "dpwgan", "selected": False, "select": "auto", "selected_generators": ["aim"]}

    for gen in ("dpwgan", "aim"):
        train(params, gen, "run", root)
    baseline(params, root)
    for gen in ("dpwgan", "aim"):
        evaluate(params, gen, root)
        check(params, gen, root)
        weight(params, gen, "run", root)
    stages = {stage for _, stage, _ in ledger_rows(root)}
    assert stages == {"train@aim", "check@aim", "weight@aim"}  # the unselected candidate spent nothing
    model = root / "models/breast_cancer/dpwgan"
    assert sorted(p.name for p in model.iterdir()) == ["selection.json"]
    assert len(pd.read_parquet(root / "data/synthetic/breast_cancer/dpwgan.parquet")) == 0
    metrics = json.loads((root / "reports/breast_cancer/dpwgan/metrics.json").read_text())
    assert metrics["selected"] is False and (root / "reports/breast_cancer/dpwgan/membership_roc.png").exists()
    assert json.loads((root / "reports/breast_cancer/dpwgan/checks.json").read_text())["gates"] == []
    assert json.loads((root / "reports/breast_cancer/dpwgan/weights.json").read_text())["weighted"] is False

    index = release(params, root)
    assert [r["generator"] for r in index["released"]] == ["aim"] and index["refused"] == []
    manifest = json.loads((root / index["released"][0]["path"] / "manifest.json").read_text())
    assert manifest["weights"] is not None  # the published table's DP weights (released or withheld by k̂)
    assert not list((root / "releases/breast_cancer").glob("dpwgan-*"))
