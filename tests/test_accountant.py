"""The accountant against published numbers, closed forms and dp_accounting's own accountants."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from scipy import optimize
from scipy.stats import binom, norm

from pipelines.privacy import accountant
from pipelines.privacy.accountant import (
    analytic_gaussian_delta,
    calibrate_noise_multiplier,
    epsilon_pld,
    epsilon_rdp,
    gaussian_sigma,
    laplace_scale,
)
from pipelines.privacy.events import (
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonGaussianEvent,
    PureEpsilonEvent,
)

DPSGD = PoissonGaussianEvent(noise_multiplier=1.1, sample_rate=256 / 50000, steps=9765)


@pytest.mark.integration
def test_dpsgd_reference_numbers_and_speed():
    accountant._mechanism_pld.cache_clear()
    t0 = time.perf_counter()
    eps = epsilon_pld([DPSGD], 1e-5)
    elapsed = time.perf_counter() - t0
    assert eps == pytest.approx(2.3932, abs=0.02)
    assert elapsed < 5.0
    assert epsilon_rdp([DPSGD], 1e-5) == pytest.approx(2.6117, abs=0.02)


def _balle_wang_epsilon(sigma: float, sensitivity: float, delta: float) -> float:
    """Solve δ = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) for ε (Balle & Wang 2018, Thm. 8)."""

    def gap(eps: float) -> float:
        a, b = sensitivity / (2 * sigma), eps * sigma / sensitivity
        return norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b) - delta

    return optimize.brentq(gap, 0.0, 50.0, xtol=1e-12)


@pytest.mark.parametrize("sigma,sensitivity,delta", [(3.0, 1.0, 1e-5), (1.0, 0.5, 1e-6), (10.0, 4.0, 1e-3)])
def test_single_gaussian_matches_analytic_gaussian(sigma, sensitivity, delta):
    exact = _balle_wang_epsilon(sigma, sensitivity, delta)
    assert epsilon_pld([GaussianEvent(sigma, sensitivity)], delta) == pytest.approx(exact, abs=1e-2)
    assert analytic_gaussian_delta(exact, sigma, sensitivity) == pytest.approx(delta, rel=1e-6)


def test_gaussians_merge_exactly_like_dp_accounting_composes_them():
    events = [GaussianEvent(4.0, 1.0), GaussianEvent(6.0, 2.0), GaussianEvent(2.5, 0.5)]
    reference = pld_privacy_accountant.PLDAccountant()
    for e in events:
        reference.compose(dp_event.GaussianDpEvent(e.noise_multiplier))
    assert epsilon_pld(events, 1e-6) == pytest.approx(reference.get_epsilon(1e-6), abs=1e-3)


@pytest.mark.integration
def test_mixed_list_matches_dp_accounting_pld_accountant():
    events = [
        PoissonGaussianEvent(1.5, 0.01, 300),
        LaplaceEvent(20.0, 1.0),
        GaussianEvent(8.0, 1.0),
        PoissonGaussianEvent(1.5, 0.01, 200),
    ]
    reference = pld_privacy_accountant.PLDAccountant()
    reference.compose(
        dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.5)), 500)
    )
    reference.compose(dp_event.LaplaceDpEvent(20.0))
    reference.compose(dp_event.GaussianDpEvent(8.0))
    assert epsilon_pld(events, 1e-5) == pytest.approx(reference.get_epsilon(1e-5), abs=2e-3)


def test_laplace_alone_is_l1_over_scale():
    event = LaplaceEvent(scale=2.5, l1_sensitivity=1.5)
    eps = epsilon_pld([event], 1e-12)
    assert eps == pytest.approx(1.5 / 2.5, abs=1e-2)
    assert eps <= 1.5 / 2.5 + 1e-9
    assert laplace_scale(0.6, 1.5) == pytest.approx(2.5)


def _randomized_response_composition(eps: float, k: int, delta: float) -> float:
    """Exact ε(δ) of k-fold randomised response with e^ε odds: the worst ε-DP mechanism, so any
    valid accountant for k pure ε-DP steps must report at least this (Kairouz, Oh & Viswanath 2015).
    Privacy loss L = ε(k − 2I), I ~ Bin(k, 1/(1+e^ε)); δ(ε') = E[(1 − e^{ε'−L})₊]."""
    i = np.arange(k + 1)
    loss, prob = eps * (k - 2 * i), binom.pmf(i, k, 1 / (1 + math.exp(eps)))

    def gap(e: float) -> float:
        return float(np.sum(prob * np.clip(1 - np.exp(e - loss), 0, None))) - delta

    return 0.0 if gap(0.0) <= 0 else optimize.brentq(gap, 0.0, k * eps, xtol=1e-12)


@pytest.mark.parametrize("eps,k", [(0.3, 5), (1.0, 3), (0.1, 20)])
def test_pure_epsilon_composition_bounds(eps, k):
    events = [PureEpsilonEvent(eps)] * k
    composed = epsilon_pld(events, 1e-12)
    assert composed <= k * eps + 1e-9  # basic composition
    assert composed >= _randomized_response_composition(eps, k, 1e-12) - 1e-9
    assert composed >= eps


def test_pure_epsilon_composition_beats_basic_composition_at_moderate_delta():
    eps, k, delta = 0.1, 50, 1e-3
    composed = epsilon_pld([PureEpsilonEvent(eps)] * k, delta)
    exact = _randomized_response_composition(eps, k, delta)
    advanced = eps * math.sqrt(2 * k * math.log(1 / delta)) + k * eps * math.expm1(eps)  # Dwork-Rothblum-Vadhan
    assert exact - 1e-9 <= composed <= exact + 5e-3
    assert composed < advanced < k * eps


def test_pure_epsilon_rdp_curve():
    orders = np.array([1.5, 2.0, 10.0, 100.0])
    np.testing.assert_allclose(accountant.pure_epsilon_rdp(0.5, orders), [0.1875, 0.25, 0.5, 0.5])


@pytest.mark.integration
@pytest.mark.parametrize(
    "events",
    [
        [DPSGD, PureEpsilonEvent(0.2)],
        [GaussianEvent(5.0, 1.0), LaplaceEvent(4.0, 1.0), PureEpsilonEvent(0.1)],
        [PoissonGaussianEvent(1.3, 0.02, 400), GaussianEvent(20.0, 2.0), LaplaceEvent(50.0, 1.0)],
        [PureEpsilonEvent(0.5)] * 4,
        [LaplaceEvent(1.0, 1.0)],
    ],
)
def test_pld_never_exceeds_rdp(events):
    assert epsilon_pld(events, 1e-6) <= epsilon_rdp(events, 1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("target,q,steps", [(1.0, 0.01, 1000), (2.0, 256 / 50000, 9765), (1.0, 0.002, 20000)])
def test_calibrate_round_trips(target, q, steps):
    """The plan spends the requested ε on the ledger's grid (the last case spent 0.974 when the
    answer of the coarse search grid was kept)."""
    nm = calibrate_noise_multiplier(target, 1e-5, q, steps)
    eps = epsilon_pld([PoissonGaussianEvent(nm, q, steps)], 1e-5)
    assert 0.995 * target <= eps <= target
    assert epsilon_pld([PoissonGaussianEvent(nm * 0.99, q, steps)], 1e-5) > target  # (nearly) the smallest


@pytest.mark.parametrize("start,most", [(1.0005, 2), (1.5, 13), (0.2, 16), (5.0, 16)])
def test_a_growing_bracket_confirms_a_close_start_in_two_evaluations(start, most):
    """The ledger-grid refinement's search (`grow`): from a start within rtol above the answer (ε(x) = 1/x, target
    1, answer 1) two evaluations settle it; far starts on either side still end within rtol of the answer, in fewer
    evaluations than a fixed factor would take from 0.2 or 5 (37 and 36 at the old refinement's 1.05)."""
    calls: list[float] = []

    def eps_of(x: float) -> float:
        calls.append(x)
        return 1.0 / x

    x = accountant.smallest_satisfying(eps_of, 1.0, 1e-3, start=start, factor=1.001, grow=True)
    assert 1.0 <= x <= 1.001 * (1 + 1e-9)
    assert len(calls) <= most


@pytest.mark.integration
def test_calibrate_with_fixed_events_reaches_a_target_the_coarse_grid_cannot():
    """A calibration after a method (plan_calibration's shape: the method's events fixed, one Gaussian scaled):
    Adult-all's dpwgan at ε = 0.125 with share 0.2 planned 18,316 DP-SGD steps at ε = 0.1, which the 10× coarser
    search grid reads as 0.19, so the search stopped with 'unreachable' and the budget stage refused the run. On
    the ledger's grid the target is met, with ε close to it."""
    method = PoissonGaussianEvent(noise_multiplier=13.862845661140621, sample_rate=0.003275835594001126, steps=18316)
    assert (
        epsilon_pld([method], 1e-5)
        <= 0.1
        < accountant._epsilon_pld([method], 1e-5, 10 * accountant.VALUE_DISCRETIZATION)
    )

    def family(x: float) -> list:
        return [method, GaussianEvent(x * 4.0, 4.0)]

    z = accountant.calibrate_noise_scale(0.125, 1e-5, family)
    assert 0.995 * 0.125 <= epsilon_pld(family(z), 1e-5) <= 0.125
    assert epsilon_pld(family(z * 0.99), 1e-5) > 0.125


def test_gaussian_sigma_round_trips():
    sigma = gaussian_sigma(1.0, 1e-5, 2.0)
    eps = epsilon_pld([GaussianEvent(sigma, 2.0)], 1e-5)
    assert 0.99 <= eps <= 1.0
    assert sigma == pytest.approx(2.0 * 3.7306, rel=2e-3)  # analytic Gaussian at (1, 1e-5)


@pytest.mark.integration
@pytest.mark.parametrize(
    "args",
    [
        (0.0, 1e-5, 0.01, 10),
        (1.0, 1.5, 0.01, 10),
        (1.0, 1e-5, 0.0, 10),
        (1.0, 1e-5, 0.01, 0),
        (math.inf, 1e-5, 0.01, 10),
        (1000.0, 1e-5, 1.0, 1),
    ],
)
def test_calibrate_rejects_impossible_targets(args):
    with pytest.raises(ValueError):
        calibrate_noise_multiplier(*args)


def test_gaussian_sigma_and_laplace_scale_reject_bad_input():
    with pytest.raises(ValueError):
        gaussian_sigma(-1.0, 1e-5, 1.0)
    with pytest.raises(ValueError):
        gaussian_sigma(1.0, 1e-5, 0.0)
    with pytest.raises(ValueError):
        laplace_scale(0.0, 1.0)


def test_non_private_and_empty():
    assert epsilon_pld([NonPrivateEvent("epsilon: inf")], 1e-5) == math.inf
    assert epsilon_rdp([NonPrivateEvent("epsilon: inf")], 1e-5) == math.inf
    assert epsilon_pld([GaussianEvent(5.0, 1.0), NonPrivateEvent("x")], 1e-5) == math.inf
    assert epsilon_pld([], 1e-5) == 0.0
    assert epsilon_rdp([], 1e-5) == 0.0


def test_invalid_events_and_delta_are_rejected():
    with pytest.raises(ValueError):
        epsilon_pld([GaussianEvent(-1.0, 1.0)], 1e-5)
    with pytest.raises(ValueError):
        epsilon_pld([GaussianEvent(1.0, 1.0)], 0.0)
    with pytest.raises(ValueError):
        epsilon_rdp([PoissonGaussianEvent(1.0, 1.5, 10)], 1e-5)


# -- adaptive zCDP budgets (AIM's rounds under a zCDP filter) ------------------------------------------------------
def test_zcdp_event_round_trips_and_is_validated():
    from pipelines.privacy.events import ZCDPEvent, event_from_dict, event_to_dict, validate_event

    e = ZCDPEvent(0.0123, "AIM rounds")
    d = event_to_dict(e)
    assert d == {"kind": "zcdp", "rho": 0.0123, "mechanism": "AIM rounds"}
    assert event_from_dict(d) == e
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="rho"):
            validate_event(ZCDPEvent(bad))
        with pytest.raises(ValueError, match="rho"):
            epsilon_pld([ZCDPEvent(bad)], 1e-5)


def test_zcdp_events_compose_additively_in_rdp_and_in_the_ledgers_figure():
    from pipelines.privacy.events import ZCDPEvent

    orders = accountant.RDP_ORDERS
    np.testing.assert_allclose(accountant.zcdp_rdp(0.02, orders), 0.02 * orders)
    a, b = ZCDPEvent(0.004), ZCDPEvent(0.011)
    assert epsilon_rdp([a, b], 1e-5) == pytest.approx(epsilon_rdp([ZCDPEvent(0.015)], 1e-5), rel=1e-12)
    assert epsilon_pld([a, b], 1e-5) == pytest.approx(epsilon_pld([ZCDPEvent(0.015)], 1e-5), rel=1e-12)
    # a Gaussian of multiplier σ is exactly 1/2σ²-zCDP in RDP: the same curve as ZCDPEvent(1/2σ²)
    g = GaussianEvent(7.0, 1.0)
    assert epsilon_rdp([g, a], 1e-5) == pytest.approx(epsilon_rdp([ZCDPEvent(1 / 98 + 0.004)], 1e-5), rel=1e-9)


@pytest.mark.integration
@pytest.mark.parametrize("rho", [1e-4, 0.003, 0.0184, 0.2, 2.0])
def test_zcdp_alone_is_the_conversion_and_never_below_a_gaussian_of_the_same_rho(rho):
    from benchmarks.aim_accountant import zcdp_epsilon
    from pipelines.privacy.events import ZCDPEvent

    for delta in (1e-5, 1e-8):
        eps = epsilon_pld([ZCDPEvent(rho)], delta)
        conv = zcdp_epsilon(rho, delta)
        assert conv * (1 - 1e-6) <= eps <= conv * (1 + 1e-3) + 1e-4
        # the Gaussian mechanism of σ = (2ρ)^(-1/2) is ρ-zCDP: no valid figure for ρ-zCDP can be below its exact ε
        assert eps >= epsilon_pld([GaussianEvent((2 * rho) ** -0.5, 1.0)], delta)


def test_zcdp_dominating_pair_lies_above_the_gaussian_curve_and_below_the_conversion():
    # `_zcdp_pld` is a pair whose hockey-stick curve must dominate every ρ-zCDP mechanism's (the Gaussian's among
    # them) and may be at most the Prop. 12 bound it is built from (up to the grid's pessimistic rounding)
    rho = 0.05
    pld = accountant._zcdp_pld(rho, accountant.VALUE_DISCRETIZATION)
    sigma = (2 * rho) ** -0.5
    for eps in np.linspace(0.0, 2.5, 26):
        d = pld.get_delta_for_epsilon(float(eps))
        assert d >= analytic_gaussian_delta(float(eps), sigma, 1.0) - 1e-12
        bound = float(accountant.zcdp_delta(rho, np.array([eps + 2 * accountant.VALUE_DISCRETIZATION]))[0])
        assert d <= bound * 1.05 + 1e-12


@pytest.mark.integration
def test_lists_with_a_zcdp_budget_are_composed_only_by_adaptively_valid_bounds():
    from pipelines.privacy.events import BOUNDED_RANGE, ZCDPEvent

    z = ZCDPEvent(0.003)
    fixed = [GaussianEvent(30.0, 1.0)] * 20 + [
        PoissonGaussianEvent(1.2, 0.01, 500),
        LaplaceEvent(40.0, 1.0),
        PureEpsilonEvent(0.05, BOUNDED_RANGE),
    ]
    eps = epsilon_pld(fixed + [z], 1e-5)
    # never below what any valid accountant could claim for a real ρ-zCDP mechanism in the same composition (a
    # Gaussian of the same ρ, composed exactly), never above the RDP bound
    gauss = GaussianEvent((2 * z.rho) ** -0.5, 1.0)
    assert epsilon_pld(fixed + [gauss], 1e-5) <= eps <= epsilon_rdp(fixed + [z], 1e-5)
    # the fixed part: dominated PLD composition with the zCDP pair, here below the RDP bound (DP-SGD in RDP is loose)
    assert eps < epsilon_rdp(fixed + [z], 1e-5) - 0.01
    # lists without a ZCDPEvent are unchanged (PLD, or min(PLD, RDP) with a bounded-range step)
    assert epsilon_pld(fixed, 1e-5) == min(
        accountant._epsilon_pld_only(fixed, 1e-5, accountant.VALUE_DISCRETIZATION), epsilon_rdp(fixed, 1e-5)
    )
    assert epsilon_pld([z, NonPrivateEvent("x")], 1e-5) == math.inf


def test_calibration_over_a_zcdp_budget_meets_the_target():
    from pipelines.privacy.events import ZCDPEvent

    x = accountant.calibrate_noise_scale(1.0, 1e-5, lambda s: [GaussianEvent(s, 1.0)] * 5 + [ZCDPEvent(3 / s**2)])
    events = [GaussianEvent(x, 1.0)] * 5 + [ZCDPEvent(3 / x**2)]
    assert 0.998 <= epsilon_pld(events, 1e-5) <= 1.0


def test_ledger_reserves_records_and_refuses_zcdp_budgets(tmp_path):
    from pipelines.errors import BudgetExceededError
    from pipelines.privacy.events import ZCDPEvent
    from pipelines.privacy.ledger import Ledger

    ledger = Ledger(str(tmp_path / "ledger.sqlite"))
    planned = [GaussianEvent(25.0, 1.0)] * 3 + [ZCDPEvent(0.004, "AIM rounds")]
    res = ledger.reserve("t", "run1", "train@aim", planned, 1e-5, 1.0)
    assert res.epsilon_planned == pytest.approx(epsilon_pld(planned, 1e-5))
    ledger.record(res, planned)
    assert ledger.effective_events("t") == planned  # the event round-trips through the ledger's JSON
    assert ledger.spent("t", 1e-5) == pytest.approx(epsilon_pld(planned, 1e-5))
    assert ledger.spent_rdp("t", 1e-5) >= ledger.spent("t", 1e-5)
    with pytest.raises(BudgetExceededError):  # composed with what is spent: over 1.0
        ledger.reserve("t", "run2", "train@aim", [ZCDPEvent(0.05)], 1e-5, 1.0)
    assert len(ledger.rows("t")) == 2 * len(planned)
