"""Repeat and select (Liu & Talwar 2019; Papernot & Steinke 2022, Algorithm 1 with the geometric law): the
mechanism a private selection runs, apart from what each trial does. Accounted as one `RepeatAndSelectEvent`
(pipelines/privacy/events.py, accountant.py `selection_rdp`).

    T ~ Geometric(1/μ) on {1, 2, ...}; for t < T: k_t ~ w, (s_t, y_t) = trial(t, k_t);
    return (s_t*, k_t*, y_t*) for t* = the first t with the smallest s_t.

w: public integer weights of the K candidates, fixed before any row is read (P(k) = w_k / Σw; all 1: uniform).
One trial is then a mixture with public weights, whose RDP is at most its worst component's whatever the weights
(the accountant's bound, pipelines/privacy/accountant.py `selection_rdp`). T and every k_t are drawn exactly from
`rng` (samplers.geometric_trials, samplers.uniform_index over Σw), the law the accountant assumes. Only the returned triple may leave the mechanism: T, the other trials and their scores stay
inside (the guarantee is for the best trial's output alone). A trial's score s_t must itself be private (a noisy
score charged as part of the trial's events): ties go to the earlier trial, a rule fixed in advance.
"""
from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import TypeVar

import numpy as np

from pipelines.privacy.samplers import geometric_trials, uniform_index

Output = TypeVar("Output")


def best_of_trials(rng: np.random.Generator, mean: float, weights: Sequence[int],
                   trial: Callable[[int, int], tuple[int, Output]]) -> tuple[int, int, Output]:
    """(score, candidate, output) of the best of T ~ Geometric(1/`mean`) trials, `trial(t, k)` running candidate k
    (drawn with probability weights[k] / Σ weights) as trial t and returning its private score (lower is better)
    and output (module docstring)."""
    if not weights or any(int(w) != w or w < 1 for w in weights):
        raise ValueError(f"candidate weights must be positive integers, got {list(weights)}")
    bounds = list(accumulate(int(w) for w in weights))
    best: tuple[int, int, Output] | None = None
    for t in range(geometric_trials(rng, mean)):
        k = bisect.bisect_right(bounds, uniform_index(rng, bounds[-1]))
        score, output = trial(t, k)
        if best is None or score < best[0]:
            best = (score, k, output)
    return best
