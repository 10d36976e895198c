"""Typed privacy plans: what a generator will spend, fixed before any private row is read.

A plan is a function of public facts only (the public row count n̂, the target (ε, δ), the parameters):
`PrivateGenerator.plan` builds it, the ledger reserves its `events`, and training reads the mechanism's
parameters (σ, q, T, C, ...) from it as typed fields, never through string keys. Each method that needs
more than the common fields subclasses `PrivacyPlan` (e.g. `DPSGDPlan`); a plan round-trips through
strict JSON (`to_dict` / `plan_from_dict`), non-finite floats included (ε = ∞, C = ∞).

A generator that calibrates its samples to noisy marginals (`pipelines/marginal/calibrate.py`) carries a
`CalibrationPlan` in the optional `calibration` field: then `epsilon` is the generator's whole target, the method
was planned at `calibration.method_epsilon` and `events` ends with the calibration's one Gaussian event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from pipelines.privacy.events import Event, event_from_dict, event_to_dict

PLAN_TYPES: dict[str, type["PrivacyPlan"]] = {}


@dataclass(frozen=True)
class CalibrationPlan:
    """The DP marginal calibration of a generator's samples (`pipelines/marginal/calibrate.py`): its declared
    `share` of the generator's ε, the noise std `sigma` of every measured count marginal (0 when ε = ∞), the
    measured marginals (column-name tuples: 1-way, then 2-way), the target `method_epsilon` the method was planned
    at ((1 − share)·ε), `epsilon` = the calibration's own ε at the plan's δ (its event alone), that `event`
    (one Gaussian of the joint query, or a NonPrivateEvent) and `w_max`: the public bound of the importance
    weights when the marginals are weighted counts (`Calibration.weights`), None for plain counts."""

    share: float
    sigma: float
    marginals: tuple[tuple[str, ...], ...]
    method_epsilon: float
    epsilon: float
    event: Event
    w_max: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "share": self.share,
            "sigma": self.sigma,
            "marginals": [list(m) for m in self.marginals],
            "method_epsilon": self.method_epsilon,
            "epsilon": self.epsilon,
            "event": event_to_dict(self.event),
            "w_max": self.w_max,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CalibrationPlan":
        return cls(
            share=float(d["share"]),
            sigma=float(d["sigma"]),
            marginals=tuple(tuple(m) for m in d["marginals"]),
            method_epsilon=float(d["method_epsilon"]),
            epsilon=float(d["epsilon"]),
            event=event_from_dict(d["event"]),
            w_max=None if d.get("w_max") is None else float(d["w_max"]),
        )


@dataclass(frozen=True, kw_only=True)
class PrivacyPlan:
    """The common part of every plan: n̂ (public), the target budget, the events to reserve and record and, when
    the samples are calibrated, the calibration (its event is the last of `events`)."""

    n_rows: int
    epsilon: float
    delta: float
    events: tuple[Event, ...]
    calibration: CalibrationPlan | None = None
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
            if f.name == "events":
                value = [event_to_dict(e) for e in value]
            elif f.name == "calibration" and value is not None:
                value = value.to_dict()
            out[f.name] = value
        return out

    def calibrated(self, calibration: CalibrationPlan, epsilon: float) -> "PrivacyPlan":
        """This method plan (planned at `calibration.method_epsilon`) with the calibration added: target
        `epsilon`, the calibration's event appended."""
        return replace(self, epsilon=epsilon, events=(*self.events, calibration.event), calibration=calibration)

    def method_plan(self) -> "PrivacyPlan":
        """The plan the method made (`PrivateGenerator._plan`): without the calibration's event and target."""
        if self.calibration is None:
            return self
        return replace(self, epsilon=self.calibration.method_epsilon, events=self.events[:-1], calibration=None)


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
        v: Any = d.get(f.name) if f.name == "calibration" else d[f.name]  # plans saved before calibration lack it
        if f.name == "events":
            v = tuple(event_from_dict(e) for e in v)
        elif f.name == "calibration" and v is not None:
            v = CalibrationPlan.from_dict(v)
        elif f.type in ("float", float) and v is not None:
            v = float(v)
        values[f.name] = v
    return cls(**values)
