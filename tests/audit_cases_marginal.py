"""Audit cases for MST and AIM (issue 18): the Gaussian measurement of a count marginal (`measure`) and the
exponential-mechanism selection (`select` over `l1_score`s), each on a worst-case neighbouring pair D, D' = D +
canary, run through the mechanisms' own code. tests/test_privacy_contract.py collects them (interface:
tests/audit_harness.py).

Configs ("audit"): 2 columns of 3 categories, ε = 20, δ = 1e-5, so that each planned event's ε is large enough
to audit with a few thousand runs. MST plans 2 one-way Gaussians, 1 selection and 1 two-way Gaussian; AIM (one
round) 2 one-way Gaussians, the rounds' Gaussian envelope and 1 selection slot.
- Gaussian event of multiplier σ: `measure` at σ·noise_scale of the canary's 1-way (or 2-way) marginal; the
  score is the noisy count in the canary's cell (the canary moves that cell by +1, the only change: Δ₂ = 1).
- Selection of ε: two candidates whose L1 scores the canary moves by +1 and −1 (possible under add/remove: the
  canary's cell is above the model in one marginal and below it in the other), drawn by `select` with
  ε/noise_scale; the score is 1 when the first candidate is selected. Odds ratio e^ε: the claim is attainable.
"""
from __future__ import annotations

import numpy as np
from audit_harness import AuditCase

from pipelines.data.layout import Block, Layout
from pipelines.generators.base import Budget, generator_class
from pipelines.marginal.measure import measure
from pipelines.marginal.select import l1_score, select
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import GaussianEvent, PureEpsilonEvent
from pipelines.privacy.noise import numpy_noise_rng

DELTA = 1e-5
EPSILON = 20.0
LAYOUT = Layout((Block("a", "categorical", 0, 3), Block("b", "categorical", 3, 6)))
CODES = np.array([[i % 3, (i // 3) % 3] for i in range(90)])
CANARY = np.array([[0, 0]])


def plan(name: str):
    params = {"max_rounds": 1} if name == "aim" else {}
    return generator_class(name)(LAYOUT, params, "cpu").plan(len(CODES), Budget(EPSILON, DELTA))


def gaussian_scores(sigma: float, clique: tuple[int, ...], tag: str):
    def scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
        codes = np.vstack([CODES, CANARY]) if neighbour else CODES
        rng = numpy_noise_rng(7919 * int(neighbour) + int(100 * noise_scale), f"audit:{tag}")
        return np.array([measure(codes, (3, 3), clique, sigma * noise_scale, rng)[0].ravel()[0]
                         for _ in range(n_runs)])
    return scores


def selection_scores(epsilon: float, tag: str):
    model_a = np.array([29.5, 30.0, 30.5])     # canary cell 0 of a: data 30 > model (score +1 with the canary)
    model_b = np.array([31.0, 29.5, 29.5])     # canary cell 0 of b: data 30 < model (score -1 with the canary)

    def scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
        codes = np.vstack([CODES, CANARY]) if neighbour else CODES
        ma = np.bincount(codes[:, 0], minlength=3).astype(float)
        mb = np.bincount(codes[:, 1], minlength=3).astype(float)
        u = np.array([l1_score(ma, model_a), l1_score(mb, model_b)])
        rng = numpy_noise_rng(104729 * int(neighbour) + int(100 * noise_scale), f"audit:{tag}")
        return np.array([float(select(u, 1.0, epsilon / noise_scale, rng)[0] == 0) for _ in range(n_runs)])
    return scores


def claimed(event) -> float:
    return float(event.epsilon) if isinstance(event, PureEpsilonEvent) else epsilon_pld([event], DELTA)


def cases_for(name: str) -> list[AuditCase]:
    out = []
    for i, e in enumerate(plan(name)):
        if isinstance(e, GaussianEvent):
            clique = (0, 1) if "2-way" in e.query else (0,)
            out.append(AuditCase(name, "audit", i, f"{name} Gaussian measurement ({e.query})", claimed(e), DELTA,
                                 gaussian_scores(e.sigma, clique, f"{name}:{i}")))
        elif isinstance(e, PureEpsilonEvent):
            out.append(AuditCase(name, "audit", i, f"{name} exponential-mechanism selection", claimed(e), DELTA,
                                 selection_scores(e.epsilon, f"{name}:{i}")))
    return out


CASES = cases_for("mst") + cases_for("aim")
PLANS = {("mst", "audit"): lambda: plan("mst"), ("aim", "audit"): lambda: plan("aim")}
