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

Exact noise on a lattice. The released weights leave the steward's side, so float Laplace and
Gaussian noise (whose low-order bits reveal the noiseless value) are replaced by exact discrete noise on a lattice
γℤ (`pipelines.privacy.mechanisms.lattice_*_mechanism`): the value is rounded exactly to γℤ, an integer is added,
and the result times γ is released. Exact rounding is monotone and commutes with integer shifts, so a coordinate
that moves by ≤ c moves by ≤ ⌈c/γ⌉ lattice points.
- Log-weights (output_lapl, output_norm): γ = Δ_w/K (K = LOG_WEIGHT_LATTICE_STEPS; exact in floats), so each of
  the N_S released log-weights moves by ≤ K points: N_S compositions of the 1-D discrete mechanism with shift K,
  accounted exactly (DiscreteLaplaceEvent(t, K, N_S) with t = Kρ/Δ_w = K·N_S/ε, pure ε = N_S·K/t = ε;
  DiscreteGaussianEvent(σ_γ, K, N_S), σ_γ the smallest σ whose exact N_S-fold PLD meets (ε, δ), γ_noise = σ_γ·γ).
  The rounding moves a log-weight by ≤ γ/2; K > 1 keeps the shifts a real pair makes (≈ Δ_w/2, tests/audit_cases_
  release.py) from rounding away to 0 or 1 point. The mean shifts are the discrete noise's own: −log E[e^{γY}]
  (`discrete_laplace_log_mgf`, `discrete_gaussian_log_mgf`), so E[e^ζ] = 1 still holds exactly on the lattice.
- Coefficients (beta_noised): γ = 2^k, the largest power of two ≤ Δ_β/(LATTICE_STEPS·⌈√d'⌉); then
  Σ_i ⌈|β_i − β'_i|/γ⌉ < ‖β − β'‖₁/γ + d' ≤ √d'Δ_β/γ + d', so the rounded vector moves by at most
  K₁ = ⌈√d'Δ_β/γ⌉ + d' points in L1: one d'-dimensional discrete Laplace block of scale t = K₁/ε,
  DiscreteLaplaceEvent(t, K₁, 1, dims = d'), ε-DP by the triangle inequality. Its noise is tγ ≤
  b·(1 + 2/LATTICE_STEPS) in the coefficients' units (the d' rounding points of L1 it pays for).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from pipelines.data.layout import Layout
from pipelines.privacy.accountant import discrete_gaussian_sigma, gaussian_sigma
from pipelines.privacy.events import DiscreteGaussianEvent, DiscreteLaplaceEvent, Event
from pipelines.privacy.mechanisms import lattice_gaussian_mechanism, lattice_laplace_mechanism

LATTICE_STEPS = 64  # beta_noised: lattice points per Δ_β/⌈√d'⌉ at least (module docstring)
LOG_WEIGHT_LATTICE_STEPS = 64  # K: output_lapl / output_norm lattice points per Δ_w (module docstring)


def log_weight_unit(delta_w: float) -> float:
    """The log-weights' lattice step Δ_w/K (a power-of-two division: exact in floats)."""
    return delta_w / LOG_WEIGHT_LATTICE_STEPS


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


def beta_noise_plan(
    epsilon: float, norm_bound: float, n_total: int, l2: float, n_coefficients: int
) -> tuple[float, DiscreteLaplaceEvent]:
    """(lattice step γ = 2^k, DiscreteLaplaceEvent(K₁/ε, K₁, 1, dims = d')) of beta_noised at ε (module docstring:
    the L1 bound √d'·Δ_β in lattice points plus one point per coefficient for the rounding)."""
    delta_beta = coefficient_sensitivity(norm_bound, n_total, l2)
    d = int(n_coefficients)
    unit = 2.0 ** math.floor(math.log2(delta_beta / (LATTICE_STEPS * (math.isqrt(d - 1) + 1))))  # ⌈√d'⌉
    ratio = Fraction(delta_beta) / Fraction(unit)
    square = d * ratio * ratio  # (√d'·Δ_β/γ)², exact: its ceiling root is ⌈√d'·Δ_β/γ⌉
    root = math.isqrt(square.numerator // square.denominator)
    while root * root < square:
        root += 1
    l1_points = root + d
    return unit, DiscreteLaplaceEvent(
        l1_points / float(epsilon),
        l1_points,
        1,
        d,
        f"{d} logistic coefficients on the lattice 2^{int(math.log2(unit))} (L1 sensitivity sqrt(d')·Δ_β + d' points)",
    )


def output_laplace_plan(
    epsilon: float, delta_w: float, n_synthetic: int, rho_max: float
) -> tuple[int, float, DiscreteLaplaceEvent]:
    """(N_S, ρ, event) of output_lapl: the most weights N_S ≤ N_G with ρ = N_S Δ_w/ε ≤ `rho_max` (< 1); the event
    is N_S discrete Laplace draws of scale Kρ/Δ_w on the lattice (Δ_w/K)ℤ (shift ≤ K points each; module
    docstring)."""
    if not 0 < rho_max < 1:
        raise ValueError(f"rho_max must lie in (0, 1) (Corollary 1 needs ρ < 1), got {rho_max}")
    n_s = min(n_synthetic, int(math.floor(rho_max * epsilon / delta_w)))
    if n_s < 1:
        raise ValueError(
            f"output_lapl cannot release even one weight: ρ = Δ_w/ε = {delta_w / epsilon:.3g} > "
            f"rho_max = {rho_max}; raise weights.epsilon or weights.l2"
        )
    rho = n_s * delta_w / epsilon
    k = LOG_WEIGHT_LATTICE_STEPS
    return (
        n_s,
        rho,
        DiscreteLaplaceEvent(
            k * n_s / epsilon, k, n_s, 1, f"{n_s} log importance weights on the lattice Δ_w/{k}, Δ_w = {delta_w:.6g}"
        ),
    )


def output_gaussian_plan(
    epsilon: float, delta: float, delta_w: float, n_synthetic: int, gamma_max: float
) -> tuple[int, float, DiscreteGaussianEvent]:
    """(N_S, γ, event) of output_norm: the most weights N_S ≤ N_G whose noise γ = σ_γ·Δ_w/K stays ≤ `gamma_max`, σ_γ
    the smallest σ (lattice points) with ε_PLD(N_S discrete Gaussians of shift K) ≤ ε at δ (module docstring);
    N_S starts from the continuous bound γ = σ₁(ε, δ)·√N_S·Δ_w and shrinks while the discrete σ_γ exceeds it."""
    sigma_unit = gaussian_sigma(epsilon, delta, 1.0)  # noise std per unit of L2 sensitivity
    n_s = min(n_synthetic, int(math.floor((gamma_max / (sigma_unit * delta_w)) ** 2)))
    if n_s < 1:
        raise ValueError(
            f"output_norm cannot release even one weight: γ would be {sigma_unit * delta_w:.3g} > "
            f"gamma_max = {gamma_max}; raise weights.epsilon, weights.l2 or weights.gamma_max"
        )
    k = LOG_WEIGHT_LATTICE_STEPS
    while True:
        sigma_points = discrete_gaussian_sigma(epsilon, delta, k, n_s, start=sigma_unit * math.sqrt(n_s) * k)
        gamma = sigma_points * log_weight_unit(delta_w)
        if gamma <= gamma_max:
            break
        if n_s == 1:
            raise ValueError(
                f"output_norm cannot release even one weight: γ would be {gamma:.3g} > gamma_max = "
                f"{gamma_max}; raise weights.epsilon, weights.l2 or weights.gamma_max"
            )
        n_s = max(1, min(n_s - 1, int(math.floor(n_s * (gamma_max / gamma) ** 2))))
    return (
        n_s,
        gamma,
        DiscreteGaussianEvent(
            sigma_points,
            k,
            n_s,
            f"{n_s} log importance weights of a logistic regression on the lattice Δ_w/{k}, Δ_w = {delta_w:.6g}",
        ),
    )


def discrete_laplace_log_mgf(scale: float, h: float) -> float:
    """log E[e^{hY}] for Y ~ Lap_ℤ(t), P(y) ∝ e^{−|y|/t}, t = `scale` (needs h < 1/t):
    E = (1 − q)/(1 + q)·(1/(1 − q e^h) + q e^{−h}/(1 − q e^{−h})), q = e^{−1/t}. Tends to −log(1 − (ht)²), the
    continuous Laplace's, as the lattice shrinks."""
    a = 1.0 / scale
    if not h < a:
        raise ValueError(f"E[e^(hY)] is infinite for h = {h} >= 1/t = {a}")
    q = math.exp(-a)
    head = math.log(-math.expm1(-a)) - math.log1p(q)
    return head + math.log(1.0 / -math.expm1(h - a) + math.exp(-a - h) / -math.expm1(-a - h))


def discrete_gaussian_log_mgf(sigma: float, h: float) -> float:
    """log E[e^{hY}] for Y ~ N_ℤ(0, σ²): h²σ²/2 + log(Σ_y e^{−(y − hσ²)²/2σ²} / Σ_y e^{−y²/2σ²}); the ratio of the
    two lattice sums differs from 1 by < 4e^{−2π²σ²} (Poisson summation), below 1e-76 from σ = 3, so it is summed
    only for σ < 3."""
    base = h * h * sigma * sigma / 2
    if sigma >= 3:
        return base
    c = h * sigma * sigma
    y = np.arange(math.floor(c - 40 * sigma) - 1, math.ceil(c + 40 * sigma) + 2)
    z = np.arange(-math.ceil(40 * sigma) - 1, math.ceil(40 * sigma) + 2)
    lse = lambda v: float(np.log(np.exp(v - v.max()).sum()) + v.max())  # noqa: E731
    return base + lse(-((y - c) ** 2) / (2 * sigma * sigma)) - lse(-((z * 1.0) ** 2) / (2 * sigma * sigma))


def noised_coefficients(
    beta: np.ndarray, event: DiscreteLaplaceEvent, unit: float, rng: np.random.Generator
) -> tuple[np.ndarray, Event]:
    """beta_noised: β̄ = γ·(round(β/γ) + Lap_ℤ(t)) per coordinate, γ = `unit`, (t, K₁) from `beta_noise_plan` (Ji &
    Elkan's Laplace, exactly sampled on the lattice; module docstring)."""
    return lattice_laplace_mechanism(beta, Fraction(unit), event, rng), event


def laplace_log_weights(
    log_w: np.ndarray, event: DiscreteLaplaceEvent, unit: float, rng: np.random.Generator
) -> np.ndarray:
    """Corollary 1 on the lattice unitℤ (unit = `log_weight_unit`(Δ_w)): log ŵ snapped + unit·Lap_ℤ(t) − log
    E[e^{unit·Y}], so that
    E[e^ζ] = 1 exactly (the continuous shift log(1 − ρ²), ρ = t·unit, is its limit)."""
    noisy = lattice_laplace_mechanism(log_w, Fraction(unit), event, rng)
    return noisy - discrete_laplace_log_mgf(event.scale, unit)


def gaussian_log_weights(
    log_w: np.ndarray, event: DiscreteGaussianEvent, unit: float, rng: np.random.Generator
) -> np.ndarray:
    """Corollary 2 on the lattice unitℤ: log ŵ snapped + unit·N_ℤ(0, σ²) − log E[e^{unit·Y}] (= γ²/2 up to < 1e-76
    for σ ≥ 3, γ = σ·unit), so that E[e^ζ'] = 1."""
    noisy = lattice_gaussian_mechanism(log_w, Fraction(unit), event, rng)
    return noisy - discrete_gaussian_log_mgf(event.sigma, unit)
