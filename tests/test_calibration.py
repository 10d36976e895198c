"""DP marginal calibration of a generator's samples (pipelines/marginal/calibrate.py): the σ
formula against a hand computation, the joint query's sensitivity, raking to consistent targets on a deliberately
wrong table, the plan's JSON round trip, the ledger's reservation and record through a fake session, save/load,
ε = ∞, the params' rules, the manifest/report sentence, importance-weighted marginals (IW-MMD-GAN: σ scaled by
w_max, the weighted sensitivity attained, the rebalanced target kept) and audits of the measurement on neighbouring
tables."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import optimize

from audit_cases_calibration import CASES as AUDIT_CASES
from support.generators import FAST, MIXED, mixed_data
from support.ledger import FakeSession

from pipelines.config import check_generator
from pipelines.data.layout import Layout
from pipelines.errors import InputError
from pipelines.reporting.report import public_markdown, public_view
from pipelines.generators.base import Budget
from pipelines.generators.dpwgan import DPWGAN
from pipelines.generators.persistence import finite_json
from pipelines.generators.registry import generator_class
from pipelines.marginal.calibrate import (
    CALIBRATION_LATTICE_STEPS,
    NoisyMarginals,
    describe,
    expected_noise_tv,
    marginals,
    plan_calibration,
    public_discretizer,
    rake,
    summary,
)
from pipelines.privacy.accountant import MIN_NOISE_MULTIPLIER, analytic_gaussian_delta, epsilon_pld, gaussian_sigma
from pipelines.privacy.audit import epsilon_lower_bound
from pipelines.privacy.events import DiscreteGaussianEvent, GaussianEvent, NonPrivateEvent, PoissonGaussianEvent
from pipelines.privacy.plan import CalibrationPlan, plan_from_dict

from support.calibration import CLIQUES, real_table, tv_of, wrong_table

DELTA = 1e-5


def exact_plan(cliques=CLIQUES) -> CalibrationPlan:
    return CalibrationPlan(
        share=0.2,
        sigma=0.0,
        marginals=tuple(cliques),
        method_epsilon=math.inf,
        epsilon=math.inf,
        event=NonPrivateEvent("epsilon: inf"),
    )


# -- the plan ------------------------------------------------------------------------------------------------


def test_sigma_matches_the_hand_computed_gaussian_composition():
    """A Gaussian method (multiplier s at ε = 0.8) and the calibration compose into one Gaussian of multiplier
    (s⁻² + (σ/√m)⁻²)^(-1/2), which must equal z*, the multiplier whose exact δ(ε = 1) (Balle & Wang 2018,
    Thm. 8) is δ: σ = √m (z*⁻² − s⁻²)^(-1/2). The PLD grid is pessimistic, so σ may only be larger, by < 1 %."""
    s = gaussian_sigma(0.8, DELTA, 1.0)
    z = math.exp(optimize.brentq(lambda lz: analytic_gaussian_delta(1.0, math.exp(lz), 1.0) - DELTA, -3, 5, xtol=1e-13))
    m = len(CLIQUES)
    hand = math.sqrt(m) * (z**-2 - s**-2) ** -0.5
    cal = plan_calibration([GaussianEvent(s, 1.0)], CLIQUES, 0.2, 1.0, DELTA)
    assert hand * (1 - 1e-6) <= cal.sigma <= 1.01 * hand
    assert cal.event == DiscreteGaussianEvent(cal.sigma, 1, m, cal.event.query)  # m exact discrete Gaussians
    composed = epsilon_pld([GaussianEvent(s, 1.0), cal.event], DELTA)
    assert 0.99 <= composed <= 1.0
    assert cal.method_epsilon == pytest.approx(0.8) and cal.epsilon == pytest.approx(epsilon_pld([cal.event], DELTA))


@pytest.mark.slow
def test_a_generator_plans_its_method_at_the_rest_and_the_total_meets_the_target():
    gen = DPWGAN(MIXED, FAST)
    plan = gen.plan(2000, Budget(1.0, DELTA))
    method = plan.method_plan()
    assert plan.calibration.marginals == CLIQUES and plan.events == (*method.events, plan.calibration.event)
    assert method == DPWGAN(MIXED, {**FAST, "calibration": {"share": 0.0}}).plan(2000, Budget(0.8, DELTA))
    assert 0.99 <= epsilon_pld(plan.events, DELTA) <= 1.0
    assert epsilon_pld(method.events, DELTA) <= 0.8


def test_ppem_never_calibrates_its_protected_columns():
    """α-LMDP promises the generated x′ marginal is not the real one: no measured marginal contains x′."""
    gen = generator_class("ppem")(MIXED, {"protected": ["age", "income"], "hidden": 8, "latent_dim": 4})
    assert gen.calibration.cliques == (
        ("smoker",),
        ("region",),
        ("outcome",),
        ("smoker", "outcome"),
        ("region", "outcome"),
    )


@pytest.mark.slow
def test_calibration_is_off_where_its_noise_would_swamp_the_marginals():
    """expected_noise_tv = mean over 1-way marginals of ½·k·σ·√(2/π)/n̂ (public facts only); above a steward's
    max_noise_tv the method gets all of ε: the plan then equals the share-0 plan at the whole budget. The default
    (null) never turns it off."""
    limit = {**FAST, "calibration": {"max_noise_tv": 0.1}}
    gen = DPWGAN(MIXED, limit)
    plan = gen.plan(2000, Budget(1.0, DELTA))
    cells = public_discretizer(MIXED, gen.params.numeric_bins)
    sizes = dict(zip(cells.names, cells.shape))  # age, income: 20 bins; smoker 2; region 3; outcome 2
    by_hand = np.mean([0.5 * sizes[c] * plan.calibration.sigma * math.sqrt(2 / math.pi) / 2000 for c in sizes])
    tv = expected_noise_tv(plan.calibration, cells.shape, cells.names, 2000)
    assert tv == pytest.approx(by_hand) and tv < 0.1  # on at n̂ = 2,000
    few = math.ceil(2000 * tv / 0.1) // 2  # TV ∝ 1/n̂ at a similar σ: about 0.2 here
    off = DPWGAN(MIXED, limit).plan(few, Budget(1.0, DELTA))
    assert off.calibration is None and off == DPWGAN(MIXED, {**FAST, "calibration": {"share": 0}}).plan(
        few, Budget(1.0, DELTA)
    )
    assert DPWGAN(MIXED, FAST).plan(few, Budget(1.0, DELTA)).calibration is not None  # the default: never off


@pytest.mark.slow
def test_a_target_looser_than_the_smallest_searched_noise_takes_that_noise():
    method = [GaussianEvent(gaussian_sigma(1.0, DELTA, 1.0), 1.0)]
    cal = plan_calibration(method, CLIQUES, 0.2, 200.0, DELTA)
    assert cal.sigma == pytest.approx(MIN_NOISE_MULTIPLIER * math.sqrt(len(CLIQUES)))
    assert epsilon_pld([*method, cal.event], DELTA) <= 200.0


def test_the_joint_query_has_sensitivity_sqrt_m_attained_by_every_row():
    """Adding one row changes exactly one cell of each of the m marginals by 1: ‖M(D') − M(D)‖₂ = √m."""
    data, disc = real_table(300, 1), public_discretizer(MIXED)
    for row in range(5):
        d_prime = np.vstack([data, data[row : row + 1]])
        a, _ = NoisyMarginals.measure(disc, exact_plan(), data, None)
        b, _ = NoisyMarginals.measure(disc, exact_plan(), d_prime, None)
        diff = np.concatenate([(y - x).ravel() for x, y in zip(a.counts, b.counts)])
        assert np.linalg.norm(diff) == pytest.approx(math.sqrt(len(CLIQUES))) and set(np.unique(diff)) == {0.0, 1.0}


# -- post-processing -----------------------------------------------------------------------------------------


def test_raking_converges_to_exact_marginals_on_a_wrong_table():
    real, disc = real_table(20_000, 2), public_discretizer(MIXED)
    exact, _ = NoisyMarginals.measure(disc, exact_plan(), real, None)
    truth = [c / len(real) for c in exact.counts]
    wrong = wrong_table(100_000, 3)
    assert tv_of(wrong, truth, disc) > 0.25  # the test has power: the table is far off
    cells = exact.cells(wrong)
    weights, gap = rake(cells, [t.ravel() for t in exact.targets()], 200, 1e-6)
    assert gap <= 1e-6 and weights.sum() == pytest.approx(1.0)
    for c, t in zip(cells, truth):  # the weighted table has the real marginals
        assert np.abs(np.bincount(c, weights, minlength=t.size) - t.ravel()).max() < 1e-5
    out = exact.calibrate(wrong, 20_000, np.random.default_rng(4), 200, 1e-6)
    assert out.shape == (20_000, MIXED.width) and tv_of(out, truth, disc) < 0.04  # resampling noise only


def test_matching_reaches_cells_the_generator_never_visits():
    """A table without region 2 and without smokers cannot be re-weighted to the real marginals; `match` moves the
    fewest rows: afterwards every 1-way and every pair with the target equals the target up to rounding."""
    real, disc = real_table(20_000, 7), public_discretizer(MIXED)
    exact, _ = NoisyMarginals.measure(disc, exact_plan(), real, None)
    truth = [c / len(real) for c in exact.counts]
    wrong = wrong_table(50_000, 8)
    wrong[:, 2] = 0.0  # never a smoker
    wrong[:, 3:6] = np.eye(3)[np.random.default_rng(9).integers(0, 2, len(wrong))]  # never region 2
    out = exact.calibrate(wrong, 10_000, np.random.default_rng(10), 50, 1e-6)
    cells = max(t.size for t in truth)
    assert tv_of(out, truth, disc) <= cells / 10_000  # rounding: at most one row per cell
    assert (out[:, 3:6].sum(1) == 1).all() and set(np.unique(out[:, 2])) == {0.0, 1.0}


def test_noisy_targets_are_consistent_probability_tables():
    data, disc = real_table(2_000, 5), public_discretizer(MIXED)
    noisy, _ = NoisyMarginals.measure(
        disc,
        CalibrationPlan(
            share=0.2, sigma=5.0, marginals=CLIQUES, method_epsilon=0.8, epsilon=1.0, event=GaussianEvent(5.0, 3.0)
        ),
        data,
        np.random.default_rng(4),
    )  # 50 raking sweeps reach 1e-9 on this draw
    targets = dict(zip(CLIQUES, noisy.targets()))
    for q, t in targets.items():
        assert (t >= 0).all() and t.sum() == pytest.approx(1.0)
        if len(q) == 2:
            assert np.allclose(t.sum(1), targets[(q[0],)], atol=1e-9)
            assert np.allclose(t.sum(0), targets[(q[1],)], atol=1e-9)


# -- the generator contract ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted() -> tuple[DPWGAN, FakeSession, np.ndarray]:
    gen, session, data = DPWGAN(MIXED, FAST), FakeSession(), mixed_data(2000)
    gen.fit(data, session, Budget(1.0, DELTA))
    return gen, session, data


@pytest.mark.slow
def test_fit_reserves_and_records_the_method_and_the_calibration(fitted):
    gen, session, _ = fitted
    plan = gen.privacy
    assert session.calls == ["reserve", "record"] and session.reserved == list(plan.events)
    assert isinstance(session.recorded[0], PoissonGaussianEvent) and session.recorded[-1] == plan.calibration.event
    assert epsilon_pld(session.recorded, DELTA) <= 1.0
    assert gen.calibration.noisy.cliques == CLIQUES and gen.calibration.noisy.sigma == plan.calibration.sigma


@pytest.mark.integration
def test_the_plan_round_trips_through_strict_json(fitted):
    for plan in (fitted[0].privacy, DPWGAN(MIXED, FAST).plan(2000, Budget(math.inf, DELTA))):
        text = json.dumps(finite_json(plan.to_dict()), allow_nan=False)
        assert plan_from_dict(json.loads(text)) == plan


def test_save_load_keeps_the_calibration(fitted, tmp_path):
    gen = fitted[0]
    gen.save(tmp_path)
    back = DPWGAN.load(tmp_path)
    assert back.privacy == gen.privacy
    assert all(np.array_equal(a, b) for a, b in zip(back.calibration.noisy.counts, gen.calibration.noisy.counts))
    assert np.array_equal(back.sample(300, 7), gen.sample(300, 7))
    uncalibrated = DPWGAN.load(tmp_path)
    uncalibrated.calibration.noisy = None
    assert not np.array_equal(uncalibrated.sample(300, 7), gen.sample(300, 7))


def test_a_non_private_fit_measures_exact_marginals():
    gen, session, data = DPWGAN(MIXED, FAST), FakeSession(), mixed_data(500)
    gen.fit(data, session, Budget(math.inf, DELTA))
    assert gen.privacy.calibration.sigma == 0 and isinstance(session.recorded[-1], NonPrivateEvent)
    disc = public_discretizer(MIXED, gen.params.numeric_bins)  # the generator's own bins
    exact, _ = NoisyMarginals.measure(disc, exact_plan(), data, None)
    assert all(np.array_equal(a, b) for a, b in zip(gen.calibration.noisy.counts, exact.counts))


@pytest.mark.slow
def test_share_zero_turns_calibration_off_and_marginal_generators_default_to_off():
    gen = DPWGAN(MIXED, {**FAST, "calibration": {"share": 0}})
    assert gen.plan(2000, Budget(1.0, DELTA)).calibration is None
    for name in ("mst", "aim"):
        assert generator_class(name)(MIXED, {}, "cpu").calibration.cliques == ()


# -- importance-weighted marginals (IW-MMD-GAN) -----------------------------------------------------------------

REBALANCE = {"rebalance": {"column": "outcome", "observed": [0.5, 0.5], "target": [0.2, 0.8]}}  # w ∈ {0.4, 1.6}
IW_FAST = {"steps": 20, "batch_size": 32, "hidden": [16, 16], "code_dim": 8, "frequencies": 16, "noise_seed": 0}


def iw_mmd_gan(**params):
    return generator_class("iw_mmd_gan")(MIXED, {**IW_FAST, **params}, "cpu")


@pytest.mark.integration
def test_weighted_sigma_is_w_max_times_the_counts_sigma_and_the_total_meets_the_target():
    """Weighted marginals (weights in [0, w_max]) have Δ₂ = √m·w_max: the same multiplier z as counts, so
    σ_w = w_max·σ = w_max·√m (z*⁻² − s⁻²)^(-1/2) (the hand computation of the test above) and the composed ε is the
    same; a σ not scaled by w_max (the counts' σ with the weighted event) would overspend: ε > 1.2 here."""
    s = gaussian_sigma(0.8, DELTA, 1.0)
    m, w_max = len(CLIQUES), 2.5
    counts = plan_calibration([GaussianEvent(s, 1.0)], CLIQUES, 0.2, 1.0, DELTA)
    weighted = plan_calibration([GaussianEvent(s, 1.0)], CLIQUES, 0.2, 1.0, DELTA, w_max)
    # the lattice (w_max/K)ℤ: K points per unit of w_max, σ in lattice points σ·K/w_max; discrete Gaussians on
    # different lattices differ slightly, so the two σ agree to the calibration's tolerance, not exactly
    assert weighted.sigma == pytest.approx(w_max * counts.sigma, rel=2e-3) and weighted.w_max == w_max
    k = CALIBRATION_LATTICE_STEPS
    assert weighted.event == DiscreteGaussianEvent(weighted.sigma * k / w_max, k, m, weighted.event.query)
    assert "importance-weighted" in weighted.event.query and counts.w_max is None
    for cal in (weighted, counts):
        assert 0.999 <= epsilon_pld([GaussianEvent(s, 1.0), cal.event], DELTA) <= 1.0
    underscaled = DiscreteGaussianEvent(counts.sigma * k / w_max, k, m)
    assert epsilon_pld([GaussianEvent(s, 1.0), underscaled], DELTA) > 1.2
    with pytest.raises(ValueError, match="w_max must be positive and finite"):
        plan_calibration([], CLIQUES, 0.2, 1.0, DELTA, math.inf)


@pytest.mark.slow
def test_iw_mmd_gan_plans_weighted_marginals_at_its_public_bound():
    gen = iw_mmd_gan(weights=REBALANCE)
    plan = gen.plan(2000, Budget(1.0, DELTA))
    cal, m = plan.calibration, len(CLIQUES)
    assert cal.share == 0.2 and cal.w_max == pytest.approx(1.6) and cal.marginals == CLIQUES
    assert cal.event.sensitivity == CALIBRATION_LATTICE_STEPS and cal.event.count == m
    assert cal.event.sigma == pytest.approx(cal.sigma * CALIBRATION_LATTICE_STEPS / 1.6, rel=1e-12)
    assert cal.sigma == pytest.approx(
        1.6 * plan_calibration(plan.method_plan().events, CLIQUES, 0.2, 1.0, DELTA).sigma, rel=2e-3
    )
    assert 0.99 <= epsilon_pld(plan.events, DELTA) <= 1.0
    capped = iw_mmd_gan(weights=REBALANCE, w_max=1.2).plan(2000, Budget(1.0, DELTA)).calibration
    assert capped.w_max == pytest.approx(1.2) and capped.event.sigma == pytest.approx(
        capped.sigma * CALIBRATION_LATTICE_STEPS / 1.2, rel=1e-12
    )
    assert iw_mmd_gan().plan(2000, Budget(1.0, DELTA)).calibration.w_max is None  # weights: null → counts
    assert (
        describe(CLIQUES, 1.6) == "noisy importance-weighted (w ≤ 1.6) 1-way marginals of 5 columns and 4 pairs "
        "with 'outcome'"
    )


def test_the_weighted_joint_query_has_sensitivity_sqrt_m_w_max_attained_by_the_largest_weight():
    """Adding a row of weight w changes one cell of each of the m marginals by w: ‖ΔM‖₂ = √m·w ≤ √m·w_max, with
    equality for a row of the largest weight (outcome 1: w = 1.6); the weights are the generator's own."""
    gen, data, disc = iw_mmd_gan(weights=REBALANCE), real_table(300, 1), public_discretizer(MIXED)
    plan = dataclasses.replace(exact_plan(), w_max=gen.w_max)
    weights = gen.calibration_weights()[0]
    a, _ = NoisyMarginals.measure(disc, plan, data, None, weights(data))
    for row, w in ((np.flatnonzero(data[:, 6] == 1)[0], 1.6), (np.flatnonzero(data[:, 6] == 0)[0], 0.4)):
        d_prime = np.vstack([data, data[row : row + 1]])
        b, _ = NoisyMarginals.measure(disc, plan, d_prime, None, weights(d_prime))
        diff = np.concatenate([(y - x).ravel() for x, y in zip(a.counts, b.counts)])
        assert np.linalg.norm(diff) == pytest.approx(math.sqrt(len(CLIQUES)) * w)
        assert np.sort(diff)[-len(CLIQUES) :] == pytest.approx(w) and np.count_nonzero(diff) == len(CLIQUES)


def test_measure_refuses_weights_outside_the_plans_bound():
    data, disc = real_table(50, 1), public_discretizer(MIXED)
    weighted = dataclasses.replace(exact_plan(), w_max=1.0)
    with pytest.raises(ValueError, match=r"in \[0, w_max = 1\]"):
        NoisyMarginals.measure(disc, weighted, data, None, np.full(50, 1.5))
    with pytest.raises(ValueError, match="w_max and the measured weights disagree"):
        NoisyMarginals.measure(disc, exact_plan(), data, None, np.ones(50))
    with pytest.raises(ValueError, match="w_max and the measured weights disagree"):
        NoisyMarginals.measure(disc, weighted, data, None)


@pytest.mark.integration
def test_iw_mmd_gan_calibrates_to_the_weighted_target_not_back_to_the_real_rows():
    """Rebalancing outcome 0.5/0.5 → 0.2/0.8 (w = 0.4, 1.6): calibrated by default (share 0.2), the samples keep
    the weighted share 1.6p/(1.6p + 0.4(1 − p)) ≈ 0.81 (p = 0.516, the rows' own share) within 0.1; a calibration
    to the plain marginals would pull it back to p (0.29 away). ε = ∞: the saved marginals are the exact Σ w."""
    data = mixed_data(2000)
    p = data[:, 6].mean()
    target = 1.6 * p / (1.6 * p + 0.4 * (1 - p))
    session, gen = FakeSession(), iw_mmd_gan(weights=REBALANCE)
    gen.fit(data, session, Budget(1.0, DELTA))
    assert session.recorded[-1] == gen.privacy.calibration.event and epsilon_pld(session.recorded, DELTA) <= 1.0
    assert abs(gen.sample(4000, 1)[:, 6].mean() - target) < 0.1 and abs(target - p) > 0.25
    exact = iw_mmd_gan(weights=REBALANCE)
    exact.fit(data, FakeSession(), Budget(math.inf, DELTA))
    w = np.where(data[:, 6] == 1, 1.6, 0.4)
    assert exact.calibration.noisy.counts[CLIQUES.index(("outcome",))] == pytest.approx(
        [w[data[:, 6] == 0].sum(), w[data[:, 6] == 1].sum()]
    )
    assert abs(exact.sample(4000, 1)[:, 6].mean() - target) < 0.01


def test_pairs_and_their_description():
    assert marginals(MIXED, "none") == tuple((b.column,) for b in MIXED.blocks)
    assert marginals(MIXED, [["age", "income"]])[-1] == ("age", "income")
    mixed = marginals(MIXED, ["target", ["age", "income"], ["outcome", "age"], ["income", "age"]])
    assert mixed == CLIQUES + (("age", "income"),)  # the target's pairs, then the new one, each measured once
    assert describe(CLIQUES) == "noisy 1-way marginals of 5 columns and 4 pairs with 'outcome'"
    related = dataclasses.replace(MIXED, related=(("smoker", "region"), ("outcome", "age")))  # the schema's pairs
    assert marginals(related, "target") == CLIQUES + (("smoker", "region"),)  # (age, outcome): once
    assert Layout.from_dict(related.to_dict()) == related and "related" not in MIXED.to_dict()
    with pytest.raises(ValueError, match="dpwgan.calibration.pairs names column 'weight'.*Fix"):
        DPWGAN(MIXED, {**FAST, "calibration": {"pairs": [["age", "weight"]]}})


@pytest.mark.parametrize(
    "bad, key",
    [
        ({"shar": 0.1}, "dpwgan.calibration.shar"),
        ({"share": 1.0}, "dpwgan.calibration.share"),
        ({"oversample": 0}, "dpwgan.calibration.oversample"),
        ({"pairs": "all"}, "dpwgan.calibration.pairs"),
    ],
)
def test_bad_calibration_params_are_refused_naming_the_key(bad, key):
    with pytest.raises(InputError, match=f"'{key}'"):
        check_generator("dpwgan", {"calibration": bad})


def test_manifest_summary_and_public_report_say_what_was_calibrated(fitted):
    cal = summary(fitted[0].privacy)
    assert cal["description"] == describe(CLIQUES) and cal["generator_epsilon"] == 1.0
    s = {"generator": "dpwgan", "dataset": "toy", "privacy": {"calibration": json.loads(json.dumps(cal))}}
    assert public_view(s)["privacy"]["calibration"] == s["privacy"]["calibration"]
    text = public_markdown(s)
    assert "calibrated to noisy 1-way marginals of 5 columns and 4 pairs with" in text
    assert f"at ε = {cal['epsilon']:.3g} of the generator's 1" in text


# -- audit ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", AUDIT_CASES, ids=[c.config for c in AUDIT_CASES])
@pytest.mark.slow
def test_audit_the_calibration_measurement_on_neighbouring_tables(case):
    """Clopper-Pearson lower bound on ε (pipelines/privacy/audit.py) from the real measurement code on D and
    D' = D + canary (counts; importance-weighted with a canary of the largest weight): below the claim at the
    planned noise, above it at half the noise (the audit has power)."""
    planned = epsilon_lower_bound(case.scores(False, 1.0, 1000), case.scores(True, 1.0, 1000), case.delta)
    halved = epsilon_lower_bound(case.scores(False, 0.5, 2000), case.scores(True, 0.5, 2000), case.delta)
    assert planned < case.claimed_epsilon < halved
