"""Release scorecard: association (Pearson, Cramér's V, η), MMD, W1, detection AUC, range queries and the
2-way marginals, against hand-computed answers; independently shuffled columns break the joint metrics
and leave the marginals perfect."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from pipelines.data.schema import Column
from pipelines.evaluation.association import association_matrix, correlation_ratio, cramers_v
from pipelines.evaluation.fidelity import marginal_distances, summarise
from pipelines.evaluation.joint import FOREST, detection_auc, mmd_test, table_wasserstein1
from pipelines.evaluation.queries import query_arrays, random_range_queries, range_query_answer, range_query_error
from pipelines.config import Scorecard
from pipelines.evaluation.scorecard import scorecard
from pipelines.evaluation.utility import MODELS
from support.evaluation import DEPENDENT, dependent, shuffled

X = Column("x", "continuous", 0.0, 1.0)


def test_cramers_v_of_two_by_two_tables():
    def table(a, b, c, d):  # counts of (0,0), (0,1), (1,0), (1,1)
        return (np.repeat([0, 0, 1, 1], [a, b, c, d]), np.repeat([0, 1, 0, 1], [a, b, c, d]))

    # 2×2: V = |ad − bc| / √((a+b)(c+d)(a+c)(b+d)) = (400 − 100) / 900
    assert cramers_v(*table(20, 10, 10, 20)) == pytest.approx(1 / 3)
    assert cramers_v(*table(10, 0, 0, 10)) == pytest.approx(1.0)
    assert cramers_v(*table(25, 25, 25, 25)) == pytest.approx(0.0)
    assert cramers_v(np.zeros(5), np.arange(5)) == 0.0  # one occurring category: no association measurable


def test_correlation_ratio_hand_computed():
    # means 2 and 5, grand mean 3.5: between = 3·1.5² · 2 = 13.5, total = Σ (y − 3.5)² = 17.5
    assert correlation_ratio(np.repeat([0, 1], 3), np.arange(1.0, 7.0)) == pytest.approx(math.sqrt(13.5 / 17.5))
    assert correlation_ratio(np.array([0, 0, 1, 1]), np.array([0.0, 1.0, 0.0, 1.0])) == 0.0


def test_association_matrix_uses_the_measure_of_each_pair():
    df = pd.DataFrame(
        {
            "x1": [0.1, 0.2, 0.3, 0.4],
            "x2": [0.9, 0.7, 0.5, 0.3],
            "b": ["no", "no", "yes", "yes"],
            "c": ["low", "low", "high", "high"],
        }
    )
    m = association_matrix(df, DEPENDENT)
    assert m[0, 1] == pytest.approx(-1.0)  # Pearson, x2 = 1.1 − 2·x1
    assert m[2, 3] == pytest.approx(1.0)  # Cramér's V, b determines c
    assert m[0, 2] == pytest.approx(math.sqrt(0.04 / 0.05))  # η: 2·0.1² + 2·0.1² between, 0.05 total
    assert np.allclose(m, m.T) and np.allclose(np.diag(m), 1)


def test_mmd_of_two_point_masses_is_the_closed_form():
    a, b = pd.DataFrame({"x": np.zeros(20)}), pd.DataFrame({"x": np.ones(20)})
    out = mmd_test(a, b, [X], n_permutations=99, max_rows=None, seed=0, bandwidth=1.0)
    assert out["mmd2_u"] == pytest.approx(2 - 2 * math.exp(-0.5))  # k = 1 within each sample, e^{−1/2} across
    assert out["p_value"] == pytest.approx(1 / 100)  # no random relabelling of 40 points reaches the observed split


def test_table_wasserstein1_of_a_shift_is_the_shift():
    real = pd.DataFrame({"x": np.linspace(0, 0.5, 11)})
    out = table_wasserstein1(real, real.assign(x=real["x"] + 0.3), real, [X], None, 0)
    assert out["w1"] == pytest.approx(0.3) and out["holdout_reference"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.integration
@pytest.mark.parametrize(
    "classifier", [FOREST, ("gradient boosting", MODELS["gradient_boosting"])], ids=["forest", "gradient_boosting"]
)
def test_detection_auc_is_chance_for_one_distribution_and_one_for_disjoint_supports(classifier):
    rng = np.random.default_rng(0)
    same = detection_auc(
        pd.DataFrame({"x": rng.random(300)}), pd.DataFrame({"x": rng.random(400)}), [X], 200, 0, classifier=classifier
    )
    assert abs(same["auc"] - 0.5) < 0.1 and same["rows_per_class"] == 200
    apart = detection_auc(
        pd.DataFrame({"x": rng.random(100) / 2}),
        pd.DataFrame({"x": 0.5 + rng.random(100) / 2}),
        [X],
        None,
        0,
        classifier=classifier,
    )
    assert apart["auc"] > 0.99 and apart["rows_per_class"] == 100
    assert apart["classifier"] == f"{classifier[0]}, out-of-fold scores"


def test_range_query_answers_and_errors_hand_computed():
    real = pd.DataFrame({"x": [0.1, 0.2, 0.3, 0.9], "b": ["no", "yes", "yes", "yes"]})
    synth = pd.DataFrame({"x": [0.1, 0.9, 0.9, 0.9], "b": ["yes", "yes", "yes", "yes"]})
    cols = [X, DEPENDENT[2]]
    query = [(X, (0.0, 0.5)), (DEPENDENT[2], ("yes",))]
    assert range_query_answer(query_arrays(real, cols), query) == 0.5  # 0.2 and 0.3
    assert range_query_answer(query_arrays(synth, cols), query) == 0.25  # 0.1
    outside = pd.DataFrame({"x": [0.1, 0.1], "b": ["maybe", "yes"]})  # a value outside the schema's list: code −1
    assert range_query_answer(query_arrays(outside, cols), query) == 0.5
    assert range_query_answer(query_arrays(outside, cols), [(DEPENDENT[2], ("no",))]) == 0.0
    out = range_query_error(real, real, synth, cols, 50, 2, 0)
    assert out["mean_error"] == 0.0 and out["holdout_reference_mean_error"] > 0


def test_random_range_queries_come_from_the_schema():
    queries = random_range_queries(DEPENDENT, 200, 3, np.random.default_rng(0))
    for q in queries:
        assert len({col.name for col, _ in q}) == 3
        for col, allowed in q:
            if col.kind == "continuous":
                assert col.lower <= allowed[0] <= allowed[1] <= col.upper
            else:
                assert allowed and set(allowed) <= set(col.categories)
    with pytest.raises(ValueError, match="at least 3 columns"):
        random_range_queries(DEPENDENT[:2], 1, 3, np.random.default_rng(0))


@pytest.mark.slow
def test_shuffled_columns_break_joint_metrics_and_keep_marginals_perfect():
    """Each real column permuted independently: identical 1-way marginals, no dependence left. Every joint
    metric must score it clearly worse than a fresh sample of the same distribution."""
    train, holdout, fresh = dependent(240, 10), dependent(120, 1), dependent(240, 40)
    broken = shuffled(train, 3)
    assert summarise(marginal_distances(train, broken, DEPENDENT)) == {
        "mean_tv": 0.0,
        "max_tv": 0.0,
        "mean_w1": 0.0,
        "max_w1": 0.0,
    }
    schema = SimpleNamespace(columns=tuple(DEPENDENT), target="b", target_positive=None)
    k = {
        **Scorecard().model_dump(),
        "mmd_permutations": 100,
        "range_queries": 300,
        "ot_max_rows": 300,
        "kway_bins": 10,
        "detection_max_rows": 150,
    }
    good, bad = (scorecard(train, s, holdout, schema, 0, k) for s in (fresh, broken))
    assert bad["marginal_2way"]["mean_tv"] > good["marginal_2way"]["mean_tv"] + 0.2
    assert bad["marginal_2way"]["pearl_mean_l1"] == pytest.approx(2 * bad["marginal_2way"]["mean_tv"])
    assert bad["correlation"]["mean_abs_diff"] > 0.5 > 0.05 > good["correlation"]["mean_abs_diff"]
    assert bad["mmd"]["p_value"] <= 0.02 and good["mmd"]["p_value"] > 0.05
    assert bad["wasserstein1"]["w1"] > 2 * good["wasserstein1"]["w1"]
    assert bad["detection"]["auc"] > 0.9 and good["detection"]["auc"] < 0.6
    assert bad["range_queries"]["mean_error"] > 2 * good["range_queries"]["mean_error"]
    assert bad["classifiers"]["average"]["tstr"]["roc"] < good["classifiers"]["average"]["tstr"]["roc"] - 0.1
