"""Audit cases at a declared privacy unit of K = 3 rows (pipelines/privacy/unit.py): each mechanism run by the project's
own function at max_rows = 3 (or planned with Budget(..., unit_rows=3)) on neighbouring data sets D and D' = D + one
unit, and its claim the UNIT-level ε, what the ledger records for it. tests/test_unit_audit.py runs them with
`pipelines.privacy.audit.epsilon_lower_bound` (interface: tests/audit_harness.py's AuditCase).

The unit. The prepare and check mechanisms see rows that went through the privacy unit's real path: the canary unit
has 5 identical rows, `units.bound` keeps 3 of them (as tasks/validate.py calls it, before validation counts a row),
`validate_table` counts them, and prepare's `write_split` puts the whole unit on one side (the canary's unit value is
chosen, by the keyed split under the test key, to land on the side the case needs). The generators, the
calibration, the selection's score and the weight estimator see the unit as 3 identical encoded rows (what bounding
leaves of it). Identical rows are the worst case for counts: every row of the unit moves the same cell.

Claims. The ε of the event the owner reserves and records in its ledger session (`FakeSession`), read from one real
call: `audit_cases_release.claimed` (pure events at δ = 0, the others by the PLD accountant at δ = DELTA = 1e-2).
For a planned row-level event E, that is `unit_event(E, 3)` (tests/test_unit_audit.py checks it).

Half noise. As tests/audit_cases_release.py and tests/audit_cases_marginal.py: Gaussian / Laplace scales × s,
exponential mechanisms (and the MH sampler's target) and the ε-parameterised mechanisms (row count, row-loss test,
release test, quality score) get ε/s; the prepare and check cases' pairs follow the noise actually used (their
margins move with ε).

Cases (claims and measured lower bounds: tests/test_unit_audit.py's docstring):
- prepare row count (`noisy_count`, max_rows 3, ε = 1): D = visits(40) (1-7 rows per patient, bounded), D' adds the
  canary unit on the training side: the training count `write_split` returns moves by exactly 3 = Δ₁, attained.
- prepare row-loss stop bit (`row_loss_test`, max_rows 3, ε = 1): D loses ⌊t⌋ − 3 rows beyond the tolerated share
  (t the margin at the noise used), D' adds the canary unit whose rows validation drops: q moves by 3 = Δ₁ and the
  stop rates differ by exactly e^ε (the geometric tail of Lap_ℤ(3/ε)).
- DP release test bit (`release_test`, max_rows 3, ε = 1): D with τ − Z ∈ [0, 1), D' adds the canary unit in the
  holdout next to a synthetic row: N_H moves by 3, Z by −3b = −12 = Δ, and the refusal rates differ by exactly e^ε.
- MST's 2-way measurement (`measure` at the plan's σ₂, Budget(3, 1e-2, unit_rows=3)): the unit moves the canary cell
  by 3. Claim: the ZCDPEvent(9/2σ₂²) the ledger records (a discrete Gaussian at k rows, unit.py item 4), whose
  (ε, δ) conversion no Gaussian attains (the release's exact ε at δ = 1e-2 is ≈ 0.82 of it), so the power check needs
  MEASURE_RUNS.
- MST's selection (`select` with MST's Δ = 1 and its ε_sel): two candidates whose L1 scores the unit moves by +3 and
  −3 (Δ = 1 per row, 3 per unit, both signs). Claim: PureEpsilonEvent(3ε_sel).
- PEARL's CF embedding (`fit`, steps 0, Budget(2, 1e-2, unit_rows=3)): the unit adds 3v, ‖3v‖ = 3√(2k) = the unit's
  Δ₂ (tests/audit_cases_release.py's pair with three canaries). Claim: GaussianEvent(σ, 3Δ₂).
- output_lapl weights (`estimators.unit_plan` / `estimate`, ε = 1 at the unit; the plan meets it at δ = 1e-2, and
  the recorded event is pure 1.02-DP, the claim): three canaries at a = 1 move the released log-weight by 0.49 of
  the unit's 3Δ_w (the logistic bound is not attained: audit_cases_release.py), so its power is checked at
  W_POWER_SCALE, as the row-level case's.
- support_points' bandwidth (`laplace_bandwidth`, kde_laplace, Budget(3, 1e-2, unit_rows=3)): the unit flips the
  bounded MLE from σ_lo to σ_hi. Claim: the unit event, Δ = 3(σ_hi − σ_lo), ε = 3ε_bw. The MLE lies in [σ_lo, σ_hi]
  whatever the data, so it moves by at most σ_hi − σ_lo under ANY pair of tables: the mechanism's exact ε at the
  unit is its row-level ε_bw, a third of the claim (the conversion's kΔ is loose for a statistic bounded by its
  range). Power is checked at BANDWIDTH_POWER = 1/(2K), half the noise of that exact mechanism.
- AIM's 1-way measurement (`measure` at the plan's σ₁, max_rounds 1 and σ₁ = x as tests/audit_cases_marginal.py's
  AIM, Budget(3, 1e-2, unit_rows=3)): the unit moves the canary cell a = 0 by 3. Claim: ZCDPEvent(9/2σ₁²), a
  discrete Gaussian at k rows, as MST's 2-way measurement (and its MEASURE_RUNS).
- The calibration's importance-weighted marginals (`Calibration.measure`, IW-MMD-GAN's "weighted" config of
  tests/audit_cases_calibration.py, Budget(2, 1e-2, unit_rows=3)): the unit, 3 canaries of weight w_max (64 lattice
  points each), moves each of the m = 3 canary cells by 3·64 points, a shift of L2 norm 3·64·√m: unit.py item 4's
  bound k·Δ·√count, attained. Claim: ZCDPEvent(m(3·64)²/2σ_γ²). As for the other zCDP claims no Gaussian attains
  its (ε, δ) conversion; its power is checked at tests/audit_cases_marginal.py's ZCDP_POWER (2,000 runs per data
  set at both noise scales: CALIBRATION_RUNS).
- The private selection's DP quality score (`QualityScore.noisy` at the plan's ε_s = score_share × the trial ε;
  private_selection with `trials: each`, score_share 0.5 and one candidate, support_points, whose pure events keep
  the unit plan's search quick; Budget(2.5, 1e-2, unit_rows=3)): S_0 of tests/audit_cases_selection.py (no row in
  the canary's cells, h_S predicts y = 1), the unit 3 canaries (a = 0, y = 0): q moves by 3·2|W| = 18, the unit's
  Δ, attained. Claim: DiscreteLaplaceEvent(2|W|/ε_s, 18), ε = 3ε_s.
- support_points' exponential mechanism (`sample_energy_mechanism` with `_release`'s arguments, the kde_laplace
  set of SP_UNIT_PARAMS, each data set planned for its own N as the row-level case): D = {1}, D' adds the unit,
  3 rows at 0. Claim: PureEpsilonEvent(3ε_set). In 1-D with one point and p = 1, e(D, y) = 2(1 − y) at Δ(1) = 2
  and e(D', y) = y + 1/8 at Δ(4) = 7/8, so both densities are exponential on [0, 1], with log-slopes ε_set/2 and
  −4ε_set/7: the exact loss (closed form) is 0.18 of the claim at 1×, 0.36 at 0.5×, 1.83 at 0.1× (the 2Δ of
  the mechanism's ε covers a score change of either sign, and group privacy's kε a loss that no unit's rows add up
  to; tests/audit_cases_release.py for the row), so power is checked at SP_POWER_SCALE = 0.1, as the row-level
  case's.

DP-SGD at a unit: tests/test_unit_accounting.py audits one step on the real sampling and noise code.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from audit_cases_calibration import CANARIES as CALIBRATION_CANARIES
from audit_cases_calibration import DATA as CALIBRATION_DATA, generator as calibrated_generator
from audit_cases_marginal import CANARY as MARGINAL_CANARY
from audit_cases_marginal import CODES, LAYOUT as MARGINAL_LAYOUT, ZCDP_POWER
from audit_cases_release import (
    PEARL_LAYOUT,
    PEARL_N,
    PEARL_PARAMS,
    SP_BASE,
    SP_CONFIGS,
    SP_LAYOUT,
    SP_POWER_SCALE,
    W_LAYOUT,
    W_N_HAT,
    W_N_SYNTHETIC,
    W_POWER_SCALE,
    W_SETTINGS,
    claimed,
    memoised,
    projection,
    tapped,
)
from audit_cases_selection import CANARY as SELECTION_CANARY
from audit_cases_selection import DATA as SELECTION_DATA, LAYOUT as SELECTION_LAYOUT, TABLES as SELECTION_TABLES
from audit_harness import RUNS, AuditCase
from support.ledger import FakeSession
from support.privacy_unit import KEY, VISITS, visits

from pipelines.config import Paths, load_params
from pipelines.data import units
from pipelines.data.schema import Schema, load_schema
from pipelines.data.validation import validate_table
from pipelines.generators import pearl as pearl_module
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.pearl import PEARL
from pipelines.generators.registry import generator_class
from pipelines.generators.support_points import SupportPoints
from pipelines.io import parquet_row_groups, write_parquet
from pipelines.marginal.measure import marginal, measure
from pipelines.marginal.exponential import l1_score, select
from pipelines.generators.mechanisms.bandwidth import laplace_bandwidth, mle_bandwidth
from pipelines.generators.mechanisms.energy_sampler import sample_energy_mechanism
from pipelines.privacy.events import Event
from pipelines.privacy.noise import NoiseSource
from pipelines.privacy.release_test import near_counts, planned_event, release_test, split_weights, threshold
from pipelines.privacy.row_count import count_event, noisy_count, tail_bound
from pipelines.privacy.row_loss import excess, loss_event, row_loss_test
from pipelines.weights import estimators, logistic
from tasks.prepare import write_split

K = 3  # rows per privacy unit
DELTA = 1e-2  # the Gaussian claims' δ (tests/audit_cases_release.py)
PROJECT = Path(__file__).resolve().parents[1]
CONFIG = load_params(PROJECT / "params.yaml")  # the defaults: holdout_fraction, max_dropped_fraction, release
FRACTION = CONFIG.dataset.holdout_fraction
CANARY_ROWS = 5  # the canary unit's raw rows; bounding keeps K of them
NEAR = {"age": 60, "ward": "a", "readmitted": "no"}  # the canary's row (and the release test's synthetic row)
Scores = Callable[[bool, float, int], np.ndarray]


@dataclass(frozen=True)
class UnitCase:
    """One audit at the unit: the harness's case, whose claim is `claimed(ledger())`; `ledger()`, the unit-level event
    the owner reserves and records; `row_event()`, the row-level event it is `unit_event(·, K)` of (the same noise
    for a unit of one row: the planned event, or the mechanism's own at max_rows 1 and ε/K); `tight`, whether the
    pair attains the unit's sensitivity (then the lower bound at the planned noise must exceed the row-level ε: a
    unit's rows break row-level accounting); the runs per data set at the planned noise and at the power check's."""

    audit: AuditCase
    ledger: Callable[[], Event]
    row_event: Callable[[], Event]
    tight: bool
    runs: tuple[int, int] = (RUNS[1.0], RUNS[0.5])


def seed(tag: int, neighbour: bool, noise_scale: float, run: int = 0) -> int:
    """A noise_seed for one run, distinct for every case tag (< 16), data set, noise scale (to 1/1000) and run
    (< 2^17), within the 32 bits a params noise_seed may have."""
    assert 0 <= tag < 16 and 0 <= run < 2**17 and 0 < noise_scale <= 1
    return ((tag * 2 + int(neighbour)) << 10 | round(1000 * noise_scale)) << 17 | run


# -- the unit's path through validate and prepare -------------------------------------------------------------------


@functools.cache
def schema() -> Schema:
    """support/privacy_unit.py's visits schema: privacy_unit {column: patient_id, max_rows: 3}."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "visits.yaml").write_text(VISITS)
        sch = load_schema(Path(folder) / "visits.yaml")
    assert sch.max_rows == K
    return sch


@dataclass(frozen=True)
class Prepared:
    """What validate and prepare make of a raw table: the validation report, write_split's (train, holdout) row
    counts and the two tables read back from their Parquet files a row group at a time (as the check stage reads)."""

    report: dict
    rows: tuple[int, int]
    train: tuple[pd.DataFrame, ...]
    holdout: tuple[pd.DataFrame, ...]


def prepared(frame: pd.DataFrame) -> Prepared:
    """`frame` through the stages' own functions: `units.bound` and `validate_table` with the pseudonyms carried (as
    tasks/validate.py), the validated Parquet file, prepare's `write_split` (whole units to one side)."""
    sch = schema()
    kept, names, _ = units.bound(frame, sch.unit, [c.name for c in sch.read], KEY)
    clean, report = validate_table(kept, sch, "audit", {units.UNIT_COLUMN: names})
    with tempfile.TemporaryDirectory() as folder:
        p = Paths("visits", Path(folder))
        p.validated.parent.mkdir(parents=True)
        write_parquet(p.validated, clean)
        p.prepared.mkdir(parents=True)
        rows = write_split(CONFIG, p, sch, KEY, p.prepared)
        train, holdout = (tuple(parquet_row_groups(p.prepared / f"{side}.parquet")) for side in ("train", "holdout"))
    return Prepared(report, rows, train, holdout)


def held_out(values: list[str]) -> np.ndarray:
    """Whether the keyed split (KEY, FRACTION) sends the unit of each value to the holdout."""
    return units.unit_holdout(units.pseudonyms(pd.Series(values), [b""] * len(values), KEY), FRACTION, KEY)


@functools.cache
def canary_id(holdout: bool) -> str:
    """The first of canary-0, canary-1, ... whose unit the keyed split sends to the holdout (True) or to training."""
    return next(v for v in (f"canary-{i}" for i in itertools.count()) if bool(held_out([v])[0]) == holdout)


def canary(holdout: bool, **row: object) -> pd.DataFrame:
    """The canary unit: CANARY_ROWS identical rows (NEAR, updated by `row`) of one patient on the chosen side."""
    return pd.DataFrame([{"patient_id": canary_id(holdout), **NEAR, **row}] * CANARY_ROWS)


def with_canary(frame: pd.DataFrame, unit: pd.DataFrame, neighbour: bool) -> pd.DataFrame:
    return pd.concat([frame, unit], ignore_index=True) if neighbour else frame


# -- prepare: the noisy training row count --------------------------------------------------------------------------
COUNT_EPSILON = 1.0


@functools.cache
def count_rows(neighbour: bool) -> int:
    """The training rows write_split counts (prepare's `count_rows`): D = visits(40); D' adds the canary unit on the
    training side, 3 of whose 5 rows bounding keeps."""
    return prepared(with_canary(visits(40), canary(holdout=False), neighbour)).rows[0]


def count_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    rows = count_rows(neighbour)
    assert count_rows(True) - count_rows(False) == K
    return np.array(
        [
            noisy_count(
                FakeSession(),
                COUNT_EPSILON / noise_scale,
                lambda: rows,
                NoiseSource(None, seed(1, neighbour, noise_scale, run)),
                K,
            )
            for run in range(n_runs)
        ],
        dtype=float,
    )


def count_ledger() -> Event:
    session = FakeSession()
    noisy_count(session, COUNT_EPSILON, lambda: count_rows(False), NoiseSource(None, 0), K)
    assert session.reserved == session.recorded
    return session.recorded[0]


# -- prepare: the row-loss stop bit ---------------------------------------------------------------------------------
LOSS_EPSILON = 1.0
MAX_DROPPED = CONFIG.dataset.max_dropped_fraction
LOST = {"ward": "z"}  # out of the schema's categories: validation drops the row (on_invalid: drop)


@functools.cache
def loss_counts(neighbour: bool, noise_scale: float) -> tuple[int, int]:
    """(lost, read) as validation reports them (check_row_loss reads dropped + clipped, rows_in). D = visits(30)
    plus L lone rows that validation drops, L the least with q = L − ⌈f·N⌉ = ⌊t⌋ − 3 and q(D') = q(D) + 3 (t the
    margin at ε/noise_scale, f the default max_dropped_fraction); D' adds the canary unit, whose 3 kept rows are
    dropped."""
    base = visits(30, seed=11)
    kept = len(units.bound(base, schema().unit, [c.name for c in schema().read], KEY)[0])
    target = math.floor(tail_bound(LOSS_EPSILON / noise_scale, K)) - K
    lost = next(
        n
        for n in itertools.count()
        if excess(n, kept + n, MAX_DROPPED) == target and excess(n + K, kept + n + K, MAX_DROPPED) == target + K
    )
    lone = pd.DataFrame([{"patient_id": f"lost-{i}", **NEAR, **LOST} for i in range(lost)])
    report = prepared(with_canary(pd.concat([base, lone], ignore_index=True), canary(False, **LOST), neighbour)).report
    counts = report["rows_dropped"] + report["rows_clipped"], report["rows_in"]
    assert counts == (lost + K * neighbour, kept + lost + K * neighbour)
    return counts


def loss_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    counts = loss_counts(neighbour, noise_scale)
    return np.array(
        [
            row_loss_test(
                FakeSession(),
                LOSS_EPSILON / noise_scale,
                lambda: counts,
                MAX_DROPPED,
                NoiseSource(None, seed(2, neighbour, noise_scale, run)),
                K,
            ).stop
            for run in range(n_runs)
        ],
        dtype=float,
    )


def loss_ledger() -> Event:
    session = FakeSession()
    row_loss_test(session, LOSS_EPSILON, lambda: loss_counts(False, 1.0), MAX_DROPPED, NoiseSource(None, 0), K)
    assert session.reserved == session.recorded
    return session.recorded[0]


# -- check: the DP release test -------------------------------------------------------------------------------------
TEST_EPSILON = 1.0  # the default release.test_epsilon 0.1 is beyond 2,000 runs (e^0.1 against 1)
NEAR_HOLDOUT = 2  # near-S units in D's holdout


def release_settings(noise_scale: float) -> dict:
    return {**CONFIG.release.model_dump(), "test_epsilon": TEST_EPSILON / noise_scale}


@dataclass(frozen=True)
class ReleasePair:
    counts: tuple[int, int]  # near_counts(train, holdout, S)
    n_rows: int  # the training rows (the check stage's n̂: len(train_encoded))


@functools.cache
def release_pair(neighbour: bool, noise_scale: float) -> ReleasePair:
    """D: visits(30) with ward a replaced by b (every row ≥ 1/3 from S in Gower distance, beyond the radius), n_T
    lone units of the row NEAR on the training side and NEAR_HOLDOUT in the holdout, n_T the least with
    τ − Z ∈ [0, 1) at ε/noise_scale (Z = a·n_T − b·NEAR_HOLDOUT); S = one row NEAR. D' adds the canary unit in the
    holdout: N_H + 3, Z − 3b."""
    a, b = split_weights(FRACTION)
    s = release_settings(noise_scale)
    far = visits(30, seed=12).replace({"ward": {"a": "b"}})
    far_train = prepared(far).rows[0]
    pool = [f"near-{i:04d}" for i in range(600)]
    sides = held_out(pool)
    train_ids, holdout_ids = [v for v, h in zip(pool, sides) if not h], [v for v, h in zip(pool, sides) if h]

    def gap(n_t: int) -> float:  # τ − Z
        return threshold(
            far_train + n_t, FRACTION, s["test_epsilon"], s["test_excess_max"], s["test_confidence"], K
        ) - (a * n_t - b * NEAR_HOLDOUT)

    n_t = next(n for n in range(len(train_ids)) if 0 <= gap(n) < 1)
    near = pd.DataFrame([{"patient_id": v, **NEAR} for v in train_ids[:n_t] + holdout_ids[:NEAR_HOLDOUT]])
    tables = prepared(with_canary(pd.concat([far, near], ignore_index=True), canary(holdout=True), neighbour))
    counts = near_counts(
        tables.train,
        tables.holdout,
        [pd.DataFrame([NEAR])],
        schema().columns,
        CONFIG.evaluate.attacks.near_duplicate_distance,
    )
    assert counts == (n_t, NEAR_HOLDOUT + K * neighbour) and tables.rows[0] == far_train + n_t
    return ReleasePair(counts, tables.rows[0])


def release_test_rng(neighbour: bool, noise_scale: float, run: int) -> np.random.Generator:
    """The check stage's stream, seeded for the audit."""
    return (
        NoiseSource(None, seed(3, neighbour, noise_scale, run))
        .streams(private=True, seed=0)
        .numpy("check:release_test")
    )


def release_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    """1 when the release test refuses."""
    pair, s = release_pair(neighbour, noise_scale), release_settings(noise_scale)
    return np.array(
        [
            not release_test(
                pair.counts, pair.n_rows, FRACTION, s, release_test_rng(neighbour, noise_scale, run), K
            ).passed
            for run in range(n_runs)
        ],
        dtype=float,
    )


def release_ledger() -> Event:
    pair = release_pair(False, 1.0)
    return release_test(
        pair.counts, pair.n_rows, FRACTION, release_settings(1.0), release_test_rng(False, 1.0, 0), K
    ).event


# -- MST: the 2-way measurement and the selection -------------------------------------------------------------------
MST_BUDGET = Budget(3.0, DELTA, unit_rows=K)
MST_MEASURE, MST_SELECT = 3, 2  # indices in MST's plan for 2 columns: 1-way, 1-way, selection, 2-way
MEASURE_RUNS = (2000, 20_000)  # the zCDP claims (module docstring): 20,000 runs resolve the half-noise release
SELECT_RUNS = (2000, 20_000)  # the half-noise rates 0.018 against 0.18 (`select_scores`)
UNIT_CODES = np.repeat(MARGINAL_CANARY, K, axis=0)  # the unit: 3 rows (a = 0, b = 0)


@functools.cache
def mst() -> PrivateGenerator:
    gen = generator_class("mst")(MARGINAL_LAYOUT, {}, "cpu")
    gen.plan(len(CODES), MST_BUDGET)
    return gen


def marginal_codes(neighbour: bool) -> np.ndarray:
    """tests/audit_cases_marginal.py's CODES, plus the unit (3 rows a = 0, b = 0) on D'."""
    return np.vstack([CODES, UNIT_CODES]) if neighbour else CODES


def measure_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    """`measure` of the 2-way marginal at σ₂·noise_scale (run_mst's call); the score: the canary cell (0, 0)."""
    exact = marginal(marginal_codes(neighbour), (3, 3), (0, 1))
    rng = NoiseSource(None, seed(4, neighbour, noise_scale)).numpy("audit:mst:measure")
    sigma = mst().privacy.sigma_2way * noise_scale
    return np.array([measure(exact, sigma, rng)[0].ravel()[0] for _ in range(n_runs)], dtype=float)


GAP_LOGIT = 4.0


def select_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    """`select` (Δ = 1, MST's ε_sel/noise_scale) between a's and b's marginals: the unit moves a's L1 score by +3
    (its cell, data 30, above a's model 29.5) and b's by −3 (its cell below b's model 33): u = [1, 3 + g] on D and
    [4, g] on D', so the first candidate's log-odds move by ε_sel·(3 + 3)/2 = 3ε_sel, the claim. g = GAP_LOGIT/ε_sel
    − 2 puts D's log-odds against the first at GAP_LOGIT at half noise (its rate 0.018, and D''s 0.18 at ε_sel =
    0.41: log ratio 2.3); at the planned noise the rates 0.12 and 0.32 bound every test below 1 (the claim 1.23).
    Score: 1 when the first candidate is selected."""
    eps = mst().privacy.epsilon_select
    gap = GAP_LOGIT / eps - 2
    model_a = np.array([29.5, 30.0, 30.5])
    model_b = np.array([33.0, 30 - gap / 2, 30 - gap / 2])
    codes = marginal_codes(neighbour)
    u = np.array(
        [
            l1_score(np.bincount(codes[:, 0], minlength=3), model_a),
            l1_score(np.bincount(codes[:, 1], minlength=3), model_b),
        ]
    )
    assert np.allclose(u, [4.0, gap] if neighbour else [1.0, 3 + gap])
    rng = NoiseSource(None, seed(5, neighbour, noise_scale)).numpy("audit:mst:select")
    return np.array([select(u, 1.0, eps / noise_scale, rng)[0] == 0 for _ in range(n_runs)], dtype=float)


# -- PEARL: the CF embedding ----------------------------------------------------------------------------------------
PEARL_BUDGET = Budget(2.0, DELTA, unit_rows=K)


@functools.cache
def pearl_planned() -> PEARL:
    """PEARL planned from the public n̂ = PEARL_N at the unit (for both data sets: the train stage plans from n̂)."""
    model = PEARL(PEARL_LAYOUT, PEARL_PARAMS)
    model.plan(PEARL_N, PEARL_BUDGET)
    return model


def pearl_plan():
    return pearl_planned().privacy


def pearl_model(noise_scale: float) -> PEARL:
    """A copy of the planned model (its unit kept) with the planned multipliers × noise_scale."""
    model = copy.deepcopy(pearl_planned())
    plan = pearl_plan()
    model.privacy = dataclasses.replace(
        plan,
        distance_noise_multiplier=plan.distance_noise_multiplier * noise_scale,
        embedding_noise_multiplier=plan.embedding_noise_multiplier * noise_scale,
    )
    return model


def pearl_rows(neighbour: bool) -> np.ndarray:
    """D = PEARL_N rows (a = 0, class 1); D' adds the unit, 3 more such rows: the pair sum is 0 on both (ℓ̂ carries no
    trace of the unit) and cos(ω·0) = 1, sin = 0 whatever the frequencies, so the sums move by 3v, v = e₁ ⊗
    [√k, 1…1, 0…0], ‖3v‖ = 3√(2k): the unit's Δ₂."""
    return np.tile(np.array([[0.0, 1.0]], np.float32), (PEARL_N + K * int(neighbour), 1))


def pearl_direction() -> np.ndarray:
    k = PEARL_PARAMS["frequencies"]
    v = np.zeros((2, 2 * k + 1))
    v[1, : k + 1] = [math.sqrt(k)] + [1.0] * k
    return v


def pearl_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    """`fit` with the planned multipliers × noise_scale; the score: the noisy sums along v (`tapped` release)."""
    model, data, along = pearl_model(noise_scale), pearl_rows(neighbour), projection(pearl_direction())
    out = np.empty(n_runs)
    with tapped(pearl_module, "release_embedding") as releases:
        for run in range(n_runs):
            model.params = model.params.model_copy(update={"noise_seed": seed(6, neighbour, noise_scale, run)})
            model.fit(data, FakeSession())
            assert len(releases) == run + 1, "PEARL's fit did not release its embedding through release_embedding"
            out[run] = along(releases[-1][0])
    return out


def pearl_ledger() -> Event:
    session = FakeSession()
    model = pearl_model(1.0)
    model.params = model.params.model_copy(update={"noise_seed": 0})
    model.fit(pearl_rows(False), session)
    assert session.reserved == session.recorded
    return session.recorded[1]


# -- output_lapl weights --------------------------------------------------------------------------------------------
W_UNIT_EPSILON = 1.0
W_UNIT_SETTINGS = {**W_SETTINGS, "rho_max": 0.3}  # N_S = ⌊0.3·ε'/Δ_w⌋ = 1 at the row-level ε' ≈ ε/3
W_SHIFT = (0.45, 0.55)  # the attained share of the unit's 3Δ_w (0.49, `w_attained`) the docstring states


@functools.cache
def w_plan() -> estimators.WeightPlan:
    return estimators.unit_plan(
        "output_lapl", W_UNIT_SETTINGS, W_LAYOUT, W_N_HAT, W_N_SYNTHETIC, W_UNIT_EPSILON, DELTA, K
    )


def w_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(real rows of D, the unit, synthetic rows): tests/audit_cases_release.py's pair with three canaries at a = 1."""
    return (np.zeros((W_N_HAT, 1)), np.ones((K, 1)), np.r_[[1.0], np.zeros(W_N_SYNTHETIC - 1)][:, None])


def w_attained() -> float:
    """|x̃ᵀ(β(D') − β(D))| / 3Δ_w for the released row x̃ = (1, 1): the share of the unit's sensitivity the pair moves
    the log-weight by (the exact fits at the public n)."""
    real, unit, synthetic = w_data()
    n_total, l2 = W_N_HAT + W_N_SYNTHETIC, float(W_UNIT_SETTINGS["l2"])
    shift = logistic.fit_coefficients(np.vstack([real, unit]), synthetic, l2, n_total) - logistic.fit_coefficients(
        real, synthetic, l2, n_total
    )
    return abs(float(shift @ np.ones(2))) / (K * w_plan().details["log_weight_sensitivity"])


def w_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    """`estimate` on D or D' (one plan from the public n̂); the score: the released log-weight of the synthetic row
    a = 1 plus the public prior odds log(n̂/N_G) that estimate subtracts."""
    real, unit, synthetic = w_data()
    data = np.vstack([real, unit]) if neighbour else real
    planned = w_plan()
    assert planned.n_released == 1 and planned.max_rows == K
    assert W_SHIFT[0] < w_attained() < W_SHIFT[1]
    plan = dataclasses.replace(
        planned, events=[dataclasses.replace(planned.events[0], scale=planned.events[0].scale * noise_scale)]
    )
    prior = math.log(plan.n_real / plan.n_synthetic)
    out = np.empty(n_runs)
    with memoised(logistic, "fit_coefficients"):
        for run in range(n_runs):
            settings = {**W_UNIT_SETTINGS, "noise_seed": seed(7, neighbour, noise_scale, run)}
            log_w, _ = estimators.estimate(plan, settings, data, synthetic)
            out[run] = float(np.sum(log_w + prior))
    return out


# -- support_points: the Laplace bandwidth --------------------------------------------------------------------------
SP_UNIT_PARAMS = {**SP_BASE, **SP_CONFIGS["kde_laplace"], "epsilon": 3.0}
SP_ROWS = 30  # D: 30 rows at 0 (MLE σ_lo); the unit: 3 rows at 1 (MLE σ_hi)
BANDWIDTH_POWER = 1 / (2 * K)


@functools.cache
def sp_model() -> SupportPoints:
    model = SupportPoints(SP_LAYOUT, SP_UNIT_PARAMS)
    model.plan(SP_ROWS, Budget(SP_UNIT_PARAMS["epsilon"], DELTA, unit_rows=K))
    return model


def sp_data(neighbour: bool) -> np.ndarray:
    return np.vstack([np.zeros((SP_ROWS, 1)), np.ones((K, 1))]) if neighbour else np.zeros((SP_ROWS, 1))


def bandwidth_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    """`laplace_bandwidth` (the grid `_grid()`, ε_bw/noise_scale from the plan) on the public centre Ỹ = {0}; the
    score: σ."""
    model, centres, data = sp_model(), np.zeros((1, 1)), sp_data(neighbour)
    grid = model._grid()
    assert mle_bandwidth(data, centres, grid) == (grid[-1] if neighbour else grid[0])
    eps = model.privacy.epsilon_bandwidth / noise_scale
    return np.array(
        [
            laplace_bandwidth(
                data,
                centres,
                grid,
                eps,
                NoiseSource(None, seed(8, neighbour, noise_scale, run)).numpy("audit:bandwidth"),
            )[0]
            for run in range(n_runs)
        ]
    )


# -- AIM: the one-way measurement -----------------------------------------------------------------------------------
AIM_BUDGET = Budget(3.0, DELTA, unit_rows=K)
AIM_PARAMS = {"max_rounds": 1, "one_way_share": None}  # tests/audit_cases_marginal.py's AIM (σ₁ = x)
AIM_ONE_WAY = 0  # index in AIM's plan for 2 columns: 1-way a, 1-way b, the rounds' zCDP budget


@functools.cache
def aim() -> PrivateGenerator:
    gen = generator_class("aim")(MARGINAL_LAYOUT, AIM_PARAMS, "cpu")
    gen.plan(len(CODES), AIM_BUDGET)
    return gen


def aim_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    """`measure` of a's 1-way marginal at σ₁·noise_scale (run_aim's call); the score: the canary cell a = 0, which
    the unit moves by 3."""
    exact = marginal(marginal_codes(neighbour), (3, 3), (0,))
    rng = NoiseSource(None, seed(9, neighbour, noise_scale)).numpy("audit:aim:one_way")
    sigma = aim().privacy.one_way * noise_scale
    return np.array([measure(exact, sigma, rng)[0].ravel()[0] for _ in range(n_runs)], dtype=float)


# -- the calibration's noisy marginals (importance-weighted) --------------------------------------------------------
CALIBRATION_BUDGET = Budget(2.0, DELTA, unit_rows=K)
CALIBRATION_CONFIG = "weighted"  # tests/audit_cases_calibration.py's IW-MMD-GAN with rebalancing weights
CALIBRATION_EVENT = 1  # the embedding, then the calibration
CALIBRATION_RUNS = (2000, RUNS[0.5])  # 2,000 at the planned noise: the bound there must exceed the row-level ε


@functools.cache
def calibrated() -> PrivateGenerator:
    """IW-MMD-GAN (tests/audit_cases_calibration.py's "weighted" config) planned at the unit for D' (n̂ = 90 + 3)."""
    gen = calibrated_generator(CALIBRATION_CONFIG)
    gen.plan(len(CALIBRATION_DATA) + K, CALIBRATION_BUDGET)
    return gen


def calibration_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    """`Calibration.measure` (what `fit` runs after `_fit`: the generator's own weights and cells) with the planned
    σ × noise_scale, a noise stream per run; D = tests/audit_cases_calibration.py's 90 rows, D' adds the unit, 3
    rows of its weighted canary (a = 0, y = 1: w = w_max, 64 lattice points each). The score: the sum of the noisy
    values of the canary's m = 3 cells, whose mean the unit moves by 3m·w_max (the unit's Δ₂ = 3√m·w_max along
    the all-ones direction of those cells)."""
    gen = calibrated()
    plan, canary = gen.privacy, CALIBRATION_CANARIES[CALIBRATION_CONFIG]
    scaled = dataclasses.replace(
        plan, calibration=dataclasses.replace(plan.calibration, sigma=plan.calibration.sigma * noise_scale)
    )
    data = np.vstack([CALIBRATION_DATA, np.repeat(canary, K, axis=0)]) if neighbour else CALIBRATION_DATA
    out = np.empty(n_runs)
    for run in range(n_runs):
        streams = NoiseSource(None, seed(10, neighbour, noise_scale, run)).streams(private=True, seed=0)
        event = gen.calibration.measure(scaled, data, streams)
        assert noise_scale != 1.0 or event == plan.events[CALIBRATION_EVENT]
        noisy = gen.calibration.noisy
        out[run] = sum(c.ravel()[int(k[0])] for c, k in zip(noisy.counts, noisy.cells(canary)))
    return out


# -- the private selection's DP quality score -----------------------------------------------------------------------
SELECTION_BUDGET = Budget(2.5, DELTA, unit_rows=K)
SELECTION_PARAMS = {
    "candidates": ["support_points"],
    "trials": "each",
    "score_share": 0.5,
    "score_bins": 10,
    "sections": {"support_points": {"calibration": {"share": 0.0}}},
}
SELECTION_SCORE = 1  # the candidate's set, then its score


@functools.cache
def selection() -> PrivateGenerator:
    """The private selection (`trials: each`, one candidate, support_points: pure events, so that planning at the
    unit is quick) on tests/audit_cases_selection.py's layout, planned at the unit: its plan holds the score's
    event as it is, the ledger its unit conversion."""
    gen = generator_class("private_selection")(SELECTION_LAYOUT, SELECTION_PARAMS, "cpu")
    gen.plan(len(SELECTION_DATA), SELECTION_BUDGET)
    return gen


def selection_score_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    """`QualityScore.noisy` (the selection's own score, at ε_s/noise_scale: `_fit`'s call, ε_s = score_share × the
    trial ε) of tests/audit_cases_selection.py's S_0 (every row a = 2, y = 1); D' adds the unit, 3 canaries
    (a = 0, y = 0): each adds 3 to err (its cell of each marginal, where S_0 has none) and h_S (y = 1) mislabels it
    (|W|·miss + 3), so q moves by 3·2|W| = 18, the unit's Δ."""
    gen = selection()
    eps = float(gen.params.score_share) * gen.privacy.trial_epsilon
    assert gen.score.event(eps) == gen.privacy.events[SELECTION_SCORE]
    with_unit = np.vstack([SELECTION_DATA, np.repeat(SELECTION_CANARY, K, axis=0)])
    assert (
        gen.score.value(with_unit, SELECTION_TABLES[0]) - gen.score.value(SELECTION_DATA, SELECTION_TABLES[0])
        == K * gen.score.sensitivity
    )
    rows = with_unit if neighbour else SELECTION_DATA
    rng = NoiseSource(None, seed(11, neighbour, noise_scale)).numpy("audit:selection:score")
    return np.array(
        [gen.score.noisy(rows, SELECTION_TABLES[0], eps / noise_scale, rng)[0] for _ in range(n_runs)], dtype=float
    )


# -- support_points: the exponential mechanism (the MH sampler) -----------------------------------------------------
SP_SET = 0  # kde_laplace's plan: the set, then the bandwidth


@functools.cache
def sp_points_model(n_rows: int) -> SupportPoints:
    """SP_UNIT_PARAMS planned at the unit for `n_rows` (each data set its own plan, as `fit` plans from len(X) and
    the row-level case does: Δ of eq. 5.10 for that N)."""
    model = SupportPoints(SP_LAYOUT, SP_UNIT_PARAMS)
    model.plan(n_rows, Budget(SP_UNIT_PARAMS["epsilon"], DELTA, unit_rows=K))
    return model


def sp_points_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    """`sample_energy_mechanism` with `_release`'s arguments (ε per set / noise_scale, the plan's Δ, n_ref = the
    plan's N), one chain per run; D = {1} (tests/audit_cases_release.py's), D' adds the unit, 3 rows at 0. The
    score: the released point."""
    data = np.vstack([np.ones((1, 1)), np.zeros((K, 1))]) if neighbour else np.ones((1, 1))
    model = sp_points_model(len(data))
    p, plan = model.params, model.privacy
    rng = NoiseSource(None, seed(12, neighbour, noise_scale)).numpy("audit:support_points")
    with np.errstate(invalid="ignore"):  # split-R̂ of chains that never moved: 0/0, not used here
        result = sample_energy_mechanism(
            data,
            int(p.n_points),
            plan.epsilon_per_set / noise_scale,
            plan.sensitivity,
            plan.norm,
            rng,
            chains=n_runs,
            burn_in=int(p.burn_in),
            steps=int(p.steps),
            thin=int(p.thin),
            target_acceptance=float(p.target_acceptance),
            phase="audit:support_points",
            n_ref=plan.n_rows,
        )
    return result.finals[:, 0, 0]


# -- the cases ------------------------------------------------------------------------------------------------------


def unit_case(
    owner: str,
    index: int,
    mechanism: str,
    ledger: Callable[[], Event],
    row_event: Callable[[], Event],
    scores: Scores,
    pure_event: bool,
    tight: bool,
    runs: tuple[int, int] = (RUNS[1.0], RUNS[0.5]),
    power: float = 0.5,
) -> UnitCase:
    """A case claiming the ε of `ledger()` (`claimed`: at δ = 0 when `pure_event`, else at DELTA), computed when the
    audit first asks for it."""
    audit = AuditCase(
        owner, f"unit{K}", index, mechanism, lambda: claimed(ledger()), 0.0 if pure_event else DELTA, scores, power
    )
    return UnitCase(audit, ledger, row_event, tight, runs)


def cases() -> list[UnitCase]:
    third = lambda eps: eps / K  # noqa: E731  (the row-level ε of the same noise, for the max_rows mechanisms)
    return [
        unit_case(
            "prepare:row_count",
            0,
            "training row count (discrete Laplace, Δ = 3)",
            count_ledger,
            lambda: count_event(third(COUNT_EPSILON)),
            count_scores,
            True,
            True,
        ),
        unit_case(
            "prepare:row_loss",
            0,
            "row-loss stop bit (discrete Laplace, Δ = 3)",
            loss_ledger,
            lambda: loss_event(third(LOSS_EPSILON)),
            loss_scores,
            True,
            True,
        ),
        unit_case(
            "check:release_test",
            0,
            "release test bit (discrete Laplace, Δ = 3·max(a, b))",
            release_ledger,
            lambda: planned_event(third(TEST_EPSILON), FRACTION),
            release_scores,
            True,
            True,
        ),
        unit_case(
            "mst",
            MST_MEASURE,
            "MST 2-way measurement (discrete Gaussian at 3 rows: zCDP)",
            lambda: mst().planned_events()[MST_MEASURE],
            lambda: mst().privacy.events[MST_MEASURE],
            measure_scores,
            False,
            True,
            MEASURE_RUNS,
        ),
        unit_case(
            "mst",
            MST_SELECT,
            "MST selection (exponential mechanism, score Δ = 3)",
            lambda: mst().planned_events()[MST_SELECT],
            lambda: mst().privacy.events[MST_SELECT],
            select_scores,
            True,
            True,
            SELECT_RUNS,
        ),
        unit_case(
            "pearl",
            1,
            "PEARL CF embedding sums (Gaussian, Δ₂ = 3√(2k))",
            pearl_ledger,
            lambda: pearl_plan().events[1],
            pearl_scores,
            False,
            True,
        ),
        unit_case(
            "weights:output_lapl",
            0,
            f"weights output_lapl (Δ_w at 3 rows attained ≈ 0.5; power checked at noise scale {W_POWER_SCALE})",
            lambda: w_plan().unit_events[0],
            lambda: w_plan().events[0],
            w_scores,
            True,
            False,
            power=W_POWER_SCALE,
        ),
        unit_case(
            "support_points",
            1,
            f"support_points Laplace bandwidth (range-bounded: exact unit ε = claim/3; "
            f"power checked at noise scale 1/{2 * K})",
            lambda: sp_model().planned_events()[1],
            lambda: sp_model().privacy.events[1],
            bandwidth_scores,
            True,
            False,
            power=BANDWIDTH_POWER,
        ),
        unit_case(
            "aim",
            AIM_ONE_WAY,
            "AIM 1-way measurement (discrete Gaussian at 3 rows: zCDP)",
            lambda: aim().planned_events()[AIM_ONE_WAY],
            lambda: aim().privacy.events[AIM_ONE_WAY],
            aim_scores,
            False,
            True,
            MEASURE_RUNS,
        ),
        unit_case(
            "calibration",
            CALIBRATION_EVENT,
            f"calibration: importance-weighted noisy marginals (discrete "
            f"Gaussian at 3 rows: zCDP; power checked at noise scale {ZCDP_POWER})",
            lambda: calibrated().planned_events()[CALIBRATION_EVENT],
            lambda: calibrated().privacy.events[CALIBRATION_EVENT],
            calibration_scores,
            False,
            True,
            CALIBRATION_RUNS,
            ZCDP_POWER,
        ),
        unit_case(
            "private_selection",
            SELECTION_SCORE,
            "DP quality score (discrete Laplace, Δ = 3·2|W|)",
            lambda: selection().planned_events()[SELECTION_SCORE],
            lambda: selection().privacy.events[SELECTION_SCORE],
            selection_score_scores,
            True,
            True,
        ),
        unit_case(
            "support_points",
            SP_SET,
            f"support_points exponential mechanism, real MH sampler, 1-D (loose: "
            f"power checked at noise scale {SP_POWER_SCALE})",
            lambda: sp_points_model(1).planned_events()[SP_SET],
            lambda: sp_points_model(1).privacy.events[SP_SET],
            sp_points_scores,
            True,
            False,
            power=SP_POWER_SCALE,
        ),
    ]


CASES: list[UnitCase] = cases()
