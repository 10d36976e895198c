"""release.select: private: the repeat-and-select accounting against dp_accounting's, the exact
trial-count sampler, the DP quality score (known answers, its sensitivity attained and never exceeded), the
selection generator (its plan spends the budget, its fit records one event and keeps one winner) and the release
path (the budget stage selects it, the candidates' own stages spend nothing). The empirical audits are in
tests/audit_cases_selection.py (tests/test_privacy_contract.py)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
import yaml
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from pipelines.config import load_params, merged, parse_params, read_params
from pipelines.data.layout import Block, Layout
from pipelines.errors import InputError
from pipelines.evaluation.outside_dp import MCMC_HEURISTIC
from pipelines.generators.base import Budget
from pipelines.generators.private_selection import TRIAL_RTOL, WINNER_DIR, candidate_weights
from pipelines.generators.registry import load_generator, make_generator
from pipelines.marginal.score import MAX_PAIRS, QualityScore, marginal_error, task_errors, workload
from pipelines.privacy.accountant import RDP_ORDERS, epsilon_pld, epsilon_rdp
from pipelines.privacy.events import (
    GEOMETRIC_SHAPE,
    LOGARITHMIC_SHAPE,
    GaussianEvent,
    RepeatAndSelectEvent,
    event_from_dict,
    event_to_dict,
    validate_event,
)
from pipelines.generators.mechanisms.repeat_select import best_of_each, best_of_trials, logarithmic_mean, trial_law
from pipelines.privacy.samplers import logarithmic_trials
from tasks.common import select
from support.generators import TINY
from support.ledger import FakeSession
from support.project import PROJECT, ledger_rows, make_root, run_stages

DELTA = 1e-5
G4, G5 = GaussianEvent(sigma=4.0, l2_sensitivity=1.0), GaussianEvent(sigma=5.0, l2_sensitivity=1.0)
LAYOUT = Layout((Block("a", "categorical", 0, 3), Block("y", "binary", 3, 4, is_target=True)))


# -- accounting ---------------------------------------------------------------------------------------------------
def selection(candidates, mean=3.0, shape=LOGARITHMIC_SHAPE):
    return RepeatAndSelectEvent(candidates, mean, shape)


@pytest.mark.parametrize("sigma, mean", [(5.0, 3.0), (2.0, 1.0), (8.0, 10.0)])
@pytest.mark.parametrize("shape", [LOGARITHMIC_SHAPE, GEOMETRIC_SHAPE])
def test_one_candidate_is_dp_accountings_repeat_and_select(sigma, mean, shape):
    ours = selection(((GaussianEvent(sigma=sigma, l2_sensitivity=1.0),),), mean, shape)
    reference = rdp_lib.RdpAccountant(orders=RDP_ORDERS)
    reference.compose(dp_event.RepeatAndSelectDpEvent(dp_event.GaussianDpEvent(sigma), mean, shape))
    assert epsilon_rdp([ours], DELTA) == pytest.approx(reference.get_epsilon(DELTA), rel=1e-12)
    assert epsilon_pld([ours], DELTA) <= epsilon_rdp([ours], DELTA)


def test_a_trial_costs_its_worst_candidate_and_the_selection_more_than_one_trial():
    both = selection(((G5,), (G4,)))
    assert epsilon_rdp([both], DELTA) == epsilon_rdp([selection(((G4,),))], DELTA)
    assert epsilon_pld([both], DELTA) > epsilon_pld([G4], DELTA)  # selection is never free
    assert epsilon_pld([selection(((G4,),), 5.0)], DELTA) > epsilon_pld([both], DELTA)  # more trials cost
    assert epsilon_pld([both, G5], DELTA) > epsilon_pld([both], DELTA)  # it composes with the other events
    # the logarithmic law at the same mean costs less than the geometric (Theorem 2's λ̂ terms halve): at σ = 4,
    # mean 3, 1.53 against 1.76 by RDP (dp_accounting's own figures, the test above)
    geometric = selection(((G4,),), shape=GEOMETRIC_SHAPE)
    assert epsilon_rdp([selection(((G4,),))], DELTA) < epsilon_rdp([geometric], DELTA) - 0.2


def test_the_event_round_trips_and_bad_ones_are_refused():
    event = selection(((G5, QualityScore.of(LAYOUT, 10).event(0.1)), (G4,)), 2.5)
    assert event_from_dict(json.loads(json.dumps(event_to_dict(event)))) == event
    old_row = {k: v for k, v in event_to_dict(event).items() if k != "shape"}  # a ledger row from before the law
    assert event_from_dict(old_row) == selection(event.candidates, 2.5, GEOMETRIC_SHAPE)
    for bad in (
        selection(((G4,),), 0.5),
        selection(()),
        selection(((),)),
        selection(((G4,),), shape=0.5),
        selection(((GaussianEvent(sigma=-1.0, l2_sensitivity=1.0),),)),
    ):
        with pytest.raises(ValueError):
            validate_event(bad)


# -- the trial count and the selection loop ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mean", [1.0, 3.0, 2.5])
def test_the_trial_count_is_logarithmic_with_the_planned_mean(mean):
    gamma, accounted = trial_law(mean)
    g = float(gamma)
    assert gamma.denominator <= 2**20 and mean <= logarithmic_mean(g) <= accounted < mean * (1 + 1e-5)
    rng = np.random.default_rng(0)
    t = np.array([logarithmic_trials(rng, gamma) for _ in range(20_000)])
    # P(T = t) = (1 − γ)^t / (t ln(1/γ)) for t = 1..4 and the mean, each within 6 standard errors; a geometric law
    # of the same mean (P(T = 1) = 1/3 at mean 3, against 0.45 here) or an off-by-one misses by far more
    pmf = [1.0] + [0.0] * 3 if mean == 1 else [(1 - g) ** k / (k * math.log(1 / g)) for k in range(1, 5)]
    for k, p in enumerate(pmf, start=1):
        assert abs(np.mean(t == k) - p) < 6 * math.sqrt(p * (1 - p) / 20_000) + 1e-9
    var = 0.0 if mean == 1 else logarithmic_mean(g) * (1 / g - logarithmic_mean(g))  # E[T²] = (1 − γ)/(γ² ln(1/γ))
    assert t.min() == 1 and abs(t.mean() - logarithmic_mean(g)) < 6 * math.sqrt(var / 20_000) + 1e-9
    for bad in (Fraction(0), Fraction(3, 2), 0.5):
        with pytest.raises(ValueError):
            logarithmic_trials(rng, bad)
    with pytest.raises(ValueError):
        trial_law(0.5)


def test_the_lowest_score_wins_ties_go_to_the_earlier_trial_and_every_trial_runs():
    calls = []

    def trial(t, k):
        calls.append((t, k))
        return [5, 3, 3, 7, 3, 9][t % 6], (t, k)

    rng = np.random.default_rng(4)
    gamma = trial_law(6.0)[0]
    score, k, output = best_of_trials(rng, gamma, (1, 1, 1), trial)
    expected_t = logarithmic_trials(np.random.default_rng(4), gamma)
    assert [t for t, _ in calls] == list(range(len(calls))) and len(calls) == expected_t
    best_t = min(range(len(calls)), key=lambda t: ([5, 3, 3, 7, 3, 9][t % 6], t))
    assert (score, output) == ([5, 3, 3, 7, 3, 9][best_t % 6], calls[best_t]) and k == calls[best_t][1]


def test_each_candidate_runs_once_in_order_and_the_lowest_score_wins_ties_to_the_earlier():
    calls = []

    def trial(t, k):
        calls.append((t, k))
        return [5, 3, 3, 7][k], f"table {k}"

    assert best_of_each(4, trial) == (3, 1, "table 1") and calls == [(0, 0), (1, 1), (2, 2), (3, 3)]
    with pytest.raises(ValueError, match="at least one candidate"):
        best_of_each(0, trial)


@pytest.mark.integration
def test_candidates_are_drawn_by_their_public_weights():
    counts = np.zeros(3)

    def trial(t, k):
        counts[k] += 1
        return 0, None

    rng = np.random.default_rng(5)
    for _ in range(3000):
        best_of_trials(rng, trial_law(3.0)[0], (2, 1, 1), trial)
    # ≈ 9,000 trials: shares 1/2, 1/4, 1/4 within 5 standard errors (≤ 0.03); uniform weights would give 1/3 each
    assert np.abs(counts / counts.sum() - [0.5, 0.25, 0.25]).max() < 0.03
    with pytest.raises(ValueError, match="positive integers"):
        best_of_trials(rng, trial_law(3.0)[0], (1, 0), trial)
    assert candidate_weights(("mst", "pearl", "aim"), True) == (1, 1, 2)  # aim: the public rule's choice
    assert candidate_weights(("pearl", "dpwgan", "mst", "support_points"), True) == (1, 1, 3, 1)
    assert candidate_weights(("mst", "pearl", "aim"), False) == (1, 1, 1) and candidate_weights(("aim",), True) == (1,)


# -- the DP quality score ------------------------------------------------------------------------------------------
def rows(cells):
    """Encoded rows of LAYOUT from (a, y) pairs."""
    return np.array([[*np.eye(3)[a], y] for a, y in cells], dtype=np.float32)


def test_the_workload_is_the_target_pairs_or_every_pair_capped():
    assert workload(LAYOUT) == (("a",), ("y",), ("a", "y"))
    wide = Layout(tuple(Block(f"c{i}", "binary", i, i + 1) for i in range(16)))  # no target: 120 pairs
    w = workload(wide)
    assert len(w) == 16 + MAX_PAIRS and w[16] == ("c0", "c1") and all(len(q) == 2 for q in w[16:])


def test_the_score_known_answers():
    score = QualityScore.of(LAYOUT, 10)
    real, synthetic = rows([(0, 0), (0, 1), (1, 1)]), rows([(2, 1), (2, 1), (2, 1)])
    # a: |2−0|+|1−0|+|0−3| = 6; y: |1−0|+|2−3| = 2; (a, y): three real cells of 1 and one synthetic cell of 3: 6
    assert marginal_error(score.discretizer, score.cliques, real, synthetic) == 14
    # h_S: S has one target cell (y = 1), so it mislabels the one real row with y = 0; q = 14 + |W|·1
    assert task_errors(score.discretizer, score.target, real, synthetic) == 1 and score.value(real, synthetic) == 17
    value, event = score.noisy(real, synthetic, 100.0, np.random.default_rng(0))
    assert value == 17 and event.sensitivity == 6 and event.epsilon == pytest.approx(100.0)
    # a fitted h_S: in S (60 rows) y = 1 exactly when a = 0; of the real rows, the two that break the rule
    learnt = rows([(0, 1)] * 20 + [(1, 0)] * 20 + [(2, 0)] * 20)
    real = rows([(0, 1)] * 5 + [(1, 0)] * 5 + [(2, 0)] * 5 + [(1, 1), (0, 0)])
    assert task_errors(score.discretizer, score.target, real, learnt) == 2
    no_target = QualityScore.of(Layout((Block("a", "categorical", 0, 3), Block("y", "binary", 3, 4))), 10)
    assert no_target.target is None and no_target.sensitivity == len(no_target.cliques) == 3
    assert no_target.value(real, learnt) == marginal_error(no_target.discretizer, no_target.cliques, real, learnt)


@pytest.mark.slow
def test_one_record_moves_the_score_by_at_most_its_sensitivity_which_is_attained():
    score = QualityScore.of(LAYOUT, 10)
    assert score.sensitivity == 2 * len(workload(LAYOUT)) == 6
    rng = np.random.default_rng(1)
    for _ in range(100):
        real = rows(zip(rng.integers(0, 3, 30), rng.integers(0, 2, 30)))
        synthetic = rows(zip(rng.integers(0, 3, 60), (rng.random(60) < 0.3).astype(int)))
        extra = rows([(int(rng.integers(0, 3)), int(rng.integers(0, 2)))])
        base = score.value(real, synthetic)
        assert abs(score.value(np.vstack([real, extra]), synthetic) - base) <= 6
        assert abs(score.value(real[1:], synthetic) - base) <= 6
    real, synthetic = rows([(1, 1)] * 5), rows([(2, 1)] * 5)  # the canary's cells empty in S, and mislabelled: + Δ
    base = score.value(real, synthetic)
    assert score.value(np.vstack([real, rows([(0, 0)])]), synthetic) == base + 6


# -- the selection generator ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bc(bc_schema, bc_raw):
    from pipelines.data.transform import Encoder

    encoder = Encoder(bc_schema)
    picked = np.random.default_rng(0).choice(len(bc_raw), 160, replace=False)
    return encoder.layout, encoder.encode(bc_raw.iloc[np.sort(picked)].reset_index(drop=True))


RANDOM = {**TINY["private_selection"], "trials": "random"}  # Papernot & Steinke's random trials (default: each)


@pytest.mark.slow
def test_random_trials_plan_spends_the_budget_on_one_selection_event(bc):
    layout, _ = bc
    gen = make_generator("private_selection", layout, RANDOM, "cpu")
    plan = gen.plan(160, Budget(1.0, DELTA))
    (event,) = plan.events
    assert isinstance(event, RepeatAndSelectEvent) and len(event.candidates) == 2
    assert (event.mean, event.shape) == (trial_law(2.0)[1], LOGARITHMIC_SHAPE)
    spent = epsilon_rdp([event], DELTA)
    assert (1 - 2 * TRIAL_RTOL) <= spent <= 1.0 and epsilon_pld([event], DELTA) <= spent
    share = gen.params.score_share
    assert 0.2 < plan.trial_epsilon < 1.0 and event.candidates[0][-1] == gen.score.event(share * plan.trial_epsilon)
    assert gen.score.sensitivity == 2 * len(workload(layout))  # breast cancer has a target: the task term is in


@pytest.mark.integration
def test_each_plans_the_composition_of_every_candidate_and_its_score_at_the_budget(bc):
    layout, _ = bc
    gen = make_generator("private_selection", layout, TINY["private_selection"], "cpu")  # trials: each
    plan = gen.plan(160, Budget(1.0, DELTA))
    x, share = plan.trial_epsilon, gen.params.score_share
    score = gen.score.event(share * x)
    expected = [
        e
        for c in ("pearl", "support_points")  # each candidate's own plan at (1 - share)·x, then its score
        for e in (*gen._candidate(c, (1 - share) * x, 0).plan(160, Budget((1 - share) * x, DELTA)).events, score)
    ]
    assert list(plan.events) == expected and [e for e in plan.events if e == score] == [score, score]
    spent = epsilon_pld(list(plan.events), DELTA)  # the ledger's own figure: the budget, to the search's tolerance
    assert (1 - 2 * TRIAL_RTOL) <= spent <= 1.0
    assert 0.3 < x < 1.0


@pytest.mark.integration
def test_each_trains_every_candidate_once_and_records_the_composition(bc, monkeypatch):
    layout, X = bc
    gen = make_generator("private_selection", layout, {**TINY["private_selection"], "noise_seed": 3}, "cpu")
    built, scored = [], []
    candidate, noisy = gen._candidate, QualityScore.noisy
    monkeypatch.setattr(gen, "_candidate", lambda name, eps, t: built.append((name, t)) or candidate(name, eps, t))
    monkeypatch.setattr(QualityScore, "noisy", lambda *a: scored.append(noisy(*a)[0]) or (scored[-1], None))
    session = FakeSession()
    gen.fit(X, session, Budget(1.0, DELTA))
    assert session.reserved == session.recorded == list(gen.privacy.events)
    assert built[-2:] == [("pearl", 0), ("support_points", 1)] and len(scored) == 2  # each once, in order
    assert gen.winner_name == ("pearl", "support_points")[int(scored[1] < scored[0])] == gen.drawn_by


@pytest.mark.integration
def test_fit_records_the_planned_event_keeps_one_winner_and_round_trips(bc, tmp_path):
    layout, X = bc
    gen = make_generator("private_selection", layout, {**RANDOM, "noise_seed": 3}, "cpu")
    session = FakeSession()
    gen.fit(X, session, Budget(1.0, DELTA))
    assert session.reserved == session.recorded == list(gen.privacy.events)
    assert gen.winner_name in ("pearl", "support_points") and gen.winner.name == gen.winner_name == gen.drawn_by
    gen.save(tmp_path)
    assert (tmp_path / WINNER_DIR).is_dir()
    again = load_generator("private_selection", tmp_path)
    assert again.winner_name == gen.winner_name
    np.testing.assert_array_equal(again.sample(32, 5), gen.sample(32, 5))
    np.testing.assert_array_equal(gen.sample(32, 5), gen.winner.sample(32, 5))


@pytest.mark.parametrize(
    "key, value",
    [
        ("candidates", ["private_selection"]),
        ("candidates", ["gan"]),
        ("mean_trials", 0.5),
        ("score_share", 1.0),
        ("score_bins", 1),
        ("trials", "all"),
    ],
)
def test_bad_selection_params_are_refused_with_their_key(tmp_path, key, value):
    params = read_params(PROJECT / "params" / "private.yaml")  # the override file made whole
    params["private_selection"][key] = value
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(InputError, match=rf"'private_selection\.{key}'.*Fix:"):
        load_params(tmp_path / "params.yaml")


# -- the release path ----------------------------------------------------------------------------------------------
def test_private_mode_selects_the_selection_generator_or_says_how_to_add_it():
    params = merged(
        read_params(PROJECT / "params.yaml"),
        {"generators": ["aim", "mst", "private_selection"], "private_selection": {}, "release": {"select": "private"}},
    )
    assert select(parse_params(params), 455).selected == ("private_selection",)
    with pytest.raises(InputError, match=r"'release\.select'.*private_selection.*Fix: add private_selection"):
        select(parse_params({**params, "generators": ["aim", "mst"]}), 455)
    bundled = load_params(PROJECT / "params" / "private.yaml")
    assert bundled.release.select == "private" and select(bundled, 455).selected == ("private_selection",)
    auto = parse_params(merged(params, {"release": {"select": "auto"}}))
    assert select(auto, 455).selected == ("aim",)  # auto never picks it first


@pytest.mark.slow
def test_private_release_trains_only_the_selection_and_charges_one_event(tmp_path):
    from tasks.train import train

    sections = {g: TINY[g] for g in ("pearl", "support_points")}
    sections["support_points"] = {**sections["support_points"], "accept_heuristic": True}  # else refused
    root = make_root(
        tmp_path,
        {
            "generators": ["pearl", "support_points", "private_selection"],
            "release": {"select": "private"},
            "weights": {"generators": []},
            "private_selection": {"trials": "random", "mean_trials": 2},
            **sections,
        },
    )
    run_stages(root, "budget")
    params = load_params(root / "params.yaml")
    alloc = root / "data/allocation/breast_cancer"
    entry = json.loads((alloc / "private_selection.json").read_text())
    assert entry["candidates"] == ["pearl", "support_points"]
    assert entry["sections"]["pearl"].items() >= TINY["pearl"].items()  # what train@private_selection re-runs on
    assert json.loads((alloc / "pearl.json").read_text())["selected"] is False
    for gen in ("pearl", "support_points", "private_selection"):
        train(params, gen, "run", root)
    assert {stage for _, stage, _ in ledger_rows(root)} == {"prepare", "train@private_selection"}
    privacy = json.loads((root / "models/breast_cancer/private_selection/privacy.json").read_text())
    assert [e["kind"] for e in privacy["events"]] == ["repeat_and_select"]
    assert privacy["drawn_by"] in ("pearl", "support_points")  # the winner: part of the selection's DP output
    assert privacy["exact_sampler"] is False and privacy["guarantee"] == MCMC_HEURISTIC  # whichever candidate won
    assert privacy["epsilon_pld"] <= entry["epsilon"] + 1e-9


def test_a_candidate_section_the_layout_cannot_take_is_refused_when_built(bc):
    layout, _ = bc  # built by check_against_schema in the validate and budget stages: before any budget is spent
    with pytest.raises(ValueError, match="no_such_column"):
        make_generator(
            "private_selection",
            layout,
            {"candidates": ["ppem"], "sections": {"ppem": {"protected": ["no_such_column"]}}},
            "cpu",
        )


def test_the_report_names_the_candidate_that_drew_the_rows():
    from pipelines.reporting.report import public_markdown, release_rows

    rows = dict(map(tuple, release_rows({"generator": "private_selection", "drawn_by": "aim"}, "public")))
    assert rows["Drawn by (the selected candidate)"] == "aim"
    assert "| Drawn by (the selected candidate) | aim |" in public_markdown(
        {"dataset": "d", "generator": "private_selection", "drawn_by": "aim"}
    )  # kept in the public view
    assert "Drawn by (the selected candidate)" not in dict(
        map(tuple, release_rows({"generator": "aim", "drawn_by": "aim"}, "public"))
    )
