"""Repeat and select (Liu & Talwar 2019; Papernot & Steinke 2022, Algorithm 1 with the logarithmic law): the
mechanism a private selection runs, apart from what each trial does. Accounted as one `RepeatAndSelectEvent`
(pipelines/privacy/events.py, accountant.py `selection_rdp`).

    T ~ Logarithmic(γ) on {1, 2, ...}, P(T = t) = (1 − γ)^t / (t·ln(1/γ)); for t < T: k_t ~ w,
    (s_t, y_t) = trial(t, k_t); return (s_t*, k_t*, y_t*) for t* = the first t with the smallest s_t.

The law. Papernot & Steinke's truncated negative binomial of shape η (η = 1: geometric; η = 0: logarithmic) costs,
by their Theorem 2, ε(λ) + (1 + η)(1 − 1/λ̂)ε(λ̂) + (1 + η)·ln(1/γ)/λ̂ + ln(E[T])/(λ − 1) at order λ: the
logarithmic law halves the λ̂ terms, so at the same mean a trial gets a larger share of the budget (a zCDP trial
at mean 3 and ε = 1, δ = 1e-5: 0.65 per trial against the geometric law's 0.56; params/private.yaml's candidates on
the bundled table: 0.573 against 0.484, `benchmarks/select_law.py`).
`trial_law(μ)` fixes the law from the mean a steward sets: γ is the root of E[T] = (1 − γ)/(γ ln(1/γ)) = μ rounded
down to a multiple of 2^-20 (a rational, so `samplers.logarithmic_trials` draws T exactly: E[T] ≥ μ), and the
accountant is given the mean of γ·(1 − 2^-30), larger than the sampler's by about 10^-9 relative: Theorem 2's bound
decreases in γ, dp_accounting maps a mean to the γ below its root, and the float rounding of the mean (10^-16) is far
inside that margin, so the ledger's bound is never below the one for the law actually drawn.

w: public integer weights of the K candidates, fixed before any row is read (P(k) = w_k / Σw; all 1: uniform).
One trial is then a mixture with public weights, whose RDP is at most its worst component's whatever the weights
(the accountant's bound, pipelines/privacy/accountant.py `selection_rdp`). T and every k_t are drawn exactly from
`rng` (samplers.logarithmic_trials, samplers.uniform_index over Σw), the law the accountant assumes. Only the
returned triple may leave the mechanism: T, the other trials and their scores stay inside (the guarantee is for the
best trial's output alone). A trial's score s_t must itself be private (a noisy score charged as part of the
trial's events): ties go to the earlier trial, a rule fixed in advance.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from fractions import Fraction
from itertools import accumulate
from typing import TypeVar

import numpy as np
from scipy import optimize

from pipelines.privacy.samplers import logarithmic_trials, uniform_index

Output = TypeVar("Output")
GAMMA_GRID = 2**20  # γ is a multiple of 1/GAMMA_GRID (exact sampling)
ACCOUNTED_SLACK = 2.0**-30  # the accountant's γ is the sampler's × (1 − this)


def logarithmic_mean(gamma: float) -> float:
    """E[T] = (1 − γ)/(γ ln(1/γ)) of the logarithmic law (1 at γ = 1)."""
    return 1.0 if gamma >= 1 else (1 - gamma) / (gamma * math.log(1 / gamma))


def trial_law(mean: float) -> tuple[Fraction, float]:
    """(γ, accounted mean) of the logarithmic trial count for a steward's mean μ ≥ 1 (module docstring): γ the
    sampler's, a multiple of 2^-20 with E[T] ≥ μ; the accounted mean E[T] at γ·(1 − 2^-30), for the event."""
    if not (mean >= 1 and math.isfinite(mean)):
        raise ValueError(f"the mean number of trials must be a finite number >= 1, got {mean}")
    if mean == 1:
        return Fraction(1), 1.0
    root = optimize.brentq(lambda g: logarithmic_mean(g) - mean, 1e-12, 1 - 1e-12, xtol=1e-15, rtol=1e-15)
    gamma = Fraction(math.floor(root * GAMMA_GRID), GAMMA_GRID)
    return gamma, logarithmic_mean(float(gamma) * (1 - ACCOUNTED_SLACK))


def best_of_trials(
    rng: np.random.Generator, gamma: Fraction, weights: Sequence[int], trial: Callable[[int, int], tuple[int, Output]]
) -> tuple[int, int, Output]:
    """(score, candidate, output) of the best of T ~ Logarithmic(`gamma`) trials (`trial_law`), `trial(t, k)`
    running candidate k (drawn with probability weights[k] / Σ weights) as trial t and returning its private score
    (lower is better) and output (module docstring)."""
    if not weights or any(int(w) != w or w < 1 for w in weights):
        raise ValueError(f"candidate weights must be positive integers, got {list(weights)}")
    bounds = list(accumulate(int(w) for w in weights))

    def runs() -> Iterator[tuple[int, int, Output]]:
        for t in range(logarithmic_trials(rng, gamma)):
            k = bisect.bisect_right(bounds, uniform_index(rng, bounds[-1]))
            yield (k, *trial(t, k))

    return _lowest(runs())


def best_of_each(n_candidates: int, trial: Callable[[int, int], tuple[int, Output]]) -> tuple[int, int, Output]:
    """(score, candidate, output) of the best of one trial per candidate, in order: `trial(k, k)` runs candidate k
    and returns its private score (lower is better) and output; ties go to the earlier candidate.

    Not repeat and select: nothing is random here, every candidate runs, and the guarantee is the composition of
    every trial's events (each candidate's own and its score's), fixed before any row is read; publishing the
    argmin and its output is post-processing of those K private outputs (`trials: each`,
    pipelines/generators/private_selection.py)."""
    if n_candidates < 1:
        raise ValueError(f"a selection needs at least one candidate, got {n_candidates}")
    return _lowest((k, *trial(k, k)) for k in range(n_candidates))


def _lowest(runs: Iterable[tuple[int, int, Output]]) -> tuple[int, int, Output]:
    """(score, candidate, output) of the run (candidate, score, output) with the lowest score, runs consumed in
    order (each one runs when reached); ties go to the earlier run."""
    best: tuple[int, int, Output] | None = None
    for k, score, output in runs:
        if best is None or score < best[0]:
            best = (score, k, output)
    assert best is not None, "a selection runs at least one trial"
    return best
