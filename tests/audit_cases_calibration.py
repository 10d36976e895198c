"""Audit cases for the DP marginal calibration: the Gaussian measurement of the calibrated
marginals (`NoisyMarginals.measure`, the code `PrivateGenerator.fit` runs after the method's `_fit`) on a
worst-case neighbouring pair D, D' = D + canary. tests/test_privacy_contract.py collects them (interface:
tests/audit_harness.py).

Layout: a categorical column `a` (3 categories) and a binary target `y`, so the calibration measures m = 3
marginals (a, y, a × y); δ = AUDIT_DELTA = 1e-2, `share` 0.5 at ε = 2 (claims ≈ 1.5 at δ = 1e-2: auditable with
1,000–2,000 runs; tests/audit_cases_marginal.py's convention). The owner "calibration" plans one event per config
(the calibration part of the real plan):

* "audit": DP-WGAN's plan(), counts: DiscreteGaussianEvent(σ, 1, count 3) (exact discrete Gaussian noise),
  the continuous plan's multiplier σ/√3 ≈ 1.36.
* "weighted": IW-MMD-GAN's plan() with `weights` rebalancing y from 0.8/0.2 to 0.5/0.5 (w ∈ {0.625, 2.5}, public
  bound w_max = 2.5): importance-weighted marginals on the lattice (w_max/64)ℤ, DiscreteGaussianEvent(σ·64/w_max,
  64, count 3), multiplier ≈ 1.39; the rows' weights come from the generator's own `calibration_weights` (the
  function its training uses), and the canary's w_max is 64 lattice points, the event's shift.

Score: the canary (a = 0, y = 0 for counts; a = 0, y = 1, the largest weight w_max, when weighted) adds w (1 for
counts) to exactly one cell of each of the m marginals and changes nothing else, so the optimal test statistic is
the sum of the m noisy values in its cells (the projection of the joint release on the canary's direction): its
mean moves by m·w and its noise std is σ√m, i.e. a Gaussian of multiplier σ/(√m·w), which is the planned event's
multiplier exactly (the sensitivity √m·w_max is attained).
"""

from __future__ import annotations

import dataclasses
from functools import partial

import numpy as np
from audit_harness import AuditCase

from pipelines.data.layout import Block, Layout
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.registry import generator_class
from pipelines.marginal.calibrate import NoisyMarginals, public_discretizer
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import Event
from pipelines.privacy.plan import CalibrationPlan

AUDIT_DELTA = 1e-2
LAYOUT = Layout((Block("a", "categorical", 0, 3), Block("y", "binary", 3, 4, is_target=True)))
PARAMS = {
    "steps": 1,
    "batch_size": 64,
    "critic_hidden": [],
    "generator_hidden": [8],
    "latent_dim": 4,
    "calibration": {"share": 0.5},
}
WEIGHTED_PARAMS = {
    "frequencies": 4,
    "steps": 0,
    "hidden": [4],
    "code_dim": 2,
    "latent_dim": 2,
    "weights": {"rebalance": {"column": "y", "observed": [0.8, 0.2], "target": [0.5, 0.5]}},
    "calibration": {"share": 0.5},
}
BUDGET = Budget(2.0, AUDIT_DELTA)
DATA = np.array([[*np.eye(3)[i % 3], (i // 3) % 2] for i in range(90)], dtype=np.float32)  # 15 rows per (a, y)
CANARIES = {
    "audit": np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32),  # a = 0, y = 0
    "weighted": np.array([[1.0, 0.0, 0.0, 1.0]], dtype=np.float32),
}  # a = 0, y = 1: w_max


def generator(config: str) -> PrivateGenerator:
    """DP-WGAN (counts) or IW-MMD-GAN with rebalancing weights (weighted marginals) on the audit layout."""
    return (
        generator_class("dpwgan")(LAYOUT, PARAMS, "cpu")
        if config == "audit"
        else generator_class("iw_mmd_gan")(LAYOUT, WEIGHTED_PARAMS, "cpu")
    )


def calibration_plan(config: str) -> CalibrationPlan:
    """The calibration part of the generator's own plan() for the audit layout."""
    return generator(config).plan(len(DATA) + 1, BUDGET).calibration


def scores_of(config: str):
    """The sum of the noisy values of the canary's m cells, `n_runs` times, through `NoisyMarginals.measure` with
    the generator's own calibration weights (`Calibration.weights`, None for counts)."""
    gen, canary = generator(config), CANARIES[config]
    weights = gen.calibration.weights()

    def scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
        cal = calibration_plan(config)
        cal = dataclasses.replace(cal, sigma=cal.sigma * noise_scale)
        data = np.vstack([DATA, canary]) if neighbour else DATA
        w = None if weights is None else weights[0](data)
        disc = public_discretizer(LAYOUT)
        rng = np.random.default_rng([7 + int(neighbour), int(100 * noise_scale), len(config)])
        out = np.empty(n_runs)
        for r in range(n_runs):
            marginals, _ = NoisyMarginals.measure(disc, cal, data, rng, w)
            cells = [int(c[0]) for c in marginals.cells(canary)]
            out[r] = sum(c.ravel()[k] for c, k in zip(marginals.counts, cells))
        return out

    return scores


def plan(config: str) -> list[Event]:
    return [calibration_plan(config).event]


def claim(config: str) -> float:
    return epsilon_pld(plan(config), AUDIT_DELTA)


def cases() -> list[AuditCase]:
    what = {
        "audit": "calibration: Gaussian measurement of the noisy marginals",
        "weighted": "calibration: Gaussian measurement of the importance-weighted marginals (Δ₂ = √m·w_max)",
    }
    return [
        AuditCase("calibration", config, 0, what[config], partial(claim, config), AUDIT_DELTA, scores_of(config))
        for config in what
    ]


CASES = cases()
PLANS = {("calibration", config): (lambda config=config: plan(config)) for config in ("audit", "weighted")}
