"""release.select: the public rule, the budget stage's selection, and a release that trains and publishes one
table while the other candidates' stages spend and publish nothing."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml

from pipelines.config import Release, load_params, merged, parse_params, read_params
from pipelines.errors import InputError
from pipelines.evaluation.outside_dp import MCMC_HEURISTIC
from pipelines.generators.names import GENERATORS
from pipelines.selection import PREFERENCE
from tasks.common import select
from support.project import PROJECT, ledger_rows, make_root, run_stages


def test_the_rule_ranks_every_registered_generator():
    assert sorted(PREFERENCE) == sorted(GENERATORS)


@pytest.mark.parametrize(
    "candidates, chosen",
    [
        (["dpwgan", "ppem", "dp_auto_gan", "pearl", "iw_mmd_gan", "support_points", "mst", "aim"], "aim"),
        (["dpwgan", "mst"], "mst"),
        (["support_points", "dpwgan", "pearl"], "pearl"),
        (["ppem"], "ppem"),
    ],
)
def test_auto_selects_one_generator_by_the_public_rule(candidates, chosen):
    params = {**read_params(PROJECT / "params.yaml"), "generators": candidates}  # release.select: auto, the default
    s = select(parse_params(params), 455)
    assert s.mode == "auto" and s.selected == (chosen,) and s.candidates == tuple(candidates)
    assert s.facts == {"rows_public": 455, "release_epsilon": 1.0} and chosen in s.reason
    assert select(parse_params(merged(params, {"release": {"select": "all"}})), 455).selected == tuple(candidates)


def test_auto_and_private_never_pick_support_points_unless_its_heuristic_guarantee_is_accepted(tmp_path):
    """auto refuses to choose support_points and private to consider it (its ε holds only for an exact sample, and
    its release is a finite MCMC chain's last state) unless support_points.accept_heuristic is true; all keeps it
    (the ledger gate labels it heuristic)."""
    base = merged(read_params(PROJECT / "params.yaml"), {"generators": ["support_points"]})
    with pytest.raises(
        InputError,
        match=rf"'release\.select': auto would choose support_points, whose guarantee is "
        rf"{re.escape(MCMC_HEURISTIC)}.*Fix: list a generator before support_points.*"
        r"support_points: \{accept_heuristic: true\}",
    ):
        select(parse_params(base), 455)
    accepted = merged(base, {"support_points": {"accept_heuristic": True}})
    chosen = select(parse_params(accepted), 455)
    assert chosen.selected == ("support_points",) and "accepted with a heuristic guarantee" in chosen.reason
    assert select(parse_params(merged(base, {"generators": ["support_points", "pearl"]})), 455).selected == ("pearl",)
    assert select(parse_params(merged(base, {"release": {"select": "all"}})), 455).selected == ("support_points",)

    private = merged(
        base, {"generators": ["aim", "support_points", "private_selection"], "release": {"select": "private"}}
    )
    with pytest.raises(
        InputError,
        match=r"private would consider support_points.*Fix: leave support_points out of "
        r"the private selection's candidates",
    ):
        select(parse_params(private), 455)
    assert select(parse_params(merged(private, {"private_selection": {"candidates": ["aim"]}})), 455).selected == (
        "private_selection",
    )  # named candidates without it: nothing heuristic is considered
    assert select(parse_params(merged(private, {"support_points": {"accept_heuristic": True}})), 455).selected == (
        "private_selection",
    )

    (tmp_path / "params.yaml").write_text(yaml.safe_dump(merged(base, {"support_points": {"accept_heuristic": 1}})))
    with pytest.raises(InputError, match=r"'support_points\.accept_heuristic'.*Fix:"):
        load_params(tmp_path / "params.yaml")


def test_an_unknown_select_mode_is_refused_with_its_key(tmp_path):
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    params["release"] = {"select": "best"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(InputError, match=r"'release\.select'.*Fix:"):
        load_params(tmp_path / "params.yaml")


def test_the_bundled_configurations_select_as_documented():
    assert (
        load_params(PROJECT / "params.yaml").release.model_dump()
        == Release().model_dump()
        == {
            "select": "auto",
            "test_epsilon": 0.1,
            "test_excess_max": 0.05,
            "test_confidence": 0.99,
            "non_dp_gates": "advise",
        }
    )
    compare = load_params(PROJECT / "params" / "compare.yaml")
    assert compare.release.model_dump() == {**Release().model_dump(), "select": "all", "test_epsilon": 0.02}
    # the default lists what auto publishes, AIM; compare lists every generator but the private selection
    assert load_params(PROJECT / "params.yaml").generators == ("aim",)
    assert sorted(compare.generators) == sorted(set(GENERATORS) - {"private_selection"})


@pytest.mark.parametrize(
    "key,value", [("test_epsilon", 0), ("test_excess_max", 1.5), ("test_confidence", 1.0), ("non_dp_gates", "ignore")]
)
def test_a_bad_release_test_setting_is_refused_with_its_key(tmp_path, key, value):
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    params.setdefault("release", {})[key] = value
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

    root = make_root(
        tmp_path,
        {"generators": ["dpwgan", "aim"], "release": {"select": "auto"}, "weights": {"generators": "selected"}},
    )
    run_stages(root, "budget")
    params = load_params(root / "params.yaml")
    alloc = root / "data/allocation/breast_cancer"
    summary = json.loads((alloc / "release.json").read_text())
    assert summary["selection"]["selected"] == ["aim"]
    assert set(summary["parts"]) == {"prepare", "aim", "weights", "release_test"}
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
    assert stages == {"prepare", "train@aim", "check@aim", "weight@aim"}  # the unselected candidate spent nothing
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


@pytest.mark.slow
def test_an_accepted_support_points_release_is_labelled_heuristic_in_its_manifest_and_reports(tmp_path):
    """auto with support_points.accept_heuristic: the table is published under the default `non_dp_gates: advise`
    (the R̂ gate decides nothing there), and privacy.json, the manifest's `guarantee` and both reports state the
    heuristic guarantee."""
    from tasks.baseline import baseline
    from tasks.check import check
    from tasks.evaluate import evaluate
    from tasks.release import release
    from tasks.train import train

    root = make_root(
        tmp_path,
        {
            "generators": ["support_points"],
            "weights": {"generators": []},
            "release": {"select": "auto", "non_dp_gates": "advise"},
            "support_points": {"accept_heuristic": True},
        },
    )
    run_stages(root, "budget")
    params = load_params(root / "params.yaml")
    train(params, "support_points", "run", root)
    privacy = json.loads((root / "models/breast_cancer/support_points/privacy.json").read_text())
    assert privacy["exact_sampler"] is False and privacy["guarantee"] == MCMC_HEURISTIC
    assert [e["mechanism"] for e in privacy["events"] if e["kind"] == "pure_epsilon"] == ["exponential_mcmc"]
    baseline(params, root)
    evaluate(params, "support_points", root)
    checks = check(params, "support_points", root)
    assert checks["deciding_gates"] == ["ledger", "release_test"] and "mh_convergence" in [
        g["name"] for g in checks["gates"]
    ]
    index = release(params, root)
    (released,) = index["released"]
    bundle = root / released["path"]
    assert json.loads((bundle / "manifest.json").read_text())["guarantee"] == MCMC_HEURISTIC
    steward = root / index["steward_reports"]["support_points"]
    for page in (bundle / "report.md", steward / "steward_report.md"):
        assert f"Guarantee | {MCMC_HEURISTIC} |" in page.read_text()
