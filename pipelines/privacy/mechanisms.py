"""One-shot DP primitives: each returns its noisy output together with the event the ledger records.

Neighbouring relation (ARCHITECTURE rule 7): D' = D plus or minus one record. Each mechanism states
the sensitivity its caller must guarantee; the caller derives it from schema bounds and clipping,
never from the data. Example: a sum of records each clipped to L2 norm ≤ C changes by one record's
contribution when a record is added or removed, so Δ₂ = C (and Δ₁ = C for a scalar sum of values in
[0, C]; Δ₁ = 1 for a count).
"""
from __future__ import annotations

import numpy as np

from pipelines.privacy.events import GaussianEvent, LaplaceEvent, PureEpsilonEvent, validate_event


def gaussian_mechanism(value: np.ndarray, l2_sensitivity: float, sigma: float,
                       rng: np.random.Generator, query: str = "") -> tuple[np.ndarray, GaussianEvent]:
    """`value` + N(0, σ² I), and the GaussianEvent(σ, Δ₂, `query`) to record.

    Contract: for every add/remove-one neighbour D', ‖value(D) − value(D')‖₂ ≤ `l2_sensitivity`.
    Then the privacy loss of an output y is ⟨y − value(D), v⟩/σ² − ‖v‖²/2σ² with
    v = value(D') − value(D), i.e. distributed N(μ²/2, μ²) with μ = ‖v‖₂/σ ≤ Δ₂/σ: the
    Gaussian mechanism with noise multiplier σ/Δ₂, which is what the accountant composes.
    """
    event = GaussianEvent(sigma=float(sigma), l2_sensitivity=float(l2_sensitivity), query=query)
    validate_event(event)
    value = np.asarray(value, dtype=float)
    return value + rng.normal(0.0, sigma, size=value.shape), event


def laplace_mechanism(value: np.ndarray, l1_sensitivity: float, scale: float,
                      rng: np.random.Generator) -> tuple[np.ndarray, LaplaceEvent]:
    """`value` + i.i.d. Laplace(0, b) noise per coordinate, and the LaplaceEvent(b, Δ₁) to record.

    Contract: for every add/remove-one neighbour D', ‖value(D) − value(D')‖₁ ≤ `l1_sensitivity`.
    The density ratio of an output y is exp(Σ_i (|y_i − value(D')_i| − |y_i − value(D)_i|)/b)
    ≤ exp(‖value(D) − value(D')‖₁/b) ≤ exp(Δ₁/b) by the triangle inequality: (Δ₁/b)-DP.
    """
    event = LaplaceEvent(scale=float(scale), l1_sensitivity=float(l1_sensitivity))
    validate_event(event)
    value = np.asarray(value, dtype=float)
    return value + rng.laplace(0.0, scale, size=value.shape), event


def exponential_mechanism(scores: np.ndarray, sensitivity: float, epsilon: float,
                          rng: np.random.Generator) -> tuple[int, PureEpsilonEvent]:
    """Index r drawn with probability ∝ exp(ε·score_r / (2Δ)), and the PureEpsilonEvent(ε) to record.

    Contract: `scores[r]` = u(D, r) with |u(D, r) − u(D', r)| ≤ Δ = `sensitivity` for every
    candidate r and add/remove-one neighbour D'. Then the numerator exp(εu/2Δ) changes by at most
    e^{ε/2} and the normaliser Σ_r exp(εu_r/2Δ) by at most e^{ε/2}, so every output probability
    changes by at most e^ε: ε-DP (McSherry & Talwar 2007). Sampling uses the Gumbel-max trick,
    argmax_r(εu_r/2Δ + G_r) with G_r i.i.d. Gumbel(0, 1), which has exactly these probabilities
    and never exponentiates, so large scores cannot overflow.
    """
    event = PureEpsilonEvent(epsilon=float(epsilon), mechanism="exponential")
    validate_event(event)
    if not sensitivity > 0:
        raise ValueError(f"sensitivity must be positive, got {sensitivity}")
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1 or scores.size == 0 or not np.all(np.isfinite(scores)):
        raise ValueError("scores must be a non-empty 1-D array of finite numbers")
    logits = epsilon * scores / (2.0 * sensitivity)
    return int(np.argmax(logits + rng.gumbel(size=scores.shape))), event
