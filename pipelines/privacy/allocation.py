"""One release budget: `privacy.release_epsilon` divided across the parts of a release run.

A release run (one `dvc repro` or one flow run) spends ε_R = `privacy.release_epsilon` at δ = `privacy.delta`
in all: the planned events of every configured generator and of the importance weights, composed by the
ledger's own accountant (`epsilon_pld`, PLD over the union of the events). Each *part* (a generator, or the
weights section, whose ε every weight@gen stage plans at) either pins its own ε (its section's `epsilon`) or
shares the rest by its declared weight w_i = share_i / Σ_shared share_j (equal shares by default).

Calibration. Composition is sub-additive: k mechanisms each planned at (ε_i, δ) compose to ε < Σ ε_i at δ
for Gaussian-like mechanisms, so the naive split ε_i = w_i·ε_R under-spends the release. Every shared part is
planned at the target ε_i(s) = s·w_i·ε_R with ONE common scale s, chosen by a bracketing search on log s
(`_calibrate`) such that

    (1 − TOLERANCE)·ε_R ≤ ε_PLD(pinned events ∪ shared events at s) ≤ ε_R,

i.e. the composed release ε equals ε_R within the relative TOLERANCE and never exceeds it. A part's events
are a pure function of public facts (the public row count n̂, the target and its parameters), so the
allocation is data-independent and costs no budget. The search keeps a bracket f(lo) ≤ ε_R < f(hi) for
f(s) = the composed ε and only ever returns a scale with f(s) ≤ ε_R; it needs only that each planner's ε grows
with its target (every planner in the project calibrates its noise to the target), and raises if the
tolerance is not reached.

Ratios: the targets keep the shares' ratios exactly (ε_i / ε_j = share_i / share_j); each part's planned ε
is at most its target (planners calibrate from below).

Non-private events (a part pinned at ε = inf) are left out of the composition: the ledger refuses them
unless the release is internal-only, where they are recorded but not charged. With ε_R = inf every
shared part is planned non-private.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import Event, NonPrivateEvent

TOLERANCE = 1e-3  # relative: the composed ε lies in [(1 − TOLERANCE)·ε_R, ε_R]
MAX_ITERATIONS = 40  # search steps (module docstring; a handful suffice in practice)
SCALE_LIMIT = 2.0**30  # the search gives up beyond s ∈ [2⁻³⁰, 2³⁰]

Planner = Callable[[float], Sequence[Event]]  # a part's planned events at target ε (pure, data-independent)


class AllocationError(ValueError):
    """The release ε cannot be divided as configured (pinned parts over it, or no scale meets the tolerance)."""


@dataclass(frozen=True)
class Part:
    """One part of a release run: its planner, and a pinned ε (None: a share of the release ε)."""

    name: str
    planner: Planner
    epsilon: float | None = None
    share: float = 1.0

    def __post_init__(self) -> None:
        if self.epsilon is not None and not self.epsilon > 0:
            raise AllocationError(f"part '{self.name}': a pinned ε must be positive or inf, got {self.epsilon}")
        if not (self.share > 0 and math.isfinite(self.share)):
            raise AllocationError(f"part '{self.name}': the share must be a positive finite number, got {self.share}")


@dataclass(frozen=True)
class PartAllocation:
    """A part's target ε (what it plans and trains at), whether it was pinned, its normalised share of the
    shared targets (None when pinned), its planned events and their own composed ε."""

    epsilon: float
    pinned: bool
    share: float | None
    events: tuple[Event, ...]
    epsilon_planned: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "pinned": self.pinned,
            "share": self.share,
            "epsilon_planned": self.epsilon_planned,
        }


@dataclass(frozen=True)
class Allocation:
    """The division of one release ε: per part, the common scale s (None: nothing shared, or ε_R = inf),
    and the composed PLD ε of every private planned event (the release's ε)."""

    release_epsilon: float
    delta: float
    tolerance: float
    scale: float | None
    epsilon_composed: float
    parts: dict[str, PartAllocation]

    @property
    def non_private(self) -> list[str]:
        """Parts planned without DP (ε = inf): outside the composed ε, refused by the ledger unless internal."""
        return [n for n, p in self.parts.items() if any(isinstance(e, NonPrivateEvent) for e in p.events)]

    @property
    def events(self) -> list[Event]:
        return [e for p in self.parts.values() for e in p.events]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (ε = inf stays a float: write it with persistence.finite_json)."""
        return {
            "release_epsilon": self.release_epsilon,
            "delta": self.delta,
            "tolerance": self.tolerance,
            "scale": self.scale,
            "epsilon_composed": self.epsilon_composed,
            "non_private": self.non_private,
            "parts": {n: p.to_dict() for n, p in self.parts.items()},
        }


def composed_epsilon(events: Sequence[Event], delta: float) -> float:
    """ε_PLD of the private events (non-private ones are outside the release ε: module docstring)."""
    return epsilon_pld([e for e in events if not isinstance(e, NonPrivateEvent)], delta)


def allocate(parts: Sequence[Part], release_epsilon: float, delta: float, tolerance: float = TOLERANCE) -> Allocation:
    """Divide `release_epsilon` across `parts` (module docstring): pinned parts keep their ε, shared parts
    plan at s·w_i·ε_R with s calibrated so the composed ε ∈ [(1 − tolerance)·ε_R, ε_R]."""
    if not release_epsilon > 0:
        raise AllocationError(f"the release ε must be positive or inf, got {release_epsilon}")
    names = [p.name for p in parts]
    if len(set(names)) != len(names):
        raise AllocationError(f"part names must be unique, got {names}")
    pinned = {p.name: tuple(p.planner(p.epsilon)) for p in parts if p.epsilon is not None}
    shared = [p for p in parts if p.epsilon is None]
    total_share = sum(p.share for p in shared)
    weights = {p.name: p.share / total_share for p in shared}
    base = composed_epsilon([e for ev in pinned.values() for e in ev], delta)
    if base > release_epsilon:
        raise AllocationError(
            f"the pinned parts {sorted(pinned)} alone compose to ε = {base:.4g}, over the release ε {release_epsilon:g}"
        )

    def targets(s: float) -> dict[str, float]:
        return {n: s * w * release_epsilon for n, w in weights.items()}

    def plan_shared(s: float) -> dict[str, tuple[Event, ...]]:
        return {p.name: tuple(p.planner(t)) for p, t in zip(shared, targets(s).values())}

    def composed(planned: dict[str, tuple[Event, ...]]) -> float:
        return composed_epsilon([e for ev in (*pinned.values(), *planned.values()) for e in ev], delta)

    scale: float | None = None
    shared_events: dict[str, tuple[Event, ...]] = {}
    if shared and not math.isfinite(release_epsilon):
        shared_events = {p.name: tuple(p.planner(math.inf)) for p in shared}
    elif shared:
        if release_epsilon - base <= tolerance * release_epsilon:
            raise AllocationError(
                f"the pinned parts {sorted(pinned)} compose to ε = {base:.4g}, which leaves nothing of the release "
                f"ε {release_epsilon:g} for {sorted(weights)}"
            )
        scale, shared_events = 1.0, plan_shared(1.0)
        if any(not isinstance(e, NonPrivateEvent) for ev in shared_events.values() for e in ev):
            scale, shared_events = _calibrate(plan_shared, composed, release_epsilon, tolerance)
        # else: the shared parts spend nothing (e.g. weights by the DP critic), whatever their target
    planned = {**pinned, **shared_events}
    targets_at = targets(scale) if scale is not None else {n: math.inf for n in weights}
    out = {
        p.name: PartAllocation(
            epsilon=float(p.epsilon) if p.epsilon is not None else targets_at[p.name],
            pinned=p.epsilon is not None,
            share=weights.get(p.name),
            events=planned[p.name],
            epsilon_planned=composed_epsilon(planned[p.name], delta),
        )
        for p in parts
    }
    return Allocation(release_epsilon, delta, tolerance, scale, composed(shared_events), out)


def _calibrate(
    plan_shared: Callable[[float], dict[str, tuple[Event, ...]]],
    composed: Callable[[dict[str, tuple[Event, ...]]], float],
    target: float,
    tolerance: float,
) -> tuple[float, dict[str, tuple[Event, ...]]]:
    """A scale s with (1 − tolerance)·target ≤ composed(plan_shared(s)) ≤ target, and its plan.

    Safeguarded secant search on (log s, log ε): from s = 1, the next scale interpolates the bracket
    [lo, hi] (composed(lo) ≤ target < composed(hi)) towards the middle of the tolerance window, clamped to
    the inner 90 % of the bracket's log-width so that it shrinks every step; without an upper (lower) end
    it extrapolates with slope 1, at most ×16 (÷16). A planner that cannot plan at a scale (ValueError: e.g.
    a noise multiplier below the accountant's search range) marks that scale as too high. Each step re-plans
    every shared part, so a few steps (the composed ε is close to a power of s) keep the pre-flight cheap.
    """
    goal = target * (1 - tolerance / 2)
    lo: tuple[float, float, dict[str, tuple[Event, ...]]] | None = None
    hi: tuple[float, float] | None = None
    s, failure = 1.0, ""
    for _ in range(MAX_ITERATIONS):
        try:
            planned = plan_shared(s)
            eps = composed(planned)
        except ValueError as e:
            planned, eps, failure = {}, math.inf, f" (at scale {s:.6g}: {e})"
        if eps <= target:
            lo = (s, eps, planned)
            if eps >= (1 - tolerance) * target:
                return s, planned
        else:
            hi = (s, eps)
        s = _next_scale(lo, hi, goal)
        if not 1 / SCALE_LIMIT <= s <= SCALE_LIMIT:
            break
    reached = f"reached only {lo[1]:.6g}" if lo else "stayed above it at every scale tried"
    raise AllocationError(
        f"the composed ε {reached} of the release ε {target:g} (tolerance {tolerance:g}){failure}: "
        f"a part's plan does not grow with its target ε, or cannot plan at the needed one"
    )


def _next_scale(lo: tuple[float, float, Any] | None, hi: tuple[float, float] | None, goal: float) -> float:
    """The next scale to try (`_calibrate`'s docstring)."""
    if lo is None:
        assert hi is not None, "a scale was tried"
        s, eps = hi
        return s * (max(min(goal / eps, 0.9), 1 / 16) if math.isfinite(eps) else 0.5)
    if hi is None:
        s, eps = lo[0], lo[1]
        return s * (min(max(goal / eps, 1.1), 16.0) if eps > 0 else 16.0)
    (s_lo, e_lo), (s_hi, e_hi) = lo[:2], hi
    t = 0.5
    if e_lo > 0 and math.isfinite(e_hi):
        t = min(max((math.log(goal) - math.log(e_lo)) / (math.log(e_hi) - math.log(e_lo)), 0.05), 0.95)
    return math.exp(math.log(s_lo) + t * (math.log(s_hi) - math.log(s_lo)))
