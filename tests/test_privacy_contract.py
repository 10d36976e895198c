"""The privacy contract: every private mechanism that a registered generator or private weight
estimator plans is audited on its own training / release code.

Cases come from tests/audit_cases_dpsgd.py (DP-SGD steps), tests/audit_cases_release.py (one-shot
releases), tests/audit_cases_marginal.py (MST, AIM), tests/audit_cases_calibration.py (the DP marginal
calibration of samples) and tests/audit_cases_selection.py (the private selection's score and repeat-and-select),
all on the interface of tests/audit_harness.py.
  - coverage (fast): every registered generator and private weight estimator has plans; every planned
    event that is not a NonPrivateEvent is exercised by a case; each case's claim is the accountant's ε
    for its planned event: the event itself at T = 1 and q = 1, or one of the k releases (k = the event's
    number of cases) that the event composes (a Gaussian/DP-SGD event of multiplier σ_e is k releases of
    multiplier σ_e·√k; a pure-ε / Laplace event is k releases whose ε sum to the event's; a ρ-zCDP budget,
    ZCDPEvent, is k shares of ρ/k).
  - audit (slow: thousands of runs of real training loops): the Clopper-Pearson lower bound on ε stays
    below the claim at the planned noise and exceeds it at half the noise (the audit has power: removing
    the noise of any release fails it).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

import audit_cases_calibration
import audit_cases_dpsgd
import audit_cases_marginal
import audit_cases_release
import audit_cases_selection
from audit_harness import RUNS
from pipelines.generators.names import GENERATORS
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.audit import epsilon_lower_bound
from pipelines.privacy.events import (
    ApproxDPEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonGaussianEvent,
    PureEpsilonEvent,
    RepeatAndSelectEvent,
    ZCDPEvent,
)
from pipelines.weights.estimators import ESTIMATORS, NON_PRIVATE

MODULES = (audit_cases_dpsgd, audit_cases_release, audit_cases_marginal, audit_cases_calibration, audit_cases_selection)
CASES = [c for m in MODULES for c in m.CASES]
PLANS = {k: v for m in MODULES for k, v in m.PLANS.items()}
CLAIM_RTOL = 1e-6


def test_every_generator_and_private_estimator_has_plans():
    owners = {owner for owner, _ in PLANS}
    expected = set(GENERATORS) | {f"weights:{e}" for e in ESTIMATORS if e not in NON_PRIVATE}
    assert expected <= owners, f"no audit plans for {sorted(expected - owners)}"


@pytest.mark.slow
def test_every_planned_event_is_exercised_and_each_claim_matches_its_event():
    for (owner, config), plan_of in PLANS.items():
        events = plan_of()
        for i, event in enumerate(events):
            cases = [c for c in CASES if (c.owner, c.config, c.event_index) == (owner, config, i)]
            if isinstance(event, NonPrivateEvent):
                continue
            assert cases, f"{owner}/{config}: planned event {i} ({event}) has no audit case"
            for c in cases:
                allowed = claims_for(event, len(cases), c.delta)
                assert any(math.isclose(c.claimed_epsilon, a, rel_tol=CLAIM_RTOL) for a in allowed), (
                    f"{c.id}: claim {c.claimed_epsilon} is not the accountant's {allowed} for {event}"
                )
    for c in CASES:
        assert (c.owner, c.config) in PLANS, f"{c.id}: no plan for its owner/config"
        assert 0 <= c.event_index < len(PLANS[(c.owner, c.config)]()), f"{c.id}: event index out of range"


def claims_for(event, k: int, delta: float) -> list[float]:
    """ε of the whole event at T = 1, q = 1, and of one of k releases that it composes (module docstring)."""
    if isinstance(event, PoissonGaussianEvent):
        nm = event.noise_multiplier
        return [epsilon_pld([PoissonGaussianEvent(nm * s, 1.0, 1)], delta) for s in (1.0, math.sqrt(k))]
    if isinstance(event, (LaplaceEvent, DiscreteLaplaceEvent, PureEpsilonEvent, ApproxDPEvent)):
        return [event.epsilon, event.epsilon / k]
    if isinstance(event, RepeatAndSelectEvent):  # the whole selection (its trials' steps have their own cases)
        return [epsilon_pld([event], delta)]
    if isinstance(event, ZCDPEvent):  # a ρ-zCDP budget, or one of k equal ρ/k shares of it
        return [epsilon_pld([event], delta), epsilon_pld([dataclasses.replace(event, rho=event.rho / k)], delta)]
    whole = epsilon_pld([event], delta)
    claims = [whole, epsilon_pld([dataclasses.replace(event, sigma=event.sigma * math.sqrt(k))], delta)]
    if isinstance(event, DiscreteGaussianEvent) and event.count % k == 0:  # `count` = k releases of count/k
        claims.append(epsilon_pld([dataclasses.replace(event, count=event.count // k)], delta))
    return claims


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_audit_lower_bound_below_claim_and_detects_half_the_noise(case):
    power = case.power_noise_scale  # 0.5 unless the case documents a loose sensitivity bound
    bounds = {
        scale: epsilon_lower_bound(case.scores(False, scale, runs), case.scores(True, scale, runs), case.delta)
        for scale, runs in ((1.0, RUNS[1.0]), (power, RUNS[0.5]))
    }
    print(
        f"AUDIT {case.id}: claimed {case.claimed_epsilon:.3f}, lower bound {bounds[1.0]:.3f}, "
        f"at noise ×{power} {bounds[power]:.3f}"
    )
    assert bounds[1.0] < case.claimed_epsilon
    assert bounds[power] > case.claimed_epsilon
