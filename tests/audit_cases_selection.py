"""Audit cases for the private selection: its DP quality score and its repeat-and-select, each
on the code `PrivateSelection._fit` runs (`pipelines.marginal.score.QualityScore.noisy`,
`pipelines.generators.mechanisms.repeat_select.best_of_trials`). tests/test_privacy_contract.py collects them
(interface: tests/audit_harness.py). A selection's event composes its candidates' events, which their own owners' cases
audit, with these two steps.

Layout: a categorical `a` (3 categories) and a binary target `y`, so the score's workload is W = {a, y, a × y},
|W| = 3, and Δ = 2|W| = 6. D: 15 rows per (a, y) cell; D' = D + the canary (a = 0, y = 0).

* "score": q(D; S) + Lap_ℤ(6/ε_s), ε_s = 1, for a synthetic table S with no row in the canary's cells (every row
  a = 2, y = 1): in each marginal the canary's cell has c(D) ≥ c(S) = 0, so err(D'; S) = err(D; S) + 3, and h_S
  (one target cell in S: it predicts y = 1) mislabels the canary, so miss rises by 1 and q by 3 + 3: the
  sensitivity Δ is attained, and the discrete Laplace's ε is exact (the lower bound exceeds it at half noise).
* "select": `best_of_trials` with the logarithmic law of mean μ = 3 over two candidates whose trial is that score
  against their own fixed
  table (S_0 as above; S_1 with every row at a = 0, y = 0, 30 rows, where the canary lowers err by 3 and is
  labelled right), publishing
  the winner's index and its noisy score (a trial's output may be anything private within it; here its score).
  Claim: the accountant's ε at δ = 1e-2 of RepeatAndSelectEvent(((score,), (score,)), μ, logarithmic). Papernot &
  Steinke's bound is not tight (its λ̂ term and the law's tail are worst cases that no pair attains), so this case's
  power is shown at noise ×0.1 (`power_noise_scale`), where the published pair (index, score) separates D from D'
  beyond the claim.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from audit_harness import AuditCase

from pipelines.data.layout import Block, Layout
from pipelines.marginal.score import QualityScore
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import LOGARITHMIC_SHAPE, Event, RepeatAndSelectEvent
from pipelines.generators.mechanisms.repeat_select import best_of_trials, trial_law

AUDIT_DELTA = 1e-2
LAYOUT = Layout((Block("a", "categorical", 0, 3), Block("y", "binary", 3, 4, is_target=True)))
SCORE = QualityScore.of(LAYOUT, 10)
SCORE_EPSILON = 1.0
GAMMA, MEAN_TRIALS = trial_law(3.0)
DATA = np.array([[*np.eye(3)[i % 3], (i // 3) % 2] for i in range(90)], dtype=np.float32)  # 15 rows per (a, y)
CANARY = np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32)  # a = 0, y = 0
TABLES = (
    np.tile(np.array([[0.0, 0.0, 1.0, 1.0]], dtype=np.float32), (90, 1)),  # S_0: a = 2, y = 1
    np.tile(CANARY, (30, 1)),
)  # S_1: a = 0, y = 0


def data(neighbour: bool) -> np.ndarray:
    return np.vstack([DATA, CANARY]) if neighbour else DATA


def score_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    """`QualityScore.noisy` of S_0 at ε_s/noise_scale (noise × noise_scale), n_runs times."""
    rng = np.random.default_rng([11, int(neighbour), int(100 * noise_scale)])
    rows = data(neighbour)
    return np.array(
        [SCORE.noisy(rows, TABLES[0], SCORE_EPSILON / noise_scale, rng)[0] for _ in range(n_runs)], dtype=float
    )


def select_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    """`best_of_trials` over the two candidates (module docstring): winner index × 10⁴ + its noisy score."""
    rng = np.random.default_rng([13, int(neighbour), int(100 * noise_scale)])
    rows = data(neighbour)

    def trial(t: int, k: int) -> tuple[int, int]:
        score = SCORE.noisy(rows, TABLES[k], SCORE_EPSILON / noise_scale, rng)[0]
        return score, score

    out = np.empty(n_runs)
    for r in range(n_runs):
        _, k, score = best_of_trials(rng, GAMMA, (1, 1), trial)
        out[r] = 10_000 * k + score
    return out


def plan(config: str) -> list[Event]:
    score = SCORE.event(SCORE_EPSILON)
    if config == "score":
        return [score]
    return [RepeatAndSelectEvent(((score,), (score,)), MEAN_TRIALS, LOGARITHMIC_SHAPE)]


CASES = [
    AuditCase(
        "private_selection",
        "score",
        0,
        "DP quality score (discrete Laplace, Δ = 2|W|)",
        partial(float, SCORE_EPSILON),
        0.0,
        score_scores,
    ),
    AuditCase(
        "private_selection",
        "select",
        0,
        "repeat and select (logarithmic T, loose bound: power at ×0.1)",
        lambda: epsilon_pld(plan("select"), AUDIT_DELTA),
        AUDIT_DELTA,
        select_scores,
        power_noise_scale=0.1,
    ),
]
PLANS = {("private_selection", config): (lambda config=config: plan(config)) for config in ("score", "select")}
