"""The exponential mechanism over point sets with the negative energy distance as score (Diesendruck thesis,
§5.3.4, eq. 5.18-5.21, Algorithm 1), sampled by Metropolis-Hastings, with the split-R̂ diagnostic of §5.5.

Mechanism. Output space: sets Ỹ of n points in [0, 1]^d, base measure uniform (Lebesgue on [0, 1]^{n×d}).
Score u(X, Ỹ) = −e(X, Ỹ) (eq. 5.18), sensitivity Δ = `energy_sensitivity(N, d, p)` (eq. 5.10). Density
    π_X(Ỹ) = exp(−ε·e(X, Ỹ)/(2Δ)) / Z_X.
For neighbours X, X' the numerator changes by at most e^{ε/2} and so does Z_X (an integral of numerators),
so π_X(Ỹ)/π_X'(Ỹ) ≤ e^ε for every Ỹ: ε-DP (McSherry & Talwar; eq. 5.4, 5.19). The 2 in 2Δ is needed: the
score does not move monotonically between neighbours (the change of e(·, Ỹ) has either sign).

Sampler (eq. 5.20-5.21). A Gaussian random walk that moves one uniformly chosen point per step, with the
proposal reflected at the faces of [0, 1]^d (t ↦ the point of [0, 1] reached by folding t at 0 and 1). The
reflected Gaussian kernel is symmetric, q(y'|y) = q(y|y'), so the acceptance ratio is exactly eq. 5.21,
exp(ε/(2Δ)·(e_t − e_{t+1})), and the chain's stationary law is π_X on [0, 1]^{n×d}: proposals are never
clipped (clipping would put mass on the faces) and never rejected for leaving the cube. The step size is
adapted towards `target_acceptance` (Robbins-Monro on log s) during burn-in only and then frozen, so after
burn-in each chain is a time-homogeneous MH chain with stationary law π_X.

What is private. The starts (uniform) and every proposal and uniform draw come from the DP noise generator
(OS entropy). A finite chain only approximates π_X, and no mixing bound is proven for it: the ε of π_X holds only
for an exact sample, so the generator records it as `MCMC_EXPONENTIAL` and every release is labelled heuristic
(pipelines/generators/support_points.py). The R̂ diagnostic (§5.5) is evidence of convergence, not a proof. The
energy traces, the adapted step sizes and acceptance rates are functions of the data and are not covered by the
DP guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipelines.stats.energy import EnergyChains
from pipelines.progress import report


def reflect(t: np.ndarray) -> np.ndarray:
    """Fold t into [0, 1] by reflection at 0 and 1 (period 2): a symmetric proposal stays symmetric."""
    t = np.mod(t, 2.0)
    return np.where(t > 1.0, 2.0 - t, t)


@dataclass
class ChainResult:
    """Final states (C, n, d), energy traces after burn-in (C, draws), frozen step sizes and acceptance rates
    after burn-in (C,), and the rank-normalised split-R̂ and bulk ESS of the traces."""

    finals: np.ndarray
    trace: np.ndarray
    step_size: np.ndarray
    acceptance: np.ndarray
    rhat: float
    ess: float


def split_rhat(trace: np.ndarray) -> tuple[float, float]:
    """Rank-normalised split-R̂ and bulk ESS of (chains, draws) traces (Vehtari et al. 2021, via arviz)."""
    import arviz as az

    trace = np.asarray(trace, float)
    if trace.shape[0] < 2 or trace.shape[1] < 4:
        raise ValueError(f"split-R̂ needs at least 2 chains of 4 draws, got {trace.shape}")
    return float(az.rhat(trace, method="rank")), float(az.ess(trace, method="bulk"))


def sample_energy_mechanism(
    data: np.ndarray,
    n_points: int,
    epsilon: float,
    sensitivity: float,
    p: float,
    rng: np.random.Generator,
    chains: int = 4,
    burn_in: int = 5000,
    steps: int = 5000,
    thin: int = 10,
    target_acceptance: float = 0.3,
    initial_step: float = 0.1,
    phase: str = "energy_mh",
    n_ref: int | None = None,
) -> ChainResult:
    """`chains` independent MH chains for π_X (module docstring) from uniform random starts: `burn_in` adapted
    steps, then `steps` steps with the step size frozen, recording e(X, Ỹ) every `thin` steps.
    `rng` must be the DP noise generator. Each step costs O((N + n)·d) per chain (`EnergyChains`); progress
    goes to `pipelines.progress.report` as phases `<phase>:burn_in` and `<phase>:sampling`."""
    if not (epsilon > 0 and sensitivity > 0):
        raise ValueError(f"epsilon and sensitivity must be positive, got {epsilon}, {sensitivity}")
    if n_points < 1 or chains < 1 or burn_in < 0 or steps < thin or thin < 1:
        raise ValueError(
            f"need n_points >= 1, chains >= 1, burn_in >= 0, steps >= thin >= 1; got n_points = "
            f"{n_points}, chains = {chains}, burn_in = {burn_in}, steps = {steps}, thin = {thin}"
        )
    x = np.asarray(data, float)
    dim = x.shape[1]
    beta = epsilon / (2.0 * sensitivity)
    state = EnergyChains(x, rng.random((chains, n_points, dim)), p, n_ref)  # n_ref: public n̂ (EnergyChains)
    log_step = np.full(chains, np.log(initial_step))
    accepted = np.zeros(chains)
    draws: list[np.ndarray] = []
    total = burn_in + steps
    rows = np.arange(chains)
    for t in range(total):
        j = rng.integers(n_points, size=chains)
        y_new = reflect(state.y[rows, j] + np.exp(log_step)[:, None] * rng.standard_normal((chains, dim)))
        delta, cross_new, within_new = state.propose(j, y_new)
        accept = np.log(rng.random(chains)) < -beta * delta  # eq. 5.21
        state.accept(accept, j, y_new, cross_new, within_new)
        if t < burn_in:  # adaptation, burn-in only
            log_step = np.minimum(log_step + (accept - target_acceptance) / (1.0 + t / 100) ** 0.6, 0.0)
            report(f"{phase}:burn_in", t + 1, burn_in)
            continue
        accepted += accept
        if (t - burn_in + 1) % thin == 0:
            draws.append(state.energy)  # exact, from the cached sums
        report(f"{phase}:sampling", t + 1 - burn_in, steps)
    trace = np.stack(draws, axis=1)
    rhat, ess = split_rhat(trace) if chains >= 2 and trace.shape[1] >= 4 else (float("nan"), float("nan"))
    return ChainResult(
        finals=state.y.copy(), trace=trace, step_size=np.exp(log_step), acceptance=accepted / steps, rhat=rhat, ess=ess
    )
