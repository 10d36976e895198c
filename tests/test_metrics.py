"""DP-auto-GAN's evaluation metrics (§4): dimension-wise probability and prediction, k-way marginal TV,
PCA marginal, Wasserstein score, target accuracy, and their plots, against hand-computed answers."""

from __future__ import annotations

import io
import itertools
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml
from PIL import Image
from scipy.spatial.distance import pdist

from pipelines.data.schema import Column
from pipelines.errors import InputError
from pipelines.reporting import plots
from pipelines.evaluation.dimensionwise import (
    column_score,
    dimension_wise_prediction,
    dimension_wise_probability,
    target_accuracy,
)
from pipelines.evaluation.marginals import (
    cell_codes,
    column_subsets,
    kway_marginal_tv,
    max_distance,
    pca_marginal,
    total_variation,
    wasserstein2,
    wasserstein_score,
)
from pipelines.evaluation.utility import featurise
from pipelines.evaluation.unsupervised import PLOTS, paper_metrics
from pipelines.config import Metrics, section
from tasks.evaluate import PLOTS as EVALUATE_PLOTS

from support.evaluation import DEPENDENT, dependent, shuffled

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(data: bytes) -> None:
    assert data[:8] == PNG_SIGNATURE
    image = Image.open(io.BytesIO(data))
    image.verify()
    assert image.format == "PNG" and image.size[0] > 100 and image.size[1] > 100


# --- identical data: every metric at its perfect value ----------------------------------------------


def test_identical_real_and_synthetic_score_perfectly():
    df = dependent(300, 0)
    prob = dimension_wise_probability(df, df.copy(), DEPENDENT)
    assert list(prob["columns"]) == ["b"]
    assert prob["columns"]["b"]["real"] == prob["columns"]["b"]["synthetic"] == np.mean(df["b"] == "yes")
    assert prob["mean_abs_diff"] == prob["max_abs_diff"] == 0.0

    kway = kway_marginal_tv(df, df.copy(), df, DEPENDENT, k=3, n_subsets=10, bins=10, seed=0)
    assert kway["n_subsets"] == 4 and kway["mean_tv"] == kway["max_tv"] == 0.0  # C(4, 3) = 4 triples

    ws = wasserstein_score(df, df.copy(), df, DEPENDENT, max_rows=None, seed=0)
    assert ws["w2"] == pytest.approx(0.0, abs=1e-7) and ws["score"] == pytest.approx(1.0, abs=1e-7)
    pca, proj = pca_marginal(df, df.copy(), df, DEPENDENT, max_rows=None, seed=0)
    assert pca["w2"] == pytest.approx(0.0, abs=1e-7) and pca["score"] == pytest.approx(1.0, abs=1e-7)
    assert proj["real"].shape == proj["synthetic"].shape == (300, 2)


# --- k-way marginal total variation ------------------------------------------------------------------

TV_COLUMNS = [
    Column("a", "binary", categories=("n", "y")),
    Column("b", "categorical", categories=("x", "y", "z")),
    Column("c", "continuous", 0.0, 1.0),
]


def test_three_way_tv_hand_computed():
    # cells (a, b, c-bin) with 2 bins on [0, 1]: real 000, 000, 121, 111 -> p = {000: .5, 121: .25, 111: .25};
    # synthetic 000, 121, 121, 011 -> q = {000: .25, 121: .5, 011: .25};
    # TV = ½(|.5-.25| + |.25-.5| + |.25-0| + |0-.25|) = 0.5
    real = pd.DataFrame({"a": ["n", "n", "y", "y"], "b": ["x", "x", "z", "y"], "c": [0.1, 0.1, 0.9, 0.6]})
    synth = pd.DataFrame({"a": ["n", "y", "y", "n"], "b": ["x", "z", "z", "y"], "c": [0.1, 0.9, 0.9, 0.7]})
    assert total_variation(real, synth, TV_COLUMNS, bins=2) == pytest.approx(0.5)
    kway = kway_marginal_tv(real, synth, real, TV_COLUMNS, k=3, n_subsets=100, bins=2, seed=0)
    assert kway["n_subsets"] == 1 and kway["mean_tv"] == pytest.approx(0.5)
    assert kway["worst"] == [{"columns": ["a", "b", "c"], "tv": pytest.approx(0.5)}]
    # 1-way on b: real (x, y, z) = (.5, .25, .25), synthetic (.25, .25, .5) -> TV = 0.25
    assert total_variation(real, synth, TV_COLUMNS[1:2], bins=2) == pytest.approx(0.25)
    # 2 bins on c: real (.5, .5), synthetic (.25, .75) -> 0.25
    assert total_variation(real, synth, TV_COLUMNS[2:], bins=2) == pytest.approx(0.25)


def test_joint_tv_counts_the_same_histograms_over_the_domain_and_over_occupied_cells(monkeypatch):
    """The dense count (every cell of the domain) and the sparse one (only the cells rows occupy) are the same TV,
    and both equal ½ Σ |p − q| counted by hand with a Counter over the rows' cell tuples."""
    from collections import Counter

    from pipelines.evaluation import marginals

    rng = np.random.default_rng(3)
    dims = [4, 3, 5]
    real = [rng.integers(0, d, 500) for d in dims]
    synth = [rng.integers(0, d, 300) for d in dims]
    p, q = Counter(zip(*real)), Counter(zip(*synth))
    expected = 0.5 * sum(abs(p[c] / 500 - q[c] / 300) for c in set(p) | set(q))
    dense = marginals.joint_tv(real, synth, dims)
    monkeypatch.setattr(marginals, "MAX_DENSE_CELLS", 1)
    assert dense == pytest.approx(expected, abs=1e-12) and marginals.joint_tv(real, synth, dims) == pytest.approx(
        expected, abs=1e-12
    )


def test_cells_come_from_the_schema():
    col = Column("c", "continuous", 0.0, 10.0)
    codes, n = cell_codes(pd.DataFrame({"c": [0.0, 4.9, 5.0, 10.0, 12.0]}), col, bins=2)
    assert n == 2 and codes.tolist() == [0, 0, 1, 1, 1]  # the upper bound and clipped values: last bin
    cat = Column("k", "categorical", categories=("x", "y", "z"))
    codes, n = cell_codes(pd.DataFrame({"k": ["z", "junk", "x"]}), cat, bins=2)
    assert n == 4 and codes.tolist() == [2, 3, 0]  # outside the schema: its own cell
    # a category the data never shows still has its cell: all mass moved onto it -> TV 1
    assert total_variation(pd.DataFrame({"k": ["x"] * 3}), pd.DataFrame({"k": ["z"] * 5}), [cat], 2) == 1.0


def test_kway_skipped_and_column_subsets():
    assert "skipped" in kway_marginal_tv(
        pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), TV_COLUMNS[:2], k=3, n_subsets=5, bins=2, seed=0
    )
    subsets = column_subsets(10, 3, 50, np.random.default_rng(0))
    assert len(subsets) == len(set(subsets)) == 50 and all(len(set(s)) == 3 for s in subsets)
    assert subsets == column_subsets(10, 3, 50, np.random.default_rng(0))
    assert column_subsets(5, 3, 50, np.random.default_rng(0)) == list(itertools.combinations(range(5), 3))


# --- Wasserstein distance and scores -----------------------------------------------------------------


def test_w2_closed_forms():
    rng = np.random.default_rng(0)
    x = rng.random((200, 3))
    shift = np.array([0.3, -0.4, 0.0])
    assert wasserstein2(x, x + shift) == pytest.approx(0.5, abs=1e-9)  # a translated cloud: W2 = ‖shift‖
    assert wasserstein2(np.array([[0.0], [1.0]]), np.array([[0.5]])) == pytest.approx(0.5)
    # in 1-D with equal sizes the optimal coupling matches sorted samples
    a, b = rng.normal(size=(150, 1)), rng.exponential(size=(150, 1))
    assert wasserstein2(a, b) == pytest.approx(math.sqrt(np.mean((np.sort(a[:, 0]) - np.sort(b[:, 0])) ** 2)))


MIXED = [
    Column("u", "continuous", 0.0, 10.0),
    Column("v", "integer", 0, 100),
    Column("s", "binary", categories=("no", "yes")),
    Column("k", "categorical", categories=("r", "g", "b")),
]


def test_max_distance_from_schema(adult_schema, bc_schema):
    assert max_distance(MIXED) == pytest.approx(math.sqrt(5))  # 2 numeric + 1 binary + 2 x 1 categorical
    # brute force over every extreme row of the universe: numeric at a bound, every category
    corners = pd.DataFrame(
        list(itertools.product([0.0, 10.0], [0, 100], ["no", "yes"], ["r", "g", "b"])), columns=["u", "v", "s", "k"]
    )
    assert pdist(featurise(corners, MIXED)).max() == pytest.approx(math.sqrt(5))
    assert max_distance(adult_schema.columns) == pytest.approx(math.sqrt(5 + 2 + 2 * 7))  # education_num: derived
    assert max_distance(bc_schema.columns) == pytest.approx(math.sqrt(31))


GRID = [
    Column("g1", "continuous", 0.0, 1.0),
    Column("g2", "continuous", 0.0, 1.0),
    Column("g3", "continuous", 0.0, 1.0),
]


def grid() -> pd.DataFrame:
    """A product grid: the sample covariance is exactly diagonal, so PCA's axes are g1 and g2."""
    rows = itertools.product(np.linspace(0.1, 0.9, 9), [0.4, 0.5, 0.6], [0.45, 0.55])
    return pd.DataFrame(list(rows), columns=["g1", "g2", "g3"])


def test_wasserstein_scores_of_a_shifted_grid_hand_computed():
    real = grid()
    # variances (population): g1 0.6/9, g2 0.02/3, g3 0.0025 -> v = (var1 + var2) / (var1 + var2 + var3)
    v = (0.6 / 9 + 0.02 / 3) / (0.6 / 9 + 0.02 / 3 + 0.0025)
    shifted = real.assign(g1=real["g1"] + 0.05)  # along PC 1: W2 = 0.05 whole and projected
    ws = wasserstein_score(real, shifted, real, GRID, max_rows=None, seed=0)
    assert ws["w2"] == pytest.approx(0.05) and ws["score"] == pytest.approx(1 - 0.05 / math.sqrt(3))
    pca, _ = pca_marginal(real, shifted, real, GRID, max_rows=None, seed=0)
    assert pca["explained_variance_ratio"] == pytest.approx(v)
    assert pca["w2"] == pytest.approx(0.05) and pca["score"] == pytest.approx(1 - 0.05 / (math.sqrt(v * 3)))
    # a shift orthogonal to the PCA plane is invisible to the projection but not to the whole-data score
    off_plane = real.assign(g3=real["g3"] + 0.2)
    assert pca_marginal(real, off_plane, real, GRID, max_rows=None, seed=0)[0]["score"] == pytest.approx(1.0)
    assert wasserstein_score(real, off_plane, real, GRID, None, 0)["score"] == pytest.approx(1 - 0.2 / math.sqrt(3))
    # the holdout reference: real vs itself here
    assert ws["holdout_reference_score"] == pytest.approx(1.0) and pca["holdout_reference_score"] == pytest.approx(1.0)


def test_ot_subsample_is_seeded_and_capped():
    df = dependent(500, 1)
    a = wasserstein_score(df, dependent(500, 2), df, DEPENDENT, max_rows=100, seed=3)
    assert a["rows"] == {"real": 100, "synthetic": 100}
    assert a == wasserstein_score(df, dependent(500, 2), df, DEPENDENT, max_rows=100, seed=3)
    assert a["w2"] != wasserstein_score(df, dependent(500, 2), df, DEPENDENT, max_rows=100, seed=4)["w2"]


def test_pca_on_constant_rows_is_skipped():
    df = pd.DataFrame({"g1": [0.5] * 5, "g2": [0.5] * 5, "g3": [0.5] * 5})
    assert "skipped" in pca_marginal(df, df, df, GRID, None, 0)[0]


# --- dimension-wise probability and prediction ---------------------------------------------------------


def test_dimension_wise_probability_hand_computed():
    real = pd.DataFrame({"s": ["yes", "no", "no", "no"], "u": [1.0] * 4})
    synth = pd.DataFrame({"s": ["yes", "yes", "no", "yes", "no"], "u": [1.0] * 5})
    cols = [Column("s", "binary", categories=("no", "yes")), Column("u", "continuous", 0.0, 10.0)]
    prob = dimension_wise_probability(real, synth, cols)
    assert prob["columns"] == {"s": {"positive_class": "yes", "real": 0.25, "synthetic": 0.6}}
    assert prob["mean_abs_diff"] == pytest.approx(0.35)
    none = dimension_wise_probability(real, synth, cols[1:])
    assert none == {"columns": {}, "reason": "the schema has no binary column"}
    with pytest.raises(InputError, match=r"column 's'.*outside the schema's categories.*Fix:"):
        dimension_wise_probability(real, synth.assign(s="maybe"), cols)


@pytest.mark.integration
def test_dimension_wise_prediction_collapses_on_independent_columns():
    train, holdout = dependent(2000, 0), dependent(1000, 1)
    result = dimension_wise_prediction(train, shuffled(train, 2), holdout, DEPENDENT, seed=0)
    cols = result["columns"]
    assert {c: (e["model"], e["score"]) for c, e in cols.items()} == {
        "x1": ("lasso", "r2"),
        "x2": ("lasso", "r2"),
        "b": ("logistic_regression", "auroc"),
        "c": ("random_forest", "f1"),
    }
    # fitted on real rows every column is well predicted from the others ...
    assert cols["x1"]["real"] > 0.9 and cols["x2"]["real"] > 0.9
    assert cols["b"]["real"] > 0.9 and cols["c"]["real"] > 0.85  # b has 5 % label noise
    # ... fitted on independent columns nothing is: R² at most 0, F1 at chance (1/3 for 3 balanced classes)
    assert cols["x1"]["synthetic"] <= 0.05 and cols["x2"]["synthetic"] <= 0.05
    assert cols["c"]["synthetic"] < 0.5
    assert result["summary"]["n_scored"] == 4 and result["summary"]["mean_gap"] > 0.5
    assert set(result["by_score"]) == {"auroc", "f1", "r2"}


@pytest.mark.integration
def test_auroc_of_a_classifier_fitted_on_independent_columns_is_chance_on_average():
    # AUROC ignores the scale of the fitted direction, so a single fit on independent columns lands
    # anywhere (its sign is a coin flip); over independent shuffles it averages to 0.5. Eight pure-noise
    # columns keep each fit's deviation small, so 20 shuffles pin the mean to ±0.1.
    noise = [Column(f"n{i}", "continuous", 0.0, 1.0) for i in range(8)]
    cols = [Column("x", "continuous", 0.0, 1.0), Column("b", "binary", categories=("no", "yes"))] + noise

    def data(n, seed):
        rng = np.random.default_rng(seed)
        x = rng.random(n)
        return pd.DataFrame(
            {
                "x": x,
                "b": np.where(x + rng.normal(0, 0.1, n) > 0.5, "yes", "no"),
                **{c.name: rng.random(n) for c in noise},
            }
        )

    train, holdout = data(1000, 0), data(1000, 1)
    assert column_score(cols[1], train, holdout, cols, seed=0) > 0.95
    scores = [column_score(cols[1], shuffled(train, s), holdout, cols, seed=0) for s in range(20)]
    assert abs(np.mean(scores) - 0.5) < 0.1


@pytest.mark.integration
def test_constant_synthetic_column_is_dropped_with_a_reason():
    train, holdout = dependent(400, 0), dependent(200, 1)
    synth = shuffled(train, 2).assign(b="no")
    result = dimension_wise_prediction(train, synth, holdout, DEPENDENT, seed=0)
    b = result["columns"]["b"]
    assert b["real"] > 0.9 and b["synthetic"] is None
    assert b["dropped"] == "the column is constant in the synthetic rows: no model can be fitted"
    assert result["summary"]["n_scored"] == 3 and result["summary"]["n_dropped"] == 1
    constant_holdout = dimension_wise_prediction(train, synth, holdout.assign(c="low"), DEPENDENT, seed=0)
    assert "constant in the real holdout" in constant_holdout["columns"]["c"]["dropped"]
    assert_png(plots.scatter_against_real(result["columns"].values(), "t", "x", "y", "none"))


# --- target accuracy (Table 2) ---------------------------------------------------------------------------


@pytest.mark.integration
def test_target_accuracy():
    train, holdout = dependent(1000, 0), dependent(500, 1)
    acc = target_accuracy(train, shuffled(train, 2), holdout, DEPENDENT, "b", seed=0)
    assert acc["majority_baseline"] == pytest.approx(max(np.mean(holdout["b"] == "yes"), np.mean(holdout["b"] == "no")))
    assert acc["real"] > 0.9 and acc["synthetic"] < 0.65 and acc["gap"] == pytest.approx(acc["real"] - acc["synthetic"])
    single = target_accuracy(train, train.assign(b="no"), holdout, DEPENDENT, "b", seed=0)
    assert single["synthetic"] == pytest.approx(np.mean(holdout["b"] == "no")) and "'no'" in single["note"]
    assert target_accuracy(train, train, holdout, DEPENDENT, None, 0) == {"skipped": "schema declares no target"}
    with pytest.raises(InputError, match="categorical or binary"):
        target_accuracy(train, train, holdout, DEPENDENT, "x1", 0)


# --- the evaluate stage's wiring and plots -----------------------------------------------------------------


@pytest.mark.integration
def test_paper_metrics_and_plots_are_valid_pngs():
    train, holdout = dependent(300, 0), dependent(150, 1)
    schema = SimpleNamespace(columns=tuple(DEPENDENT), target="b")
    settings = knobs({"max_rows": 200, "ot_max_rows": 100, "kway_subsets": 3})
    metrics, pngs = paper_metrics(train, dependent(300, 2), holdout, schema, 0, settings)
    assert set(metrics) == {"dimension_wise", "kway_marginal", "pca_marginal", "wasserstein_score", "target_accuracy"}
    assert metrics["kway_marginal"]["n_subsets"] == 3 and metrics["wasserstein_score"]["rows"]["real"] == 100
    assert metrics["target_accuracy"]["n_test"] == 150  # the holdout is under the cap
    assert set(pngs) == set(PLOTS)
    for data in pngs.values():
        assert_png(data)
    # not-applicable plots are still valid figures that say so
    assert_png(plots.pca_scatter({}, None, "no projection"))


def knobs(raw: dict) -> dict:
    """The DP-auto-GAN metrics' knobs of an `evaluate:` section, as the baseline stage passes them."""
    return section("evaluate", raw).model_dump(include=set(Metrics.model_fields))


def test_knobs_validation():
    assert knobs({}) == {
        "read_max_rows": 1_000_000,
        "max_rows": 10000,
        "utility_max_rows": 50000,
        "ot_max_rows": 2000,
        "kway": 3,
        "kway_subsets": 100,
        "kway_bins": 10,
    }
    assert knobs({"read_max_rows": None})["read_max_rows"] is None
    with pytest.raises(InputError, match=r"'evaluate\.read_max_rows': must be a positive integer or null"):
        knobs({"read_max_rows": 0})
    assert knobs({"max_rows": None})["max_rows"] is None
    assert knobs({"utility_max_rows": None})["utility_max_rows"] is None
    with pytest.raises(InputError, match=r"'evaluate\.utility_max_rows': must be a positive integer or null"):
        knobs({"utility_max_rows": 0})
    with pytest.raises(InputError, match=r"params\.yaml: 'evaluate\.kway': must be an integer in \[1, 5\].*Fix:"):
        knobs({"kway": 0})
    with pytest.raises(InputError, match="evaluate.kway_bins"):
        knobs({"kway_bins": None})


def test_dvc_declares_every_plot_the_stage_writes():
    dvc = yaml.safe_load((Path(__file__).resolve().parents[1] / "dvc.yaml").read_text())
    declared = [next(iter(p)) for p in dvc["stages"]["evaluate"]["do"]["plots"]]
    assert declared == [f"reports/${{dataset.name}}/${{item}}/{name}.png" for name in EVALUATE_PLOTS]
    assert all(next(iter(p.values()))["cache"] is False for p in dvc["stages"]["evaluate"]["do"]["plots"])
