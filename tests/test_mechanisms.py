"""Mechanisms: the noise formulas (goodness-of-fit with fixed seeds) and empirical privacy audits.

Audit design (privacy rule 4, docs/architecture.md): neighbouring data sets D and D' = D + one record at maximal
contribution, N independent runs on each (vectorised: N copies of the query answer get independent
noise), a Clopper-Pearson lower bound on ε from thresholding the outputs. The bound must stay below
the ε the accountant claims, and must exceed it once the noise is halved (the audit has power).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pipelines.marginal.measure import measurement_event
from pipelines.privacy.accountant import discrete_gaussian_sigma, epsilon_pld, gaussian_sigma, laplace_scale
from pipelines.privacy.audit import epsilon_lower_bound
from pipelines.privacy.events import GaussianEvent, LaplaceEvent, PureEpsilonEvent
from pipelines.privacy.mechanisms import (
    discrete_gaussian_mechanism,
    discrete_laplace_mechanism,
    exponential_mechanism,
    gaussian_mechanism,
    laplace_mechanism,
)
from pipelines.privacy.row_count import count_event

P_MIN = 1e-3  # goodness-of-fit tests must not reject at this level (fixed seeds: deterministic)
N_AUDIT = 200_000
DELTA = 1e-5


# -- formulas ----------------------------------------------------------------------------------------


def test_gaussian_noise_has_the_stated_variance_and_shape():
    rng = np.random.default_rng(1)
    value = np.arange(200 * 500, dtype=float).reshape(200, 500)
    noisy, event = gaussian_mechanism(value, l2_sensitivity=2.0, sigma=3.0, rng=rng)
    assert event == GaussianEvent(sigma=3.0, l2_sensitivity=2.0)
    assert noisy.shape == value.shape
    noise = (noisy - value).ravel()
    n = noise.size
    chi2 = (n - 1) * noise.var(ddof=1) / 3.0**2  # ~ χ²(n−1) under the claimed σ
    p_var = 2 * min(stats.chi2.cdf(chi2, n - 1), stats.chi2.sf(chi2, n - 1))
    assert p_var > P_MIN
    assert stats.kstest(noise, stats.norm(0, 3.0).cdf).pvalue > P_MIN


def test_laplace_noise_has_the_stated_scale():
    rng = np.random.default_rng(2)
    value = np.full(100_000, 5.0)
    noisy, event = laplace_mechanism(value, l1_sensitivity=1.0, scale=0.7, rng=rng)
    assert event == LaplaceEvent(scale=0.7, l1_sensitivity=1.0)
    assert event.epsilon == pytest.approx(1 / 0.7)
    noise = noisy - value
    assert stats.kstest(noise, stats.laplace(0, 0.7).cdf).pvalue > P_MIN
    # E|X| = b and sd(|X|) = b for Laplace(0, b): a 5-standard-error check on the scale.
    assert abs(np.abs(noise).mean() - 0.7) < 5 * 0.7 / np.sqrt(noise.size)


@pytest.mark.integration
def test_exponential_mechanism_selection_frequencies_match_closed_form():
    rng = np.random.default_rng(3)
    scores, sensitivity, epsilon = np.array([0.0, 1.0, 2.0, 5.0, -3.0]), 1.5, 1.2
    n = 20_000
    picks = np.array([exponential_mechanism(scores, sensitivity, epsilon, rng)[0] for _ in range(n)])
    weights = np.exp(epsilon * scores / (2 * sensitivity))
    expected = n * weights / weights.sum()
    observed = np.bincount(picks, minlength=scores.size)
    assert stats.chisquare(observed, expected).pvalue > P_MIN
    _, event = exponential_mechanism(scores, sensitivity, epsilon, rng)
    assert event == PureEpsilonEvent(epsilon=1.2, mechanism="exponential")


@pytest.mark.integration
def test_exponential_mechanism_is_stable_for_huge_scores():
    rng = np.random.default_rng(4)
    scores = np.array([1e6, 1e6 - 1.0, 1e6 - 2.0])  # exp(ε·1e6/2) would overflow
    n = 10_000
    picks = np.array([exponential_mechanism(scores, 1.0, 2.0, rng)[0] for _ in range(n)])
    weights = np.exp(scores - scores.max())
    assert stats.chisquare(np.bincount(picks, minlength=3), n * weights / weights.sum()).pvalue > P_MIN


def test_mechanisms_reject_invalid_parameters():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        gaussian_mechanism(np.zeros(3), 1.0, 0.0, rng)
    with pytest.raises(ValueError):
        laplace_mechanism(np.zeros(3), -1.0, 1.0, rng)
    with pytest.raises(ValueError):
        exponential_mechanism(np.array([0.0, np.nan]), 1.0, 1.0, rng)
    with pytest.raises(ValueError):
        exponential_mechanism(np.array([]), 1.0, 1.0, rng)
    with pytest.raises(ValueError):
        exponential_mechanism(np.array([0.0, 1.0]), 0.0, 1.0, rng)


# -- empirical audits --------------------------------------------------------------------------------


def _audit_sum_query(mechanism, sensitivity: float, noise: float, seed: int) -> float:
    """Lower bound on ε for a sum of values in [0, sensitivity]: D sums to 37·Δ, D' adds one record at Δ."""
    rng = np.random.default_rng(seed)
    out_d, _ = mechanism(np.full(N_AUDIT, 37.0 * sensitivity), sensitivity, noise, rng)
    out_dprime, _ = mechanism(np.full(N_AUDIT, 38.0 * sensitivity), sensitivity, noise, rng)
    return epsilon_lower_bound(out_d, out_dprime, DELTA)


def test_gaussian_mechanism_audit():
    sensitivity = 2.0
    sigma = gaussian_sigma(1.0, DELTA, sensitivity)
    claimed = epsilon_pld([GaussianEvent(sigma, sensitivity)], DELTA)
    assert _audit_sum_query(gaussian_mechanism, sensitivity, sigma, seed=10) < claimed
    assert _audit_sum_query(gaussian_mechanism, sensitivity, sigma / 2, seed=11) > claimed


def test_laplace_mechanism_audit():
    sensitivity = 1.0
    scale = laplace_scale(1.0, sensitivity)
    claimed = epsilon_pld([LaplaceEvent(scale, sensitivity)], DELTA)
    assert _audit_sum_query(laplace_mechanism, sensitivity, scale, seed=20) < claimed
    assert _audit_sum_query(laplace_mechanism, sensitivity, scale / 2, seed=21) > claimed


@pytest.mark.integration
def test_discrete_laplace_row_count_audit():
    """The noisy row count's exact discrete Laplace (count_event at ε = 1, Δ₁ = 1, attained by one added row)."""
    event = count_event(1.0)
    claimed = epsilon_pld([event], DELTA)
    assert claimed <= event.epsilon == 1.0
    assert _audit_sum_query(discrete_laplace_mechanism, 1, event.scale, seed=40) < claimed
    assert _audit_sum_query(discrete_laplace_mechanism, 1, event.scale / 2, seed=41) > claimed


@pytest.mark.integration
def test_discrete_gaussian_measurement_audit():
    """A marginal cell's exact discrete Gaussian (`measure`'s mechanism, shift 1 attained) at the σ meeting ε = 1."""
    sigma = discrete_gaussian_sigma(1.0, DELTA, 1)
    claimed = epsilon_pld([measurement_event(sigma)], DELTA)
    assert 0.99 <= claimed <= 1.0
    assert _audit_sum_query(discrete_gaussian_mechanism, 1, sigma, seed=42) < claimed
    assert _audit_sum_query(discrete_gaussian_mechanism, 1, sigma / 2, seed=43) > claimed


@pytest.mark.slow
def test_exponential_mechanism_audit():
    """Worst-case utility of sensitivity 1 over K = 10 candidates: with c = the number of records
    matching a predicate, u(r₀) = −c and u(r) = +c otherwise. D has c = 0 (all scores 0); D' adds
    one matching record (r₀ drops by 1, every other candidate rises by 1). Then P(r₀|D) = 1/K and
    P(r₀|D') = 1/(1 + (K−1)e^ε), a ratio (1 + (K−1)e^ε)/K: log 0.93 at ε = 1, 1.91 at ε = 2.
    Score = [output is r₀]."""
    k, claimed = 10, 1.0
    u_d = np.zeros(k)
    u_dprime = np.ones(k)
    u_dprime[0] = -1.0

    def lower_bound(sampling_epsilon: float, seed: int) -> float:
        rng = np.random.default_rng(seed)
        hit_d = [exponential_mechanism(u_d, 1.0, sampling_epsilon, rng)[0] == 0 for _ in range(N_AUDIT)]
        hit_dprime = [exponential_mechanism(u_dprime, 1.0, sampling_epsilon, rng)[0] == 0 for _ in range(N_AUDIT)]
        return epsilon_lower_bound(np.array(hit_d, float), np.array(hit_dprime, float), DELTA)

    assert epsilon_pld([PureEpsilonEvent(claimed)], DELTA) <= claimed
    assert lower_bound(claimed, seed=30) < claimed
    assert lower_bound(2 * claimed, seed=31) > claimed  # sampling with 2ε while claiming ε
