"""Evaluation: marginal distances, TSTR utility and the release report."""

from __future__ import annotations

import re
from dataclasses import dataclass
from numbers import Real

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from pipelines.errors import InputError
from pipelines.evaluation import utility
from pipelines.evaluation.fidelity import marginal_distances, summarise
from pipelines.reporting.report import render_html, render_markdown
from pipelines.evaluation.utility import featurise, tstr_auroc


@dataclass(frozen=True)
class Col:
    """Stand-in for a schema column."""

    name: str
    kind: str
    lower: float | None = None
    upper: float | None = None
    categories: tuple = ()


MIXED = [
    Col("age", "integer", 0, 100),
    Col("income", "continuous", 0.0, 1e5),
    Col("colour", "categorical", categories=("red", "green", "blue")),
    Col("smoker", "binary", categories=("no", "yes")),
]


def mixed_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(0, 101, n),
            "income": rng.uniform(0, 1e5, n),
            "colour": rng.choice(["red", "green"], n),
            "smoker": rng.choice(["no", "yes"], n),
        }
    )


# --- fidelity -------------------------------------------------------------------------------------


def test_identical_frames_have_zero_distance():
    df = mixed_frame(200, 0)
    d = marginal_distances(df, df.copy(), MIXED)
    assert {c: v["metric"] for c, v in d.items()} == {"age": "w1", "income": "w1", "colour": "tv", "smoker": "tv"}
    assert all(v["value"] == pytest.approx(0.0, abs=1e-12) for v in d.values())


def test_total_variation_worked_examples():
    cat = Col("c", "categorical", categories=("a", "b", "z"))
    real = pd.DataFrame({"c": ["a", "b"] * 50})
    assert marginal_distances(real, pd.DataFrame({"c": ["a"] * 10}), [cat])["c"]["value"] == pytest.approx(0.5)
    # a schema category unseen in the real data still counts: mass moved entirely onto it -> 1
    assert marginal_distances(real, pd.DataFrame({"c": ["z"] * 4}), [cat])["c"]["value"] == pytest.approx(1.0)
    # values outside the schema's list are pooled into their own bucket, not dropped
    synth = pd.DataFrame({"c": ["a", "junk"] * 5})
    assert marginal_distances(real, synth, [cat])["c"]["value"] == pytest.approx(0.5)


def test_w1_point_masses_at_the_bounds_is_one():
    col = Col("x", "continuous", 10.0, 20.0)
    d = marginal_distances(pd.DataFrame({"x": [10.0] * 5}), pd.DataFrame({"x": [20.0] * 7}), [col])
    assert d["x"] == {"metric": "w1", "value": pytest.approx(1.0)}


def test_w1_scales_by_schema_bounds_not_data():
    col = Col("x", "integer", 0, 100)
    d = marginal_distances(pd.DataFrame({"x": [10] * 5}), pd.DataFrame({"x": [11] * 5}), [col])
    assert d["x"]["value"] == pytest.approx(0.01)


def test_w1_of_shifted_uniform_is_the_scaled_shift():
    rng = np.random.default_rng(1)
    col = Col("x", "continuous", 0.0, 2.0)
    real = pd.DataFrame({"x": rng.uniform(0, 1, 5000)})
    synth = pd.DataFrame({"x": rng.uniform(0, 1, 5000) + 0.5})
    assert marginal_distances(real, synth, [col])["x"]["value"] == pytest.approx(0.25, abs=0.015)


def test_summarise_and_missing_column():
    d = {"a": {"metric": "tv", "value": 0.1}, "b": {"metric": "tv", "value": 0.3}, "c": {"metric": "w1", "value": 0.2}}
    assert summarise(d) == pytest.approx({"mean_tv": 0.2, "max_tv": 0.3, "mean_w1": 0.2, "max_w1": 0.2})
    assert summarise({"a": d["a"]})["mean_w1"] is None
    with pytest.raises(InputError, match="colour"):
        marginal_distances(mixed_frame(10, 0), mixed_frame(10, 1).drop(columns="colour"), MIXED)


# --- utility --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cancer():
    data = load_breast_cancer(as_frame=True)
    df = data.data.assign(diagnosis=data.target.map({0: "malignant", 1: "benign"}))
    columns = [Col(c, "continuous", 0.0, float(np.ceil(data.data[c].max() * 1.5))) for c in data.data.columns]
    columns.append(Col("diagnosis", "binary", categories=("malignant", "benign")))
    train, test = train_test_split(df, test_size=0.3, random_state=0, stratify=df["diagnosis"])
    return train, test, columns


@pytest.fixture(scope="module")
def real_vs_real(cancer):
    train, test, columns = cancer
    return tstr_auroc(train, train, test, columns, "diagnosis", seed=0)


def test_featuriser_uses_schema_categories_and_bounds():
    frame = pd.DataFrame({"age": [0, 50], "income": [1e5, 2e5], "colour": ["red", "purple"], "smoker": ["yes", "no"]})
    x = featurise(frame, MIXED)
    # one-hot width = 3 schema categories although only one appears; unknown value -> zero block
    np.testing.assert_allclose(x, [[0.0, 1.0, 1, 0, 0, 1], [0.5, 1.0, 0, 0, 0, 0]])
    assert featurise(frame, MIXED, target="smoker").shape == (2, 5)


def test_a_long_code_list_is_featurised_by_its_buckets():
    codes = tuple(f"D{i:04d}" for i in range(5000))
    frame = pd.DataFrame({"dx": ["D0000", "D4999", "D0000", "X", "D0078", "D0079"]})
    x = featurise(frame, [Col("dx", "categorical", categories=codes)])
    assert x.shape == (6, 64) and x.sum(1).tolist() == [1, 1, 1, 0, 1, 1]  # unknown: zero block
    # known answers: bucket of code k = floor(64 k / 5000): D0000 -> 0, D4999 -> 63, D0078 -> 0, D0079 -> 1
    assert x[0, 0] == x[1, 63] == x[4, 0] == x[5, 1] == 1
    assert (x[0] == x[2]).all()
    assert featurise(frame, [Col("dx", "categorical", categories=codes[:99] + ("D4999",))]).shape == (6, 100)
    from pipelines.evaluation.attacks.distance import gower_features

    g = gower_features(frame, [Col("dx", "categorical", categories=codes)])  # codes in different buckets: d = 1
    assert g.shape == (6, 64) and np.abs(g[0] - g[1]).sum() == 1.0 and np.abs(g[0] - g[2]).sum() == 0
    from pipelines.evaluation.dimensionwise import _labels  # predicted as its bucket, 64 classes at most

    assert _labels(frame.iloc[[0, 1, 2, 4, 5]], Col("dx", "categorical", categories=codes), "t").tolist() == [
        0,
        63,
        0,
        0,
        1,
    ]


@pytest.mark.integration
def test_real_vs_real_tstr_equals_trtr(real_vs_real):
    r = real_vs_real
    assert (r["n_train_real"], r["n_synth"], r["n_test"]) == (398, 398, 171)
    assert r["positive_class"] == "benign"
    assert set(r["models"]) == {"logistic_regression", "random_forest", "gradient_boosting"}
    for m in r["models"].values():
        assert m["tstr"] == m["trtr"] and m["gap"] == 0.0 and m["tstr"] > 0.95 and "note" not in m


@pytest.mark.integration
def test_shuffled_target_gives_chance_auroc(cancer, monkeypatch):
    # One shuffle's AUROC varies a lot (a random LR direction still projects onto the strongly
    # label-correlated features: 0.30-0.66 over 10 seeds), so average over shuffles. LR only, for speed.
    monkeypatch.setattr(utility, "MODELS", {"logistic_regression": utility.MODELS["logistic_regression"]})
    train, test, columns = cancer
    rng = np.random.default_rng(0)
    scores = [
        tstr_auroc(
            train,
            train.assign(diagnosis=rng.permutation(train["diagnosis"].to_numpy())),
            test,
            columns,
            "diagnosis",
            seed=0,
        )["models"]["logistic_regression"]["tstr"]
        for _ in range(20)
    ]
    assert np.mean(scores) == pytest.approx(0.5, abs=0.1)


def test_single_class_synthetic_target_scores_chance_with_note(cancer):
    train, test, columns = cancer
    r = tstr_auroc(train, train.assign(diagnosis="benign"), test, columns, "diagnosis", seed=0)
    for m in r["models"].values():
        assert m["tstr"] == 0.5 and "single class" in m["note"] and m["gap"] == pytest.approx(m["trtr"] - 0.5)


def test_utility_skips_and_rejects(cancer):
    train, test, columns = cancer
    assert tstr_auroc(train, train, test, columns, None, seed=0) == {"skipped": "schema declares no target"}
    assert (
        "single target class"
        in tstr_auroc(train, train, test.assign(diagnosis="benign"), columns, "diagnosis", seed=0)["skipped"]
    )
    with pytest.raises(InputError, match="outside the schema"):
        tstr_auroc(train, train.assign(diagnosis="maybe"), test, columns, "diagnosis", seed=0)


# --- report ---------------------------------------------------------------------------------------

SUMMARY = {
    "dataset": "adult",
    "generator": "ppem",
    "release_id": "2024-06-01-r7",
    "privacy": {
        "epsilon_generator": 1.25,
        "epsilon_dataset_total": 3.5,
        "epsilon_dataset_total_rdp": 3.875,
        "delta": 1e-05,
        "lifetime_budget": 8.25,
        "ledger_rows": [
            {"row_id": 41, "stage": "train", "epsilon": 2.25},
            {"row_id": 42, "stage": "train@ppem", "epsilon": 1.25},
        ],
    },
    "gates": [
        {"name": "ledger", "passed": True, "evidence": {"epsilon_after": 3.5}},
        {"name": "alpha_lmdp", "passed": False, "evidence": {"ksd_p_value": 0.0625, "alpha": 0.05}},
    ],
    "fidelity": {"age": {"metric": "w1", "value": 0.0312}, "workclass": {"metric": "tv", "value": 0.1875}},
    "fidelity_summary": {"mean_tv": 0.1875, "max_tv": 0.1875, "mean_w1": 0.0312, "max_w1": 0.0312},
    "utility": {
        "target": "income",
        "positive_class": ">50K",
        "n_train_real": 3000,
        "n_synth": 2500,
        "n_test": 1000,
        "models": {
            "logistic_regression": {"tstr": 0.8125, "trtr": 0.9, "gap": 0.0875},
            "random_forest": {"tstr": 0.5, "trtr": 0.875, "gap": 0.375, "note": "single class"},
            "gradient_boosting": {"tstr": 0.7731, "trtr": 0.9062, "gap": 0.1331},
        },
    },
    "hashes": {"schema": "sha256:ab12", "params": "sha256:cd34"},
    "rows": 2500,
    "guarantee": "differentially private",
    "audience": "public",
}


def numbers(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from numbers(v)
    elif isinstance(obj, Real) and not isinstance(obj, bool):
        yield obj


@pytest.mark.parametrize("render", [render_markdown, render_html])
def test_report_shows_every_number_gate_and_notice(render):
    out = render(SUMMARY)
    found = list(numbers(SUMMARY))
    assert len(found) == 31
    for x in found:
        assert re.search(rf"(?<![\d.]){re.escape(str(x))}(?![\d])", out), x
    for text in (
        "adult",
        "ppem",
        "2024-06-01-r7",
        "sha256:ab12",
        "sha256:cd34",
        "alpha_lmdp",
        "PASS",
        "FAIL",
        "FAILED gates: alpha_lmdp",
        "4.75",
        "not covered by the DP guarantee",
        "train@ppem",
        "differentially private",
        "What the guarantees cover",
        "α-LMDP",
    ):
        assert text in out, text
    assert out.count("not available") == 3  # no evaluate metrics (privacy risk, scorecard: test_report.py), no events


@pytest.mark.parametrize("render", [render_markdown, render_html])
def test_report_missing_sections_read_not_available(render):
    out = render({"dataset": "adult", "generator": "ppem"})
    assert out.count("not available") >= 5
    assert "No figure in this report was computed from real data." in out
    assert "skipped: schema declares no target" in render({"utility": {"skipped": "schema declares no target"}}).lower()


def test_report_html_escapes_and_is_self_contained():
    evil = '<script>alert("x")</script>'
    summary = {
        **SUMMARY,
        "dataset": evil,
        "fidelity": {evil: {"metric": "tv", "value": 0.5}},
        "gates": [{"name": evil, "passed": True, "evidence": evil}],
    }
    out = render_html(summary)
    assert "<script" not in out and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in out
    assert not re.search(r"\b(src|href)=|<link|@import|url\(", out)
    with_plot = render_html({**summary, "plots": {"pca_2way": b"\x89PNG fake"}})
    assert re.findall(r"\b(?:src|href)=\"([a-z]+:[^;,]*)", with_plot) == ["data:image/png"]  # embedded, not linked
    assert "<script" not in render_markdown(summary)


@pytest.mark.integration
def test_report_lists_worst_ten_columns_from_real_outputs(real_vs_real):
    columns = [Col(f"c{i}", "continuous", 0.0, 1.0) for i in range(15)]
    real = pd.DataFrame({c.name: np.zeros(4) for c in columns})
    synth = pd.DataFrame({c.name: np.full(4, i / 100) for i, c in enumerate(columns)})
    fidelity = marginal_distances(real, synth, columns)
    out = render_markdown({"fidelity": fidelity, "fidelity_summary": summarise(fidelity), "utility": real_vs_real})
    shown = re.findall(r"^\| (c\d+) \|", out, flags=re.M)
    assert shown == [f"c{i}" for i in range(14, 4, -1)]
    assert "The 10 most distant of 15 columns" in out
    lr = real_vs_real["models"]["logistic_regression"]
    assert f"{lr['tstr']:.4g}" in out and "TSTR/TRTR AUROC" in out
