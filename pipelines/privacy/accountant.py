"""Compose privacy events into (ε, δ): tight PLD accounting with an RDP cross-check (dp_accounting 0.6).

Neighbouring relation: add/remove one record (ARCHITECTURE rule 7) for every event.

* `epsilon_pld` is the number the ledger enforces: privacy loss distributions (Meiser & Mohammadi
  2018; Koskela et al. 2020; Doroshenko et al. 2022, "connect the dots"), pessimistic rounding on a
  grid of `VALUE_DISCRETIZATION` so the result is an upper bound on the true ε(δ).
* `epsilon_rdp` is the looser cross-check: Rényi DP (Mironov 2017) composed additively per order,
  converted with the improved bound of Canonne, Kamath & Steinke 2020 (Prop. 12).
* Bounded-range steps (`PureEpsilonEvent` with mechanism BOUNDED_RANGE, the exponential mechanism of MST and
  AIM): the PLD composes them as generic ε-DP (randomised response, their dominating pair as ε-DP steps), RDP
  as ε²/8-zCDP (Cesar & Rogers 2021), 4× tighter per step than ε-DP's ε²/2. When a list holds such a step,
  `epsilon_pld` returns the smaller of the two bounds (`epsilon_pld`'s docstring: why the minimum is valid).

Identical mechanisms are grouped before composing (k copies of one PLD are self-composed with one
FFT instead of k convolutions) and per-mechanism PLDs are cached, so recomputing the spend of a
data set after every ledger row stays cheap.
"""
from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from dp_accounting import dp_event
from dp_accounting.pld import common, privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from scipy import optimize, special

from pipelines.privacy.events import (Event, GaussianEvent, LaplaceEvent, NonPrivateEvent, PoissonGaussianEvent,
                                      PureEpsilonEvent, validate_event)

VALUE_DISCRETIZATION = 1e-4
RDP_ORDERS = np.asarray(rdp_lib.DEFAULT_RDP_ORDERS, dtype=float)
# Smallest noise multiplier the calibration searches: below it a PLD on the 1e-4 grid needs
# millions of buckets (privacy losses grow like 1/σ²), and no sensible DP target needs it.
MIN_NOISE_MULTIPLIER = 0.1
MAX_NOISE_MULTIPLIER = 1e4
# dp_accounting warns (per order, per call) when a fractional order's series does not converge and
# drops that order; dropping orders can only loosen the RDP cross-check, never the PLD figure.
logging.getLogger("absl").addFilter(lambda record: "failed to converge" not in record.getMessage())


def _check_delta(delta: float) -> None:
    if not (0 < delta < 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta}")


def _group(events: Sequence[Event]) -> tuple[bool, float | None, dict[tuple, int]]:
    """(has non-private event, merged Gaussian noise multiplier or None, {mechanism: repetitions}).

    A mechanism is (kind, parameter): (noise multiplier, q) for DP-SGD (repetitions = steps),
    scale/L1 sensitivity for Laplace, ε for pure steps.

    All one-shot Gaussians merge exactly into one: composing Gaussian mechanisms with noise
    multipliers σ_i has the privacy loss distribution of a single Gaussian with
    σ = (Σ σ_i⁻²)^(-1/2) (the PLD of N(0,σ²) vs N(1,σ²) is N(1/2σ², 1/σ²); sums of independent
    normals are normal). Dong, Roth & Su 2019, Cor. 3.3 (μ-GDP composes as sqrt(Σ μ_i²)).
    """
    non_private, inv_var, counts = False, 0.0, defaultdict(int)
    for e in events:
        validate_event(e)
        if isinstance(e, NonPrivateEvent):
            non_private = True
        elif isinstance(e, GaussianEvent):
            inv_var += e.noise_multiplier ** -2
        elif isinstance(e, PoissonGaussianEvent):
            counts[("poisson_gaussian", (float(e.noise_multiplier), float(e.sample_rate)))] += int(e.steps)
        elif isinstance(e, LaplaceEvent):
            counts[("laplace", float(e.scale / e.l1_sensitivity))] += 1
        elif isinstance(e, PureEpsilonEvent):
            counts[("pure_epsilon", float(e.epsilon))] += 1
        else:
            raise TypeError(f"not a privacy event: {e!r}")
    return non_private, (inv_var ** -0.5 if inv_var > 0 else None), dict(counts)


@lru_cache(maxsize=32)
def _mechanism_pld(kind: str, param: float | tuple[float, float], count: int,
                   interval: float) -> pld_lib.PrivacyLossDistribution:
    """PLD of `count` repetitions of one mechanism (add/remove-one, pessimistic, grid `interval`)."""
    if kind == "gaussian":
        base = pld_lib.from_gaussian_mechanism(param, pessimistic_estimate=True,
                                               value_discretization_interval=interval)
    elif kind == "poisson_gaussian":
        noise_multiplier, q = param
        base = pld_lib.from_gaussian_mechanism(noise_multiplier, sampling_prob=q, pessimistic_estimate=True,
                                               value_discretization_interval=interval)
    elif kind == "laplace":
        base = pld_lib.from_laplace_mechanism(param, pessimistic_estimate=True,
                                              value_discretization_interval=interval)
    elif kind == "pure_epsilon":
        # The dominating pair of every ε-DP mechanism (randomised response with e^ε odds).
        base = pld_lib.from_privacy_parameters(common.DifferentialPrivacyParameters(param, 0.0),
                                               value_discretization_interval=interval)
    else:
        raise ValueError(f"unknown mechanism kind {kind!r}")
    return base if count == 1 else base.self_compose(count)


def epsilon_pld(events: Sequence[Event], delta: float) -> float:
    """ε at `delta` of composing all `events`: the number the ledger enforces (∞ if any event is non-private).

    PLD accountant: DP-SGD = SelfComposed(PoissonSampled(q, Gaussian(σ)), steps); Gaussian = Gaussian(σ/Δ₂);
    Laplace = Laplace(b/Δ₁); pure ε (bounded-range or not) = the PLD of `from_privacy_parameters(ε, 0)`.
    The PLDs are built on one grid and composed by convolution; the empty list costs 0.

    With at least one bounded-range step (`PureEpsilonEvent.bounded_range`) the result is
    min(ε_PLD(δ), ε_RDP(δ)), ε_RDP = `epsilon_rdp` (bounded-range steps at RDP min(αε²/8, ε)). Validity: let
    ε*(δ) = inf{ε : the composed mechanism is (ε, δ)-DP}. ε_PLD(δ) ≥ ε*(δ), since each step's PLD dominates it
    (a bounded-range step is ε-DP, dominated by randomised response) and pessimistic PLD composition of
    dominating pairs dominates the adaptive composition (Zhu, Dong & Wang 2022, Thm. 10). ε_RDP(δ) ≥ ε*(δ),
    since per-order RDP bounds add under adaptive composition (Mironov 2017, Prop. 1) and the conversion of
    Canonne, Kamath & Steinke 2020 (Prop. 12) gives (ε_RDP, δ)-DP. (ε, δ)-DP at ε ≥ ε* holds for every ε ≥ ε*
    (δ(ε) is non-increasing), so the composition is (min(ε_PLD, ε_RDP), δ)-DP. The minimum of two functions
    that decrease in a noise scale decreases in it, so `calibrate_noise_scale` keeps working. Lists without
    a bounded-range step get ε_PLD alone (their numbers are unchanged).
    """
    return _epsilon_pld(events, delta, VALUE_DISCRETIZATION)


def _epsilon_pld(events: Sequence[Event], delta: float, interval: float) -> float:
    eps = _epsilon_pld_only(events, delta, interval)
    if math.isfinite(eps) and any(isinstance(e, PureEpsilonEvent) and e.bounded_range for e in events):
        eps = min(eps, epsilon_rdp(events, delta))
    return eps


def _epsilon_pld_only(events: Sequence[Event], delta: float, interval: float) -> float:
    _check_delta(delta)
    non_private, gaussian_nm, counts = _group(events)
    if non_private:
        return math.inf
    if gaussian_nm is not None:
        counts[("gaussian", gaussian_nm)] = 1
    if not counts:
        return 0.0
    plds = [_mechanism_pld(kind, param, n, interval) for (kind, param), n in counts.items()]
    total = plds[0]
    for p in plds[1:]:
        total = total.compose(p)
    return max(0.0, float(total.get_epsilon_for_delta(delta)))


def pure_epsilon_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """RDP curve implied by ε-DP: (α, min(ε, α ε²/2)) for every order α.

    ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4) ⇒ D_α ≤ α ε²/2; and D_α ≤ D_∞ ≤ ε.
    """
    return np.minimum(epsilon, orders * epsilon ** 2 / 2)


def bounded_range_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """RDP curve of an ε-bounded-range step: (α, min(ε, α ε²/8)) for every order α.

    ε-BR ⇒ (ε²/8)-zCDP (Cesar & Rogers 2021, Lemma 3.2; Durfee & Rogers 2019 for the exponential mechanism)
    ⇒ D_α ≤ α ε²/8; and ε-BR ⇒ ε-DP ⇒ D_α ≤ D_∞ ≤ ε.
    """
    return np.minimum(epsilon, orders * epsilon ** 2 / 8)


def epsilon_rdp(events: Sequence[Event], delta: float) -> float:
    """ε at `delta` of composing `events` by Rényi DP, the cross-check for `epsilon_pld` (always ≥ it).

    DP-SGD and Gaussian events use dp_accounting's RdpAccountant (Mironov, Talwar & Zhang 2019 for
    the sampled Gaussian; α/(2σ²) for the plain one). Laplace is supported there too, with the exact
    curve of Mironov 2017 (Prop. 6 / Table II): for b = Δ₁/ε,
    D_α = ε + log(1 + (α-1)(e^{(1-2α)ε} - 1)/(2α-1)) / (α-1).
    Pure ε steps add `pure_epsilon_rdp` at the same orders, bounded-range steps `bounded_range_rdp`. RDP
    composes by summing per order.
    """
    _check_delta(delta)
    accountant = rdp_lib.RdpAccountant(orders=RDP_ORDERS)
    extra = np.zeros_like(RDP_ORDERS)
    for e in events:
        validate_event(e)
        if isinstance(e, NonPrivateEvent):
            return math.inf
        if isinstance(e, PoissonGaussianEvent):
            accountant.compose(dp_event.SelfComposedDpEvent(
                dp_event.PoissonSampledDpEvent(e.sample_rate, dp_event.GaussianDpEvent(e.noise_multiplier)),
                int(e.steps)))
        elif isinstance(e, GaussianEvent):
            accountant.compose(dp_event.GaussianDpEvent(e.noise_multiplier))
        elif isinstance(e, LaplaceEvent):
            accountant.compose(dp_event.LaplaceDpEvent(e.scale / e.l1_sensitivity))
        elif isinstance(e, PureEpsilonEvent):
            extra += (bounded_range_rdp if e.bounded_range else pure_epsilon_rdp)(e.epsilon, RDP_ORDERS)
        else:
            raise TypeError(f"not a privacy event: {e!r}")
    return float(rdp_lib.compute_epsilon(RDP_ORDERS, accountant.rdp + extra, delta)[0])


class UnreachableTarget(ValueError):
    """Even the largest searched noise multiplier leaves ε above the target."""


def _smallest_satisfying(eps_of: Callable[[float], float], target: float, rtol: float, start: float = 1.0,
                         factor: float = 2.0) -> float:
    """Smallest x in [MIN, MAX]_NOISE_MULTIPLIER with eps_of(x) ≤ target, eps_of decreasing.

    Brackets by multiplying/dividing `start` by `factor`, then shrinks [lo, hi] (eps(lo) > target ≥
    eps(hi)) by Illinois false position on (log x, log ε), which converges in a few PLD evaluations;
    stops when hi/lo - 1 ≤ rtol and returns hi, the side that satisfies the target.
    """
    lo: float | None = None
    hi, e_hi = start, eps_of(start)
    while e_hi > target:
        lo, e_lo = hi, e_hi
        hi *= factor
        if hi > MAX_NOISE_MULTIPLIER:
            raise UnreachableTarget(f"target ε={target} is unreachable: even noise multiplier {lo:g} gives "
                                    f"ε={e_lo:.4g}")
        e_hi = eps_of(hi)
    while lo is None:
        x = hi / factor
        if x < MIN_NOISE_MULTIPLIER:
            raise ValueError(f"target ε={target} is so loose that noise multiplier {hi:g} already satisfies it "
                             f"(ε={e_hi:.4g}); calibration below {MIN_NOISE_MULTIPLIER} is not supported")
        e = eps_of(x)
        if e > target:
            lo, e_lo = x, e
        else:
            hi, e_hi = x, e
    # f(x) = log ε(x) - log target: f(lo) > 0 ≥ f(hi); work in log x.
    a, b = math.log(lo), math.log(hi)
    fa, fb = _log_gap(e_lo, target), _log_gap(e_hi, target)
    side = 0
    while b - a > math.log1p(rtol):
        x = b - fb * (b - a) / (fb - fa) if fa != fb else (a + b) / 2
        x = min(max(x, a + 0.05 * (b - a)), b - 0.05 * (b - a))  # keep strictly inside
        e = eps_of(math.exp(x))
        fx = _log_gap(e, target)
        if fx > 0:
            a, fa = x, fx
            if side == -1:
                fb /= 2
            side = -1
        else:
            b, fb = x, fx
            if side == 1:
                fa /= 2
            side = 1
    return math.exp(b)


def _log_gap(eps: float, target: float) -> float:
    return math.log(max(eps, 1e-300)) - math.log(target)


def calibrate_noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int,
                               rtol: float = 1e-3) -> float:
    """Smallest DP-SGD noise multiplier (to ~`rtol`) whose PLD ε at `delta` over `steps`
    Poisson-sampled steps at rate `sample_rate` is ≤ `epsilon` (`calibrate_noise_scale`)."""
    if not (0 < sample_rate <= 1):
        raise ValueError(f"sample_rate must lie in (0, 1], got {sample_rate}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    return calibrate_noise_scale(epsilon, delta, lambda nm: [PoissonGaussianEvent(nm, sample_rate, int(steps))], rtol)


def calibrate_noise_scale(epsilon: float, delta: float, events_of: Callable[[float], list[Event]],
                          rtol: float = 1e-3) -> float:
    """Smallest scale s (to ~`rtol`) with PLD ε(events_of(s); δ) ≤ `epsilon`, for a family of events
    whose ε decreases in s (e.g. several DP-SGD releases whose noise multipliers are fixed multiples
    of s); the result always satisfies the target on the ledger's PLD grid.

    The search runs on a 10× coarser PLD grid (~10× faster), then is refined on the ledger's grid
    starting from that answer: the coarse grid is more pessimistic, so stopping there would leave budget unspent.
    Its pessimism grows with the steps composed (a DP-SGD release of 18,316 steps at q = 0.0033 planned at
    ε = 0.1 reads 0.19 there); when part of `events_of(s)` does not move with s (a method's events before its
    calibration's, `pipelines.marginal.calibrate.plan_calibration`) the target can be out of the coarse grid's
    reach while the ledger's grid meets it, and then the search runs on the ledger's grid alone.
    """
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon}")
    _check_delta(delta)

    def ledger_epsilon(x: float) -> float:
        return epsilon_pld(events_of(x), delta)
    try:
        coarse = _smallest_satisfying(lambda x: _epsilon_pld(events_of(x), delta, 10 * VALUE_DISCRETIZATION),
                                      epsilon, rtol)
    except UnreachableTarget:   # on the coarse grid only (a too-loose target is looser still on the ledger's)
        return _smallest_satisfying(ledger_epsilon, epsilon, rtol)
    return _smallest_satisfying(ledger_epsilon, epsilon, rtol, start=coarse, factor=1.05)


def analytic_gaussian_delta(epsilon: float, sigma: float, l2_sensitivity: float) -> float:
    """Exact δ(ε) of one Gaussian release (Balle & Wang 2018, Thm. 8), Δ = L2 sensitivity:

    δ(ε) = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ)   (second term in log space, no overflow).
    """
    a, b = l2_sensitivity / (2 * sigma), epsilon * sigma / l2_sensitivity
    return float(special.ndtr(a - b) - math.exp(epsilon + special.log_ndtr(-a - b)))


def gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float, rtol: float = 1e-3) -> float:
    """Noise std for one Gaussian release of a query with L2 sensitivity `l2_sensitivity` at (ε, δ).

    Starts from the analytic Gaussian mechanism (solve `analytic_gaussian_delta`(σ) = δ, exact) and
    raises σ by factors (1 + rtol) until the PLD accountant, whose grid is slightly pessimistic,
    also gives ε ≤ `epsilon`; so the ledger's own recomputation of the event never exceeds ε.
    """
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon}")
    _check_delta(delta)
    if not l2_sensitivity > 0:
        raise ValueError(f"l2_sensitivity must be positive, got {l2_sensitivity}")
    # δ(σ) falls monotonically from ≈1 at σ = 1e-4·Δ towards 0; solve in log σ.
    lo, hi = math.log(1e-4), math.log(1e6)
    if analytic_gaussian_delta(epsilon, math.exp(hi), 1.0) > delta:
        raise ValueError(f"(ε={epsilon}, δ={delta}) is unreachable with Gaussian noise below 1e6·Δ")
    log_sigma = optimize.brentq(lambda ls: analytic_gaussian_delta(epsilon, math.exp(ls), 1.0) - delta,
                                lo, hi, xtol=1e-12)
    multiplier = math.exp(log_sigma)
    while epsilon_pld([GaussianEvent(multiplier, 1.0)], delta) > epsilon:
        multiplier *= 1 + rtol
    return multiplier * l2_sensitivity


def laplace_scale(epsilon: float, l1_sensitivity: float) -> float:
    """Laplace scale b = Δ₁/ε: the log density ratio |x-f(D)|/b - |x-f(D')|/b is at most Δ₁/b = ε."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon}")
    if not l1_sensitivity > 0:
        raise ValueError(f"l1_sensitivity must be positive, got {l1_sensitivity}")
    return l1_sensitivity / epsilon
