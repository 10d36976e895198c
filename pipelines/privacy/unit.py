"""Accounting at a declared privacy unit: every row-level event as the event of its mechanism under add/remove of
k rows.

Setting. A schema may declare a privacy unit (`privacy_unit: {column, max_rows: k}`); a release's neighbouring
relation is then add/remove one unit, every row that carries one value of the unit column. Contribution bounding
keeps at most k rows per unit and the split keeps a unit's rows together (pipelines/data/units.py), so neighbouring
tables give training sets D and D' = D ∪ U that differ by m ≤ k added rows (removal: the same pair reversed). Every
mechanism states its event for add/remove ONE row (pipelines/privacy/events.py); `unit_events(events, k)` returns
the event of the same mechanism under add/remove of k rows, which the ledger stores and the accountant composes.
k = 1 returns the events unchanged. Composition needs nothing new: every composition theorem the accountant uses
holds for any neighbouring relation once each step's guarantee holds under it.

The chain. D = D_0 ⊂ D_1 ⊂ ... ⊂ D_m = D', each D_i one row more than D_(i−1). A query that moves by at most Δ (in
some norm) between row-level neighbours moves by at most mΔ ≤ kΔ between D and D' (triangle inequality along the
chain), and a privacy loss log P_D(y)/P_D'(y) = Σ_i log P_(D_(i−1))(y)/P_(D_i)(y) is a sum of m row-level losses.

Conversions, event by event:

1. GaussianEvent(σ, Δ₂) → GaussianEvent(σ, kΔ₂). The L2 sensitivity is kΔ₂ by the chain, and a Gaussian release
   is accounted from σ/Δ₂ alone: the unit sees noise multiplier σ/(kΔ₂).
2. LaplaceEvent(b, Δ₁) → LaplaceEvent(b, kΔ₁). The same in L1: (kΔ₁/b)-DP.
3. DiscreteLaplaceEvent(t, Δ, count, dims) → DiscreteLaplaceEvent(t, kΔ, count, dims). Each of the `count` blocks
   moves by an integer vector of L1 norm ≤ Δ per row, so ≤ kΔ per unit (the chain, block by block): the event's
   contract with Δ replaced by kΔ.
4. DiscreteGaussianEvent(σ, Δ, count) → ZCDPEvent(count·(kΔ)²/2σ²). A row moves at most `count` coordinates by
   integers of size ≤ Δ, an integer shift of L2 norm ≤ Δ√count, so the unit's shift μ has ‖μ‖₂ ≤ kΔ√count (the
   chain). It may spread over up to k·count coordinates, which is not the event's contract with kΔ (count
   coordinates, each by ≤ kΔ), so no discrete-Gaussian PLD is claimed for it. The product of discrete Gaussians
   N_ℤ(0, σ²) under an integer shift μ has D_α ≤ α‖μ‖₂²/2σ² (Canonne, Kamath & Steinke 2020, Prop. 5, per
   coordinate; Rényi divergences of product laws add), both orders: ‖μ‖₂²/2σ² ≤ count·(kΔ)²/2σ²-zCDP, for the exact
   sampler (no truncation slack). The accountant composes it as any zCDP budget (RDP, or the dominating pair of
   the ρ-zCDP profile).
5. PureEpsilonEvent(ε, mechanism) → PureEpsilonEvent(kε, mechanism). Each of the m row-level losses lies in
   [−ε, ε], so the sum lies in [−kε, kε]: kε-DP (group privacy, Dwork & Roth 2014, Thm. 2.2). A bounded-range step
   (BOUNDED_RANGE) stays bounded range: as y varies the i-th loss ranges over an interval [a_i, a_i + ε], so the
   sum ranges within [Σ a_i, Σ a_i + kε], an interval of length ≤ kε: kε-BR. An MCMC_EXPONENTIAL label scales as the
   exact mechanism's ε does.
6. ZCDPEvent(ρ) → ZCDPEvent(k²ρ). Group privacy of zCDP (Bun & Steinke 2016, Prop. 1.9): a ρ-zCDP mechanism is
   k²ρ-zCDP for inputs that differ in k records. It applies to the filter's budget of an adaptive run as a whole
   (the run is ρ-zCDP, pipelines/privacy/events.py ZCDPEvent).
7. PoissonGaussianEvent(z, q, T) → PoissonGaussianEvent(z, q, T, group=k). DP-SGD samples every row independently
   at rate q (`dpsgd.poisson_sample`) and clips every row alone (`dpsgd.clip_and_noise`), so j ~ Bin(m, q) of the
   unit's rows enter a batch and move the noised sum by at most j clipping norms: not the chain's fixed shift kΔ,
   nor a unit sampled as one record. A step is dominated by the mixture of Gaussians Σ_j Bin(j; k, q) N(j, z²)
   against N(0, z²) (Ganesh 2024, arXiv 2401.10294; the derivation: `accountant.unit_dpsgd_pld`), and T steps by
   its T-fold composition. At q = 1 (every row in every batch) it is the Gaussian of multiplier z/k, the chain's
   answer. Its RDP is not computed (∞).
8. RepeatAndSelectEvent: each candidate's events converted as above. Papernot & Steinke's selection theorem takes
   each candidate's RDP under whatever relation it holds for; a candidate with DP-SGD at k > 1 has no RDP curve
   here, so such a selection is refused (`validate_event`).
9. ApproxDPEvent(ε, δ) → ApproxDPEvent(kε, k·e^{(k−1)ε}·δ): group privacy of (ε, δ)-DP (Dwork & Roth 2014,
   Thm. 2.2, applied along the chain). Steps that know the unit (partition selection) record their unit-level
   event directly instead.
10. NonPrivateEvent: unchanged (ε = ∞ under any relation).

Planning (`unit_plan`). A generator plans at the row level: `plan_at(ε')` calibrates its noise to a row-level ε'.
The unit-level ε of that plan, ε_u(ε') = epsilon_pld(unit_events(plan.events, k), δ), grows with ε'; the plan
returned is the one at the largest ε' ≤ ε (to a relative 1e-3) with ε_u(ε') ≤ ε. The search runs over the divisor
x = ε/ε' with the accountant's noise search (`calibrate_noise_scale`: on a 10× coarser PLD grid, then on the
ledger's, Illinois false position on (log x, log ε)), from x = 1 by doublings up to the first power of two ≥ 32k:
ε/(2k) covers every conversion above that scales the unit's ε by at most 2k, four more halvings the compositions
whose ε(δ) grows faster than linearly in the unit's shift (Gaussian-like privacy losses at a fixed δ; many DP-SGD
steps at a unit of k rows can spend more than k times the row-level ε at the same δ).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from pipelines.privacy.accountant import UnreachableTarget, calibrate_noise_scale, epsilon_pld
from pipelines.privacy.events import (
    ApproxDPEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonGaussianEvent,
    PureEpsilonEvent,
    RepeatAndSelectEvent,
    ZCDPEvent,
    validate_event,
)

P = TypeVar("P")
SEARCH_RTOL = 1e-3  # relative precision of the row-level ε' that `unit_plan` returns
LOWEST_DIVISOR = 32  # the search's lowest row-level ε' is ε/x, x the first power of two ≥ LOWEST_DIVISOR·k
DISCRETE_GAUSSIAN_UNIT = "discrete_gaussian"  # ZCDPEvent.mechanism of a converted DiscreteGaussianEvent


def _attr_events(plan: Any) -> Sequence[Event]:
    """The plan's own `events` attribute: `unit_plan`'s default reading of a plan's events."""
    return plan.events


def _check_rows(max_rows: int) -> None:
    if not (isinstance(max_rows, numbers.Integral) and not isinstance(max_rows, bool) and max_rows >= 1):
        raise ValueError(f"max_rows must be an integer >= 1, got {max_rows!r}")


def unit_event(event: Event, max_rows: int) -> Event:
    """The event of `event`'s mechanism under add/remove of `max_rows` = k rows (module docstring, items 1-10)."""
    _check_rows(max_rows)
    k = int(max_rows)
    if k == 1 or isinstance(event, NonPrivateEvent):
        return event
    if isinstance(event, GaussianEvent):
        return replace(event, l2_sensitivity=k * event.l2_sensitivity)
    if isinstance(event, LaplaceEvent):
        return replace(event, l1_sensitivity=k * event.l1_sensitivity)
    if isinstance(event, DiscreteLaplaceEvent):
        return replace(event, sensitivity=k * event.sensitivity)
    if isinstance(event, DiscreteGaussianEvent):
        return ZCDPEvent(event.count * (k * event.sensitivity) ** 2 / (2 * event.sigma**2), DISCRETE_GAUSSIAN_UNIT)
    if isinstance(event, PureEpsilonEvent):
        return replace(event, epsilon=k * event.epsilon)
    if isinstance(event, ZCDPEvent):
        return replace(event, rho=k * k * event.rho)
    if isinstance(event, ApproxDPEvent):
        return replace(event, epsilon=k * event.epsilon, delta=k * math.exp((k - 1) * event.epsilon) * event.delta)
    if isinstance(event, PoissonGaussianEvent):
        if event.group != 1:
            raise ValueError(
                f"{event} is already at a unit of {event.group} rows; unit_events converts row-level events only"
            )
        return replace(event, group=k)
    if isinstance(event, RepeatAndSelectEvent):
        return replace(event, candidates=tuple(tuple(unit_event(e, k) for e in c) for c in event.candidates))
    raise TypeError(f"not a privacy event: {event!r}")


def unit_events(events: Sequence[Event], max_rows: int) -> list[Event]:
    """Every row-level event (add/remove one row) as the event of its mechanism under add/remove of `max_rows` = k
    rows (module docstring); k = 1: the events unchanged. The converted events are validated, so a private selection
    that no accountant can compose at the unit (a DP-SGD candidate at k > 1) is refused here (ValueError)."""
    _check_rows(max_rows)
    if max_rows == 1:
        return list(events)
    out = [unit_event(e, max_rows) for e in events]
    for e in out:
        validate_event(e)
    return out


def unit_epsilon(events: Sequence[Event], delta: float, max_rows: int) -> float:
    """ε at `delta` of the row-level `events` for a unit of `max_rows` rows: the ledger's PLD figure
    (`accountant.epsilon_pld`) of `unit_events(events, max_rows)`."""
    return epsilon_pld(unit_events(events, max_rows), delta)


def unit_plan(
    plan_at: Callable[[float], P],
    epsilon: float,
    delta: float,
    max_rows: int,
    events_of: Callable[[P], Sequence[Event]] = _attr_events,
) -> P:
    """The row-level plan `plan_at(ε')` at the largest ε' ≤ `epsilon` (to a relative SEARCH_RTOL) whose unit-level ε,
    `unit_epsilon(events_of(plan), delta, max_rows)`, is ≤ `epsilon` on the ledger's grid (module docstring,
    "Planning"). `plan_at(epsilon)` itself when max_rows = 1, when ε = ∞ (nothing to meet) or when that plan already
    meets `epsilon` at the unit. Its events stay row-level: the ledger stores `unit_events` of them. ValueError when
    even ε' = ε/x, x the first power of two ≥ 32·max_rows, leaves the unit's ε above `epsilon`."""
    _check_rows(max_rows)
    if max_rows == 1 or math.isinf(epsilon):
        return plan_at(epsilon)
    if not epsilon > 0:
        raise ValueError(f"epsilon must be positive, got {epsilon}")
    plans: dict[float, P] = {}

    def plan_for(x: float) -> P:
        x = float(f"{x:.12g}")  # exp(log x) and x are one divisor (the search returns either)
        if x not in plans:
            try:
                plans[x] = plan_at(epsilon / x)
            except UnreachableTarget as e:  # not the search's own bracket: a plan the generator cannot make
                raise ValueError(
                    f"no row-level plan at ε'={epsilon / x:.6g} (searching for a unit of {max_rows} "
                    f"rows at ε={epsilon}): {e}"
                ) from e
        return plans[x]

    if unit_epsilon(events_of(plan_for(1.0)), delta, max_rows) <= epsilon:
        return plans[1.0]
    highest = float(2 ** math.ceil(math.log2(LOWEST_DIVISOR * max_rows)))  # reached exactly by doublings from 1
    try:
        x = calibrate_noise_scale(
            epsilon,
            delta,
            lambda x: unit_events(events_of(plan_for(x)), max_rows),
            rtol=SEARCH_RTOL,
            lowest=1.0,
            highest=highest,
        )
    except UnreachableTarget:
        low = unit_epsilon(events_of(plan_for(highest)), delta, max_rows)
        raise ValueError(
            f"ε={epsilon} at a unit of {max_rows} rows is unreachable: even the row-level plan at "
            f"ε'={epsilon / highest:.6g} spends ε={low:.6g} at the unit"
        ) from None
    return plan_for(x)
