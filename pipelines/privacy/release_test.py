"""The DP release test: does a synthetic table sit closer to its training rows than to fresh rows? One noisy bit.

Every other gate reads real rows outside any DP mechanism, so its pass/fail bit is not private (one record can
flip it). The publish decision is this test instead (`release.non_dp_gates: advise`, the default: the other gates
go to the steward report only). It is the noisy-threshold test on a clipped statistic (Dwork & Roth 2014,
§3.3 and §3.6), on the memorisation signal the copy and DCR gates look for.

Statistic. With S the synthetic table (a DP output: the test is a further mechanism on (D, S), composed
adaptively in the ledger), ρ = `evaluate.attacks.near_duplicate_distance` and the Gower distance of
pipelines/evaluation/attacks/distance.py (schema bounds and categories only):

    N_T = #{x ∈ train : min_{s ∈ S} d(x, s) ≤ ρ},   N_H = the same count over the holdout,
    Z = a·N_T − b·N_H,   where a/(a+b) = f, the holdout fraction in lowest terms (`split_weights`).

Null. The keyed split sends each record to the holdout with probability f by its keyed hash alone
(pipelines/data/transform.py; repeated rows spread as independent rows would), so for a table that does not
depend on which side a record fell, each of the M real rows within ρ of S adds a with probability
1 − f = b/(a+b) and −b with probability f: E[Z] = 0 and Var[Z] = a·b·M ≤ a·b·n̂/(1 − f) (M is at most the
whole table, n̂ the public training count). Memorising a share φ of the training rows adds ≈ a·φ·n̂.

Sensitivity (add/remove one record r). S is fixed; every other row keeps its side (its keyed hash and its
occurrence index among identical rows, copies being interchangeable), so r changes N_T by 0 or 1 (it lands in
train) or N_H by 0 or 1 (it lands in the holdout), never both: |Z(D) − Z(D')| ≤ Δ = max(a, b). Z is an integer,
so Z + Lap_ℤ(Δ/ε) (`discrete_laplace_mechanism`, exact) is ε-DP, and so is the bit Z + Y ≤ τ for a public τ.

With a declared privacy unit of at most k rows (pipelines/data/units.py) a unit's rows all lie on one side, so
adding or removing it changes N_T or N_H by at most k: Δ = k·max(a, b). Under the null a unit with m ≤ k near rows
adds a·m or −b·m together, so Var[Z] = a·b·Σ m_u² ≤ k·a·b·M: the threshold's normal term is √k wider.

Cost. N_T and N_H ask, for every real row, whether some synthetic row lies within ρ: `distance.within` answers
exactly that without comparing every pair (with p < 1/ρ columns, rows differing in a category are ≥ 1/p > ρ apart,
so a KD-tree over each row's category pattern and numeric features suffices): far faster than comparing every pair,
with the same answers, and still practical at sizes where all pairs are not (`benchmarks/release_test_rows.py`).

Threshold. τ = a·n̂·excess_max + x_c, with x_c the `confidence` quantile of G + Y, G ~ N(0, a·b·n̂/(1 − f)) (the
normal approximation of Z's worst-case null) and Y ~ Lap_ℤ(t), t = Δ/ε, P(Y = k) = (1 − q)/(1 + q)·q^|k|,
q = e^(−1/t): P(G + Y > x) = Σ_k P(Y = k)·Φ̄((x − k)/σ) is summed over |k| ≤ 40t (the rest weighs < e^−40) and
solved for x. A table whose excess share of training rows near S is at most `excess_max` then passes with
probability ≥ `confidence` whatever M is. (Adding the variances instead, z_c·√(σ² + 2t²), under-covers the
Laplace's heavier tail: at ε = 0.01 it refuses ≈ 1.8 % of fresh tables at `confidence` 0.99.)
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.stats import norm

from pipelines.evaluation.attacks.distance import Near, gower_features
from pipelines.privacy.events import DiscreteLaplaceEvent
from pipelines.privacy.mechanisms import discrete_laplace_mechanism

QUERY = "release test: a·(train rows near S) − b·(holdout rows near S)"
MAX_DENOMINATOR = 20  # f's rational approximation: Δ = max(a, b) < 20 (f = 0.2 gives a = 1, b = 4, Δ = 4)


def split_weights(holdout_fraction: float) -> tuple[int, int]:
    """(a, b) with a/(a + b) the holdout fraction f in lowest terms, denominator at most MAX_DENOMINATOR
    (f = 0.2: (1, 4); a documented fraction such as 0.25 or 0.3 is exact)."""
    frac = Fraction(str(holdout_fraction)).limit_denominator(MAX_DENOMINATOR)
    if not 0 < frac < 1:
        raise ValueError(f"the holdout fraction must be in (0, 1), got {holdout_fraction}")
    return frac.numerator, frac.denominator - frac.numerator


def planned_event(epsilon: float, holdout_fraction: float, max_rows: int = 1) -> DiscreteLaplaceEvent:
    """The test's ledger event: discrete Laplace of scale Δ/ε on Z, Δ = k·max(a, b), k = `max_rows` (module
    docstring)."""
    sensitivity = int(max_rows) * max(split_weights(holdout_fraction))
    return DiscreteLaplaceEvent(scale=sensitivity / float(epsilon), sensitivity=sensitivity, query=QUERY)


def threshold(
    n_rows: int, holdout_fraction: float, epsilon: float, excess_max: float, confidence: float, max_rows: int = 1
) -> float:
    """τ of the module docstring, from public facts only (k = `max_rows` rows per privacy unit)."""
    a, b = split_weights(holdout_fraction)
    t = max_rows * max(a, b) / float(epsilon)
    sigma = max(float(np.sqrt(max_rows * a * b * n_rows * (a + b) / b)), 1e-9)
    q, alpha = np.exp(-1.0 / t), 1.0 - float(confidence)
    k = np.arange(-np.ceil(40 * t), np.ceil(40 * t) + 1)
    pmf = (1 - q) / (1 + q) * q ** np.abs(k)

    def excess_refusal(x: float) -> float:  # P(G + Y > x) − α
        return float(pmf @ norm.sf((x - k) / sigma)) - alpha

    def end(tail: float) -> float:  # P(G > x₁) + P(Y > x₂) ≤ tail/2 + tail/2 at x₁ + x₂ (and by symmetry below −)
        return norm.isf(tail / 2) * sigma + t * np.log(2 / tail) + 1.0

    return float(a * n_rows * excess_max + brentq(excess_refusal, -end(1 - alpha), end(alpha), xtol=1e-6))


def near_counts(
    train: Iterable[pd.DataFrame],
    holdout: Iterable[pd.DataFrame],
    synth: Iterable[pd.DataFrame],
    columns: Sequence[Any],
    radius: float,
) -> tuple[int, int]:
    """(N_T, N_H): the real rows of each side whose closest synthetic row is within Gower distance `radius`
    (every row: a row-dependent subsample would break the sensitivity bound; `Near`: exact, without comparing
    every pair). Each table comes in parts (row groups; one frame is one part): a part's rows are counted alone,
    so the counts are those of the whole tables, and the synthetic rows are held only as the search needs them."""
    near = Near((gower_features(part, columns) for part in synth), radius + 1e-12, columns)
    n_train, n_holdout = (
        sum(int(near.within(gower_features(part, columns)).sum()) for part in side) for side in (train, holdout)
    )
    return n_train, n_holdout


@dataclass(frozen=True)
class ReleaseTest:
    passed: bool  # the DP bit: the only output that may leave the steward's side
    event: DiscreteLaplaceEvent  # recorded in the ledger
    threshold: float
    statistic: int  # Z, and the counts: steward-internal
    noisy_statistic: int  # Z + Y: DP, kept internal (the bit suffices)
    counts: tuple[int, int]

    def evidence(self) -> dict[str, Any]:
        return {
            "private": True,
            "epsilon": self.event.epsilon,
            "query": QUERY,
            "threshold": self.threshold,
            "statistic": self.statistic,
            "noisy_statistic": self.noisy_statistic,
            "near_train_rows": self.counts[0],
            "near_holdout_rows": self.counts[1],
        }


def release_test(
    counts: tuple[int, int],
    n_rows: int,
    holdout_fraction: float,
    s: dict[str, Any],
    rng: np.random.Generator,
    max_rows: int = 1,
) -> ReleaseTest:
    """Z + Lap_ℤ(Δ/ε) ≤ τ on `counts` = `near_counts(...)` (the caller reserves `planned_event` first and records
    the returned event); `s`: the `release` section (`test_epsilon`, `test_excess_max`, `test_confidence`); k =
    `max_rows` rows per privacy unit."""
    a, b = split_weights(holdout_fraction)
    planned = planned_event(s["test_epsilon"], holdout_fraction, max_rows)
    z = a * counts[0] - b * counts[1]
    noisy, event = discrete_laplace_mechanism(np.array([z]), planned.sensitivity, planned.scale, rng, query=QUERY)
    tau = threshold(n_rows, holdout_fraction, s["test_epsilon"], s["test_excess_max"], s["test_confidence"], max_rows)
    return ReleaseTest(bool(noisy[0] <= tau), event, tau, int(z), int(noisy[0]), counts)
