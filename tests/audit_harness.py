"""The shared interface of the privacy contract test: one `AuditCase` per private
mechanism a generator or weight estimator plans, run on its own training/release code.

Each cases module (tests/audit_cases_*.py) exposes

    CASES: list[AuditCase]
    PLANS: dict[tuple[str, str], Callable[[], list[Event]]]

The claim check (tests/test_privacy_contract.py `claims_for`): with k = the number of cases of one planned
event, a case's claimed_epsilon must equal (relative 1e-6) the accountant's ε at the case's delta for the
whole event run once (PoissonGaussianEvent at T = 1, q = 1; GaussianEvent as planned; Laplace / pure ε:
event.epsilon), or for one of k equal releases that compose it (multiplier × √k for Gaussian kinds,
ε / k for Laplace / pure ε).

Each cases module imports this module as `from audit_harness import AuditCase` (tests/ has no __init__.py; pytest's
default import mode puts tests/ on sys.path).

PLANS maps (owner, config) to a function that returns the owner's planned events for that config,
obtained by calling the owner's real plan(); tests/test_privacy_contract.py checks that every planned
event that is not a NonPrivateEvent is exercised by at least one case, that each case's claimed ε
matches its planned event, and that the empirical lower bound on ε (pipelines.privacy.audit) stays
below the claim at the planned noise and exceeds it at half the noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

RUNS = {1.0: 1000, 0.5: 2000}  # runs per data set at the planned and at half the noise; the half-noise check needs
# the power


@dataclass(frozen=True)
class AuditCase:
    owner: str  # registry name: a generator ("ppem") or "weights:<estimator>" ("weights:priv_mlp")
    config: str  # which params configuration of the owner (e.g. "default", "kde_laplace")
    event_index: int  # index, in the owner's plan for that config, of the planned event this case exercises
    mechanism: str  # human name, e.g. "ppem γ step (conditional energy, Gaussian)"
    claim: Callable[[], float]  # the ε our accountant claims for exactly what the case runs (one step / one release)
    # at `delta`; computed when first asked for (`claimed_epsilon`), so that collecting the cases costs no PLD
    delta: float
    scores: Callable[[bool, float, int], np.ndarray]
    # scores(neighbour, noise_scale, n_runs) -> n_runs floats: neighbour False = data set D, True = D' (one record
    # added: add/remove relation); noise_scale 1.0 = the planned noise, 0.5 = half of it with the claim unchanged.
    # Runs THE OWNER'S OWN training/release code (not precomputed gradients); deterministic (noise_seed per run).
    power_noise_scale: float = 0.5
    # the noise scale at which the lower bound must EXCEED the claim: 0.5 unless the case documents a sensitivity
    # bound that no neighbouring pair attains (then the exact mechanism stays below the claim at half noise too;
    # e.g. support_points' exponential mechanism, the logistic weight estimators: tests/audit_cases_release.py).

    @cached_property
    def claimed_epsilon(self) -> float:
        """The claim, computed once per case."""
        return float(self.claim())

    @property
    def id(self) -> str:
        """A pytest id: owner/config/event index/mechanism."""
        return f"{self.owner}/{self.config}/e{self.event_index}/{self.mechanism}"
