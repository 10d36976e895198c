"""Empirical privacy auditing: a statistically valid lower bound on ε from neighbouring runs.

Run a mechanism many times on a data set D and on a neighbour D' (one record added), reduce
each output to a scalar score, and test "output came from D'" by thresholding the score.
For any (ε, δ)-DP mechanism and any threshold test, TPR <= e^ε · FPR + δ (and the same with
the roles of the two data sets swapped), so

    ε >= log((TPR - δ) / FPR).

Confidence. Let m be the number of threshold tests tried (thresholds x direction x which set
plays "positive") and β = 1 − confidence. Each test j uses two one-sided Clopper-Pearson bounds
from independent runs: a lower bound L_j on its TPR and an upper bound U_j on its FPR, each at
level β / (2m), i.e. P(TPR_j < L_j) <= β/(2m) and P(FPR_j > U_j) <= β/(2m). By the union bound
over the 2m bounds,

    P(some L_j > TPR_j or some U_j < FPR_j) <= 2m · β/(2m) = β,

so with probability >= confidence every L_j <= TPR_j and U_j >= FPR_j simultaneously, and then
every log((L_j − δ)/U_j) <= log((TPR_j − δ)/FPR_j) <= ε: the *maximum* over the grid is a lower
bound on ε at the stated confidence. (A two-sided interval at level 2β/m per bound, each side
β/m, would cost 2(1 − confidence) in total: the union bound counts both one-sided bounds of a test.)
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta


def cp_lower(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper-Pearson lower bound L: P(p < L) <= alpha for k successes in n trials."""
    return 0.0 if k == 0 else float(beta.ppf(alpha, k, n - k + 1))


def cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper-Pearson upper bound U: P(p > U) <= alpha for k successes in n trials."""
    return 1.0 if k == n else float(beta.ppf(1 - alpha, k + 1, n - k))


def epsilon_lower_bound(
    scores_d: np.ndarray, scores_dprime: np.ndarray, delta: float, confidence: float = 0.95, n_thresholds: int = 64
) -> float:
    """Lower bound on ε, valid with probability >= `confidence`, from scores on D and D'.

    Thresholds are a fixed grid of quantiles of the pooled scores; both "score > t means D'"
    and "score < t means D'" are tried, each with D' and with D as the positive set. Each of the
    m tests gets β/m of β = 1 − confidence, split over its two one-sided bounds (β/(2m) each; module
    docstring). Returns 0.0 when no test beats chance.
    """
    s0, s1 = np.asarray(scores_d, float), np.asarray(scores_dprime, float)
    pooled = np.concatenate([s0, s1])
    thresholds = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, n_thresholds + 2)[1:-1]))
    tests = 2 * 2 * len(thresholds)  # thresholds x direction x which set plays "positive"
    alpha = (1 - confidence) / tests / 2  # per one-sided bound: two per test
    best = 0.0
    for t in thresholds:
        for a, b in ((s1, s0), (s0, s1)):  # a plays D' (positive), b plays D
            for above in (True, False):
                tp = int(np.sum(a > t) if above else np.sum(a < t))
                fp = int(np.sum(b > t) if above else np.sum(b < t))
                tpr_lo = cp_lower(tp, len(a), alpha)
                fpr_hi = cp_upper(fp, len(b), alpha)
                if tpr_lo - delta > 0 and fpr_hi > 0:
                    best = max(best, math.log((tpr_lo - delta) / fpr_hi))
    return best
