"""Compose privacy events into (ε, δ): tight PLD accounting with an RDP cross-check (dp_accounting 0.6).

Neighbouring relation: the one each event states (privacy rule 7, docs/architecture.md): add/remove one record for
what a mechanism records, add/remove one privacy unit of at most k rows for what the ledger stores (the events
`pipelines.privacy.unit.unit_events` converts them to). Every conversion but one is an event of the same kind with
a larger sensitivity; DP-SGD at a unit (`PoissonGaussianEvent.group` = k > 1) is its own mechanism below.

* `epsilon_pld` is the number the ledger enforces: privacy loss distributions (Meiser & Mohammadi
  2018; Koskela et al. 2020; Doroshenko et al. 2022, "connect the dots"), pessimistic rounding on a
  grid of `VALUE_DISCRETIZATION` so the result is an upper bound on the true ε(δ).
* `epsilon_rdp` is the looser cross-check: Rényi DP (Mironov 2017) composed additively per order,
  converted with the improved bound of Canonne, Kamath & Steinke 2020 (Prop. 12).
* Bounded-range steps (`PureEpsilonEvent` with mechanism BOUNDED_RANGE, the exponential mechanism of MST and
  AIM): the PLD composes them as generic ε-DP (randomised response, their dominating pair as ε-DP steps), RDP
  as ε²/8-zCDP (Cesar & Rogers 2021), 4× tighter per step than ε-DP's ε²/2. When a list holds such a step,
  `epsilon_pld` returns the smaller of the two bounds (`epsilon_pld`'s docstring: why the minimum is valid).
* Adaptive budgets (`ZCDPEvent`: a ρ-zCDP guarantee of a whole run whose steps' parameters were chosen from
  earlier outputs under a privacy filter, AIM's rounds): no fixed dominating pair per step exists, so a list with
  one is composed by methods that hold under adaptivity only: RDP (α·ρ per order) and the PLD of the other
  events composed with a dominating pair of the ρ-zCDP privacy profile (`epsilon_pld`'s docstring). Lists
  without one are unchanged.
* Private selection (`RepeatAndSelectEvent`: the best of a secret, random number of trials, each a candidate
  chosen at random): its RDP curve is Papernot & Steinke's (`selection_rdp`); the PLD composes it with the other
  events through a dominating pair of the privacy profile that curve implies, as a ρ-zCDP budget (`epsilon_pld`).
* Exactly sampled lattice noise (`DiscreteGaussianEvent`, `DiscreteLaplaceEvent`): the PLD of
  the 1-D discrete mechanism with its integer shift, self-composed `count` times (connect-the-dots, pessimistic).
  Never merged with continuous Gaussians: a discrete Gaussian's hockey-stick curve is not below the continuous
  one's at the same σ (at σ = 1, shift 1, its δ(ε) is 4-20 % larger on ε ∈ [0, 4]; tests/test_samplers.py), so
  the continuous figure would not bound it. RDP: αΔ²/2σ² per coordinate (discrete Gaussian), min(ε, αε²/2)
  (discrete Laplace).
* DP-SGD at a unit of k rows (`PoissonGaussianEvent.group` = k > 1): the PLD of the mixture of Gaussians
  Σ_j Bin(j; k, q) N(j, z²) vs N(0, z²) per step (`unit_dpsgd_pld`: why it dominates, Ganesh 2024), self-composed.
  Its RDP is not computed: `rdp_curve` is ∞ at every order for it, so `epsilon_rdp` is ∞, min(PLD, RDP) is the
  PLD, and a private selection with such a candidate is refused (`validate_event`: it needs each candidate's RDP).

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
from typing import cast

import numpy as np
from dp_accounting import dp_event
from dp_accounting.pld import common, privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from scipy import optimize, special, stats

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

    A mechanism is (kind, parameter): (noise multiplier, q, group) for DP-SGD (repetitions = steps),
    scale/L1 sensitivity for Laplace, ε for pure steps.

    All one-shot Gaussians merge exactly into one: composing Gaussian mechanisms with noise
    multipliers σ_i has the privacy loss distribution of a single Gaussian with
    σ = (Σ σ_i⁻²)^(-1/2) (the PLD of N(0,σ²) vs N(1,σ²) is N(1/2σ², 1/σ²); sums of independent
    normals are normal). Dong, Roth & Su 2019, Cor. 3.3 (μ-GDP composes as sqrt(Σ μ_i²)).
    """
    non_private, inv_var = False, 0.0
    counts: defaultdict[tuple, int] = defaultdict(int)
    for e in events:
        validate_event(e)
        if isinstance(e, NonPrivateEvent):
            non_private = True
        elif isinstance(e, GaussianEvent):
            inv_var += e.noise_multiplier**-2
        elif isinstance(e, PoissonGaussianEvent):
            mechanism = (float(e.noise_multiplier), float(e.sample_rate), int(e.group))
            counts[("poisson_gaussian", mechanism)] += int(e.steps)
        elif isinstance(e, LaplaceEvent):
            counts[("laplace", float(e.scale / e.l1_sensitivity))] += 1
        elif isinstance(e, PureEpsilonEvent):
            counts[("pure_epsilon", float(e.epsilon))] += 1
        elif isinstance(e, ApproxDPEvent):
            counts[("approx_dp", (float(e.epsilon), float(e.delta)))] += 1
        elif isinstance(e, DiscreteGaussianEvent):  # never merged: lattice PLDs are not Gaussian (module doc)
            counts[("discrete_gaussian", (float(e.sigma), int(e.sensitivity)))] += int(e.count)
        elif isinstance(e, DiscreteLaplaceEvent) and e.dims == 1:
            counts[("discrete_laplace", (float(e.scale), int(e.sensitivity)))] += int(e.count)
        elif isinstance(e, DiscreteLaplaceEvent):  # an L1 block of dims > 1 coordinates: generic ε-DP per block
            counts[("pure_epsilon", float(e.sensitivity / e.scale))] += int(e.count)
        else:
            raise TypeError(f"not a privacy event: {e!r}")
    return non_private, (inv_var**-0.5 if inv_var > 0 else None), dict(counts)


# dp_accounting's discrete Gaussian PLD is that of the noise truncated to [−T, T], T = ⌈11.6σ⌉ (its default)
DISCRETE_GAUSSIAN_TRUNCATION = 11.6


def discrete_gaussian_tail(sigma: float) -> float:
    """An upper bound on P(|Y| > T) for Y ~ N_ℤ(0, σ²), T = ⌈11.6σ⌉ (< 3e-30·max(1, σ)).

    Σ_{y>T} e^{−y²/2σ²} ≤ e^{−(T+1)²/2σ²}/(1 − e^{−(T+1)/σ²}) (consecutive terms shrink by ≤ e^{−(T+1)/σ²}), the
    normaliser is ≥ 1 (its y = 0 term), both tails: ×2; computed in logs and doubled for rounding."""
    t = math.ceil(DISCRETE_GAUSSIAN_TRUNCATION * sigma) + 1
    log_tail = math.log(4.0) - t * t / (2.0 * sigma * sigma) - math.log(-math.expm1(-t / (sigma * sigma)))
    return math.exp(log_tail)


def _truncation_slack(counts: dict[tuple, int]) -> float:
    """Σ count·P(|Y| > T) over the discrete Gaussian mechanisms in `counts` (`_epsilon_pld_only`)."""
    return math.fsum(
        n * discrete_gaussian_tail(param[0]) for (kind, param), n in counts.items() if kind == "discrete_gaussian"
    )


def unit_dpsgd_pld(
    noise_multiplier: float, sample_rate: float, group: int, interval: float
) -> pld_lib.PrivacyLossDistribution:
    """The pessimistic PLD (grid `interval`) of one DP-SGD step at a unit of up to k = `group` rows: the mixture of
    Gaussians pair P = Σ_{j=0..k} Bin(j; k, q) N(j, z²) and Q = N(0, z²), z the noise multiplier, in both orders
    (Ganesh 2024, "Tight group-level DP guarantees for DP-SGD with sampling via mixture of Gaussians mechanisms",
    arXiv 2401.10294). dp_accounting 0.6's `from_mixture_gaussian_mechanism(z, [0..k], Bin(k, q) pmf)` builds both
    orders (its MixtureGaussianPrivacyLoss): REMOVE, the privacy loss of Σ_j p_j N(−j, z²) against N(0, z²) (the
    mirror image of (P, Q)), ADD, of N(0, z²) against Σ_j p_j N(j, z²), i.e. (Q, P); the PLD's ε(δ) is the larger.

    Why the pair dominates a step. Units are m ≤ k rows, clipped gradients are in units of the noise's Δ (the
    clipping norm C, or C + 2C_α with PPEM's batch-coupled term: `dpsgd.clip_and_noise`), and the step's input, the
    model, is fixed by the earlier outputs. Let D' = D ∪ U with U the unit's rows. Every row enters the batch
    independently with probability q (`dpsgd.poisson_sample`), so the batch of D' is B ∪ S: B ⊆ D has the law of D's
    batch and S ⊆ U is drawn independently of it, P(S) = q^|S|(1 − q)^(m−|S|). The released sum plus noise is
    N(c_B, z²I) under D and N(c_B + v_{B,S}, z²I) under D', where ‖v_{B,S}‖ ≤ |S|: one clipped term of norm ≤ 1 per
    row of S (triangle inequality), and the coupled term, whose change is at most 2C_α and only when S ≠ ∅, adds at
    most |S|·2C_α within |S|(C + 2C_α). Then:
    1. B has one law under D and D', so by joint convexity of the hockey-stick divergence H_γ (every γ ≥ 0) each
       order of (M(D'), M(D)) is at most the largest over B of that of (Σ_S P(S) N(v_{B,S}, z²I), N(0, z²I)) (c_B
       translated away: a bijection).
    2. A vector mixture Σ_S P(S) N(v_S, z²I) against N(0, z²I) is dominated, both orders, by the scalar one with each
       v_S replaced by its norm (Choquette-Choo, Ganesh, Steinke & Thakurta 2024, "Privacy amplification for matrix
       mechanisms", Cor. 4.7, cited in dp_accounting's MixtureGaussianPrivacyLoss).
    3. Larger shifts dominate: the scalar mixture with shifts a_S ≤ |S| is the image, under projection on the first
       axis (post-processing), of the vector mixture with shifts a_S e₁ + (|S|² − a_S²)^½ e₂, all of norm |S|; by 2
       that one is dominated by the scalar mixture with shifts |S|.
    4. A unit of m < k rows: add k − m rows that are never read (shift |S ∩ U| ≤ |S| for S drawn from k rows), and
       3 again. Grouping the subsets S by j = |S| gives P.
    The pair is attained (k identical rows whose clipped gradients have norm 1), so nothing tighter holds for every
    unit. It depends on (z, q, k) only, fixed in advance, so the pessimistic PLD self-composition bounds T
    adaptively chosen steps (Zhu, Dong & Wang 2022, Thm. 10). At k = 1 it is the Poisson-subsampled Gaussian
    ((1 − q) N(0, z²) + q N(1, z²) against N(0, z²)), which `_mechanism_pld` builds from from_gaussian_mechanism as
    it always has (the two agree to 1e-9, tests/test_unit_accounting.py). dp_accounting builds the mixture by a
    binary search per grid point, far slower than the subsampled Gaussian's closed form: `_mechanism_pld` caches it."""
    if not (group >= 1 and int(group) == group):
        raise ValueError(f"group must be an integer >= 1, got {group!r}")
    shifts = np.arange(int(group) + 1)
    return pld_lib.from_mixture_gaussian_mechanism(
        standard_deviation=noise_multiplier,
        sensitivities=shifts.astype(float).tolist(),
        sampling_probs=stats.binom.pmf(shifts, int(group), sample_rate).tolist(),
        pessimistic_estimate=True,
        value_discretization_interval=interval,
    )


@lru_cache(maxsize=256)
def _mechanism_pld(kind: str, param: float | tuple, count: int, interval: float) -> pld_lib.PrivacyLossDistribution:
    """PLD of `count` repetitions of one mechanism (the relation the event states, pessimistic, grid `interval`)."""
    base = _base_pld(kind, param, interval)
    return base if count == 1 else base.self_compose(count)


@lru_cache(maxsize=256)
def _base_pld(kind: str, param: float | tuple, interval: float) -> pld_lib.PrivacyLossDistribution:
    """PLD of one run of one mechanism (`_mechanism_pld`), built once for every count it is composed at."""
    if kind == "gaussian":
        base = pld_lib.from_gaussian_mechanism(param, pessimistic_estimate=True, value_discretization_interval=interval)
    elif kind == "poisson_gaussian":
        noise_multiplier, q, group = cast(tuple[float, float, int], param)
        if group == 1:
            base = pld_lib.from_gaussian_mechanism(
                noise_multiplier, sampling_prob=q, pessimistic_estimate=True, value_discretization_interval=interval
            )
        else:
            base = unit_dpsgd_pld(noise_multiplier, q, group, interval)
    elif kind == "laplace":
        base = pld_lib.from_laplace_mechanism(param, pessimistic_estimate=True, value_discretization_interval=interval)
    elif kind == "discrete_gaussian":
        # The 1-D discrete Gaussian with integer shift Δ (connect-the-dots: a pessimistic PLD). Every smaller
        # integer shift k ≤ Δ is dominated by it: for a fixed noise law the privacy loss L_k(y) = ((y−k)² − y²)/2σ²
        # grows in k wherever it exceeds any ε ≥ 0, so each hockey-stick divergence grows in k (both orders: the
        # noise is symmetric). The PLD is of the noise truncated at T (`discrete_gaussian_tail`, accounted there).
        sigma, shift = cast(tuple[float, int], param)
        base = pld_lib.from_discrete_gaussian_mechanism(
            sigma,
            sensitivity=shift,
            pessimistic_estimate=True,
            value_discretization_interval=interval,
            use_connect_dots=True,
        )
    elif kind == "discrete_laplace":
        # The 1-D discrete Laplace P(y) ∝ e^{−|y|/t} with integer shift Δ, exact (no truncation); smaller shifts
        # are dominated as for the discrete Gaussian (the loss (|y−k| − |y|)/t grows in k where it is positive).
        scale, shift = cast(tuple[float, int], param)
        base = pld_lib.from_discrete_laplace_mechanism(
            1.0 / scale,
            sensitivity=shift,
            pessimistic_estimate=True,
            value_discretization_interval=interval,
            use_connect_dots=True,
        )
    elif kind == "pure_epsilon":
        # The dominating pair of every ε-DP mechanism (randomised response with e^ε odds).
        base = pld_lib.from_privacy_parameters(
            common.DifferentialPrivacyParameters(param, 0.0), value_discretization_interval=interval
        )
    elif kind == "approx_dp":
        # The dominating pair of every (ε, δ)-DP mechanism: (ε, δ) randomised response (`ApproxDPEvent`).
        epsilon, delta = cast(tuple[float, float], param)
        base = pld_lib.from_privacy_parameters(
            common.DifferentialPrivacyParameters(epsilon, delta), value_discretization_interval=interval
        )
    else:
        raise ValueError(f"unknown mechanism kind {kind!r}")
    return base


def epsilon_pld(events: Sequence[Event], delta: float) -> float:
    """ε at `delta` of composing all `events`: the number the ledger enforces (∞ if any event is non-private).

    PLD accountant: DP-SGD = SelfComposed(PoissonSampled(q, Gaussian(σ)), steps), at a unit of group k > 1 rows
    SelfComposed(`unit_dpsgd_pld`(σ, q, k), steps); Gaussian = Gaussian(σ/Δ₂);
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

    Adaptive budgets. With at least one `ZCDPEvent` (ρ_j each; AIM's rounds under a zCDP filter) the result is
    min(ε_hyb(δ), ε_RDP(δ)) and the plain PLD above is NOT used, because it needs a dominating pair fixed in
    advance for every step, which a step whose σ was chosen from earlier outputs does not have (for mixed
    Gaussian and bounded-range steps no theorem lets the PLD compose such steps as if fixed). Why each bound
    holds under adaptivity:
    - Inside the run. Each step t is ρ_t-zCDP (a Gaussian count at σ_t: 1/2σ_t², the discrete Gaussian too,
      Canonne, Kamath & Steinke 2020; an ε-bounded-range selection: ε²/8, Cesar & Rogers 2021), ρ_t chosen
      from earlier outputs, and the run stops before Σ_t ρ_t exceeds ρ_j, fixed before any row is read. At every
      order α the per-step bounds α·ρ_t then sum to at most α·ρ_j, so the run is (α, αρ_j)-RDP (the Rényi filter
      of Feldman & Zrnic 2021, Thm. 3.1; Whitehouse, Ramdas, Rogers & Wu 2023 for fully adaptive composition):
      the whole run is ρ_j-zCDP with ρ_j fixed in advance, whatever the data made the schedule.
    - ε_RDP: every event's per-order RDP bound is fixed in advance (a ZCDPEvent's is α·ρ_j), and per-order RDP
      bounds add under adaptive composition (Mironov 2017, Prop. 1); converted by Canonne, Kamath & Steinke 2020
      (Prop. 12).
    - ε_hyb: the runs together are ρ-zCDP, ρ = Σ_j ρ_j (zCDP composes adaptively, Bun & Steinke 2016, Lemma 2.3),
      hence (ε, δ_ρ(ε))-DP for every ε ≥ 0 (`zcdp_delta`, the same Prop. 12 in both orders of a neighbouring
      pair), so their hockey-stick curve H(t), t = e^ε, lies below the convex piecewise-linear function that
      joins those points (and their mirror images at 1/t, H(1/t) = 1 − 1/t + H(t)/t for the reversed pair) by
      its lower convex hull: a hockey-stick curve is convex in t, so it lies below the greatest convex function
      under the points. That function is the hockey-stick curve of an explicit discrete pair (`_zcdp_pld`), a
      dominating pair fixed in advance (it depends on ρ only). Every other event has its own fixed dominating
      pair, so the pessimistic PLD composition of all of them bounds the adaptive composition (Zhu, Dong & Wang
      2022, Thm. 10), in whatever order the runs and the other events interleave.
    The minimum of two valid bounds is valid (as above). Non-ZCDP lists never reach this branch.

    Private selection. A `RepeatAndSelectEvent` is (α, ε_sel(α))-RDP at every order, both orders of a
    neighbouring pair (`selection_rdp`), so (ε, δ_sel(ε))-DP for every ε ≥ 0 (`rdp_delta`, Prop. 12 again): its
    hockey-stick curve lies below the lower convex hull of those points, which is the curve of an explicit pair
    fixed in advance (`_hull_pld`, as for ρ-zCDP above). ε_hyb composes that pair with the others' by PLD (Zhu,
    Dong & Wang 2022, Thm. 10); ε_RDP adds ε_sel(α) per order. The minimum of the two is returned.
    """
    return _epsilon_pld(events, delta, VALUE_DISCRETIZATION)


def _epsilon_pld(events: Sequence[Event], delta: float, interval: float) -> float:
    """`epsilon_pld` on the grid `interval`, memoised: a noise search evaluates the same event lists again
    whenever a plan is rebuilt (events are frozen dataclasses; equal lists give equal ε)."""
    return _epsilon_pld_cached(tuple(events), float(delta), float(interval))


ADAPTIVE = (ZCDPEvent, RepeatAndSelectEvent)  # events composed by RDP or a profile's dominating pair only


@lru_cache(maxsize=4096)
def _epsilon_pld_cached(events: tuple[Event, ...], delta: float, interval: float) -> float:
    if any(isinstance(e, ADAPTIVE) for e in events):
        return _epsilon_adaptive(events, delta, interval)
    eps = _epsilon_pld_only(events, delta, interval)
    if math.isfinite(eps) and any(isinstance(e, PureEpsilonEvent) and e.bounded_range for e in events):
        eps = min(eps, epsilon_rdp(events, delta))
    return eps


def _epsilon_pld_only(
    events: Sequence[Event], delta: float, interval: float, extra: Sequence[pld_lib.PrivacyLossDistribution] = ()
) -> float:
    _check_delta(delta)
    non_private, gaussian_nm, counts = _group(events)
    if non_private:
        return math.inf
    if gaussian_nm is not None:
        counts[("gaussian", gaussian_nm)] = 1
    plds = [*extra, *(_mechanism_pld(kind, param, n, interval) for (kind, param), n in counts.items())]
    if not plds:
        return 0.0
    total = plds[0]
    for p in plds[1:]:
        total = total.compose(p)
    # Discrete Gaussians: the PLD is of the noise truncated at T while the sampler is not. On the event that every
    # moved coordinate's noise lies in [−T, T] (probability 1 − τ, the same under D and D') the output has the
    # truncated law, so by joint convexity each hockey-stick divergence exceeds the PLD's by at most τ ≤ Σ
    # count·tail (the union bound): ε at δ − τ (one ulp below δ when τ is below δ's precision) is a valid ε at δ.
    slack = _truncation_slack(counts)
    if slack > 0:
        delta = min(delta - slack, math.nextafter(delta, 0.0))
        if delta <= 0:
            return math.inf
    return max(0.0, float(total.get_epsilon_for_delta(delta)))


def _epsilon_adaptive(events: Sequence[Event], delta: float, interval: float) -> float:
    """min(ε_hyb, ε_RDP) of a list with ZCDPEvents or RepeatAndSelectEvents (`epsilon_pld`'s docstring, "Adaptive
    budgets" and "Private selection")."""
    _check_delta(delta)
    for e in events:
        validate_event(e)
    if any(isinstance(e, NonPrivateEvent) for e in events):
        return math.inf
    rho = math.fsum(e.rho for e in events if isinstance(e, ZCDPEvent))
    rest = [e for e in events if not isinstance(e, ADAPTIVE)]
    extra = [_zcdp_pld(rho, interval)] if rho > 0 else []
    extra += [_selection_pld(e, interval) for e in events if isinstance(e, RepeatAndSelectEvent)]
    hybrid = _epsilon_pld_only(rest, delta, interval, extra=extra)
    return min(hybrid, epsilon_rdp(events, delta))


ZCDP_PROFILE_POINTS = 512  # ε grid of `_zcdp_pld`'s dominating pair (more: closer to the conversion's curve)
ZCDP_PROFILE_TAIL = 69.0  # the grid ends at ε_max = ρ + 2√(69ρ), where δ_ρ(ε_max) ≤ e^-69 ≈ 1e-30 (Bun &
# Steinke's bound, looser than Prop. 12); that tail counts as infinite loss


def zcdp_delta(rho: float, epsilons: np.ndarray) -> np.ndarray:
    """δ(ε) ≥ the hockey-stick divergence H_{e^ε} of a ρ-zCDP mechanism (either order of a neighbouring pair), by
    Canonne, Kamath & Steinke 2020, Prop. 12 at every order α > 1:
    δ ≤ exp((α − 1)(αρ − ε) + (α − 1) log(1 − 1/α) − log α). Any α gives a valid bound; this takes the best of
    81 orders around α* = (ε + ρ)/2ρ (the minimiser of the leading term), capped at 1."""
    eps = np.asarray(epsilons, dtype=float)[:, None]
    alpha = np.maximum((eps + rho) / (2 * rho) * np.exp(np.linspace(-1.0, 1.0, 81))[None, :], 1 + 1e-9)
    log_delta = (alpha - 1) * (alpha * rho - eps) + (alpha - 1) * np.log1p(-1 / alpha) - np.log(alpha)
    return np.minimum(1.0, np.exp(log_delta.min(axis=1)))


def zcdp_rdp(rho: float, orders: np.ndarray) -> np.ndarray:
    """RDP curve of ρ-zCDP: (α, αρ) for every order α (the definition, Bun & Steinke 2016, Def. 1.1)."""
    return orders * rho


@lru_cache(maxsize=64)
def _zcdp_pld(rho: float, interval: float) -> pld_lib.PrivacyLossDistribution:
    """A pessimistic PLD of a dominating pair of every ρ-zCDP mechanism (`epsilon_pld`'s docstring, ε_hyb): the
    hull pair (`_hull_pld`) of (ε_i, `zcdp_delta`(ε_i)) on ZCDP_PROFILE_POINTS equally spaced ε_i ∈ [0, ε_max]."""
    eps = np.linspace(0.0, rho + 2 * math.sqrt(rho * ZCDP_PROFILE_TAIL), ZCDP_PROFILE_POINTS)
    return _hull_pld(eps, zcdp_delta(rho, eps), interval)


def rdp_delta(rdp: np.ndarray, epsilons: np.ndarray, orders: np.ndarray = RDP_ORDERS) -> np.ndarray:
    """δ(ε) ≥ the hockey-stick divergence H_{e^ε} of an (α, rdp(α))-RDP mechanism (both orders of a neighbouring
    pair): the best over `orders` of Canonne, Kamath & Steinke 2020, Prop. 12,
    δ ≤ exp((α − 1)(rdp(α) − ε) + (α − 1) log(1 − 1/α) − log α), capped at 1 (orders ≤ 1 and infinite rdp skipped)."""
    eps = np.asarray(epsilons, dtype=float)[:, None]
    ok = (orders > 1) & np.isfinite(rdp)
    a, r = orders[ok][None, :], rdp[ok][None, :]
    log_delta = (a - 1) * (r - eps) + (a - 1) * np.log1p(-1 / a) - np.log(a)
    return np.minimum(1.0, np.exp(log_delta.min(axis=1)))


@lru_cache(maxsize=64)
def _selection_pld(event: RepeatAndSelectEvent, interval: float) -> pld_lib.PrivacyLossDistribution:
    """A pessimistic PLD of a dominating pair of a private selection (`epsilon_pld`'s docstring): the hull pair of
    (ε_i, `rdp_delta`(ε_i)) on ZCDP_PROFILE_POINTS equally spaced ε_i up to where δ < e^−ZCDP_PROFILE_TAIL."""
    rdp = selection_rdp(event)
    top = float(rdp_lib.compute_epsilon(RDP_ORDERS, rdp, math.exp(-ZCDP_PROFILE_TAIL))[0])
    eps = np.linspace(0.0, top, ZCDP_PROFILE_POINTS)
    return _hull_pld(eps, rdp_delta(rdp, eps), interval)


def _hull_pld(eps: np.ndarray, d: np.ndarray, interval: float) -> pld_lib.PrivacyLossDistribution:
    """The pessimistic PLD of a pair whose hockey-stick curve dominates every mechanism that is (ε_i, δ_i)-DP for
    every i in both orders of a neighbouring pair (the last δ_i negligible: beyond it the loss counts as infinite).

    Points (t_i, δ_i), t_i = e^{ε_i}, their mirror images (1/t_i, 1 − 1/t_i + δ_i/t_i) and (0, 1): every
    hockey-stick curve H(t) of the mechanism (convex, H(0) = 1) lies below their lower convex hull g, and beyond
    t_max below δ_max (H is non-increasing). g is piecewise linear, so g(t) = δ_max + Σ_k q_k (t_k − t)_+ with
    q_k > 0 the slope increase at vertex t_k: the hockey-stick curve of the pair (P, Q) with P = t_k q_k and
    Q = q_k at privacy loss log t_k, P = δ_max at loss +∞ and Q's remaining mass at loss −∞ (Σ_k q_k = −g'(0) ≤
    1; ΣP = g(0) = 1). Losses are rounded up to the grid (pessimistic, as dp_accounting's own
    `from_privacy_parameters`). The pair bounds both orders of a neighbouring pair, so the PLD is symmetric."""
    t = np.exp(eps)
    points = sorted({(0.0, 1.0), *zip(t.tolist(), d.tolist()), *zip((1 / t).tolist(), (1 - 1 / t + d / t).tolist())})
    hull: list[tuple[float, float]] = []
    for x, y in points:  # lower convex hull (Andrew's monotone chain, left to right)
        while (
            len(hull) >= 2
            and ((hull[-1][0] - hull[-2][0]) * (y - hull[-2][1]) - (hull[-1][1] - hull[-2][1]) * (x - hull[-2][0])) <= 0
        ):
            hull.pop()
        hull.append((x, y))
    xs, ys = np.array([h[0] for h in hull]), np.array([h[1] for h in hull])
    slopes = np.append(np.diff(ys) / np.diff(xs), 0.0)  # flat at δ_max after the last point
    jumps = np.diff(slopes)  # q_k at the vertices xs[1:]
    pmf: dict[int, float] = defaultdict(float)
    for x, q in zip(xs[1:], jumps):
        if q > 0:
            pmf[math.ceil(math.log(x) / interval)] += x * q
    return pld_lib.PrivacyLossDistribution.create_from_rounded_probability(dict(pmf), float(ys[-1]), interval)


def pure_epsilon_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """RDP curve implied by ε-DP: (α, min(ε, α ε²/2)) for every order α.

    ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4) ⇒ D_α ≤ α ε²/2; and D_α ≤ D_∞ ≤ ε.
    """
    return np.minimum(epsilon, orders * epsilon**2 / 2)


def bounded_range_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """RDP curve of an ε-bounded-range step: (α, min(ε, α ε²/8)) for every order α.

    ε-BR ⇒ (ε²/8)-zCDP (Cesar & Rogers 2021, Lemma 3.2; Durfee & Rogers 2019 for the exponential mechanism)
    ⇒ D_α ≤ α ε²/8; and ε-BR ⇒ ε-DP ⇒ D_α ≤ D_∞ ≤ ε.
    """
    return np.minimum(epsilon, orders * epsilon**2 / 8)


def epsilon_rdp(events: Sequence[Event], delta: float) -> float:
    """ε at `delta` of composing `events` by Rényi DP (`rdp_curve`), the cross-check for `epsilon_pld` (always ≥
    it), converted by Canonne, Kamath & Steinke 2020 (Prop. 12, dp_accounting's `compute_epsilon`)."""
    _check_delta(delta)
    rdp = rdp_curve(events)
    if not np.any(np.isfinite(rdp)):
        return math.inf
    return float(rdp_lib.compute_epsilon(RDP_ORDERS, rdp, delta)[0])


def rdp_curve(events: Sequence[Event]) -> np.ndarray:
    """The RDP of composing `events` at each of RDP_ORDERS (∞ everywhere if one is non-private).

    DP-SGD and Gaussian events use dp_accounting's RdpAccountant (Mironov, Talwar & Zhang 2019 for
    the sampled Gaussian; α/(2σ²) for the plain one). Laplace is supported there too, with the exact
    curve of Mironov 2017 (Prop. 6 / Table II): for b = Δ₁/ε,
    D_α = ε + log(1 + (α-1)(e^{(1-2α)ε} - 1)/(2α-1)) / (α-1).
    Pure ε steps add `pure_epsilon_rdp` at the same orders, bounded-range steps `bounded_range_rdp`, ρ-zCDP
    budgets (`ZCDPEvent`) `zcdp_rdp`, private selections `selection_rdp`. RDP composes by summing per order, also
    under adaptive composition (Mironov 2017, Prop. 1). DP-SGD at a unit of group > 1 rows adds ∞ at every order:
    its RDP is not computed (module docstring), which only makes the cross-check vacuous.
    """
    library = np.zeros_like(RDP_ORDERS)  # the events dp_accounting's RdpAccountant composes, summed per order
    extra = np.zeros_like(RDP_ORDERS)
    for e in events:
        validate_event(e)
        if isinstance(e, NonPrivateEvent):
            return np.full_like(RDP_ORDERS, np.inf)
        if (isinstance(e, PoissonGaussianEvent) and e.group > 1) or isinstance(e, ApproxDPEvent):
            extra += np.inf  # no RDP curve computed (DP-SGD at a unit) or none finite ((ε, δ) with δ > 0)
        elif isinstance(e, (PoissonGaussianEvent, GaussianEvent, LaplaceEvent)):
            library += _library_rdp(e)
        elif isinstance(e, PureEpsilonEvent):
            extra += (bounded_range_rdp if e.bounded_range else pure_epsilon_rdp)(e.epsilon, RDP_ORDERS)
        elif isinstance(e, ZCDPEvent):
            extra += zcdp_rdp(e.rho, RDP_ORDERS)
        elif isinstance(e, DiscreteGaussianEvent):
            # D_α(N_ℤ(0, σ²) ‖ N_ℤ(k, σ²)) ≤ αk²/2σ² (Canonne, Kamath & Steinke 2020, Prop. 5), summed over count
            extra += zcdp_rdp(e.rho, RDP_ORDERS)
        elif isinstance(e, DiscreteLaplaceEvent):
            # each block is (Δ/t)-DP: min(ε, αε²/2) per order (Bun & Steinke 2016, Prop. 1.4), summed over count
            extra += e.count * pure_epsilon_rdp(e.sensitivity / e.scale, RDP_ORDERS)
        elif isinstance(e, RepeatAndSelectEvent):
            extra += selection_rdp(e)
        else:
            raise TypeError(f"not a privacy event: {e!r}")
    return library + extra


@lru_cache(maxsize=1024)
def _library_rdp(e: PoissonGaussianEvent | GaussianEvent | LaplaceEvent) -> np.ndarray:
    """One event's RDP at RDP_ORDERS by dp_accounting's RdpAccountant (`rdp_curve`), computed once per event: the
    accountant sums its events' curves per order, so composing them one by one and summing is the same number."""
    accountant = rdp_lib.RdpAccountant(orders=RDP_ORDERS)
    if isinstance(e, PoissonGaussianEvent):
        accountant.compose(
            dp_event.SelfComposedDpEvent(
                dp_event.PoissonSampledDpEvent(e.sample_rate, dp_event.GaussianDpEvent(e.noise_multiplier)),
                int(e.steps),
            )
        )
    elif isinstance(e, GaussianEvent):
        accountant.compose(dp_event.GaussianDpEvent(e.noise_multiplier))
    else:
        accountant.compose(dp_event.LaplaceDpEvent(e.scale / e.l1_sensitivity))
    curve = np.asarray(accountant.rdp, dtype=float)
    curve.setflags(write=False)
    return curve


@lru_cache(maxsize=256)
def selection_rdp(event: RepeatAndSelectEvent) -> np.ndarray:
    """The RDP curve of a private selection (`RepeatAndSelectEvent`), at each of RDP_ORDERS.

    One trial: at each order the largest RDP of the candidates' composed events (a mixture with public weights is
    no less private than its worst component: Rényi divergence is jointly quasi-convex, van Erven & Harremoës
    2014, Thm. 13). The selection: Papernot & Steinke 2022, Theorem 2 for the truncated negative binomial of the
    event's shape η (0: logarithmic; 1: geometric) and mean μ, ε'(λ) = ε(λ) + (1 + η)(1 − 1/λ̂)ε(λ̂) − (1 + η) log γ/λ̂
    + log μ/(λ − 1) with the best λ̂, then made non-decreasing in λ — dp_accounting 0.6's
    `_compute_rdp_repeat_and_select`, used as is."""
    trial = np.max([rdp_curve(c) for c in event.candidates], axis=0)
    return np.asarray(
        rdp_lib._compute_rdp_repeat_and_select(RDP_ORDERS, trial, float(event.mean), event.shape), dtype=float
    )


class UnreachableTarget(ValueError):
    """Even the largest searched noise multiplier leaves ε above the target."""


def smallest_satisfying(
    eps_of: Callable[[float], float],
    target: float,
    rtol: float,
    start: float = 1.0,
    factor: float = 2.0,
    grow: bool = False,
    lowest: float = MIN_NOISE_MULTIPLIER,
    highest: float = MAX_NOISE_MULTIPLIER,
) -> float:
    """Smallest x in [`lowest`, `highest`] (default [MIN, MAX]_NOISE_MULTIPLIER) with eps_of(x) ≤ target, eps_of
    decreasing.

    Brackets by multiplying/dividing `start` by `factor` (squared after every step with `grow`: a start known to
    lie close to the answer is confirmed in two evaluations, a far one still reached in a few; a division never
    goes below `lowest`, and a target already met there is refused as too loose), then shrinks
    [lo, hi] (eps(lo) > target ≥ eps(hi)) by Illinois false position on (log x, log ε), which converges in a few
    PLD evaluations; stops when hi/lo - 1 ≤ rtol and returns hi, the side that satisfies the target.
    """
    lo: float | None = None
    hi, e_hi = start, eps_of(start)
    while e_hi > target:
        lo, e_lo = hi, e_hi
        hi *= factor
        if hi > highest:
            raise UnreachableTarget(
                f"target ε={target} is unreachable: even noise multiplier {lo:g} gives ε={e_lo:.4g}"
            )
        e_hi = eps_of(hi)
        factor = factor * factor if grow else factor
    while lo is None:
        if hi <= lowest:
            raise ValueError(
                f"target ε={target} is so loose that noise multiplier {hi:g} already satisfies it "
                f"(ε={e_hi:.4g}); calibration below {lowest} is not supported"
            )
        x = max(hi / factor, lowest)
        e = eps_of(x)
        if e > target:
            lo, e_lo = x, e
        else:
            hi, e_hi = x, e
        factor = factor * factor if grow else factor
    # f(x) = log ε(x) - log target: f(lo) > 0 ≥ f(hi); work in log x.
    a, b = math.log(lo), math.log(hi)
    fa, fb = _log_gap(e_lo, target), _log_gap(e_hi, target)
    side = 0
    while b - a > math.log1p(rtol) * (1 + 1e-9):  # a bracket of exactly factor = 1 + rtol is done
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


def calibrate_noise_multiplier(
    epsilon: float, delta: float, sample_rate: float, steps: int, rtol: float = 1e-3
) -> float:
    """Smallest DP-SGD noise multiplier (to ~`rtol`) whose PLD ε at `delta` over `steps`
    Poisson-sampled steps at rate `sample_rate` is ≤ `epsilon` (`calibrate_noise_scale`)."""
    if not (0 < sample_rate <= 1):
        raise ValueError(f"sample_rate must lie in (0, 1], got {sample_rate}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    return calibrate_noise_scale(epsilon, delta, lambda nm: [PoissonGaussianEvent(nm, sample_rate, int(steps))], rtol)


def calibrate_noise_scale(
    epsilon: float,
    delta: float,
    events_of: Callable[[float], Sequence[Event]],
    rtol: float = 1e-3,
    lowest: float = MIN_NOISE_MULTIPLIER,
    highest: float = MAX_NOISE_MULTIPLIER,
) -> float:
    """Smallest scale s in [`lowest`, `highest`] (to ~`rtol`) with PLD ε(events_of(s); δ) ≤ `epsilon`, for a family
    of events whose ε decreases in s (e.g. several DP-SGD releases whose noise multipliers are fixed multiples
    of s); the result always satisfies the target on the ledger's PLD grid. Raises UnreachableTarget when even
    `highest` misses the target.

    The search runs on a 10× coarser PLD grid (correspondingly faster), then is refined on the ledger's grid
    starting from that answer: the coarse grid is more pessimistic, so stopping there would leave budget unspent.
    The refinement brackets from the coarse answer by factors 1 + rtol, (1 + rtol)², (1 + rtol)⁴, ...: where the
    two grids agree to within rtol (DP-SGD's weights at 1,000,000 rows: 0.1 %) two ledger-grid evaluations settle
    it.
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
        coarse = smallest_satisfying(
            lambda x: _epsilon_pld(events_of(x), delta, 10 * VALUE_DISCRETIZATION),
            epsilon,
            rtol,
            start=max(1.0, lowest),
            lowest=lowest,
            highest=highest,
        )
    except UnreachableTarget:  # on the coarse grid only (a too-loose target is looser still on the ledger's)
        return smallest_satisfying(
            ledger_epsilon, epsilon, rtol, start=max(1.0, lowest), lowest=lowest, highest=highest
        )
    return smallest_satisfying(
        ledger_epsilon, epsilon, rtol, start=coarse, factor=1 + rtol, grow=True, lowest=lowest, highest=highest
    )


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
    log_sigma = optimize.brentq(
        lambda ls: analytic_gaussian_delta(epsilon, math.exp(ls), 1.0) - delta, lo, hi, xtol=1e-12
    )
    multiplier = math.exp(log_sigma)
    while epsilon_pld([GaussianEvent(multiplier, 1.0)], delta) > epsilon:
        multiplier *= 1 + rtol
    return multiplier * l2_sensitivity


def discrete_gaussian_sigma(
    epsilon: float, delta: float, sensitivity: int, count: int = 1, start: float | None = None, rtol: float = 1e-3
) -> float:
    """σ (lattice points) of `count` discrete Gaussians with integer shift `sensitivity` at (ε, δ): the smallest σ on
    the grid start·(1 + rtol)^j whose PLD ε (`epsilon_pld` of DiscreteGaussianEvent(σ, Δ, count)) is ≤ ε. `start`
    defaults to the continuous analytic Gaussian's σ for the same ratio (`gaussian_sigma`·√count), which the
    discrete one matches to ~0.1 % from σ ≈ 2 on."""
    if start is None:
        start = gaussian_sigma(epsilon, delta, float(sensitivity)) * math.sqrt(count)
    sensitivity, count = int(sensitivity), int(count)

    def eps(s: float) -> float:
        return epsilon_pld([DiscreteGaussianEvent(s, sensitivity, count)], delta)

    sigma = float(start)
    if eps(sigma) > epsilon:
        while eps(sigma) > epsilon:
            sigma *= 1 + rtol
            if sigma > MAX_NOISE_MULTIPLIER * sensitivity * math.sqrt(count):
                raise UnreachableTarget(f"(ε={epsilon}, δ={delta}) is unreachable with discrete Gaussian noise")
        return sigma
    while eps(sigma / (1 + rtol)) <= epsilon:
        sigma /= 1 + rtol
    return sigma


def laplace_scale(epsilon: float, l1_sensitivity: float) -> float:
    """Laplace scale b = Δ₁/ε: the log density ratio |x-f(D)|/b - |x-f(D')|/b is at most Δ₁/b = ε."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon}")
    if not l1_sensitivity > 0:
        raise ValueError(f"l1_sensitivity must be positive, got {l1_sensitivity}")
    return l1_sensitivity / epsilon
