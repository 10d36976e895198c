"""Typed privacy plans: what a generator will spend, fixed before any private row is read.

A plan is a function of public facts only (the public row count n̂, the target (ε, δ), the parameters):
`PrivateGenerator.plan` builds it, the ledger reserves its `events`, and training reads the mechanism's
parameters (σ, q, T, C, ...) from it as typed fields, never through string keys. Each method that needs
more than the common fields subclasses `PrivacyPlan` (e.g. `DPSGDPlan`); a plan round-trips through
strict JSON (`to_dict` / `plan_from_dict`), non-finite floats included (ε = ∞, C = ∞).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from pipelines.privacy.events import Event, event_from_dict, event_to_dict

PLAN_TYPES: dict[str, type["PrivacyPlan"]] = {}


@dataclass(frozen=True, kw_only=True)
class PrivacyPlan:
    """The common part of every plan: n̂ (public), the target budget and the events to reserve and record."""
    n_rows: int
    epsilon: float
    delta: float
    events: tuple[Event, ...]
    kind: ClassVar[str] = "plan"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        PLAN_TYPES[cls.kind] = cls

    @property
    def private(self) -> bool:
        """ε < ∞: the fit must draw its noise from the noise source (never from the public seed)."""
        return math.isfinite(self.epsilon)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: {'kind': ..., every field, events as dicts}; ε = ∞ stays a float (see persistence)."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = [event_to_dict(e) for e in value] if f.name == "events" else value
        return out


PLAN_TYPES[PrivacyPlan.kind] = PrivacyPlan


@dataclass(frozen=True, kw_only=True)
class DPSGDPlan(PrivacyPlan):
    """One DP-SGD phase (Abadi et al. 2016, Alg. 1): noise multiplier σ, Poisson rate q = B/n̂, T steps,
    clipping norm C (∞ and σ = 0 when ε = ∞)."""
    noise_multiplier: float
    sample_rate: float
    steps: int
    clip_norm: float
    kind: ClassVar[str] = "dpsgd"


def plan_from_dict(d: dict[str, Any]) -> PrivacyPlan:
    """The plan `to_dict` wrote: its class by `kind`, float fields restored from "inf" strings, events typed."""
    d = dict(d)
    cls = PLAN_TYPES[d.pop("kind", PrivacyPlan.kind)]
    values: dict[str, Any] = {}
    for f in fields(cls):
        v = d[f.name]
        if f.name == "events":
            v = tuple(event_from_dict(e) for e in v)
        elif f.type in ("float", float) and v is not None:
            v = float(v)
        values[f.name] = v
    return cls(**values)
