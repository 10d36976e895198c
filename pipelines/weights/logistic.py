"""Likelihood ratios from an L2-regularised logistic regression, private (beta_noised, output_lapl,
output_norm) and not (logreg). Paper §3.3, Proposition 1, Corollaries 1-2, appendices A.1-A.4.

Classifier. Real rows get y = 1, synthetic rows y = 0; features are the encoded rows with a constant 1
appended (the intercept is a regularised coefficient, as Chaudhuri et al. require). The coefficients
minimise

    J_D(β) = (1/n) Σ_i ℓ(β; x̃_i, y_i) + (λ/2) ‖β‖²,   ℓ = log(1 + exp(−(2y−1) βᵀx̃)),

with n = N_D + N_G a public constant (N_D = n̂, the public training row count, departure 1; the sum runs
over the rows actually read, whose number may differ from n̂) and λ = `l2` from params.
By eq. (1), log ŵ(x) = βᵀx̃ − log(N_D/N_G) (prior odds removed; §3.1 prints the ratio upside down).

Feature norm bound R (public, from the layout): every schema column's block contributes at most 1 to
‖x‖² (a numeric value in [0, 1], a binary 0/1, a one-hot block with a single 1), so with the intercept
‖x̃‖₂ ≤ R = √(columns + 1). Tighter than the paper's √d for one-hot blocks; equal for all-numeric data.

Sensitivity of β under add/remove-one (the ledger's relation; Chaudhuri et al. 2011, Cor. 8 / Lemma 7
adapted). The divisor n is public: n = n̂ + N_G with n̂ the public-or-DP training row count (layout.json
`rows_public`, `EncodedTable.__len__`), never the number of rows actually read, so it is the same constant
for D and D' = D + one record x_*. ℓ is convex and ‖∇_β ℓ‖ = |σ(βᵀx̃) − y|·‖x̃‖ ≤ 1·R. Then
J_{D'}(β) = J_D(β) + g(β), g = ℓ(β; x̃_*, 1)/n, ‖∇g‖ ≤ R/n. Both objectives are λ-strongly convex; at
β = argmin J_D, ∇J_{D'}(β) = ∇g(β), and strong convexity of J_{D'} gives
λ‖β' − β‖² ≤ ⟨∇J_{D'}(β) − ∇J_{D'}(β'), β − β'⟩ = ⟨∇g(β), β − β'⟩ ≤ (R/n)‖β − β'‖, so
‖β(D) − β(D')‖₂ ≤ R/(nλ) = Δ_β (removal is the same pair read backwards). The paper's 2R/(nλ) is the
replace-one bound (one term out, one in); with a divisor that moved with the data (the actual row count)
neither would hold, since every other term's weight 1/n would change too. Not attained by any pair: a
record's step is |σ_* − 1|·R/(nλ + curvature), and driving σ_* → 0 needs synthetic mass at x_* whose
curvature shrinks the step as much; the worst pairs we found move β by ≈ 0.5 Δ_β
(tests/audit_cases_release.py).

Sensitivity of one log-weight (appendix A.4, corrected): |x̃ᵀ(β − β')| ≤ ‖x̃‖₂ ‖β − β'‖₂ ≤ R·Δ_β = R²/(nλ) = Δ_w.
Appendix A.4 drops the ‖x̃‖ ≤ √d factor and states Δ_w = 2√d/(N_D λ); that undercounts by √d.

- beta_noised (Ji & Elkan 2013, Alg. 1): β̄ = β + Laplace(b)^{d'} per coordinate. i.i.d. Laplace noise
  needs the L1 sensitivity, ‖β − β'‖₁ ≤ √d' Δ_β (d' = number of coefficients); the paper's scale
  Δ_β/ε (L2 sensitivity in a Laplace mechanism) is not ε-DP in general. b = √d' Δ_β / ε. Biased
  (Proposition 1: E_ζ[exp(ζᵀx)] ≠ 1).
- output_lapl (Corollary 1): log w*(x_j) = log ŵ(x_j) + ζ_j, ζ_j ~ Laplace(log(1 − ρ²), ρ) for the
  N_S released rows. The vector of N_S log-weights has L1 sensitivity N_S Δ_w, so one Laplace release
  at scale ρ = N_S Δ_w / ε is ε-DP (the paper's "(N_S ε)-DP" with ε per weight). E[e^ζ] = 1 needs
  ρ < 1 (eq. 8), finite variance ρ < 1/2; N_S is capped so that ρ ≤ `rho_max`.
- output_norm (Corollary 2): ζ'_j ~ N(−γ²/2, γ²). The vector has L2 sensitivity √N_S Δ_w, so one
  Gaussian release with γ = σ(ε, δ)·√N_S Δ_w (the accountant's analytic Gaussian calibration, tighter
  than the paper's Blum et al. γ and N_S-fold composition). E[e^ζ'] = 1 for every γ; Var = e^{γ²} − 1
  (the paper's "γ²" is its first-order term). N_S is capped so that γ ≤ `gamma_max`.
"""
from __future__ import annotations

import math

import numpy as np
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from pipelines.data.layout import Layout
from pipelines.privacy.accountant import gaussian_sigma
from pipelines.privacy.events import Event, GaussianEvent, LaplaceEvent
from pipelines.privacy.mechanisms import gaussian_mechanism, laplace_mechanism


def feature_norm_bound(layout: Layout) -> float:
    """R = √(columns + 1): the largest ‖x̃‖₂ of an encoded row with its intercept (module docstring)."""
    return math.sqrt(len(layout.blocks) + 1)


def with_intercept(x: np.ndarray) -> np.ndarray:
    return np.hstack([np.asarray(x, dtype=float), np.ones((len(x), 1))])


def coefficient_sensitivity(norm_bound: float, n_total: int, l2: float) -> float:
    """Δ_β = R/(nλ): L2 sensitivity of the regularised logistic-regression coefficients under add/remove-one, for the
    PUBLIC n = n̂ + N_G (`n_total`; module docstring)."""
    if not (l2 > 0 and n_total > 0 and norm_bound > 0):
        raise ValueError(f"l2, n_total and norm_bound must be positive, got {l2}, {n_total}, {norm_bound}")
    return norm_bound / (n_total * l2)


def log_weight_sensitivity(norm_bound: float, n_total: int, l2: float) -> float:
    """Δ_w = R·Δ_β = R²/(nλ): how far one log-weight βᵀx̃ can move when one private row is added or removed
    (|x̃ᵀ(β − β')| ≤ ‖x̃‖₂‖β − β'‖₂)."""
    return norm_bound * coefficient_sensitivity(norm_bound, n_total, l2)


def fit_coefficients(real: np.ndarray, synthetic: np.ndarray, l2: float, n_total: int) -> np.ndarray:
    """argmin_β J_D(β) (module docstring) on [real; synthetic] with intercept features.

    scikit-learn minimises ½‖β‖² + C Σ ℓ_i; with C = 1/(nλ) that is J_D(β)/λ, the same minimiser;
    lbfgs to a tight tolerance, since the sensitivity bound is about the exact minimiser. `n_total` is the
    PUBLIC n = n̂ + N_G the plan used, not len(real) + len(synthetic): Δ_β = R/(nλ) needs the same divisor
    for neighbouring tables, whatever number of rows was actually read.
    """
    x = with_intercept(np.vstack([real, synthetic]))
    y = np.r_[np.ones(len(real)), np.zeros(len(synthetic))]
    model = LogisticRegression(C=1.0 / (n_total * l2), fit_intercept=False, tol=1e-10, max_iter=10_000)
    with threadpool_limits(limits=1):
        model.fit(x, y)
    return model.coef_[0]


def log_weights(beta: np.ndarray, rows: np.ndarray, n_real: int, n_synthetic: int) -> np.ndarray:
    """log ŵ(x) = βᵀx̃ − log(N_D/N_G) (eq. 1: the classifier's odds times the prior odds N_G/N_D)."""
    return with_intercept(rows) @ beta - math.log(n_real / n_synthetic)


def beta_noise_scale(epsilon: float, norm_bound: float, n_total: int, l2: float,
                     n_coefficients: int) -> tuple[float, float]:
    """(Laplace scale b, L1 sensitivity √d'·Δ_β) of beta_noised at ε."""
    l1 = math.sqrt(n_coefficients) * coefficient_sensitivity(norm_bound, n_total, l2)
    return l1 / epsilon, l1


def output_laplace_plan(epsilon: float, delta_w: float, n_synthetic: int,
                        rho_max: float) -> tuple[int, float, LaplaceEvent]:
    """(N_S, ρ, event) of output_lapl: the most weights N_S ≤ N_G with ρ = N_S Δ_w/ε ≤ `rho_max` (< 1)."""
    if not 0 < rho_max < 1:
        raise ValueError(f"rho_max must lie in (0, 1) (Corollary 1 needs ρ < 1), got {rho_max}")
    n_s = min(n_synthetic, int(math.floor(rho_max * epsilon / delta_w)))
    if n_s < 1:
        raise ValueError(f"output_lapl cannot release even one weight: ρ = Δ_w/ε = {delta_w / epsilon:.3g} > "
                         f"rho_max = {rho_max}; raise weights.epsilon or weights.l2")
    rho = n_s * delta_w / epsilon
    return n_s, rho, LaplaceEvent(scale=rho, l1_sensitivity=n_s * delta_w)


def output_gaussian_plan(epsilon: float, delta: float, delta_w: float, n_synthetic: int,
                         gamma_max: float) -> tuple[int, float, GaussianEvent]:
    """(N_S, γ, event) of output_norm: the most weights with γ = σ₁(ε, δ)·√N_S·Δ_w ≤ `gamma_max`."""
    sigma_unit = gaussian_sigma(epsilon, delta, 1.0)  # noise std per unit of L2 sensitivity
    n_s = min(n_synthetic, int(math.floor((gamma_max / (sigma_unit * delta_w)) ** 2)))
    if n_s < 1:
        raise ValueError(f"output_norm cannot release even one weight: γ would be {sigma_unit * delta_w:.3g} > "
                         f"gamma_max = {gamma_max}; raise weights.epsilon, weights.l2 or weights.gamma_max")
    sensitivity = math.sqrt(n_s) * delta_w
    gamma = sigma_unit * sensitivity
    return n_s, gamma, GaussianEvent(sigma=gamma, l2_sensitivity=sensitivity,
                                     query=f"{n_s} log importance weights of a logistic regression")


def noised_coefficients(beta: np.ndarray, scale: float, l1_sensitivity: float,
                        rng: np.random.Generator) -> tuple[np.ndarray, Event]:
    """beta_noised: β̄ = β + Laplace(0, b) per coordinate (Ji & Elkan; module docstring)."""
    return laplace_mechanism(beta, l1_sensitivity, scale, rng)


def laplace_log_weights(log_w: np.ndarray, event: LaplaceEvent, rng: np.random.Generator) -> np.ndarray:
    """Corollary 1: log ŵ + ζ, ζ ~ Laplace(log(1 − ρ²), ρ), so that E[e^ζ] = 1/(1−ρ²)·(1−ρ²) = 1."""
    rho = event.scale
    noisy, _ = laplace_mechanism(log_w, event.l1_sensitivity, rho, rng)
    return noisy + math.log(1 - rho ** 2)


def gaussian_log_weights(log_w: np.ndarray, event: GaussianEvent, rng: np.random.Generator) -> np.ndarray:
    """Corollary 2: log ŵ + ζ', ζ' ~ N(−γ²/2, γ²), so that E[e^ζ'] = 1."""
    noisy, _ = gaussian_mechanism(log_w, event.l2_sensitivity, event.sigma, rng, event.query)
    return noisy - event.sigma ** 2 / 2
