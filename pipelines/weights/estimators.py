"""The weight estimators of params.yaml `weights.estimator`: plan (public quantities only), then estimate.

  logreg, mlp      non-private references (a NonPrivateEvent; never releasable outside internal releases)
  beta_noised      Ji & Elkan: Laplace noise on the logistic coefficients (biased, Proposition 1)
  output_lapl      Corollary 1: Laplace noise on each released log-weight, mean log(1 − ρ²)
  output_norm      Corollary 2: Gaussian noise on each released log-weight, mean −γ²/2
                   (these three: exact discrete noise on a lattice, `pipelines/weights/logistic.py`)
  priv_mlp         the classifier MLP under the relaxed DP-SGD of Algorithm 1
  discriminator    the generator's released critic (post-processing: no event)

`plan` sees only the public row counts N_D (departure 1) and N_G, the layout and the settings, so the
stage reserves its events before a private row is read. `estimate` returns the log-weights of the
first N_S synthetic rows (N_S = N_G except for the output-noised estimators, whose cost grows with N_S)
and, for estimators whose model is itself private or public, the logit function that beta calibration
may apply to public calibration rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from pipelines.config import WEIGHT_ESTIMATORS, WeightEstimator, section
from pipelines.data.layout import Layout
from pipelines.io import MatrixFile, blockwise
from pipelines.privacy.accountant import calibrate_noise_multiplier
from pipelines.privacy.dpsgd import sampling_schedule
from pipelines.privacy.events import Event, NonPrivateEvent, PoissonGaussianEvent, event_to_dict
from pipelines.privacy import unit as privacy_unit
from pipelines.privacy.noise import NoiseSource, Streams
from pipelines.privacy.unit import unit_events
from pipelines.weights import logistic, relaxed_dpsgd
from pipelines.weights.discriminator import critic_log_weights

ESTIMATORS = WEIGHT_ESTIMATORS  # the names; the knobs: pipelines/config.py `WeightEstimator`
NON_PRIVATE = ("logreg", "mlp")
READS_PRIVATE_ROWS = ("logreg", "mlp", "beta_noised", "output_lapl", "output_norm", "priv_mlp")


@dataclass
class WeightPlan:
    """What an estimator will spend and release, fixed before any private row is read."""

    estimator: str
    n_real: int
    n_synthetic: int
    n_released: int  # N_S: weights released for synthetic rows 0..N_S-1
    events: list[Event]  # at row level (the estimator's own derivations)
    details: dict[str, Any] = field(default_factory=dict)
    max_rows: int = 1  # the privacy unit's rows the plan was calibrated for (`unit_plan`)

    @property
    def private(self) -> bool:
        return not any(isinstance(e, NonPrivateEvent) for e in self.events)

    @property
    def unit_events(self) -> list[Event]:
        """The events at the privacy unit (pipelines/privacy/unit.py): what the ledger reserves and records."""
        return unit_events(self.events, self.max_rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimator": self.estimator,
            "n_real": self.n_real,
            "n_synthetic": self.n_synthetic,
            "n_released": self.n_released,
            "events": [event_to_dict(e) for e in self.events],
            **self.details,
        }


def settings_with_defaults(settings: WeightEstimator | dict[str, Any]) -> WeightEstimator:
    """The estimator knobs of `weights:`: the checked section (a `Weights`, which holds them), or a mapping
    checked by the section's model (pipelines/config.py `section`: keys, types, ranges, defaults filled)."""
    return settings if isinstance(settings, WeightEstimator) else section("weights", settings)


def unit_plan(
    estimator: str,
    settings: WeightEstimator | dict[str, Any],
    layout: Layout,
    n_real: int,
    n_synthetic: int,
    epsilon: float,
    delta: float,
    max_rows: int = 1,
) -> WeightPlan:
    """`plan` for a privacy unit of at most `max_rows` rows: the row-level plan whose events, at the unit
    (`WeightPlan.unit_events`), meet (ε, δ) (`pipelines.privacy.unit.unit_plan`)."""

    def at(eps: float) -> WeightPlan:
        return plan(estimator, settings, layout, n_real, n_synthetic, eps, delta)

    first = at(epsilon)
    if max_rows == 1 or not first.events or not first.private:
        return first
    return replace(privacy_unit.unit_plan(at, epsilon, delta, max_rows), max_rows=int(max_rows))


def plan(
    estimator: str,
    settings: WeightEstimator | dict[str, Any],
    layout: Layout,
    n_real: int,
    n_synthetic: int,
    epsilon: float,
    delta: float,
) -> WeightPlan:
    """The estimator's events and N_S from public quantities (module docstring)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown weights.estimator {estimator!r}; known: {', '.join(ESTIMATORS)}")
    if n_real < 1 or n_synthetic < 1:
        raise ValueError(f"need real and synthetic rows, got N_D = {n_real}, N_G = {n_synthetic}")
    s = settings_with_defaults(settings)
    if estimator in NON_PRIVATE:
        return WeightPlan(
            estimator,
            n_real,
            n_synthetic,
            n_synthetic,
            [NonPrivateEvent(f"importance weights by non-private {estimator}")],
        )
    if estimator == "discriminator":
        return WeightPlan(
            estimator, n_real, n_synthetic, n_synthetic, [], {"critic_temperature": float(s.critic_temperature)}
        )
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(
            f"weights.epsilon must be positive and finite for the private estimator '{estimator}', got {epsilon}"
        )
    n_total, l2 = n_real + n_synthetic, float(s.l2)
    r = logistic.feature_norm_bound(layout)
    delta_w = logistic.log_weight_sensitivity(r, n_total, l2)
    if estimator == "beta_noised":
        unit, event = logistic.beta_noise_plan(epsilon, r, n_total, l2, layout.width + 1)
        return WeightPlan(
            estimator,
            n_real,
            n_synthetic,
            n_synthetic,
            [event],
            {"l2": l2, "norm_bound": r, "laplace_scale": event.scale * unit, "lattice_unit": unit},
        )
    if estimator == "output_lapl":
        n_s, rho, event = logistic.output_laplace_plan(epsilon, delta_w, n_synthetic, float(s.rho_max))
        return WeightPlan(
            estimator,
            n_real,
            n_synthetic,
            n_s,
            [event],
            {"l2": l2, "norm_bound": r, "log_weight_sensitivity": delta_w, "rho": rho},
        )
    if estimator == "output_norm":
        n_s, gamma, event = logistic.output_gaussian_plan(epsilon, delta, delta_w, n_synthetic, float(s.gamma_max))
        return WeightPlan(
            estimator,
            n_real,
            n_synthetic,
            n_s,
            [event],
            {"l2": l2, "norm_bound": r, "log_weight_sensitivity": delta_w, "gamma": gamma},
        )
    # priv_mlp: Algorithm 1's q = L / (N_D + N_G), T = ceil(epochs / q) at most max_steps
    q, steps = sampling_schedule(s.batch_size, n_total, None, s.epochs, s.max_steps)
    sigma = calibrate_noise_multiplier(epsilon, delta, q, steps)
    return WeightPlan(
        estimator,
        n_real,
        n_synthetic,
        n_synthetic,
        [PoissonGaussianEvent(sigma, q, steps)],
        {"sample_rate": q, "steps": steps, "noise_multiplier": sigma, "clip_norm": float(s.clip_norm)},
    )


Logit = Callable[[np.ndarray], np.ndarray]


def streams(source: NoiseSource | None, settings: WeightEstimator, private: bool) -> Streams:
    """The estimator's random streams: `source` (OS entropy when None; settings' `noise_seed` overrides it,
    for tests) bound to its privacy and its public `seed`."""
    return (source or NoiseSource()).overridden(settings.noise_seed).streams(private, settings.seed)


def estimate(
    p: WeightPlan,
    settings: WeightEstimator | dict[str, Any],
    real: np.ndarray | MatrixFile | None,
    synthetic: np.ndarray | MatrixFile,
    critic: Logit | None = None,
    noise_source: NoiseSource | None = None,
) -> tuple[np.ndarray, Logit | None]:
    """(log-weights of synthetic rows 0..N_S-1, classifier logit function or None).

    `real`: the private encoded rows (None for `discriminator`, which never reads them); `critic`: the
    released critic's D(x) for `discriminator`. The logit function is None for the output-noised
    estimators: their classifier is not private, only the released weights are. `noise_source`: where the
    DP noise comes from (the weight stage passes a keyed one; OS entropy when None). The rows may be
    `io.MatrixFile`s: priv_mlp, mlp and discriminator then read the lots and the scored rows a block at a time
    (their logit functions score a block at a time too); the logistic estimators fit on every row at once.
    """
    s = settings_with_defaults(settings)
    released = synthetic[: p.n_released]
    if p.estimator == "discriminator":
        if critic is None:
            raise ValueError("the discriminator estimator needs the generator's critic")
        t = float(s.critic_temperature)
        return critic_log_weights(blockwise(critic, released), t), (lambda rows: blockwise(critic, rows) / t)
    if real is None or real.ndim != 2 or real.shape[1] != synthetic.shape[1]:  # rows may differ from n̂ = N_D
        raise ValueError(
            f"real rows have shape {None if real is None else real.shape}, expected (rows, {synthetic.shape[1]})"
        )
    prior = math.log(p.n_real / p.n_synthetic)
    if p.estimator in ("mlp", "priv_mlp"):
        private = p.estimator == "priv_mlp"
        q, steps = (
            (p.details["sample_rate"], p.details["steps"])
            if private
            else sampling_schedule(s.batch_size, p.n_real + p.n_synthetic, None, s.epochs, s.max_steps)
        )
        noise = streams(noise_source, s, private).torch("weights:priv_mlp")
        model = relaxed_dpsgd.train_classifier(
            real,
            synthetic,
            s,
            q,
            steps,
            p.details["noise_multiplier"] if private else 0.0,
            p.details["clip_norm"] if private else math.inf,
            noise,
            n_real=p.n_real,
        )
        logit = lambda rows: relaxed_dpsgd.logits(model, rows)  # noqa: E731
        return logit(released) - prior, logit
    real, synthetic = np.asarray(real), np.asarray(synthetic)
    released = synthetic[: p.n_released]
    n_total, l2 = p.n_real + p.n_synthetic, float(s.l2)
    beta = logistic.fit_coefficients(real, synthetic, l2, n_total)
    rng = streams(noise_source, s, p.private).numpy(f"weights:{p.estimator}")
    if p.estimator in ("logreg", "beta_noised"):
        if p.estimator == "beta_noised":
            beta, _ = logistic.noised_coefficients(beta, p.events[0], p.details["lattice_unit"], rng)
        logit = lambda rows: logistic.with_intercept(rows) @ beta  # noqa: E731
        return logit(released) - prior, logit
    log_w = logistic.log_weights(beta, released, p.n_real, p.n_synthetic)
    unit = logistic.log_weight_unit(p.details["log_weight_sensitivity"])  # the lattice (Δ_w/K)ℤ
    if p.estimator == "output_lapl":
        return logistic.laplace_log_weights(log_w, p.events[0], unit, rng), None
    return logistic.gaussian_log_weights(log_w, p.events[0], unit, rng), None
