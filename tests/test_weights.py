"""DP importance weights (pipelines/weights): the sensitivities and noise laws by formula, the paper's
unbiasedness results (Corollaries 1-2) and bias (Proposition 1) by Monte Carlo, Proposition 2 against the
accountant, empirical privacy audits of output_lapl, output_norm and one relaxed DP-SGD step, and the
post-processing (PSIS k̂, ESS, beta calibration) against known answers."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from pipelines.data.layout import Block, Layout
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.audit import epsilon_lower_bound
from pipelines.privacy.events import DiscreteGaussianEvent, DiscreteLaplaceEvent, NonPrivateEvent, PoissonGaussianEvent
from pipelines.weights import estimators, logistic, postprocess, relaxed_dpsgd

DELTA = 1e-5
N_AUDIT = 200_000


def numeric_layout(d: int) -> Layout:
    return Layout(tuple(Block(f"c{i}", "continuous", i, i + 1) for i in range(d)))


# -- sensitivities and plans (closed forms) ---------------------------------------------------------------


@pytest.mark.slow
def test_plans_follow_the_closed_forms():
    layout = numeric_layout(3)  # R = √(3 + 1) = 2
    assert logistic.feature_norm_bound(layout) == 2.0
    # n = 200, λ = 0.1: Δ_β = R/(nλ) = 0.1 (add/remove-one at the public n; not the replace-one 2R/(nλ)),
    # Δ_w = R Δ_β = 0.2
    assert logistic.coefficient_sensitivity(2.0, 200, 0.1) == pytest.approx(0.1)
    assert logistic.log_weight_sensitivity(2.0, 200, 0.1) == pytest.approx(0.2)
    lapl = estimators.plan("output_lapl", {"rho_max": 0.45}, layout, 100, 100, 2.0, DELTA)
    assert lapl.n_released == 4  # floor(0.45 · 2 / 0.2)
    # 4 log-weights on the lattice Δ_w/64, Δ_w = 0.2, shift ≤ 64 points each: t = 64ρ/Δ_w = 64·0.4/0.2 = 64·N_S/ε
    [event] = lapl.events
    assert isinstance(event, DiscreteLaplaceEvent) and (event.sensitivity, event.count, event.dims) == (64, 4, 1)
    assert event.scale == pytest.approx(128.0) and event.epsilon == pytest.approx(2.0)
    assert lapl.details["rho"] == pytest.approx(0.4) and epsilon_pld(lapl.events, DELTA) <= 2.0
    beta = estimators.plan("beta_noised", {}, layout, 100, 100, 2.0, DELTA)
    # Δ_β = 0.1, d' = 4: lattice 2^-11 (the largest power of 2 ≤ 0.1/(64·⌈√4⌉)), L1 bound ⌈√4·0.1·2^11⌉ + 4 = 414
    # points, t = 414/ε; the noise in the coefficients' units, 207·2^-11, is b = √4·0.1/ε = 0.1 plus 1.1 %
    [event] = beta.events
    assert beta.details["lattice_unit"] == 2.0**-11 and (event.sensitivity, event.count, event.dims) == (414, 1, 4)
    assert event.scale == pytest.approx(207.0) and event.epsilon == pytest.approx(2.0)
    assert 0.1 <= beta.details["laplace_scale"] <= 0.1 * (1 + 2 / logistic.LATTICE_STEPS)
    norm = estimators.plan("output_norm", {"gamma_max": 1.0}, layout, 100, 100, 2.0, DELTA)
    event = norm.events[0]
    assert isinstance(event, DiscreteGaussianEvent) and (event.sensitivity, event.count) == (64, norm.n_released)
    assert norm.details["gamma"] == pytest.approx(event.sigma * 0.2 / 64) and norm.details["gamma"] <= 1.0
    assert 0.99 * 2.0 <= epsilon_pld([event], DELTA) <= 2.0
    mlp = estimators.plan("priv_mlp", {}, layout, 100, 100, 2.0, DELTA)
    q, steps = 64 / 200, math.ceil(3 / (64 / 200))  # the default 3 epochs
    assert (mlp.details["sample_rate"], mlp.details["steps"]) == (q, steps)
    assert epsilon_pld(mlp.events, DELTA) == pytest.approx(2.0, rel=0.01)
    # a million rows a side: 3 epochs would be 3·2,000,000/64 = 93,750 steps; max_steps (5,000) caps T, and the
    # event the ledger gets is the capped one (null: no cap)
    big = estimators.plan("priv_mlp", {}, layout, 10**6, 10**6, 2.0, DELTA)
    assert big.details["steps"] == 5000 and big.events[0].steps == 5000
    assert estimators.plan("priv_mlp", {"max_steps": None}, layout, 10**6, 10**6, 2.0, DELTA).details["steps"] == 93750
    assert estimators.plan("discriminator", {}, layout, 100, 100, 2.0, DELTA).events == []
    assert isinstance(estimators.plan("logreg", {}, layout, 100, 100, 2.0, DELTA).events[0], NonPrivateEvent)
    with pytest.raises(ValueError, match="cannot release even one weight"):
        estimators.plan("output_lapl", {"l2": 1e-3}, layout, 100, 100, 2.0, DELTA)
    with pytest.raises(ValueError, match="unknown weights.estimator"):
        estimators.plan("kde", {}, layout, 100, 100, 2.0, DELTA)


def test_logistic_coefficients_and_log_weights_stay_within_their_sensitivity():
    """Add/remove-one neighbours at the public n (the divisor does not move with the rows): ‖β − β'‖ ≤ Δ_β = R/(nλ)
    and |Δ log ŵ(x)| ≤ Δ_w at every x, whether the rows read number n̂, fewer or more; and the worst pair found
    (logistic.py's docstring) moves β by about half of Δ_β, so the bound is not vacuous and the replace-one
    2R/(nλ) would be four times looser than what a record can do."""
    rng = np.random.default_rng(0)
    d, n_hat, n_syn, l2 = 4, 60, 60, 0.5
    r = logistic.feature_norm_bound(numeric_layout(d))
    n = n_hat + n_syn  # the public divisor
    syn = rng.uniform(size=(n_syn, d))
    for n_read in (n_hat - 10, n_hat, n_hat + 10):  # the rows actually read may differ from n̂
        real = rng.uniform(size=(n_read, d)) ** 2
        beta = logistic.fit_coefficients(real, syn, l2, n)
        for record in (np.zeros(d), np.ones(d), np.eye(d)[0]):
            for other in (np.vstack([real, record]), real[1:]):  # add a record; remove one
                beta2 = logistic.fit_coefficients(other, syn, l2, n)
                assert np.linalg.norm(beta - beta2) <= logistic.coefficient_sensitivity(r, n, l2)
                dw = np.abs(logistic.with_intercept(syn) @ (beta - beta2)).max()
                assert dw <= logistic.log_weight_sensitivity(r, n, l2)
    # 1-D worst case: one real row at 0, synthetic 1 × a = 1 and 10 × a = 0, λ = 3, the canary a = 1 (‖x̃‖ = R)
    real, syn, canary = np.zeros((1, 1)), np.r_[[1.0], np.zeros(10)][:, None], np.ones((1, 1))
    n, l2, r = 12, 3.0, math.sqrt(2)
    moved = np.linalg.norm(
        logistic.fit_coefficients(np.vstack([real, canary]), syn, l2, n) - logistic.fit_coefficients(real, syn, l2, n)
    )
    assert 0.45 < moved / logistic.coefficient_sensitivity(r, n, l2) <= 1.0


def test_logistic_estimators_divide_by_the_public_row_count(monkeypatch):
    """`estimate` fits J with n = n̂ + N_G from the plan (C = 1/(nλ)), not with the number of rows it reads."""
    layout, seen = numeric_layout(2), []
    real_fit = logistic.fit_coefficients

    def spy(real, synthetic, l2, n_total):
        seen.append(n_total)
        return real_fit(real, synthetic, l2, n_total)

    monkeypatch.setattr(logistic, "fit_coefficients", spy)
    rng = np.random.default_rng(1)
    for estimator in ("beta_noised", "output_lapl", "output_norm"):
        p = estimators.plan(estimator, {"l2": 1.0}, layout, 50, 40, 2.0, DELTA)
        estimators.estimate(p, {"l2": 1.0, "noise_seed": 0}, rng.uniform(size=(37, 2)), rng.uniform(size=(40, 2)))
        assert seen[-1] == 50 + 40, f"{estimator} fitted with n = {seen[-1]}, not the public n̂ + N_G = 90"


# -- Corollaries 1-2 (unbiased) and Proposition 1 (biased), by Monte Carlo ---------------------------------


@pytest.mark.slow
def test_output_noise_is_unbiased_on_the_weight_scale():
    """Corollaries 1-2 on a lattice: with the discrete noise's own mean shift E[e^ζ] = 1, on a fine lattice (the
    continuous limit, eq. (8)'s sd) and on a coarse one, where the continuous shifts would be off by > 5 sd."""
    rng = np.random.default_rng(1)
    zeros = np.zeros(1_000_000)
    for rho in (0.2, 0.4):
        unit = 0.01
        m = np.exp(logistic.laplace_log_weights(zeros, DiscreteLaplaceEvent(rho / unit, 1, zeros.size), unit, rng))
        sd = math.sqrt((1 - rho**2) ** 2 * (1 / (1 - 4 * rho**2) - 1 / (1 - rho**2) ** 2))  # eq. (8)
        assert abs(m.mean() - 1) < 5 * sd / math.sqrt(m.size)
        if rho < 0.25:  # the sample sd converges only with a finite 4th moment (4ρ < 1)
            assert m.std() == pytest.approx(sd, rel=0.05)
    coarse = DiscreteLaplaceEvent(1.0, 1, zeros.size)  # ρ = 0.4 on the lattice 0.4ℤ
    m = np.exp(logistic.laplace_log_weights(zeros, coarse, 0.4, rng))
    shift_gap = abs(-logistic.discrete_laplace_log_mgf(1.0, 0.4) - math.log(1 - 0.4**2))  # 0.0127
    assert abs(m.mean() - 1) < 5 * m.std() / math.sqrt(m.size) < shift_gap
    for gamma, points in ((0.3, 100.0), (0.8, 100.0), (0.8, 1.5)):  # σ = γ/unit lattice points
        unit = gamma / points
        m = np.exp(logistic.gaussian_log_weights(zeros, DiscreteGaussianEvent(points, 1, zeros.size), unit, rng))
        sd = math.sqrt(math.exp(gamma**2) - 1)  # log-normal variance
        assert abs(m.mean() - 1) < 5 * sd / math.sqrt(m.size)
        assert m.std() == pytest.approx(sd, rel=0.05)
    # Without the mean shift (plain Laplace), E[e^ζ] = 1/(1 − ρ²) ≠ 1: the shift is what makes it unbiased.
    assert np.exp(rng.laplace(0, 0.4, 1_000_000)).mean() == pytest.approx(1 / (1 - 0.16), rel=0.01)


@pytest.mark.slow
def test_beta_noised_weights_are_biased_as_proposition_1_says():
    """E_ζ[exp(ζᵀx̃)] = Π_j 1/(1 − b² x̃_j²) > 1 for Laplace(b) coefficients (b|x̃_j| < 1); on the lattice γℤ the
    exact factor is the discrete Laplace's E[e^{γx̃_j Y}], within 0.1 % of it at γ = 2^-10."""
    rng = np.random.default_rng(2)
    x, b, unit = np.array([0.9, 0.5, 1.0]), 0.3, 2.0**-10
    event = DiscreteLaplaceEvent(b / unit, 1, 1, 3)
    draws = np.array([logistic.noised_coefficients(np.zeros(3), event, unit, rng)[0] for _ in range(100_000)])
    assert np.all(draws / unit == np.round(draws / unit))  # lattice points
    ratio = np.exp(draws @ x)
    closed = np.prod(1 / (1 - b**2 * x**2))
    lattice = math.exp(sum(logistic.discrete_laplace_log_mgf(b / unit, unit * xj) for xj in x))
    assert closed > 1.15 and lattice == pytest.approx(closed, rel=1e-3)
    assert ratio.mean() == pytest.approx(lattice, rel=0.02)


# -- audits (privacy rule 4, docs/architecture.md) -----------------------------------------------------------------


def audit_output(noisy_fn, event, shift: float, halve: bool) -> float:
    """N_AUDIT runs of one released log-weight on D (value 0) and D' (value Δ_w: the sensitivity attained), on the
    lattice (Δ_w/64)ℤ the estimators use."""
    rng = np.random.default_rng(3)
    if halve:
        event = (
            dataclasses.replace(event, scale=event.scale / 2)
            if isinstance(event, DiscreteLaplaceEvent)
            else dataclasses.replace(event, sigma=event.sigma / 2)
        )
    unit = logistic.log_weight_unit(shift)
    s0 = noisy_fn(np.zeros(N_AUDIT), event, unit, rng)
    s1 = noisy_fn(np.full(N_AUDIT, shift), event, unit, rng)
    return epsilon_lower_bound(s0, s1, DELTA)


@pytest.mark.integration
def test_output_lapl_audit():
    delta_w = 0.1
    n_s, rho, event = logistic.output_laplace_plan(1.0, delta_w, 1, 0.5)
    claim = epsilon_pld([event], DELTA)
    assert (n_s, claim) == (1, pytest.approx(1.0, rel=1e-3))
    assert audit_output(logistic.laplace_log_weights, event, delta_w, halve=False) < claim
    assert audit_output(logistic.laplace_log_weights, event, delta_w, halve=True) > claim


@pytest.mark.integration
def test_output_norm_audit():
    delta_w = 0.1
    n_s, gamma, event = logistic.output_gaussian_plan(1.0, DELTA, delta_w, 1, 10.0)
    claim = epsilon_pld([event], DELTA)
    assert n_s == 1 and claim <= 1.0
    assert audit_output(logistic.gaussian_log_weights, event, delta_w, halve=False) < claim
    assert audit_output(logistic.gaussian_log_weights, event, delta_w, halve=True) > claim


def test_proposition_2_claims_hold_under_the_accountant():
    """Per lot: σ = √(2 log(1.25/δ))/ε gives (ε, δ)-DP (classical Gaussian bound, ε < 1); with sampling
    probability q: ε' ≤ log(1 + q(e^ε − 1)) at δ' = qδ (amplification). The PLD of
    PoissonGaussianEvent(σ, q, 1), which the ledger records, is at least as tight as both."""
    for eps in (0.5, 0.9):
        sigma = math.sqrt(2 * math.log(1.25 / DELTA)) / eps
        assert epsilon_pld([PoissonGaussianEvent(sigma, 1.0, 1)], DELTA) <= eps
        for q in (0.01, 0.1):
            amplified = math.log(1 + q * (math.exp(eps) - 1))
            assert epsilon_pld([PoissonGaussianEvent(sigma, q, 1)], q * DELTA) <= amplified


@pytest.fixture(scope="module")
def relaxed_neighbours():
    torch.manual_seed(0)
    model = relaxed_dpsgd.classifier(3, [4])
    gen = torch.Generator().manual_seed(0)
    real = torch.rand(8, 3, generator=gen)
    synthetic = torch.rand(8, 3, generator=gen)
    from pipelines.privacy.dpsgd import per_example_grads

    def norm(x):  # the canary's unclipped gradient norm
        grads = per_example_grads(model, relaxed_dpsgd._lot_loss, x, x.new_ones(len(x))).materialised()
        return float(sum(g.square().sum() for g in grads.values()))

    canary = max((torch.full((1, 3), s * 1e3) for s in (1.0, -1.0)), key=norm)
    assert norm(canary) > 1e4  # far above C = 1: only clipping keeps the step private
    return model, real, torch.cat([real, canary]), synthetic


def relaxed_audit(neighbours, sigma: float) -> float:
    model, d, d_prime, syn = neighbours
    clip, expected = 1.0, float(len(d) + len(syn))  # q = 1: the public constant N_D + N_G
    outs = []
    for rows, seed in ((d, 10), (d_prime, 11)):
        g = relaxed_dpsgd.relaxed_dpsgd_gradient(
            model, rows, syn, clip, sigma, expected, torch.Generator().manual_seed(seed), draws=N_AUDIT
        )
        outs.append(torch.cat([v.reshape(N_AUDIT, -1) for v in g.values()], 1))
    clean = [
        relaxed_dpsgd.relaxed_dpsgd_gradient(model, rows, syn, clip, 0.0, expected, torch.Generator())
        for rows in (d, d_prime)
    ]
    direction = torch.cat([(clean[1][k] - clean[0][k]).reshape(-1) for k in clean[0]])
    assert float(direction.norm()) * expected == pytest.approx(clip, rel=1e-4)  # one clipped private term
    direction = direction / direction.norm()
    return epsilon_lower_bound((outs[0] @ direction).numpy(), (outs[1] @ direction).numpy(), DELTA)


def test_relaxed_dpsgd_step_audit(relaxed_neighbours):
    """One lot at q = 1 with public synthetic rows in the same sum: a Gaussian mechanism of multiplier σ
    in the private row (Proposition 2 as derived in relaxed_dpsgd's docstring)."""
    sigma = 3.0
    claim = epsilon_pld([PoissonGaussianEvent(sigma, 1.0, 1)], DELTA)
    assert relaxed_audit(relaxed_neighbours, sigma) < claim
    assert relaxed_audit(relaxed_neighbours, sigma / 2) > claim


# -- post-processing against known answers ----------------------------------------------------------------


@pytest.mark.parametrize("k", [0.3, 0.9])
def test_psis_khat_recovers_the_pareto_shape(k):
    """Weights from a generalised Pareto with shape k: k̂ ≈ k (Vehtari et al.'s estimator via arviz)."""
    u = np.random.default_rng(4).uniform(size=20_000)
    w = (u**-k - 1) / k + 1e-3
    smoothed, khat = postprocess.psis(np.log(w))
    assert khat == pytest.approx(k, abs=0.12)
    assert np.exp(smoothed).sum() == pytest.approx(1.0)


def test_psis_on_too_few_weights_reports_an_infinite_khat():
    smoothed, khat = postprocess.psis(np.log([1.0, 3.0]))
    assert khat == math.inf and np.exp(smoothed) == pytest.approx([0.25, 0.75])


def test_ess_tempering_and_mean_one():
    assert postprocess.effective_sample_size(np.ones(50)) == pytest.approx(50)
    assert postprocess.effective_sample_size(np.r_[1.0, np.zeros(49)]) == pytest.approx(1)
    w = postprocess.mean_one(postprocess.temper(np.log([1.0, 4.0]), 0.5))
    assert w == pytest.approx([2 / 3, 4 / 3])  # √1 : √4, mean one
    assert postprocess.mean_one(postprocess.temper(np.log([1.0, 4.0]), 0.0)) == pytest.approx([1, 1])


def test_beta_calibration_recovers_a_known_miscalibration():
    """True log-odds = 2·logit(s) + 0.5 is beta calibration with a = b = 2, c = 0.5."""
    rng = np.random.default_rng(5)
    logit = rng.normal(0, 1.5, 40_000)
    y = rng.uniform(size=logit.size) < 1 / (1 + np.exp(-(2 * logit + 0.5)))
    fit = postprocess.fit_beta_calibration(logit[y], logit[~y])
    assert (fit.a, fit.b, fit.c) == (pytest.approx(2, abs=0.1), pytest.approx(2, abs=0.1), pytest.approx(0.5, abs=0.1))
