"""The schema's `target_positive`: parsed and checked against the target's categories, hashed only when set, and
the class every utility score reads as positive (TSTR AUROC, PEARL's classifiers, the verdict's associations);
without it, the target's second category. The features' names the reports give the verdict's associations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.data.schema import Column, load_schema
from pipelines.errors import InputError, SchemaError
from pipelines.evaluation import verdict
from pipelines.evaluation.classifiers import trtr_results, tstr_classifiers
from pipelines.evaluation.utility import _labels, feature_names, featurise, target_scores, tstr_auroc

SCHEMA = """\
name: toy
target: grade
{extra}columns:
  x: {{kind: continuous, lower: 0, upper: 1}}
  grade: {{kind: categorical, categories: [A, B, C]}}
"""


def write(tmp_path: Path, extra: str = "", target: str = "target: grade\n") -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(SCHEMA.format(extra=extra).replace("target: grade\n", target))
    return path


def test_target_positive_is_parsed_and_hashed_only_when_set(tmp_path):
    plain = load_schema(write(tmp_path))
    assert plain.target_positive is None and "target_positive" not in plain.to_dict()
    chosen = load_schema(write(tmp_path, "target_positive: C\n"))
    assert chosen.target_positive == "C" and chosen.to_dict()["target_positive"] == "C"
    assert chosen.hash() != plain.hash()
    assert {k: v for k, v in chosen.to_dict().items() if k != "target_positive"} == plain.to_dict()


@pytest.mark.parametrize(
    ("extra", "target", "message"),
    [
        (
            "target_positive: D\n",
            "target: grade\n",
            "column 'grade': target_positive is 'D', not one of the target's categories. Fix: set target_positive "
            "to one of ['A', 'B', 'C'], or remove it (the second category, 'B', is then the positive class).",
        ),
        (
            "target_positive: true\n",
            "target: grade\n",
            "column 'grade': target_positive is True, not one of the target's categories.",
        ),
        (
            "target_positive: C\n",
            "",
            ": target_positive is 'C', but the schema declares no target. Fix: declare target: <a categorical or "
            "binary column>, or remove target_positive.",
        ),
        (
            "target_positive: 1\n",
            "target: x\n",
            "column 'x': target_positive is 1, but the target has no categories to choose from. Fix: make the "
            "target a categorical or binary column, or remove target_positive.",
        ),
    ],
)
def test_a_bad_target_positive_names_the_file_the_key_and_the_fix(tmp_path, extra, target, message):
    path = write(tmp_path, extra, target)
    with pytest.raises(SchemaError) as e:
        load_schema(path)
    assert str(e.value).startswith(f"file {path}") and message in str(e.value)


COLUMNS = (Column("x", "continuous", 0.0, 1.0), Column("grade", "categorical", categories=("A", "B", "C")))


def rows(n: int, offset: float = 0.0) -> pd.DataFrame:
    """x evenly over [0, 1); grade A below 1/3, B up to 2/3, C above: C is monotone in x, B is not."""
    x = (np.arange(n) + offset) / n
    return pd.DataFrame({"x": x, "grade": np.where(x < 1 / 3, "A", np.where(x < 2 / 3, "B", "C"))})


def test_labels_read_the_declared_positive_class_else_the_second_category():
    frame = rows(6)
    col = COLUMNS[1]
    assert frame["grade"].tolist() == ["A", "A", "B", "B", "C", "C"]
    assert _labels(frame, col, "t").tolist() == [0, 0, 1, 1, 0, 0]
    assert _labels(frame, col, "t", "C").tolist() == [0, 0, 0, 0, 1, 1]
    with pytest.raises(InputError, match=r"the positive class 'D' is not one of the target's categories"):
        _labels(frame, col, "t", "D")


def test_utility_scores_use_target_positive():
    train, test = rows(90), rows(60, 0.5)
    chosen = tstr_auroc(train, train, test, COLUMNS, "grade", 0, positive="C")
    assert {k: chosen[k] for k in ("positive_class", "positive_class_rule", "target_categories")} == {
        "positive_class": "C",
        "positive_class_rule": "target_positive",
        "target_categories": 3,
    }
    # C is a threshold on x: every model ranks the real test rows perfectly
    assert {m: (r["tstr"], r["trtr"]) for m, r in chosen["models"].items()} == {
        "logistic_regression": (1.0, 1.0),
        "random_forest": (1.0, 1.0),
        "gradient_boosting": (1.0, 1.0),
    }
    default = tstr_auroc(train, train, test, COLUMNS, "grade", 0)
    assert (default["positive_class"], default["positive_class_rule"]) == ("B", "second_category")
    # B is the middle third: a line in x cannot rank it (measured 0.3675), trees can
    assert default["models"]["logistic_regression"]["tstr"] == pytest.approx(0.3675, abs=1e-3)
    assert default["models"]["random_forest"]["tstr"] == 1.0
    pearl = tstr_classifiers(train, train, test, COLUMNS, "grade", 0, classifiers=["lda"], positive="C")
    assert (pearl["positive_class"], pearl["positive_class_rule"], pearl["models"]["lda"]["tstr"]["roc"]) == (
        "C",
        "target_positive",
        1.0,
    )


def test_cached_scores_of_another_positive_class_are_refused():
    train, test = rows(90), rows(60, 0.5)
    real = target_scores({"trtr": train}, test, COLUMNS, "grade", 0)
    with pytest.raises(InputError, match="computed for positive class 'B', not 'C'"):
        target_scores({"tstr": train}, test, COLUMNS, "grade", 0, real=real, positive="C")
    trtr = trtr_results(train, test, COLUMNS, "grade", 0, classifiers=["lda"])
    with pytest.raises(InputError, match="fitted for positive class 'B', not 'C'"):
        tstr_classifiers(train, train, test, COLUMNS, "grade", 0, classifiers=["lda"], trtr=trtr, positive="C")


def test_the_verdict_reads_associations_with_the_scored_positive_class():
    """The synthetic table puts C at small x. Scored with C as the positive class, x's association with the target
    is inverted (+0.82 = √(2/3) in real rows, -0.82 in the table) and the verdict names x as distorted; with the
    default B (the middle third, no linear association either way) x is not distorted."""
    train, holdout = rows(300), rows(150, 0.5)
    synth = train.assign(x=1 - train["x"])
    s = {"confidence": 0.95, "bootstrap": 50, "association_tolerance": 0.1, "baseline_draws": 3}
    baselines = verdict.baseline_tables(train, len(synth), 0, s["baseline_draws"])
    tables = {"tstr": synth, "trtr": train, **baselines}

    def associations(positive: str | None) -> dict:
        scored = target_scores(tables, holdout, COLUMNS, "grade", 0, positive=positive)
        return verdict.utility_verdict(scored, synth, baselines, holdout, COLUMNS, 10, s, 0)["associations"]

    real = np.corrcoef(holdout["x"], holdout["grade"] == "C")[0, 1]
    fake = np.corrcoef(synth["x"], synth["grade"] == "C")[0, 1]
    assert real == pytest.approx(np.sqrt(2 / 3), abs=1e-3) and fake == pytest.approx(-np.sqrt(2 / 3), abs=1e-3)
    chosen = associations("C")
    (found,) = chosen["distorted"]
    assert found["feature"] == "x" and chosen["worst_feature_name"] == "x"
    assert found["real"] == pytest.approx(real) and found["synthetic"] == pytest.approx(fake)
    # d = |c_baseline − c_real| − |c_table − c_real|: about |c_real| − 2·|c_real| for an inverted association
    assert found["improvement"] == pytest.approx(-real, abs=0.1) and found["upper_bound"] < 0
    assert associations(None)["distorted"] == []


def test_feature_names_follow_featurise():
    codes = tuple(f"K{i:03d}" for i in range(130))  # a long code list: 64 buckets of 2-3 codes
    columns = (
        Column("age", "integer", 0.0, 100.0),
        Column("smoker", "binary", categories=("no", "yes")),
        Column("colour", "categorical", categories=("red", "green")),
        Column("dx", "categorical", categories=codes),
        Column("grade", "categorical", categories=("A", "B", "C")),
    )
    frame = pd.DataFrame({"age": [1], "smoker": ["no"], "colour": ["red"], "dx": ["K000"], "grade": ["A"]})
    names = feature_names(columns, "grade")
    assert len(names) == featurise(frame, columns, "grade").shape[1] == 1 + 1 + 2 + 64
    assert names[:5] == ["age", "smoker = yes", "colour = red", "colour = green", "dx in K000…K002"]
    assert names[-1] == "dx in K128…K129"
