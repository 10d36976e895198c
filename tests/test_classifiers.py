"""Table 2's 10-classifier TSTR on breast cancer, on cases whose answer is known by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.data.readers import read_table
from pipelines.data.schema import load_schema
from pipelines.data.transform import train_holdout_split
from pipelines.errors import InputError
from pipelines.evaluation.classifiers import CLASSIFIERS, METRICS, tstr_classifiers


@pytest.fixture(scope="module")
def split():
    schema = load_schema(Path(__file__).resolve().parents[1] / "schemas" / "breast_cancer.yaml")
    train, test = train_holdout_split(read_table("bundled:breast_cancer", schema)[0], 0.2, 0)
    return schema, train, test


@pytest.mark.integration
def test_identical_tables_give_tstr_equal_to_trtr(split):
    """Synthetic = the real training table: every classifier (seeded) scores exactly as train-on-real."""
    schema, train, test = split
    result = tstr_classifiers(train, train, test, schema.columns, schema.target, seed=0)
    assert sorted(result["models"]) == sorted(CLASSIFIERS) and len(CLASSIFIERS) == 10
    for name, r in result["models"].items():
        assert r["tstr"] == r["trtr"], name
        assert r["trtr"]["roc"] > 0.85, name  # breast cancer is easy for all ten
    for m in METRICS:
        assert result["average"]["tstr"][m] == pytest.approx(np.mean([r["tstr"][m] for r in result["models"].values()]))


@pytest.mark.slow
def test_flipped_labels_mirror_the_roc(split):
    """Synthetic = real with the two target categories swapped: each classifier learns the mirror
    image, so its test ROC is 1 − the train-on-real ROC (for the score and for hard labels)."""
    schema, train, test = split
    a, b = schema.columns[-1].categories
    flipped = train.copy()
    flipped[schema.target] = train[schema.target].map({a: b, b: a}).astype(train[schema.target].dtype)
    result = tstr_classifiers(train, flipped, test, schema.columns, schema.target, seed=0)
    for name, r in result["models"].items():
        assert r["tstr"]["roc"] + r["trtr"]["roc"] == pytest.approx(1.0, abs=0.01), name
        # hard labels: tied votes (bagging's 5-5) go to the first class whichever class it is
        assert r["tstr"]["roc_label"] + r["trtr"]["roc_label"] == pytest.approx(1.0, abs=0.02), name


@pytest.mark.integration
def test_degenerate_synthetic_table_scores_chance_with_a_note(split):
    """Constant features (a collapsed generator): LDA and AdaBoost cannot be fitted and score chance
    (ROC 0.5, PRC = the test positive rate); the tree-based and linear models predict one constant."""
    schema, train, test = split
    a, b = schema.columns[-1].categories
    constant = pd.concat([train.iloc[[0]]] * 200, ignore_index=True)
    constant[schema.target] = pd.Series([a, b] * 100, dtype=train[schema.target].dtype)
    result = tstr_classifiers(train, constant, test, schema.columns, schema.target, seed=0)
    positive_rate = float((test[schema.target] == b).mean())
    for name in ("lda", "adaboost"):
        assert "fitting failed" in result["models"][name]["note"]
    for name in ("lda", "adaboost", "logistic_regression", "decision_tree", "gradient_boosting", "linear_svm"):
        r = result["models"][name]["tstr"]
        assert r["roc"] == 0.5 and r["roc_label"] == 0.5, name
        assert r["prc_label"] == pytest.approx(positive_rate), name


def test_bad_target_is_refused(split):
    schema, train, test = split
    with pytest.raises(InputError, match="target"):
        tstr_classifiers(train, train, test, schema.columns, "mean_radius")
    with pytest.raises(ValueError, match="unknown classifiers"):
        tstr_classifiers(train, train, test, schema.columns, schema.target, classifiers=["svm"])
