"""Privacy-risk attacks: hand-computed cases for every statistic, and the planted leak (a "generator" that
returns its training rows) failing every risk gate while a fresh real sample passes them all."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipelines.data.schema import Column
from pipelines.errors import InputError
from pipelines.evaluation.attacks import anonymeter
from pipelines.evaluation.attacks.disclosure import copies, impute, presence_at_precision
from pipelines.evaluation.attacks.distance import gower_features, nearest
from pipelines.evaluation.attacks.gates import family_z
from pipelines.gates.risk import risk_gates
from pipelines.evaluation.attacks.membership import attack_roc, auc, kde_log_density, split_targets
from pipelines.evaluation.attacks.suite import privacy_risk
from pipelines.evaluation.queries import query_arrays
from sections import attack_settings as settings, thresholds

NUM = Column("x", "continuous", 0.0, 10.0)
CAT = Column("c", "categorical", categories=("a", "b", "c"))
BIN = Column("b", "binary", categories=("no", "yes"))


# --- hand-computed statistics ------------------------------------------------------------------------


def test_gower_distance_hand_computed():
    a = pd.DataFrame({"x": [2.0], "c": ["a"], "b": ["no"]})
    b = pd.DataFrame({"x": [7.0], "c": ["b"], "b": ["no"]})
    d, i = nearest(gower_features(a, [NUM, CAT, BIN]), gower_features(b, [NUM, CAT, BIN]))
    assert d[0, 0] == pytest.approx((0.5 + 1 + 0) / 3) and i[0, 0] == 0  # |2 − 7| / 10, a ≠ b, no = no


def test_auc_and_low_fpr_tpr_hand_computed():
    assert auc(np.array([3.0, 4.0]), np.array([1.0, 2.0])) == 1.0
    assert auc(np.array([1.0, 3.0]), np.array([2.0, 4.0])) == 0.25  # one of four pairs ranked right
    assert auc(np.array([1.0]), np.array([1.0])) == 0.5  # a tie counts one half
    out = attack_roc(np.array([5.0, 4.0, 1.0]), np.array([3.0, 2.0, 0.0]), 50, np.random.default_rng(0))
    assert out["auc"] == pytest.approx(7 / 9) and out["tpr_at_1pct_fpr"] == pytest.approx(2 / 3)
    assert out["auc_ci95"][0] <= out["auc"] <= out["auc_ci95"][1]


def test_kde_log_density_is_the_gaussian_at_one_point():
    sample = np.array([[0.0, 0.0], [1.0, 1.0]])
    h = 0.5 * 2 ** (-1 / 6)  # Scott: mean std 0.5, n = 2, d = 2
    expected = np.log(0.5 * (1 + math.exp(-1 / h**2)) / (2 * math.pi * h**2))
    assert kde_log_density(sample, np.zeros((1, 2)))[0] == pytest.approx(expected)


def test_kde_log_density_is_scikit_learns_kernel_density():
    """The blocked closed form against scikit-learn's tree KDE on one-hot-and-numeric rows (more points than a
    block), and far in the tail (every kernel term underflows as a float) the exact log-sum-exp of the pairwise
    squared distances, which the tree misses by 466 nats."""
    from scipy.spatial.distance import cdist
    from scipy.special import logsumexp
    from sklearn.neighbors import KernelDensity

    rng = np.random.default_rng(0)
    sample = np.hstack([rng.random((700, 3)), np.eye(5)[rng.integers(5, size=700)]])
    points = np.hstack([rng.random((600, 3)), np.eye(5)[rng.integers(5, size=600)]])
    n, d = sample.shape
    h = float(sample.std(axis=0).mean()) * n ** (-1 / (d + 4))
    assert kde_log_density(sample, points) == pytest.approx(
        KernelDensity(bandwidth=h).fit(sample).score_samples(points), rel=1e-9, abs=1e-9
    )
    far = np.full((1, d), 40.0)
    exact = logsumexp(-cdist(far, sample, "sqeuclidean") / (2 * h * h)) - np.log(n) - d / 2 * np.log(2 * np.pi * h * h)
    assert kde_log_density(sample, far)[0] == pytest.approx(exact, rel=1e-12) and exact < -1e5


def test_singling_out_counts_matches_by_category_code_as_by_value():
    """The matching on category codes finds the rows the comparison of values finds, and a value outside the
    schema's list matches nothing listed."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.uniform(0, 10, 500), "c": rng.choice(["a", "b", "c"], 500)})
    codes = query_arrays(frame, [NUM, CAT])
    for query in anonymeter.random_queries([NUM, CAT], 2, 50, rng):
        by_value = np.ones(500, bool)
        for col, op, v in query:
            x = frame[col.name].to_numpy()
            by_value &= (x == v) if op == "==" else (x <= v) if op == "<=" else (x >= v)
        assert (anonymeter._matches(codes, query) == by_value).all()
    assert not anonymeter._matches(codes, [(CAT, "==", "zzz")]).any()


def test_wilson_interval_and_risk_formula():
    rate, err = anonymeter.wilson(5, 10)
    z2 = 1.96**2
    assert rate == pytest.approx(0.5) and err == pytest.approx(1.96 / (10 + z2) * math.sqrt(2.5 + z2 / 4))
    r = anonymeter.privacy_risk((90, 100), (40, 100), (5, 100))
    (rm, em), (rc, ec) = anonymeter.wilson(90, 100), anonymeter.wilson(40, 100)
    assert r["risk"] == pytest.approx((rm - rc) / (1 - rc))
    half = math.hypot(em / (1 - rc), ec * (1 - rm) / (1 - rc) ** 2)
    assert r["risk_ci95"] == pytest.approx([r["risk"] - half, r["risk"] + half]) and r["informative"]


def test_exchangeable_control_is_the_hypergeometric_expectation():
    # n = 3 training and m = 1 control rows. t = 2 matches: P(a = 1) = C(3,1)·C(1,1)/C(4,2) = 1/2;
    # t = 1: P = 3/4; t = 0: 0; t = 4: every row matches, a = 3.
    assert anonymeter.exchangeable_successes(np.array([1, 1, 0, 3]), np.array([1, 0, 0, 1]), 3, 1) == pytest.approx(
        0.5 + 0.75
    )


def test_exchangeable_control_matches_the_main_attack_when_membership_is_irrelevant():
    """Rows split at random into 'training' and 'control': the expected singling-out success equals the
    observed one on average, whatever the control set's size."""
    rng = np.random.default_rng(0)
    w = rng.uniform(0, 0.01, 3000)  # each query's match probability
    n, m = 800, 100
    matches = rng.random((3000, n + m)) < w[:, None]
    a, b = matches[:, :n].sum(1), matches[:, n:].sum(1)
    assert anonymeter.exchangeable_successes(a, b, n, m) == pytest.approx((a == 1).sum(), rel=0.05)


def test_univariate_queries_single_out_one_synthetic_row():
    synth = pd.DataFrame({"x": [1.0, 2.0, 2.0], "c": ["a", "a", "b"]})
    found = {(c.name, op, v) for q in anonymeter.univariate_queries(synth, [NUM, CAT]) for c, op, v in q}
    assert found == {("x", "==", 1.0), ("x", "<=", 1.0), ("c", "==", "b")}


def test_presence_at_the_largest_epsilon_with_precision_above_55_percent():
    # ε = 0: {m0} 1/1; ε = 0.05: {m0, n0} 1/2; ε = 0.1: {m0, n0, m1} 2/3; ε = 0.2: 2/4
    out = presence_at_precision(np.array([0.0, 0.1]), np.array([0.05, 0.2]))
    assert out == {"epsilon": 0.1, "sensitivity": 1.0, "precision": pytest.approx(2 / 3)}
    assert presence_at_precision(np.array([0.3]), np.array([0.1, 0.2]))["epsilon"] is None


def test_knn_imputation_means_numeric_and_votes_categorical():
    released = pd.DataFrame({"x": [1.0, 3.0, 9.0], "c": ["b", "b", "a"], "b": ["yes", "no", "no"]})
    cand = pd.DataFrame({"x": [0.0], "c": ["a"], "b": ["yes"]})
    out = impute(cand, released, [BIN], [NUM, CAT], 2)  # nearest on b: row 0 (yes), then row 1 (first tie)
    assert out["x"][0] == pytest.approx(2.0) and out["c"][0] == "b"


def test_exact_matches_and_near_duplicates_hand_computed():
    train = pd.DataFrame({"x": [1.0, 5.0], "c": ["a", "b"]})
    synth = pd.DataFrame({"x": [1.0, 5.05, 9.0, 5.0], "c": ["a", "b", "c", "a"]})
    out = copies(train, synth, train.iloc[:1], [NUM, CAT], 0.01, None, None, np.random.default_rng(0))
    assert out["exact_match_rate"] == 0.25 and out["holdout_exact_match_rate"] == 1.0
    assert out["near_duplicate_rate"] == 0.5  # 5.05 is 0.005/2 = 0.0025 from (5.0, b)


def test_settings_and_thresholds_refuse_bad_values(bc_schema):
    s = settings(None, bc_schema)
    assert s["secret"] == "target" and "target" not in s["known"] and len(s["known"]) == 30
    assert not set(s["linkability_columns"][0]) & set(s["linkability_columns"][1])
    with pytest.raises(InputError, match=r"params\.yaml.*evaluate\.attacks\.secret.*Fix:"):
        settings({"secret": "nope"}, bc_schema)
    with pytest.raises(InputError, match=r"'evaluate\.attacks\.secrets': unknown evaluate\.attacks keys.*Fix:"):
        settings({"secrets": "target"}, bc_schema)
    with pytest.raises(InputError, match="disjoint"):
        settings({"linkability_columns": [["mean_radius"], ["mean_radius"]]}, bc_schema)
    with pytest.raises(InputError, match=r"'risk_gates\.membership_auc_max': must be a number in \[0, 1\].*Fix:"):
        thresholds({"membership_auc_max": 2})


# --- the family-wise risk bound ---------------------------------------------------------------------


def _release(rng: np.random.Generator, auc_shift: float, p_control: float, risk: float, n: int) -> dict:
    """privacy_risk-shaped results of one release whose true risk sits at given values: two membership
    attacks with Gaussian scores (AUC = Φ(shift/√2)) and four anonymeter attacks with R = `risk`."""
    p_main = p_control + risk * (1 - p_control)
    member = {a: attack_roc(rng.normal(auc_shift, 1, n), rng.normal(0, 1, n), 50, rng) for a in ("domias", "dcr")}
    attacks = {
        a: anonymeter.privacy_risk((rng.binomial(n, p_main), n), (rng.binomial(n, p_control), n), (0, n))
        for a in ("singling_out_univariate", "singling_out_multivariate", "linkability", "inference")
    }
    return {
        "outside_dp": "real rows",
        "membership": member,
        "anonymeter": attacks,
        "copies": {
            "exact_match_rate": 0.0,
            "holdout_exact_match_rate": 0.0,
            "exact_match_counts": {"synthetic": [0, n], "holdout": [0, n]},
        },
    }


def test_family_wise_bound_hand_computed():
    assert family_z(0.95, 7) == pytest.approx(2.45000, abs=1e-5)  # Φ⁻¹(1 − 0.05/7)
    risk = _release(np.random.default_rng(0), 0.0, 0.5, 0.0, 200)
    risk["anonymeter"]["inference"] = anonymeter.privacy_risk((90, 100), (40, 100), (5, 100))
    gates = {g.name: g.evidence for g in risk_gates(risk, thresholds(None))}
    z = family_z(0.95, 7)  # 2 membership AUCs, the exact-copy excess, 4 anonymeter risks
    (rm, em), (rc, ec) = anonymeter.wilson(90, 100, z), anonymeter.wilson(40, 100, z)
    low = (rm - rc) / (1 - rc) - math.hypot(em / (1 - rc), ec * (1 - rm) / (1 - rc) ** 2)
    assert gates["inference_risk"]["risk_lower_bound"] == pytest.approx(low)
    assert low < risk["anonymeter"]["inference"]["risk_ci95"][0]  # stricter than the per-test 95 % bound
    dcr = risk["membership"]["dcr"]
    assert gates["membership_inference"]["dcr_auc_lower_bound"] == pytest.approx(dcr["auc"] - z * dcr["auc_se"])
    assert gates["membership_inference"]["family_tests"] == gates["exact_copies"]["family_tests"] == 7
    with pytest.raises(InputError, match=r"'risk_gates\.confidence': must be a number in \(0, 1\).*Fix:"):
        thresholds({"confidence": 1})


@pytest.mark.slow
def test_family_wise_refusal_rate_at_the_thresholds():
    """A release whose true risks sit exactly at every threshold (AUC 0.6, R = 0.1) is refused by chance in at
    most ≈ α = 5 % of releases; per-test 95 % intervals (z = 1.96, i.e. confidence 1 − 7 · 0.025) refuse
    ≈ 1 − 0.975⁶ = 14 % (no copies here: the exact-copy bound never refuses)."""
    rng = np.random.default_rng(1)
    shift = math.sqrt(2) * 0.2533471  # Φ(shift/√2) = 0.6
    releases = [_release(rng, shift, 0.5, 0.1, 400) for _ in range(500)]

    def refused(confidence: float) -> float:
        t = thresholds({"confidence": confidence})
        return float(np.mean([not all(g.passed for g in risk_gates(r, t)) for r in releases]))

    assert refused(0.95) <= 0.075
    assert refused(1 - 7 * 0.025) >= 0.09


# --- the planted leak -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def leak_and_fresh(bc_raw, bc_schema):
    """Breast cancer split three ways: training rows, holdout rows, and a disjoint fresh real sample that
    stands in for an ideal generator's output. The leak "generator" returns its training rows."""
    rows = bc_raw.sample(frac=1.0, random_state=0).reset_index(drop=True)
    train, holdout, fresh = rows.iloc[:280], rows.iloc[280:420], rows.iloc[420:].reset_index(drop=True)
    # The secret is a measurement no other column predicts: the diagnosis (the default) is guessed right for
    # 64 of 70 control rows from their nearest neighbour, which leaves a copy too little excess to show.
    s = settings({"n_attacks": 200, "bootstrap": 100, "secret": "mean_texture"}, bc_schema)
    return {
        name: privacy_risk(train, synth, holdout, bc_schema, s, 0)
        for name, synth in (("leak", train.reset_index(drop=True)), ("fresh", fresh))
    }


@pytest.mark.integration
def test_the_row_caps_bound_what_the_attacks_search_and_the_copy_count_reads_every_row(bc_raw, bc_schema):
    """`max_rows` caps the disclosure sets and the targets, `pool_max_rows` the synthetic rows the attacks search and
    the training rows the copies' DCR searches; the exact-copy count still reads every synthetic row."""
    rows = bc_raw.sample(frac=1.0, random_state=0).reset_index(drop=True)
    train, holdout = rows.iloc[:280], rows.iloc[280:420]
    s = settings(
        {"n_attacks": 50, "bootstrap": 20, "max_rows": 30, "pool_max_rows": 100, "disclosure_fraction": 0.5}, bc_schema
    )
    out = privacy_risk(train, train.reset_index(drop=True), holdout, bc_schema, s, 0)  # S copies every row
    assert out["disclosure"]["set_size"] == 30 and out["membership"]["n_members"] == 30  # not 140 or 70
    assert out["copies"]["exact_match_counts"]["synthetic"] == [280, 280]
    # 30 copies' DCR to a 100-row sample of the 280 training rows: 0 for about 100/280 of them, not for all
    assert 0.1 < out["copies"]["near_duplicate_rate"] < 0.7
    whole, capped = (split_targets(train, holdout, 30, np.random.default_rng(0), cap) for cap in (None, 100))
    assert len(whole.reference) == 110 and len(capped.reference) == 100  # 140 holdout rows less 30 non-members
    assert whole.members.equals(capped.members) and whole.non_members.equals(capped.non_members)
    assert set(capped.reference.index) < set(whole.reference.index)
    with pytest.raises(InputError, match=r"evaluate\.attacks\.pool_max_rows.*Fix:"):
        settings({"pool_max_rows": 0}, bc_schema)


@pytest.mark.integration
def test_planted_leak_fails_every_risk_gate(leak_and_fresh):
    leak = leak_and_fresh["leak"]
    gates = {g.name: g for g in risk_gates(leak, thresholds(None))}
    assert set(gates) == {
        "membership_inference",
        "exact_copies",
        "singling_out_risk",
        "linkability_risk",
        "inference_risk",
    }
    assert not any(g.passed for g in gates.values()), {n: g.evidence for n, g in gates.items()}
    assert leak["membership"]["dcr"]["auc"] == 1.0 and leak["membership"]["dcr"]["tpr_at_1pct_fpr"] == 1.0
    assert leak["copies"]["exact_match_rate"] == 1.0 and leak["copies"]["near_duplicate_rate"] == 1.0
    assert leak["attribute_inference"]["accuracy_members"] == 1.0
    assert leak["disclosure"]["presence"]["sensitivity"] == 1.0
    assert all("real" in g.evidence["outside_dp"] for g in gates.values())


@pytest.mark.integration
def test_fresh_real_sample_passes_every_risk_gate(leak_and_fresh):
    fresh, leak = leak_and_fresh["fresh"], leak_and_fresh["leak"]
    gates = risk_gates(fresh, thresholds(None))
    assert all(g.passed for g in gates), {g.name: g.evidence for g in gates}
    for attack in ("domias", "dcr"):
        assert abs(fresh["membership"][attack]["auc"] - 0.5) < 0.15
        assert fresh["membership"][attack]["auc"] < leak["membership"][attack]["auc"]
    assert fresh["copies"]["exact_match_rate"] == 0.0
    for name, result in fresh["anonymeter"].items():
        assert result["risk_ci95"][0] <= 0.1 < leak["anonymeter"][name]["risk_ci95"][0], name
    assert fresh["attribute_inference"]["advantage"] < leak["attribute_inference"]["advantage"]


@pytest.mark.slow
def test_memorising_non_private_generator_is_refused_and_its_private_counterpart_is_not(bc_raw, bc_schema):
    """Exact support points with n = N/2 and a narrow KDE sit on the training rows (docs/privacy-risk.md,
    evidence): the membership gate refuses them, and their DCR AUC interval lies above that of the same
    generator at ε = 1, which passes every gate."""
    from support.ledger import FakeSession

    from pipelines.data.transform import Encoder, train_holdout_split
    from pipelines.generators.base import Budget
    from pipelines.generators.registry import make_generator

    train, holdout = train_holdout_split(bc_raw, 0.2, 0)
    encoder = Encoder(bc_schema)
    risks = {}
    for eps in (1.0, math.inf):
        gen = make_generator(
            "support_points",
            encoder.layout,
            {"n_points": len(train) // 2, "bandwidth": 0.01, "seed": 0, "noise_seed": 0, "calibration": {"share": 0}},
            "cpu",
        )  # method alone
        gen.fit(encoder.encode(train), FakeSession(), Budget(eps, 1e-5))
        synth = encoder.decode(gen.sample(len(train), 0))
        risks[eps] = privacy_risk(train, synth, holdout, bc_schema, settings(None, bc_schema), 0)
    private, exact = ({g.name: g.passed for g in risk_gates(risks[e], thresholds(None))} for e in (1.0, math.inf))
    assert all(private.values()), private
    assert not exact["membership_inference"], exact
    dcr = {e: risks[e]["membership"]["dcr"] for e in risks}
    assert dcr[math.inf]["auc_ci95"][0] > dcr[1.0]["auc_ci95"][1], dcr


# --- the attacks on the keyed split of a table whose rows repeat -----------------------------------------

FEW_CELLS = [
    Column(f"c{i}", "categorical", categories=tuple(str(j) for j in range(len(p))))
    for i, p in enumerate(([5, 3, 1, 1], [6, 2, 1], [3, 1]))
]
FEW_CELLS_P = [np.array(p) / sum(p) for p in ([5, 3, 1, 1], [6, 2, 1], [3, 1])]


def _repeated_rows_risk(seed: int, split: str) -> list:
    """The whole suite's gates on one 600-row table of 24 cells (about 25 copies a cell; 30 % held out), the
    "synthetic" table a resample of the training rows: the population's distribution, which tells an attacker
    nothing about whether one record was a member. `split`: "keyed" (the product's ``train_holdout_split``)
    or "cells" (every copy of a row on the side its content draws: a split by content alone)."""
    from types import SimpleNamespace

    from pipelines.data.transform import train_holdout_split

    rng = np.random.default_rng(seed)
    table = pd.DataFrame({c.name: rng.choice(c.categories, 600, p=p) for c, p in zip(FEW_CELLS, FEW_CELLS_P)})
    names = [c.name for c in FEW_CELLS]
    if split == "keyed":
        train, holdout = train_holdout_split(table, 0.3, seed, names)
    else:
        content = table.astype(str).agg("|".join, axis=1)
        cells = content.unique()
        held = content.map(dict(zip(cells, rng.random(len(cells)) < 0.3))).to_numpy(bool)
        train, holdout = table[~held].reset_index(drop=True), table[held].reset_index(drop=True)
    synth = train.sample(len(train), replace=True, random_state=seed).reset_index(drop=True)
    schema = SimpleNamespace(columns=FEW_CELLS, target="c2")
    return risk_gates(privacy_risk(train, synth, holdout, schema, settings(None, schema), seed), thresholds(None))


@pytest.mark.slow
def test_attacks_on_the_keyed_split_of_repeated_rows_see_no_membership():
    """On the keyed split, which spreads the copies of a row over both sides, every risk gate
    passes for a table that reproduces the population in 8 of 8 seeds (measured: every gate passed in 49 of
    seeds 0-49, one inference-risk refusal, within the gates' 5 % family-wise level; DCR AUC 0.49-0.51 in seeds 0-9).
    With a side per row content the non-members never share a cell with a member: the same table fails the
    membership and exact-copy gates in 4 of 4 seeds (DCR AUC 1.0), a refusal the split, not the table, makes."""
    keyed = [_repeated_rows_risk(seed, "keyed") for seed in range(8)]
    assert all(g.passed for gates in keyed for g in gates), [[g.name for g in gs if not g.passed] for gs in keyed]
    for seed in range(4):
        failed = {g.name for g in _repeated_rows_risk(seed, "cells") if not g.passed}
        assert {"membership_inference", "exact_copies"} <= failed
