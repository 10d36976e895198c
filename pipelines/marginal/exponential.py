"""Selection steps of MST and AIM: quality scores and the exponential mechanism over them.

MST (McKenna, Miklau & Sheldon 2021, §4): candidate pair r = (i, j), score u(D, r) = ||M_r(D) - M_r(p̂)||₁
where p̂ is the model estimated from the noisy 1-way measurements (post-processing of released values, fixed
when the selection runs). Add/remove one record moves one cell of M_r(D) by 1, so by the triangle inequality
|u(D, r) - u(D', r)| ≤ ||M_r(D) - M_r(D')||₁ = 1: Δ = 1 (the paper's value; under replace-one it would be 2).

AIM (McKenna et al. 2022, Alg. 2): candidate r with weight w_r (the workload's overlap with r),
u(D, r) = w_r (||M_r(D) - M_r(p̂_{t-1})||₁ - sqrt(2/π) σ_t n_r) with n_r = the number of cells of r. The
penalty term is public (σ_t, n_r) and p̂_{t-1} is post-processing, so |u(D, r) - u(D', r)| ≤ w_r · 1 and
Δ = max_r w_r over the candidates offered.

Both are drawn by `pipelines.privacy.mechanisms.exponential_mechanism` (P ∝ exp(ε u / 2Δ) over a finite set,
sampled exactly by rejection with exact Bernoulli acceptance, `pipelines.privacy.samplers.exponential_index`, so
the ε-DP and ε-bounded-range properties hold for the sampled distribution itself, pipelines/privacy/events.py),
recorded as PureEpsilonEvent(ε, BOUNDED_RANGE), which the accountant composes as min(PLD as ε-DP, RDP as
ε²/8-zCDP).
ε = inf selects the argmax (non-private runs only).
"""

from __future__ import annotations

import math

import numpy as np

from pipelines.privacy.events import BOUNDED_RANGE, NonPrivateEvent, PureEpsilonEvent
from pipelines.privacy.mechanisms import exponential_mechanism


def l1_score(exact: np.ndarray, model: np.ndarray, weight: float = 1.0, penalty: float = 0.0) -> float:
    """w (||exact - model||₁ - penalty): the quality score of one candidate (sensitivity w under add/remove)."""
    return float(weight * (np.abs(np.asarray(exact) - np.asarray(model)).sum() - penalty))


def aim_penalty(sigma: float, cells: int) -> float:
    """sqrt(2/π) σ n_r: the expected L1 norm of the Gaussian noise a measurement of r at σ would add."""
    return math.sqrt(2.0 / math.pi) * sigma * cells


def select(
    scores: np.ndarray, sensitivity: float, epsilon: float, rng: np.random.Generator | None
) -> tuple[int, PureEpsilonEvent | NonPrivateEvent]:
    """Index drawn by the exponential mechanism (ε finite) or argmax (ε = inf), and its event."""
    if math.isinf(epsilon):
        return int(np.argmax(scores)), NonPrivateEvent("epsilon: inf")
    index, event = exponential_mechanism(np.asarray(scores, dtype=float), sensitivity, epsilon, rng)
    return index, PureEpsilonEvent(event.epsilon, BOUNDED_RANGE)
