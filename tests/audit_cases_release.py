"""Audit cases for the one-shot release mechanisms: PEARL's two Gaussian releases, IW-MMD-GAN's
weighted random-feature embedding (iw, sniw), support_points' exponential mechanism (its real MH sampler) and its
bandwidth mechanisms (kde_laplace, kde_exponential, repeat), the three logistic weight estimators
(beta_noised, output_lapl, output_norm), and prepare's noisy training row count (`noisy_count`).
tests/test_privacy_contract.py runs them (interface: tests/audit_harness.py).

Every case runs the owner's own code on a worst-case neighbouring pair D, D' = D + canary; PEARL and the weight
estimators plan once from the public n̂ for both data sets (the stages plan from len(EncodedTable), not from the rows
read), the other owners each data set with its own plan (as `fit` plans from len(X)):
- PEARL and IW-MMD-GAN: `fit` itself (steps 0). The Gaussian mechanism's raw output (the noisy SUMS, before the
  division by the class counts or the weight total) is read by `tapped`, a spy around the release function that
  `fit` calls; a fit that does not go through it (noise removed by calling the exact statistic) fails the case.
- support_points: `sample_energy_mechanism` (the MH sampler `_release` calls, with `_release`'s arguments from
  the plan and params), one chain per run (the chains are independent), and `laplace_bandwidth` /
  `exponential_bandwidth` with `_grid()` on fixed public centres (the bandwidth is post-processing of the
  released points plus its own event: auditing it on given centres audits exactly that event).
- weights: `estimators.plan` and `estimators.estimate`, the functions the weight stage calls.

Half noise: Gaussian/Laplace scales times 0.5; exponential mechanisms and the MH target get ε/0.5 in the exponent.

Loose sensitivity bounds. Some claims rest on bounds that no neighbouring pair attains, so even the exact
mechanism cannot exceed the claim at half noise; those cases say so in `mechanism` and set `power_noise_scale`
(when the harness has that field) to the scale at which the worst case we construct does exceed the claim:
- support_points' exponential mechanism: π ∝ exp(−ε e(X, Ỹ)/2Δ). The factor 2 covers a score change of either
  sign, but a record moves e(·, Ỹ) by −Δ at worst and by ≤ ~Δ/4 the other way (energy.py's derivation), and the
  output space is continuous: on the audited pair the exact loss (quadrature) is 0.26ε at 1×, 0.54ε at 0.5×,
  3.4ε at 0.1× (tests/test_support_points.py::test_exact_mechanism_is_loose_on_the_audited_pair).
- logistic estimators: Δ_β = R/(nλ) (add/remove at the public n), but a record's step is |σ_* − 1|R/(nλ + curvature)
  and pushing σ_* towards 0 brings curvature that shrinks it as much: the worst pair found moves β by ≈ 0.50 Δ_β
  (grid over 1-D row counts and λ; ≤ 0.54 over random 2-D corner tables); power at noise scale W_POWER_SCALE.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from functools import partial
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd
import torch
from audit_harness import AuditCase
from support.ledger import FakeSession

from pipelines.data.layout import Block, Layout
from pipelines.generators import iw_mmd_gan as iw_module
from pipelines.generators import pearl as pearl_module
from pipelines.generators.base import Budget
from pipelines.generators.iw_mmd_gan import IWMMDGAN
from pipelines.generators.mechanisms import embeddings
from pipelines.generators.mechanisms.bandwidth import exponential_bandwidth, laplace_bandwidth
from pipelines.generators.mechanisms.energy_sampler import sample_energy_mechanism
from pipelines.generators.pearl import PEARL
from pipelines.generators.support_points import SupportPoints
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import DiscreteLaplaceEvent, Event, LaplaceEvent, PureEpsilonEvent
from pipelines.privacy.noise import NoiseSource
from pipelines.privacy.row_count import count_event, noisy_count, tail_bound
from pipelines.privacy.row_loss import loss_event, row_loss_test
from pipelines.data.discovery import Step, discover, planned_events
from pipelines.data.schema import OTHER, PENDING_BOUND, Column, PrivacyUnit, Schema
from pipelines.privacy.discovery import bounds_threshold, partition_threshold
from pipelines.weights import estimators, logistic

# Gaussian claims are made at δ = 1e-2 (as tests/audit_cases_dpsgd.py): at δ = 1e-5 the claim is set by tails that
# 2,000 runs cannot resolve, and even an exact Gaussian's lower bound at half noise stays below it. Pure-ε claims
# (Laplace, exponential) hold at δ = 0.
DELTA = 1e-2
Scores = Callable[[bool, float, int], np.ndarray]


def pure(event: Event) -> bool:
    return isinstance(event, (LaplaceEvent, DiscreteLaplaceEvent, PureEpsilonEvent))


def claimed(event: Event) -> float:
    """The ε the ledger's accountant claims for one event: at δ = 0 if pure, else at DELTA."""
    return float(event.epsilon) if pure(event) else epsilon_pld([event], DELTA)


@contextlib.contextmanager
def tapped(module: Any, name: str) -> Iterator[list]:
    """Within the block, `module.name` (a release function a fit calls) records each return value it gives."""
    real, outputs = getattr(module, name), []

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        outputs.append(out)
        return out

    setattr(module, name, spy)
    try:
        yield outputs
    finally:
        setattr(module, name, real)


@contextlib.contextmanager
def memoised(module: Any, name: str) -> Iterator[None]:
    """Within the block, `module.name` (a deterministic function of its array arguments, e.g. an exact model fit)
    returns its cached value for arguments it has seen: the audit's runs differ only in their noise."""
    real, cache = getattr(module, name), {}

    def memo(*args: Any) -> Any:
        key = tuple(a.tobytes() + str(a.shape).encode() if isinstance(a, np.ndarray) else a for a in args)
        if key not in cache:
            cache[key] = real(*args)
        return np.array(cache[key], copy=True)

    setattr(module, name, memo)
    try:
        yield
    finally:
        setattr(module, name, real)


def case(
    owner: str, config: str, index: int, mechanism: str, event: Event, scores: Scores, power_noise_scale: float = 0.5
) -> AuditCase:
    """An AuditCase claiming `event`'s ε."""
    return AuditCase(
        owner,
        config,
        index,
        mechanism,
        partial(claimed, event),
        0.0 if pure(event) else DELTA,
        scores,
        power_noise_scale,
    )


def projection(direction: np.ndarray) -> Callable[[np.ndarray], float]:
    """The likelihood-ratio statistic of a Gaussian shift along `direction`: ⟨output, direction/‖direction‖⟩."""
    unit = np.asarray(direction, float).ravel() / np.linalg.norm(direction)
    return lambda output: float(np.asarray(output, float).ravel() @ unit)


# -- PEARL ---------------------------------------------------------------------------------------------------------
# One numeric feature a (diameter D = 1) and a binary target.
PEARL_LAYOUT = Layout((Block("a", "continuous", 0, 1), Block("y", "binary", 1, 2, is_target=True)))
# every owner here runs its method alone (calibration share 0): the calibration is audited by
# tests/audit_cases_calibration.py
PEARL_PARAMS = {
    "frequencies": 4,
    "steps": 0,
    "batch_size": 8,
    "hidden": [4, 4],
    "latent_dim": 2,
    "epsilon": 2.5,
    "calibration": {"share": 0.0},
}
PEARL_N = 50  # the public n̂; the distance case needs 2D/n̂ above the floor MIN_LENGTH_SCALE·D = 0.01


def pearl_plan(n: int = PEARL_N) -> list[Event]:
    return list(PEARL(PEARL_LAYOUT, PEARL_PARAMS).plan(n, Budget(PEARL_PARAMS["epsilon"], DELTA)).events)


def pearl_scores(rows: np.ndarray, canary: np.ndarray, read: Callable[[PEARL, list], float]) -> Scores:
    """Fit PEARL (steps 0) on `rows` (D) or `rows` + `canary` (D') with the planned multipliers × noise_scale,
    noise_seed = run; `read(model, tapped embedding releases)` gives the score. Both data sets are planned from
    the public n̂ = PEARL_N (as the train stage plans from len(EncodedTable)): D' has n̂ + 1 rows."""

    def scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
        data = np.vstack([rows, canary]) if neighbour else rows
        model = PEARL(PEARL_LAYOUT, PEARL_PARAMS)
        plan = model.plan(PEARL_N, Budget(PEARL_PARAMS["epsilon"], DELTA))
        model.privacy = dataclasses.replace(
            plan,
            distance_noise_multiplier=plan.distance_noise_multiplier * noise_scale,
            embedding_noise_multiplier=plan.embedding_noise_multiplier * noise_scale,
        )
        out = np.empty(n_runs)
        with tapped(pearl_module, "release_embedding") as releases:
            for run in range(n_runs):
                model.params = model.params.model_copy(update={"noise_seed": 1_000_003 * int(neighbour) + run})
                model.fit(data, FakeSession())
                assert len(releases) == run + 1, "PEARL's fit did not release its embedding through release_embedding"
                out[run] = read(model, releases)
        return out

    return scores


def pearl_cases() -> list[AuditCase]:
    distance, embedding = pearl_plan()
    # Mean pairwise distance over the n̂ rows of smallest sha256 priority (embeddings.capped_rows): D = n̂ rows at
    # a = 1, D' adds a = 0 (same class), whose priority is below a = 1's, so it enters the selection and one a = 1
    # row leaves (the N ≥ n̂ swap): T goes from 0 to exactly (n̂ − 1)D, the planned Δ₂. Score: the released ℓ̂ (T̃
    # over the public pair count, clamped to [0.01, 1]; the clamp at 1 lies far above the mean in noise sd, so the
    # upper-tail tests keep their power; without noise D' gives 2/n̂, above the floor, and D the floor).
    priority = embeddings.row_priorities(torch.tensor([[0.0], [1.0]]))
    assert priority[0] < priority[1], "the distance case needs the canary a = 0 to rank before the rows a = 1"
    ones_a = np.tile(np.array([[1.0, 0.0]], np.float32), (PEARL_N, 1))
    dist_scores = pearl_scores(ones_a, np.array([[0.0, 0.0]], np.float32), lambda model, _: model.length_scale)
    # Embedding: every record (and the canary) is a = 0, class 1, so the pair sum is 0 on both data sets (ℓ̂ carries
    # no trace of the canary beyond the public n) and cos(ω·0) = 1, sin = 0 whatever the noisy frequencies:
    # the canary adds v = e₁ ⊗ [√k, 1…1, 0…0], ‖v‖ = √(2k), the planned Δ₂. Score: the noisy sums along v.
    k = PEARL_PARAMS["frequencies"]
    v = np.zeros((2, 2 * k + 1))
    v[1, : k + 1] = [math.sqrt(k)] + [1.0] * k
    along = projection(v)
    ones = np.array([[0.0, 1.0]], np.float32)
    emb_scores = pearl_scores(np.repeat(ones, PEARL_N, 0), ones, lambda _, releases: along(releases[-1][0]))
    return [
        case("pearl", "default", 0, "PEARL mean pairwise distance (Gaussian, Δ₂ = (n̂ − 1)D)", distance, dist_scores),
        case(
            "pearl",
            "default",
            1,
            "PEARL class-conditional CF embedding sums (Gaussian, Δ₂ = √(2k))",
            embedding,
            emb_scores,
        ),
    ]


# -- IW-MMD-GAN ----------------------------------------------------------------------------------------------------
# One numeric column and a binary group rebalanced 0.8/0.2 → 0.5/0.5: w ∈ {0.625, 2.5}, w_max = 2.5.
IW_LAYOUT = Layout((Block("a", "continuous", 0, 1), Block("g", "binary", 1, 2)))
IW_PARAMS = {
    "frequencies": 4,
    "steps": 0,
    "batch_size": 8,
    "hidden": [4],
    "code_dim": 2,
    "latent_dim": 2,
    "weights": {"rebalance": {"column": "g", "observed": [0.8, 0.2], "target": [0.5, 0.5]}},
    "epsilon": 1.6,
    "calibration": {"share": 0.0},
}
IW_N = 50


def iw_params(estimator: str) -> dict:
    return {**IW_PARAMS, "estimator": estimator}


def iw_plan(estimator: str) -> list[Event]:
    return list(IWMMDGAN(IW_LAYOUT, iw_params(estimator)).plan(IW_N, Budget(IW_PARAMS["epsilon"], DELTA)).events)


def iw_scores(estimator: str) -> Scores:
    """D: n rows (a = 0.5, g = 0); D' adds the canary a = 0, g = 1 (weight w_max): the sum moves by w_max·v(0),
    v(0) = [√k (sniw), 1…1, 0…0] whatever the frequencies, ‖·‖ = the planned Δ₂. Score: the noisy sums along it."""
    k = IW_PARAMS["frequencies"]
    sniw = estimator == "sniw"
    along = projection(np.r_[[math.sqrt(k)] if sniw else [], np.ones(k), np.zeros(k)])
    rows = np.tile(np.array([[0.5, 0.0]], np.float32), (IW_N, 1))
    canary = np.array([[0.0, 1.0]], np.float32)

    def scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
        data = np.vstack([rows, canary]) if neighbour else rows
        model = IWMMDGAN(IW_LAYOUT, iw_params(estimator))
        plan = model.plan(len(data), Budget(IW_PARAMS["epsilon"], DELTA))
        model.privacy = dataclasses.replace(plan, noise_multiplier=plan.noise_multiplier * noise_scale)
        out = np.empty(n_runs)
        with tapped(iw_module, "release_weighted_embedding") as releases:
            for run in range(n_runs):
                model.params = model.params.model_copy(update={"noise_seed": 1_000_003 * int(neighbour) + run})
                model.fit(data, FakeSession())
                assert len(releases) == run + 1, "IW-MMD-GAN's fit did not go through release_weighted_embedding"
                out[run] = along(releases[-1][0])
        return out

    return scores


def iw_cases() -> list[AuditCase]:
    return [
        case(
            "iw_mmd_gan",
            est,
            0,
            f"IW-MMD-GAN {est} weighted RFF embedding sums (Gaussian, Δ₂ = w_max·√{'2k' if est == 'sniw' else 'k'})",
            iw_plan(est)[0],
            iw_scores(est),
        )
        for est in ("iw", "sniw")
    ]


# -- support_points ------------------------------------------------------------------------------------------------
# One numeric column; one point per set; a two-value bandwidth grid [0.05, 1] (so the bandwidth mechanisms' worst
# case is a flip between the bounds). Budgets chosen so that every event claims ε = 1.
SP_LAYOUT = Layout((Block("a", "continuous", 0, 1),))
SP_BASE = {
    "n_points": 1,
    "norm": 1.0,
    "chains": 4,
    "burn_in": 300,
    "steps": 300,
    "thin": 10,
    "bandwidth_bounds": [0.05, 1.0],
    "bandwidth_grid": 2,
    "noise_seed": 0,
    "calibration": {"share": 0.0},
}
SP_CONFIGS: dict[str, dict] = {
    "default": {"epsilon": 1.0},  # kde_public
    "kde_laplace": {"epsilon": 4.0, "expansion": "kde_laplace", "bandwidth_share": 0.5},
    "kde_exponential": {"epsilon": 4.0, "expansion": "kde_exponential", "bandwidth_share": 0.5},
    "repeat": {"epsilon": 2.0, "expansion": "repeat", "repeats": 2},
}
SP_N = 1
SP_POWER_SCALE = 0.1


def sp_model(config: str, n: int = SP_N) -> SupportPoints:
    model = SupportPoints(SP_LAYOUT, {**SP_BASE, **SP_CONFIGS[config]})
    model.plan(n, Budget(model.params.epsilon, DELTA))
    return model


def sp_plan(config: str) -> list[Event]:
    return list(sp_model(config).privacy.events)


def sp_points_scores(config: str) -> Scores:
    """The exponential mechanism over one-point sets through the real MH sampler, with the arguments `_release`
    passes (ε per set, the planned Δ of eq. 5.10 for each data set's N, p, burn-in, steps, adaptation): one chain
    per run (the chains are independent and identically distributed). D = {1}, D' = {1, 0}, n = 1, d = 1, p = 1
    (the tightest 1-D pair found by quadrature: exact loss 0.26ε at 1×, 0.54ε at 0.5×, 3.4ε at 0.1×;
    tests/test_support_points.py). Score: the released point. The MH chain only approximates π_X (its final
    states match π_X in tests/test_support_points.py's KS test); a lower bound on a chain's output is evidence
    about the code, not a certificate of the exact mechanism."""
    rows, canary = np.ones((SP_N, 1)), np.zeros((1, 1))

    def scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
        data = np.vstack([rows, canary]) if neighbour else rows
        model = sp_model(config, len(data))
        p, plan = model.params, model.privacy
        rng = NoiseSource(noise_seed=1_000_003 * int(neighbour) + int(1 / noise_scale)).numpy("audit:support_points")
        with np.errstate(invalid="ignore"):  # split-R̂ of chains that never moved: 0/0, not used here
            result = sample_energy_mechanism(
                data,
                int(p.n_points),
                plan.epsilon_per_set / noise_scale,
                plan.sensitivity,
                plan.norm,
                rng,
                chains=n_runs,
                burn_in=int(p.burn_in),
                steps=int(p.steps),
                thin=int(p.thin),
                target_acceptance=float(p.target_acceptance),
                phase="audit:support_points",
            )
        return result.finals[:, 0, 0]

    return scores


def sp_bandwidth_scores(config: str, n_rows: int) -> Scores:
    """The bandwidth mechanism `_release` calls (`laplace_bandwidth` or `exponential_bandwidth`, grid `_grid()`,
    ε_bandwidth from the plan), on the public centre Ỹ = {0}. D = `n_rows` rows at 0 (each favours σ_lo by
    log(σ_hi/σ_lo)); the canary at 1 favours σ_hi by ~R (98 % of likelihood_range). Laplace: 10 rows, the bounded
    MLE flips from σ_lo to σ_hi, Δ₁ attained. Exponential: 67 rows put D's log-odds of σ_hi at −ε (ε = 2 claimed,
    the canary moves them by 0.98ε). Score: σ."""
    mechanism = laplace_bandwidth if config == "kde_laplace" else exponential_bandwidth
    rows, canary, centres = np.zeros((n_rows, 1)), np.ones((1, 1)), np.zeros((1, 1))

    def scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
        data = np.vstack([rows, canary]) if neighbour else rows
        model = sp_model(config, len(data))
        grid, eps = model._grid(), model.privacy.epsilon_bandwidth / noise_scale
        return np.array(
            [
                mechanism(
                    data,
                    centres,
                    grid,
                    eps,
                    NoiseSource(noise_seed=1_000_003 * int(neighbour) + run).numpy("audit:bandwidth"),
                )[0]
                for run in range(n_runs)
            ]
        )

    return scores


def sp_cases() -> list[AuditCase]:
    loose = (
        f"support_points exponential mechanism, real MH sampler, 1-D (loose: score range ≈ 1.25Δ of the 2Δ "
        f"assumed; power checked at noise scale {SP_POWER_SCALE})"
    )
    out = []
    for config in SP_CONFIGS:
        planned = sp_plan(config)
        for index, event in enumerate(planned):
            if isinstance(event, PureEpsilonEvent) and index < (2 if config == "repeat" else 1):
                out.append(
                    case("support_points", config, index, loose, event, sp_points_scores(config), SP_POWER_SCALE)
                )
    _, lap = sp_plan("kde_laplace")
    out.append(
        case(
            "support_points",
            "kde_laplace",
            1,
            "support_points bandwidth: bounded MLE + Laplace",
            lap,
            sp_bandwidth_scores("kde_laplace", 10),
        )
    )
    _, expo = sp_plan("kde_exponential")
    out.append(
        case(
            "support_points",
            "kde_exponential",
            1,
            "support_points bandwidth: exponential mechanism",
            expo,
            sp_bandwidth_scores("kde_exponential", 67),
        )
    )
    return out


# -- logistic weight estimators ------------------------------------------------------------------------------------
# One numeric column (R = √2). Public n̂ = 1 real row, N_G = 11 synthetic rows, n = 12, λ = 3: Δ_β = R/(nλ), the
# public divisor the same on D and D' (the plan is made once from n̂, as the weight stage makes it from
# len(EncodedTable)).
# rho_max / gamma_max release N_S = 1 weight (the corner row), so each output-noised release is one coordinate.
W_LAYOUT = Layout((Block("a", "continuous", 0, 1),))
W_SETTINGS = {"l2": 3.0, "rho_max": 0.08, "gamma_max": 0.12}  # N_S = floor(0.08/Δ_w) = 1; σ₁Δ_w = 0.104 ≤ 0.12
W_EPSILON = {"beta_noised": 1.0, "output_lapl": 1.0, "output_norm": 1.0}
W_N_HAT, W_N_SYNTHETIC = 1, 11
W_POWER_SCALE = 0.25


def w_plan(estimator: str) -> estimators.WeightPlan:
    return estimators.plan(
        estimator, W_SETTINGS, W_LAYOUT, W_N_HAT, W_N_SYNTHETIC, W_EPSILON.get(estimator, 1.0), DELTA
    )


def w_scores(estimator: str) -> Scores:
    """`estimators.estimate` (one plan from the public n̂ for both data sets) on D = one real row at a = 0 and
    D' = D + the canary a = 1 (x̃ = (1, 1), ‖x̃‖ = R); synthetic rows 1 × a = 1 (the released row) then 10 × a = 0.
    The worst 1-D pair found (grid over row counts and λ): ‖β(D') − β(D)‖ ≈ 0.50 Δ_β along x̃ (logistic.py: driving
    the canary's |σ − y| towards 1 takes synthetic mass at a = 1 whose curvature shrinks the step as much; here
    σ(x̃ᵀβ(D)) ≈ 0.46). Score: beta_noised, the Laplace likelihood-ratio statistic of the released coefficients
    β̄ = (logit(1) − logit(0), logit(0)) read from the released logit: Σ_j clip(s_j(β̄_j − β_j), 0, |m_j|),
    m = β(D') − β(D) (exact fits), s = sign(m), plus 1e-6 × the unclipped sum to break the ties at the clip
    ends; output_lapl / output_norm, the released log-weight of the corner row plus the public prior odds
    log(n̂/N_G) that estimate subtracts (one coordinate: monotone in the likelihood ratio)."""
    real, canary = np.zeros((W_N_HAT, 1)), np.ones((1, 1))
    synthetic = np.r_[[1.0], np.zeros(W_N_SYNTHETIC - 1)][:, None]
    planned = w_plan(estimator)
    assert estimator == "beta_noised" or planned.n_released == 1
    l2 = float(W_SETTINGS["l2"])
    n_total = W_N_HAT + W_N_SYNTHETIC
    exact = logistic.fit_coefficients(real, synthetic, l2, n_total)
    shift = logistic.fit_coefficients(np.vstack([real, canary]), synthetic, l2, n_total) - exact
    sign, corners = np.sign(shift), np.array([[1.0], [0.0]])

    def likelihood_ratio(logit: Callable[[np.ndarray], np.ndarray]) -> float:
        at = logit(corners)
        moved = sign * (np.array([at[0] - at[1], at[1]]) - exact)
        return float(np.clip(moved, 0.0, np.abs(shift)).sum() + 1e-6 * moved.sum())

    def scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
        data = np.vstack([real, canary]) if neighbour else real
        event = planned.events[0]
        event = (
            dataclasses.replace(event, scale=event.scale * noise_scale)
            if isinstance(event, (LaplaceEvent, DiscreteLaplaceEvent))
            else dataclasses.replace(event, sigma=event.sigma * noise_scale)
        )
        plan = dataclasses.replace(planned, events=[event])
        prior = math.log(plan.n_real / plan.n_synthetic)
        out = np.empty(n_runs)
        with memoised(logistic, "fit_coefficients"):
            for run in range(n_runs):
                settings = {**W_SETTINGS, "noise_seed": 1_000_003 * int(neighbour) + run}
                log_w, logit = estimators.estimate(plan, settings, data, synthetic)
                out[run] = likelihood_ratio(logit) if estimator == "beta_noised" else float(np.sum(log_w + prior))
        return out

    return scores


def w_cases() -> list[AuditCase]:
    return [
        case(
            f"weights:{est}",
            "default",
            0,
            f"weights {est} (Δ_β = R/(nλ), attained ≈ 0.5 by the worst pair; "
            f"power checked at noise scale {W_POWER_SCALE})",
            w_plan(est).events[0],
            w_scores(est),
            W_POWER_SCALE,
        )
        for est in ("beta_noised", "output_lapl", "output_norm")
    ]


# The noisy training row count prepare releases (n̂, or the documented count's check): `noisy_count`, prepare's own
# call, at ε = 1 (at the default 0.05 no 2,000 runs resolve e^0.05 from 1). D has 40 training rows, D' one more (a
# record lands in the training set or nowhere: Δ₁ = 1); the output is the released integer.
COUNT_EPSILON = 1.0


def count_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    rows = 40 + int(neighbour)
    return np.array(
        [
            noisy_count(
                FakeSession(),
                COUNT_EPSILON / noise_scale,
                lambda: rows,
                NoiseSource(None, 7_000_003 * int(neighbour) + run),
            )
            for run in range(n_runs)
        ],
        dtype=float,
    )


# The DP row-loss test's stop bit (`row_loss_test`, prepare's own call), at ε = 1 with f = 0 so that q = L: D loses
# ⌊t⌋ − 1 of its rows (stop iff Z ≥ 2) and D' one more lost row (stop iff Z ≥ 1), the pair whose stop rates differ
# by exactly e^ε; the margin t follows the noise actually used, so at half the noise the pair moves with it.
LOSS_EPSILON = 1.0


def loss_scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    epsilon = LOSS_EPSILON / noise_scale
    lost, rows = math.floor(tail_bound(epsilon)) - 1 + int(neighbour), 40 + int(neighbour)
    return np.array(
        [
            row_loss_test(
                FakeSession(), epsilon, lambda: (lost, rows), 0.0, NoiseSource(None, 9_000_011 * int(neighbour) + run)
            ).stop
            for run in range(n_runs)
        ],
        dtype=float,
    )


# Private domain discovery (`pipelines.data.discovery.discover`, the discover stage's own call) at ε = 1, one row
# per unit. Categories: D holds value "a" in τ − 1 rows, D' in τ (τ = `partition_threshold` at the ε used, so at half
# the noise the pair moves with it); "a" stays unreleased with probabilities 1/(1 + p) and p/(1 + p), a ratio of
# exactly e^ε. Bounds: 400 rows at 1.5 (a bin far above the threshold τ_b) and τ_b − 1 rows at 100 (the bin
# [64, 128)) in D, τ_b in D'; the output is whether the discovered upper bound is 128, the same ratio on that bin.
# Step: 2000 rows at 50 (coarsest grid 25) and 20 rows at 12.3 (grid 0.1; the same decade) in D, 21 in D'; the
# output is whether the step is 25 at every magnitude, i.e. whether that band's 0.1 bin's noisy count stays below the
# limit (1 % of the band's noisy total, about 20.2, at both noise scales; the empty-cell threshold is 13 at ε = 1):
# below it with probabilities 1/(1 + p) and p/(1 + p), a ratio of e^ε, as the categories' pair.
# Rounding (a documented step of 0.1, the histogram measured for rounding alone): 2000 rows at 50 and 20 rows at 12.5
# (coarsest grid 0.5) in D, 21 in D'; the output is whether the band [10, 100)'s rounding lists the grid 0.5, i.e.
# whether its bin's noisy count reaches the same limit: Z ≥ 1 against Z ≥ 0, a ratio of e^ε.
DISCOVERY_EPSILON, DISCOVERY_DELTA = 1.0, 1e-6


def _discovery_schema(key: str, max_rows: int = 1) -> Schema:
    column = (
        Column("c", "categorical", categories=(OTHER,), other=OTHER)
        if key == "categories"
        else Column("c", "continuous", lower=-PENDING_BOUND, upper=PENDING_BOUND, step=((0.0, 0.1),))
        if key == "rounding"
        else Column("c", "continuous", lower=-PENDING_BOUND, upper=PENDING_BOUND)
    )
    unit = PrivacyUnit("id", max_rows) if max_rows > 1 else None
    return Schema("audit", "", (column,), discovered=(("c", key),), pending=True, unit=unit)


# The same mechanisms at a unit of k = 2 rows (`discover` with the units' pseudonyms): the unit U holds two rows.
# Categories: U's rows are "a" and "b", each held by τ − 1 units in D (τ at k = 2); the output is whether neither is
# released, with probabilities (1/(1 + p))² and (p/(1 + p))², p = e^(−ε/2): a ratio of e^ε. Bounds: D has τ_b − 2 rows
# at 100, D' U's two more; the bin [64, 128) passes with probabilities p²/(1 + p) and 1/(1 + p), a ratio of e^ε.
# Step: 4000 rows at 50 (two per unit) and 41 at 12.3 (one per unit) in D, D' U's two more at 12.3; the output is
# whether the step is 25 at every magnitude, i.e. whether that decade's 0.1 bin stays below the limit (1 % of its
# noisy total, about 40.4, at both noise scales): Z ≤ −1 against Z ≤ −3, probabilities p/(1 + p) and p³/(1 + p),
# a ratio of p^(−2) = e^ε. Rounding (documented step 0.1, the same histogram): the same rows at 12.5 instead of 12.3;
# the output is whether the band [10, 100)'s rounding leaves out the grid 0.5, the same two probabilities.
UNIT_ROWS = 2


def unit_discovery_scores(key: str, neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    epsilon, delta = DISCOVERY_EPSILON / noise_scale, DISCOVERY_DELTA if key == "categories" else 0.0
    if key == "categories":
        n = partition_threshold(epsilon, delta, UNIT_ROWS) - 1
        values: list[Any] = ["a"] * n + ["b"] * n
        units = [f"a{i}" for i in range(n)] + [f"b{i}" for i in range(n)]
    elif key in ("step", "rounding"):
        values = [50.0] * 4000 + [12.3 if key == "step" else 12.5] * 41
        units = [f"s{i // 2}" for i in range(4000)] + [f"u{i}" for i in range(41)]
    else:
        n = bounds_threshold(epsilon, UNIT_ROWS) - 2
        values = [1.5] * 800 + [100.0] * n
        units = [f"s{i // 2}" for i in range(800)] + [f"u{i}" for i in range(n)]
    if neighbour:
        added = {"categories": ["a", "b"], "step": [12.3, 12.3], "rounding": [12.5, 12.5]}.get(key, [100.0, 100.0])
        values, units = values + added, units + ["U", "U"]
    frame = pd.DataFrame({"c": values})
    schema, plan = _discovery_schema(key, UNIT_ROWS), [Step("c", (key,), epsilon, delta)]
    out = []
    for run in range(n_runs):
        streams = NoiseSource(None, 13_000_033 * int(neighbour) + run).streams(private=True, seed=0)
        found = discover(frame, np.asarray(units), schema, plan, streams.numpy)[0]["columns"]["c"]
        out.append(
            not {"a", "b"} & set(found["categories"])
            if key == "categories"
            else found["step"] == [[0.0, 25.0]]
            if key == "step"
            else 0.5 not in dict(dict(found["rounding"]).get(10.0, []))
            if key == "rounding"
            else found["upper"] == 128.0
        )
    return np.asarray(out, dtype=float)


def discovery_scores(key: str, neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
    epsilon, delta = DISCOVERY_EPSILON / noise_scale, DISCOVERY_DELTA if key == "categories" else 0.0
    if key == "categories":
        values: list[Any] = ["a"] * (partition_threshold(epsilon, delta) - 1 + int(neighbour))
    elif key == "step":
        values = [50.0] * 2000 + [12.3] * (20 + int(neighbour))
    elif key == "rounding":
        values = [50.0] * 2000 + [12.5] * (20 + int(neighbour))
    else:
        values = [1.5] * 400 + [100.0] * (bounds_threshold(epsilon) - 1 + int(neighbour))
    frame = pd.DataFrame({"c": values})
    schema, plan = _discovery_schema(key), [Step("c", (key,), epsilon, delta)]
    out = []
    for run in range(n_runs):
        streams = NoiseSource(None, 11_000_027 * int(neighbour) + run).streams(private=True, seed=0)
        found = discover(frame, None, schema, plan, streams.numpy)[0]["columns"]["c"]
        out.append(
            "a" in found["categories"]
            if key == "categories"
            else found["step"] == [[0.0, 25.0]]
            if key == "step"
            else 0.5 in dict(dict(found["rounding"]).get(10.0, []))
            if key == "rounding"
            else found["upper"] == 128.0
        )
    return np.asarray(out, dtype=float)


CASES: list[AuditCase] = [
    *pearl_cases(),
    *iw_cases(),
    *sp_cases(),
    *w_cases(),
    AuditCase(
        "prepare:row_count",
        "epsilon_1",
        0,
        "training row count (discrete Laplace, Δ = 1)",
        partial(float, COUNT_EPSILON),
        0.0,
        count_scores,
    ),
    AuditCase(
        "prepare:row_loss",
        "epsilon_1",
        0,
        "row-loss stop bit (discrete Laplace, Δ = 1)",
        partial(float, LOSS_EPSILON),
        0.0,
        loss_scores,
    ),
    AuditCase(
        "discover:categories",
        "epsilon_1",
        0,
        "partition selection (discrete Laplace above a threshold, ε part)",
        partial(float, DISCOVERY_EPSILON),
        DISCOVERY_DELTA,
        partial(discovery_scores, "categories"),
    ),
    AuditCase(
        "discover:bounds",
        "epsilon_1",
        0,
        "approximate bounds (discrete Laplace histogram over powers of two)",
        partial(float, DISCOVERY_EPSILON),
        0.0,
        partial(discovery_scores, "upper"),
    ),
    *[
        AuditCase(
            f"discover:{key}",
            "unit_2",
            0,
            f"{key} at a unit of 2 rows",
            partial(float, DISCOVERY_EPSILON),
            DISCOVERY_DELTA if key == "categories" else 0.0,
            partial(unit_discovery_scores, key),
        )
        for key in ("categories", "upper", "step", "rounding")
    ],
    AuditCase(
        "discover:step",
        "epsilon_1",
        0,
        "granularity (discrete Laplace histogram over magnitude bands × the step ladder; steps: post-processing)",
        partial(float, DISCOVERY_EPSILON),
        0.0,
        partial(discovery_scores, "step"),
    ),
    AuditCase(
        "discover:rounding",
        "epsilon_1",
        0,
        "rounding against a documented step (the granularity histogram; shares: post-processing)",
        partial(float, DISCOVERY_EPSILON),
        0.0,
        partial(discovery_scores, "rounding"),
    ),
]
PLANS: dict[tuple[str, str], Callable[[], list[Event]]] = {
    ("prepare:row_count", "epsilon_1"): lambda: [count_event(COUNT_EPSILON)],
    ("prepare:row_loss", "epsilon_1"): lambda: [loss_event(LOSS_EPSILON)],
    **{
        (f"discover:{key}", "epsilon_1"): (
            lambda key=key: planned_events(
                [
                    Step(
                        "c",
                        (key if key != "bounds" else "upper",),
                        DISCOVERY_EPSILON,
                        DISCOVERY_DELTA * (key == "categories"),
                    )
                ],
                _discovery_schema(key if key != "bounds" else "upper"),
            )
        )
        for key in ("categories", "bounds", "step", "rounding")
    },
    **{
        (f"discover:{key}", "unit_2"): (
            lambda key=key: planned_events(
                [Step("c", (key,), DISCOVERY_EPSILON, DISCOVERY_DELTA * (key == "categories"))],
                _discovery_schema(key, UNIT_ROWS),
            )
        )
        for key in ("categories", "upper", "step", "rounding")
    },
    ("pearl", "default"): pearl_plan,
    **{("iw_mmd_gan", est): (lambda est=est: iw_plan(est)) for est in ("iw", "sniw")},
    **{("support_points", config): (lambda config=config: sp_plan(config)) for config in SP_CONFIGS},
    **{
        (f"weights:{est}", "default"): (lambda est=est: w_plan(est).events)
        for est in ("beta_noised", "output_lapl", "output_norm", "discriminator")
    },
}
