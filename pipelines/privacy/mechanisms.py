"""One-shot DP primitives: each returns its noisy output together with the event the ledger records.

Neighbouring relation (privacy rule 7, docs/architecture.md): D' = D plus or minus one record. Each mechanism states
the sensitivity its caller must guarantee; the caller derives it from schema bounds and clipping,
never from the data. Example: a sum of records each clipped to L2 norm ≤ C changes by one record's
contribution when a record is added or removed, so Δ₂ = C (and Δ₁ = C for a scalar sum of values in
[0, C]; Δ₁ = 1 for a count).

Published values use exact samplers on integers (`pipelines/privacy/samplers.py`):
`discrete_gaussian_mechanism` and `discrete_laplace_mechanism` on integer queries (counts),
`lattice_gaussian_mechanism` and `lattice_laplace_mechanism` on real queries snapped exactly to a lattice first,
and `exponential_mechanism` by exact rejection sampling. `gaussian_mechanism` and `laplace_mechanism` (float
noise from NumPy) remain only for values that never leave the steward's side: PEARL's and IW-MMD-GAN's noisy
embeddings (`pipelines/generators/mechanisms/embeddings.py`, `weighted_embedding.py`), which train a generator
in-process.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from pipelines.privacy import samplers
from pipelines.privacy.events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PureEpsilonEvent,
    validate_event,
)


def gaussian_mechanism(
    value: np.ndarray, l2_sensitivity: float, sigma: float, rng: np.random.Generator, query: str = ""
) -> tuple[np.ndarray, GaussianEvent]:
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


def laplace_mechanism(
    value: np.ndarray, l1_sensitivity: float, scale: float, rng: np.random.Generator
) -> tuple[np.ndarray, LaplaceEvent]:
    """`value` + i.i.d. Laplace(0, b) noise per coordinate, and the LaplaceEvent(b, Δ₁) to record.

    Contract: for every add/remove-one neighbour D', ‖value(D) − value(D')‖₁ ≤ `l1_sensitivity`.
    The density ratio of an output y is exp(Σ_i (|y_i − value(D')_i| − |y_i − value(D)_i|)/b)
    ≤ exp(‖value(D) − value(D')‖₁/b) ≤ exp(Δ₁/b) by the triangle inequality: (Δ₁/b)-DP.
    """
    event = LaplaceEvent(scale=float(scale), l1_sensitivity=float(l1_sensitivity))
    validate_event(event)
    value = np.asarray(value, dtype=float)
    return value + rng.laplace(0.0, scale, size=value.shape), event


def exponential_mechanism(
    scores: np.ndarray, sensitivity: float, epsilon: float, rng: np.random.Generator
) -> tuple[int, PureEpsilonEvent]:
    """Index r drawn with probability ∝ exp(ε·score_r / (2Δ)), and the PureEpsilonEvent(ε) to record.

    Contract: `scores[r]` = u(D, r) with |u(D, r) − u(D', r)| ≤ Δ = `sensitivity` for every
    candidate r and add/remove-one neighbour D'. Then the numerator exp(εu/2Δ) changes by at most
    e^{ε/2} and the normaliser Σ_r exp(εu_r/2Δ) by at most e^{ε/2}, so every output probability
    changes by at most e^ε: ε-DP (McSherry & Talwar 2007). Sampling is exact (`samplers.exponential_index`:
    rejection from the uniform proposal with exact Bernoulli(exp(−ε(u* − u_r)/2Δ)) acceptance; the scores and
    ε, Δ are taken as the exact rationals their floats are), so the output has exactly these probabilities
    (float Gumbel-max only approximates them) and large scores cannot overflow.
    """
    event = PureEpsilonEvent(epsilon=float(epsilon), mechanism="exponential")
    validate_event(event)
    if not sensitivity > 0:
        raise ValueError(f"sensitivity must be positive, got {sensitivity}")
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1 or scores.size == 0 or not np.all(np.isfinite(scores)):
        raise ValueError("scores must be a non-empty 1-D array of finite numbers")
    return samplers.exponential_index(rng, scores, sensitivity, epsilon), event


def _integers(value: np.ndarray | int) -> np.ndarray:
    v = np.asarray(value)
    if v.dtype.kind == "f":
        if not (np.all(np.isfinite(v)) and np.all(v == np.round(v)) and np.all(np.abs(v) < 2.0**62)):
            raise ValueError("an integer query must hold integers (a real query goes through a lattice_* mechanism)")
        return v.astype(np.int64)
    if v.dtype.kind not in "iub":
        raise ValueError(f"an integer query must hold integers, got dtype {v.dtype}")
    return v.astype(np.int64)


def discrete_gaussian_mechanism(
    value: np.ndarray, sensitivity: int, sigma: float, rng: np.random.Generator, count: int = 1, query: str = ""
) -> tuple[np.ndarray, DiscreteGaussianEvent]:
    """`value` (integers) + i.i.d. discrete Gaussian N_ℤ(0, σ²) per coordinate, drawn exactly, as int64, and the
    DiscreteGaussianEvent(σ, Δ, count, `query`) to record.

    Contract: every add/remove-one neighbour moves at most `count` coordinates of `value`, each by an integer of
    absolute value ≤ Δ = `sensitivity` (a count marginal: one cell by 1, count = 1). The other coordinates' noise
    has the same law under D and D', so the privacy loss is that of `count` 1-D discrete Gaussians with shifts
    ≤ Δ, each dominated by the shift Δ (pipelines/privacy/accountant.py), which the accountant composes exactly.
    """
    event = DiscreteGaussianEvent(sigma=float(sigma), sensitivity=int(sensitivity), count=int(count), query=query)
    validate_event(event)
    v = _integers(value)
    return v + samplers.discrete_gaussian(rng, event.sigma, v.size).reshape(v.shape), event


def discrete_laplace_mechanism(
    value: np.ndarray | int,
    sensitivity: int,
    scale: float,
    rng: np.random.Generator,
    count: int = 1,
    dims: int = 1,
    query: str = "",
) -> tuple[np.ndarray, DiscreteLaplaceEvent]:
    """`value` (integers) + i.i.d. discrete Laplace Lap_ℤ(t) per coordinate (P(y) ∝ e^{−|y|/t}, t = `scale`),
    drawn exactly, as int64, and the DiscreteLaplaceEvent(t, Δ, count, dims, `query`) to record.

    Contract: a neighbour moves `count` blocks of `dims` coordinates, each block by an integer vector of L1 norm
    ≤ Δ = `sensitivity`. The log mass ratio of an output is Σ_i (|y_i − v'_i| − |y_i − v_i|)/t ≤ ‖v − v'‖₁/t per
    block (triangle inequality): each block is (Δ/t)-DP, the event count·Δ/t-DP; dims = 1 is accounted exactly.
    """
    event = DiscreteLaplaceEvent(
        scale=float(scale), sensitivity=int(sensitivity), count=int(count), dims=int(dims), query=query
    )
    validate_event(event)
    v = _integers(value)
    return v + samplers.discrete_laplace(rng, event.scale, v.size).reshape(v.shape), event


def lattice_unit(sensitivity: float, steps: int) -> Fraction:
    """The lattice step γ = Δ/steps (exact rational of the float Δ): a query whose coordinates move by ≤ Δ moves
    by ≤ `steps` lattice points after `samplers.lattice_round` (exact rounding is monotone and commutes with
    integer shifts: |round(a) − round(b)| ≤ ⌈|a − b|⌉)."""
    if not (sensitivity > 0 and np.isfinite(sensitivity)) or int(steps) < 1:
        raise ValueError(f"a lattice needs a positive sensitivity and steps >= 1, got {sensitivity}, {steps}")
    return Fraction(float(sensitivity)) / int(steps)


def lattice_gaussian_mechanism(
    value: np.ndarray, unit: Fraction, event: DiscreteGaussianEvent, rng: np.random.Generator
) -> np.ndarray:
    """Real `value` snapped to the lattice γℤ (γ = `unit`, exact rounding) + discrete Gaussian noise of `event`
    (σ in lattice units), returned in the value's units: γ·(round(value/γ) + Y).

    The snapping makes the query integer-valued with the sensitivity the caller put in `event` (with γ =
    `lattice_unit(Δ, K)`: K per coordinate); multiplying the noisy integers by γ is post-processing, so its float
    rounding reveals nothing more (Mironov's snapping idea with exact discrete noise in place of his clamped
    Laplace)."""
    validate_event(event)
    k = samplers.lattice_round(value, unit)
    noisy = k + samplers.discrete_gaussian(rng, event.sigma, k.size).reshape(k.shape)
    return noisy.astype(np.float64) * float(unit)


def lattice_laplace_mechanism(
    value: np.ndarray, unit: Fraction, event: DiscreteLaplaceEvent, rng: np.random.Generator
) -> np.ndarray:
    """Real `value` snapped to the lattice γℤ (exact rounding) + discrete Laplace noise of `event` (scale in lattice
    units), in the value's units: γ·(round(value/γ) + Y) (`lattice_gaussian_mechanism`, same reasoning)."""
    validate_event(event)
    k = samplers.lattice_round(value, unit)
    noisy = k + samplers.discrete_laplace(rng, event.scale, k.size).reshape(k.shape)
    return noisy.astype(np.float64) * float(unit)
