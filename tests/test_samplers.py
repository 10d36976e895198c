"""Exact samplers (pipelines/privacy/samplers.py) and the accounting of the mechanisms built on them: each
sampler's law against its closed form (fixed seeds, so never flaky; every goodness-of-fit test is
also run on a plausible WRONG sampler, e.g. a rounded float normal, which it must reject, so the test has power),
outputs on the integers / the lattice, randomness drawn only by `rng.integers`, and the accountant's figures for
DiscreteGaussianEvent / DiscreteLaplaceEvent against privacy profiles summed directly over the lattice.
"""

from __future__ import annotations

import math
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest
from randomgen import AESCounter
from scipy import special, stats

from pipelines.privacy import samplers
from pipelines.privacy.accountant import (
    discrete_gaussian_sigma,
    discrete_gaussian_tail,
    epsilon_pld,
    epsilon_rdp,
    gaussian_sigma,
)
from pipelines.privacy.events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    PureEpsilonEvent,
    event_from_dict,
    event_to_dict,
    validate_event,
)
from pipelines.privacy.mechanisms import (
    discrete_gaussian_mechanism,
    discrete_laplace_mechanism,
    exponential_mechanism,
    lattice_gaussian_mechanism,
    lattice_laplace_mechanism,
    lattice_unit,
)

P_MIN = 1e-3  # goodness of fit: the right sampler's p-value at its fixed seed must exceed this
N = 200_000


class IntegersOnly:
    """A Generator proxy that records which methods are called (the samplers may use `integers` only)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng, self.called = rng, set()

    def __getattr__(self, name: str):
        self.called.add(name)
        return getattr(self.rng, name)


def chi2_pvalue(draws: np.ndarray, pmf) -> float:
    """χ² p-value of integer draws against `pmf(k)` over the support values seen, pooling cells below 5 expected
    into one tail cell."""
    ks, counts = np.unique(draws, return_counts=True)
    lo, hi = int(ks.min()), int(ks.max())
    support = np.arange(lo - 50, hi + 51)
    expected = pmf(support) * draws.size
    observed = np.zeros(support.size)
    observed[np.searchsorted(support, ks)] = counts
    big = expected >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], draws.size - expected[big].sum())
    if exp[-1] < 1e-9:
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def dlap_pmf(scale: float):
    q = math.exp(-1 / scale)
    return lambda k: (1 - q) / (1 + q) * q ** np.abs(k)


def dgauss_pmf(sigma: float):
    y = np.arange(-int(40 * sigma) - 2, int(40 * sigma) + 3)
    z = np.exp(-(y.astype(float) ** 2) / (2 * sigma * sigma)).sum()
    return lambda k: np.exp(-(np.asarray(k, float) ** 2) / (2 * sigma * sigma)) / z


# -- Bernoulli(e^-γ): the one transcendental primitive ----------------------------------------------------------


def test_exp_neg_bracket_contains_e_to_the_minus_gamma():
    getcontext().prec = 120
    for gamma in [
        Fraction(0),
        Fraction(1, 3),
        Fraction(1),
        Fraction(7, 2),
        Fraction(2469, 20),
        Fraction(3, 10**9),
        Fraction(0.1),
        Fraction(50),
        Fraction(1000),
    ]:
        for precision in (64, 200):
            lo, hi = samplers._exp_neg_bracket(gamma, precision)
            true = (-(Decimal(gamma.numerator) / Decimal(gamma.denominator))).exp() * Decimal(2) ** precision
            assert Decimal(lo) <= true <= Decimal(hi) and hi - lo <= 4, (gamma, precision)


def test_bernoulli_exp_has_probability_e_to_the_minus_gamma_on_both_paths():
    rng = np.random.default_rng(11)
    for gamma in (0.0, 0.3, 1.0, 2.5, 6.0):
        fast = samplers.bernoulli_exp(rng, np.full(N, gamma), np.zeros(N), lambda i: Fraction(gamma))
        assert stats.binomtest(int(fast.sum()), N, math.exp(-gamma)).pvalue > P_MIN
    # an infinite float error forces every draw through the exact rational path
    n = 4000
    slow = samplers.bernoulli_exp(rng, np.full(n, 0.7), np.full(n, np.inf), lambda i: Fraction(7, 10))
    assert stats.binomtest(int(slow.sum()), n, math.exp(-0.7)).pvalue > P_MIN
    assert stats.binomtest(int(slow.sum()), n, math.exp(-0.8)).pvalue < P_MIN  # power: a 10 % error in γ


def test_kept_indices_keeps_each_index_with_exactly_the_rate():
    """Every two-byte expansion once (index i's bytes are i >> 8, then i & 255): rate 0.5 + 2^-15 (bytes 128, 2)
    keeps exactly the 32,768 indices whose first byte is below 128 and the 2 that tie on it with a second byte
    below 2, i.e. 65,536 · rate; a rate that ends in its first byte (0.5) keeps the first half and no tie."""
    i = np.arange(65_536)
    served: list[int] = []

    def exhaustive(k: int) -> np.ndarray:  # the first call serves every first byte, the next the ties' second
        served.append(k)
        return (i >> 8).astype(np.uint8) if len(served) == 1 else (i[32_768 : 32_768 + k] & 255).astype(np.uint8)

    kept = samplers.kept_indices(exhaustive, 65_536, 0.5 + 2.0**-15)
    assert len(kept) == 65_536 * (0.5 + 2.0**-15) == 32_770 and served == [65_536, 256]
    assert np.array_equal(kept, np.r_[np.arange(32_768), 32_768, 32_769])
    served.clear()
    assert np.array_equal(samplers.kept_indices(exhaustive, 65_536, 0.5), np.arange(32_768)) and served == [65_536]
    assert np.array_equal(samplers.kept_indices(exhaustive, 7, 1.0), np.arange(7))
    with pytest.raises(ValueError, match="sample_rate"):
        samplers.kept_indices(exhaustive, 7, 0.0)


@pytest.mark.integration
def test_kept_indices_batch_sizes_are_binomial_on_the_csprng():
    """Batch sizes over 4,000 draws at q = 64 / 160,000 (every first byte ties or exceeds q's, which is 0), and the
    indices uniform over range(n): a sampler keeping each index at 256·q (a rate read as a whole byte) or at 0 fails."""
    rng = np.random.Generator(AESCounter(key=7))
    n, q, draws = 160_000, 64 / 160_000, 4_000
    batches = [samplers.kept_indices(lambda k: np.frombuffer(rng.bytes(k), np.uint8), n, q) for _ in range(draws)]
    sizes = np.array([len(b) for b in batches])
    assert abs(sizes.mean() - n * q) < 5 * math.sqrt(n * q * (1 - q) / draws)
    assert sizes.var(ddof=1) == pytest.approx(n * q * (1 - q), rel=0.1)
    every = np.concatenate(batches)
    assert stats.chisquare(np.bincount(every * 16 // n, minlength=16)).pvalue > P_MIN
    assert all(np.all(np.diff(b) > 0) for b in batches)


# -- discrete Laplace and discrete Gaussian against their closed forms -----------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("scale", [0.5, 1.0, 7 / 3, 20.000000000000004])
def test_discrete_laplace_matches_its_pmf(scale):
    draws = samplers.discrete_laplace(np.random.default_rng(21), scale, N)
    assert draws.dtype == np.int64
    assert chi2_pvalue(draws, dlap_pmf(scale)) > P_MIN
    if scale < 3:  # a rounded float Laplace differs from Lap_ℤ(t) where the lattice is coarse
        wrong = np.round(np.random.default_rng(22).laplace(0, scale, N)).astype(np.int64)
        assert chi2_pvalue(wrong, dlap_pmf(scale)) < P_MIN
    off = samplers.discrete_laplace(np.random.default_rng(23), scale * 1.03, N)
    assert chi2_pvalue(off, dlap_pmf(scale)) < P_MIN  # power: 3 % in the scale


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.5, 0.8, 1.0, 3.7, 50.0])
def test_discrete_gaussian_matches_its_pmf(sigma):
    draws = samplers.discrete_gaussian(np.random.default_rng(31), sigma, N)
    assert draws.dtype == np.int64
    assert chi2_pvalue(draws, dgauss_pmf(sigma)) > P_MIN
    if sigma < 1.5:  # the rounded float normal differs from N_ℤ(0, σ²) where the lattice is coarse
        wrong = np.round(np.random.default_rng(32).normal(0, sigma, N)).astype(np.int64)
        assert chi2_pvalue(wrong, dgauss_pmf(sigma)) < P_MIN
    slightly_off = samplers.discrete_gaussian(np.random.default_rng(33), sigma * 1.03, N)
    assert chi2_pvalue(slightly_off, dgauss_pmf(sigma)) < P_MIN  # power: 3 % in σ


def test_samplers_draw_only_uniform_integers_and_run_on_the_csprng():
    rng = IntegersOnly(np.random.Generator(AESCounter(key=2**100 + 12345)))
    samplers.discrete_gaussian(rng, 2.5, 1000)
    samplers.discrete_laplace(rng, 3.0, 1000)
    samplers.exponential_index(rng, np.array([0.0, 1.0, 5.0]), 1.0, 1.0)
    samplers.bernoulli_exp(rng, np.full(10, 0.5), np.full(10, np.inf), lambda i: Fraction(1, 2))
    assert rng.called == {"integers"}


# -- the exponential mechanism ------------------------------------------------------------------------------


@pytest.mark.integration
def test_exponential_index_has_the_exponential_mechanisms_probabilities():
    rng = np.random.default_rng(41)
    scores, sensitivity, epsilon = np.array([0.0, 1.0, 2.0, 5.0, -3.0, 4.5]), 1.5, 1.2
    n = 20_000
    picks = np.array([samplers.exponential_index(rng, scores, sensitivity, epsilon) for _ in range(n)])
    p = np.exp(epsilon * scores / (2 * sensitivity))
    p /= p.sum()
    observed = np.bincount(picks, minlength=scores.size)
    assert stats.chisquare(observed, n * p).pvalue > P_MIN
    q = np.exp(1.1 * epsilon * scores / (2 * sensitivity))  # power: 10 % off in ε
    assert stats.chisquare(observed, n * q / q.sum()).pvalue < P_MIN
    # 1,000 candidates of which one dominates: still exact, and the expected R/Σe^-γ proposals stay one batch
    big = np.r_[np.zeros(999), 40.0]
    assert all(samplers.exponential_index(rng, big, 1.0, 1.0) == 999 for _ in range(20))


# -- exact lattice rounding ---------------------------------------------------------------------------------


def test_lattice_round_is_exact_monotone_and_shift_equivariant():
    rng = np.random.default_rng(51)
    unit = Fraction(0.1)
    values = np.r_[rng.normal(0, 10, 5000), [0.05, 0.15, -0.05, 0.25, 1e9 + 0.05, 0.30000000000000004, 2.5e-17]]
    got = samplers.lattice_round(values, unit)
    want = [math.floor(Fraction(float(v)) / unit + Fraction(1, 2)) for v in values]
    assert got.dtype == np.int64 and got.tolist() == want
    ties = np.array([float(Fraction(2 * k + 1, 2) * unit) for k in range(-50, 50)])  # near-ties (0.1 is inexact)
    want = [math.floor(Fraction(t) / unit + Fraction(1, 2)) for t in ties]
    assert samplers.lattice_round(ties, unit).tolist() == want
    # |v − v'| ≤ k·unit ⇒ |round(v) − round(v')| ≤ k: the integer sensitivity the lattice mechanisms use
    unit = lattice_unit(0.37, 3)
    a = rng.uniform(-5, 5, 20_000)
    b = a + rng.uniform(-1, 1, a.size) * float(Fraction(0.37))
    b = np.clip(b, a - 0.37, a + 0.37)
    assert np.abs(samplers.lattice_round(a, unit) - samplers.lattice_round(b, unit)).max() <= 3


# -- mechanisms and their events ----------------------------------------------------------------------------


def test_mechanisms_release_integers_or_lattice_points_with_their_events():
    rng = np.random.default_rng(61)
    noisy, event = discrete_gaussian_mechanism(np.arange(12).reshape(3, 4), 1, 2.5, rng, query="cells")
    assert noisy.dtype == np.int64 and noisy.shape == (3, 4) and event == DiscreteGaussianEvent(2.5, 1, 1, "cells")
    count, event = discrete_laplace_mechanism(1234, 1, 20.0, rng)
    assert isinstance(int(count), int) and event.epsilon == pytest.approx(0.05)
    with pytest.raises(ValueError, match="integer"):
        discrete_gaussian_mechanism(np.array([0.5]), 1, 1.0, rng)
    unit = lattice_unit(0.2, 1)
    out = lattice_gaussian_mechanism(rng.normal(size=1000), unit, DiscreteGaussianEvent(30.0, 1, 1000), rng)
    assert np.allclose(out / 0.2, np.round(out / 0.2), rtol=0, atol=1e-9)
    out = lattice_laplace_mechanism(rng.normal(size=1000), unit, DiscreteLaplaceEvent(5.0, 1, 1000), rng)
    assert np.allclose(out / 0.2, np.round(out / 0.2), rtol=0, atol=1e-9)
    picks = {exponential_mechanism(np.array([1e6, 1e6 - 1.0, 1e6 - 40.0]), 1.0, 2.0, rng)[0] for _ in range(300)}
    assert picks == {0, 1}  # huge scores: no overflow, exact
    for bad in (
        DiscreteGaussianEvent(0.0),
        DiscreteGaussianEvent(1.0, 0),
        DiscreteLaplaceEvent(1.0, 1, 1, 0),
        DiscreteLaplaceEvent(math.inf),
    ):
        with pytest.raises(ValueError):
            validate_event(bad)
    for e in (DiscreteGaussianEvent(2.5, 3, 7, "q"), DiscreteLaplaceEvent(4.0, 2, 3, 5, "q")):
        assert event_from_dict(event_to_dict(e)) == e


# -- accounting: exact for the mechanism sampled ------------------------------------------------------------


def lattice_delta(pmf_p: np.ndarray, pmf_q: np.ndarray, epsilon: float) -> float:
    """max of the two hockey-stick divergences H_{e^ε}(P‖Q), H_{e^ε}(Q‖P), summed over the lattice."""
    return max(
        float(np.maximum(pmf_p - math.exp(epsilon) * pmf_q, 0).sum()),
        float(np.maximum(pmf_q - math.exp(epsilon) * pmf_p, 0).sum()),
    )


def dgauss_pair(sigma: float, shift: int) -> tuple[np.ndarray, np.ndarray]:
    y = np.arange(-int(45 * sigma) - shift - 2, int(45 * sigma) + shift + 3).astype(float)
    log_p = -(y**2) / (2 * sigma**2)
    log_q = -((y - shift) ** 2) / (2 * sigma**2)
    return np.exp(log_p - special.logsumexp(log_p)), np.exp(log_q - special.logsumexp(log_q))


@pytest.mark.parametrize("sigma, shift", [(0.7, 1), (1.0, 1), (2.0, 3), (6.0, 1)])
def test_discrete_gaussian_epsilon_is_its_exact_privacy_profile(sigma, shift):
    """ε_PLD of DiscreteGaussianEvent(σ, Δ) against δ(ε) summed over ℤ: never below it (δ(ε_PLD) ≤ δ) and
    within 1 % above; every smaller shift k < Δ is dominated (the monotonicity the event's contract uses)."""
    delta = 1e-5
    eps = epsilon_pld([DiscreteGaussianEvent(sigma, shift)], delta)
    p, q = dgauss_pair(sigma, shift)
    assert lattice_delta(p, q, eps) <= delta * (1 + 1e-9)
    assert lattice_delta(p, q, eps * 0.99) > delta
    for k in range(1, shift):
        assert lattice_delta(*dgauss_pair(sigma, k), eps) <= delta


def test_discrete_gaussians_are_not_merged_as_continuous_ones():
    """At σ = 1 a discrete Gaussian's δ(ε) exceeds the continuous one's (by up to 20 % on ε ∈ [0, 3]), so the
    continuous figure would not bound it; the accountant composes the discrete PLD (count copies, never a merged
    multiplier)."""
    p, q = dgauss_pair(1.0, 1)
    grid = np.linspace(0.0, 3.0, 301)
    continuous = special.ndtr(0.5 - grid) - np.exp(grid + special.log_ndtr(-0.5 - grid))  # Balle & Wang, Thm. 8
    discrete = np.array([lattice_delta(p, q, e) for e in grid])
    assert (discrete - continuous).max() > 0.01 and (discrete / continuous).max() > 1.2
    composed = epsilon_pld([DiscreteGaussianEvent(3.0, 1, 20)], 1e-5)
    assert composed == pytest.approx(epsilon_pld([DiscreteGaussianEvent(3.0, 1)] * 20, 1e-5), rel=1e-12)
    assert composed == pytest.approx(epsilon_pld([GaussianEvent(3.0 / math.sqrt(20), 1.0)], 1e-5), rel=1e-3)
    # RDP: count·αΔ²/2σ², the continuous Gaussian's curve (CKS20, Prop. 5)
    assert epsilon_rdp([DiscreteGaussianEvent(3.0, 2, 5)], 1e-5) == pytest.approx(
        epsilon_rdp([GaussianEvent(3.0 / (2 * math.sqrt(5)), 1.0)], 1e-5), rel=1e-9
    )


def test_the_truncation_slack_is_negligible_and_bounds_the_tail():
    for sigma in (0.3, 1.0, 10.0, 1e4):
        t = math.ceil(11.6 * sigma)
        y = np.arange(0, int(60 * sigma) + 60, dtype=float)
        w = np.exp(-(y**2) / (2 * sigma**2))
        z = w[0] + 2 * w[1:].sum()
        exact = 2 * w[t + 1 :].sum() / z
        assert exact <= discrete_gaussian_tail(sigma) < 1e-25


def test_discrete_laplace_epsilon_is_exact():
    """DiscreteLaplaceEvent(t, Δ): pure ε = Δ/t; the PLD at δ against the lattice sum; an L1 block of dims > 1 is
    accounted as a generic (Δ/t)-DP step."""
    for scale, shift in ((20.0, 1), (1.0, 1), (3.0, 4)):
        event = DiscreteLaplaceEvent(scale, shift)
        assert event.epsilon == shift / scale
        eps = epsilon_pld([event], 1e-6)
        y = np.arange(-2000, 2001).astype(float)
        p, q = dlap_pmf(scale)(y), dlap_pmf(scale)(y - shift)
        assert lattice_delta(p, q, eps) <= 1e-6 * (1 + 1e-9) and eps <= shift / scale + 1e-4  # + the PLD grid
    assert epsilon_pld([DiscreteLaplaceEvent(2.0, 3, 1, 4)], 1e-6) == pytest.approx(
        epsilon_pld([PureEpsilonEvent(1.5)], 1e-6), rel=1e-12
    )
    assert epsilon_pld([DiscreteLaplaceEvent(20.0, 1, 10)], 1e-6) < 10 / 20  # 10 compositions: below the pure sum


def test_discrete_gaussian_sigma_meets_the_target_and_is_near_the_continuous_one():
    for count in (1, 9, 400):
        sigma = discrete_gaussian_sigma(1.0, 1e-5, 1, count)
        assert epsilon_pld([DiscreteGaussianEvent(sigma, 1, count)], 1e-5) <= 1.0
        assert epsilon_pld([DiscreteGaussianEvent(sigma / 1.002, 1, count)], 1e-5) > 1.0
        assert sigma == pytest.approx(gaussian_sigma(1.0, 1e-5, 1.0) * math.sqrt(count), rel=5e-3)
