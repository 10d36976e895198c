"""Typed privacy events: every access to private data is recorded as one of these.

Neighbouring relation for all events (ARCHITECTURE rule 7): add/remove one record.
Each event carries what an accountant needs; sensitivities are derived where the
mechanism is implemented and only the *ratios* (noise multipliers) enter accounting.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import ClassVar, Union


@dataclass(frozen=True)
class PoissonGaussianEvent:
    """DP-SGD: `steps` compositions of the Poisson-subsampled Gaussian mechanism.

    noise_multiplier = noise std / clipping norm (the L2 sensitivity of a clipped-gradient sum
    under add/remove-one), sample_rate = per-record inclusion probability q.
    """
    noise_multiplier: float
    sample_rate: float
    steps: int
    kind: ClassVar[str] = "poisson_gaussian"


@dataclass(frozen=True)
class GaussianEvent:
    """One Gaussian mechanism release: noise std `sigma` on a query of L2 sensitivity `l2_sensitivity`.

    `query` (optional, not used in accounting) says what was released and, for a mean, whether its
    denominator is a noisy count or a public row count (ARCHITECTURE rule 7).
    """
    sigma: float
    l2_sensitivity: float
    query: str = ""
    kind: ClassVar[str] = "gaussian"

    @property
    def noise_multiplier(self) -> float:
        return self.sigma / self.l2_sensitivity


@dataclass(frozen=True)
class LaplaceEvent:
    """One Laplace mechanism release: noise scale `scale` on a query of L1 sensitivity `l1_sensitivity`."""
    scale: float
    l1_sensitivity: float
    kind: ClassVar[str] = "laplace"

    @property
    def epsilon(self) -> float:
        return self.l1_sensitivity / self.scale


# `PureEpsilonEvent.mechanism` of an ε-bounded-range step (Durfee & Rogers 2019, Def. 3.1): for all neighbours
# D, D' the privacy loss log P_D(y)/P_D'(y) ranges over an interval of length ≤ ε as y varies. The exponential
# mechanism P(r) ∝ exp(ε u_r / 2Δ) over a finite set, sampled exactly, is ε-BR: every log-numerator moves by
# ε(u_r(D) − u_r(D'))/2Δ ∈ [−ε/2, ε/2] and the normaliser is common to all r. ε-BR ⇒ ε-DP and ε-BR ⇒
# ε²/8-zCDP (Cesar & Rogers 2021, Lemma 3.2); the accountant uses both (pipelines/privacy/accountant.py).
BOUNDED_RANGE = "exponential_bounded_range"


@dataclass(frozen=True)
class PureEpsilonEvent:
    """Any pure ε-DP step, e.g. the exponential mechanism (`mechanism` names it). `mechanism` =
    BOUNDED_RANGE declares the step ε-bounded-range (an exactly sampled finite exponential mechanism), which
    the accountant may compose more tightly; any other name is treated as a generic ε-DP step."""
    epsilon: float
    mechanism: str = "exponential"
    kind: ClassVar[str] = "pure_epsilon"

    @property
    def bounded_range(self) -> bool:
        return self.mechanism == BOUNDED_RANGE


@dataclass(frozen=True)
class NonPrivateEvent:
    """Data accessed without a DP guarantee (ε = ∞), e.g. a generator trained with epsilon: inf.

    `internal`: made for an internal-only release (params `privacy.internal_release: true`). Such an
    access is recorded like any other but is not composed into the data set's budget for external
    releases (its output never leaves the data holder); without the flag it costs ε = ∞ and is refused.
    """
    reason: str
    internal: bool = False
    kind: ClassVar[str] = "non_private"


Event = Union[PoissonGaussianEvent, GaussianEvent, LaplaceEvent, PureEpsilonEvent, NonPrivateEvent]
EVENT_TYPES: dict[str, type] = {t.kind: t for t in
                                 (PoissonGaussianEvent, GaussianEvent, LaplaceEvent, PureEpsilonEvent, NonPrivateEvent)}


def event_to_dict(event: Event) -> dict:
    """JSON-able form: {'kind': ..., **fields}."""
    return {"kind": event.kind, **asdict(event)}


def event_from_dict(d: dict) -> Event:
    d = dict(d)
    cls = EVENT_TYPES[d.pop("kind")]
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


def validate_event(event: Event) -> None:
    """Reject events no accountant can compose (non-positive noise, q outside (0, 1], ...)."""
    bad = None
    if isinstance(event, PoissonGaussianEvent):
        if not (event.noise_multiplier > 0 and math.isfinite(event.noise_multiplier)):
            bad = "noise_multiplier must be positive and finite"
        elif not (0 < event.sample_rate <= 1):
            bad = "sample_rate must lie in (0, 1]"
        elif event.steps < 1:
            bad = "steps must be >= 1"
    elif isinstance(event, GaussianEvent):
        if not (event.sigma > 0 and event.l2_sensitivity > 0):
            bad = "sigma and l2_sensitivity must be positive"
    elif isinstance(event, LaplaceEvent):
        if not (event.scale > 0 and event.l1_sensitivity > 0):
            bad = "scale and l1_sensitivity must be positive"
    elif isinstance(event, PureEpsilonEvent):
        if not (event.epsilon > 0 and math.isfinite(event.epsilon)):
            bad = "epsilon must be positive and finite"
    if bad:
        raise ValueError(f"invalid {event.kind} event {event}: {bad}")
