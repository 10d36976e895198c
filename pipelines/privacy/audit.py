"""Empirical privacy auditing: a statistically valid lower bound on ε from neighbouring runs.

Run a mechanism many times on a data set D and on a neighbour D' (one record added), reduce
each output to a scalar score, and test "output came from D'" by thresholding the score.
For any (ε, δ)-DP mechanism and any threshold test, TPR <= e^ε · FPR + δ (and the same with
the roles of the two data sets swapped), so

    ε >= log((TPR - δ) / FPR).

Clopper-Pearson bounds (lower on TPR, upper on FPR) make this a high-confidence lower bound;
a Bonferroni correction covers the search over thresholds and both directions, so the bound
holds with the stated confidence for the *maximum* over the grid.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two-sided (1 - alpha) Clopper-Pearson interval for a binomial proportion k/n."""
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def epsilon_lower_bound(scores_d: np.ndarray, scores_dprime: np.ndarray, delta: float,
                        confidence: float = 0.95, n_thresholds: int = 64) -> float:
    """Lower bound on ε, valid with probability >= `confidence`, from scores on D and D'.

    Thresholds are a fixed grid of quantiles of the pooled scores; both "score > t means D'"
    and "score < t means D'" are tried. Returns 0.0 when no test beats chance.
    """
    s0, s1 = np.asarray(scores_d, float), np.asarray(scores_dprime, float)
    pooled = np.concatenate([s0, s1])
    thresholds = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, n_thresholds + 2)[1:-1]))
    tests = 2 * 2 * len(thresholds)  # thresholds x direction x which set plays "positive"
    alpha = (1 - confidence) / tests
    best = 0.0
    for t in thresholds:
        for a, b in ((s1, s0), (s0, s1)):              # a plays D' (positive), b plays D
            for above in (True, False):
                tp = int(np.sum(a > t) if above else np.sum(a < t))
                fp = int(np.sum(b > t) if above else np.sum(b < t))
                tpr_lo = clopper_pearson(tp, len(a), 2 * alpha)[0]
                fpr_hi = clopper_pearson(fp, len(b), 2 * alpha)[1]
                if tpr_lo - delta > 0 and fpr_hi > 0:
                    best = max(best, math.log((tpr_lo - delta) / fpr_hi))
    return best
