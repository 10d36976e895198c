"""One release budget: privacy.release_epsilon divided across the run's parts, calibrated so that
the composed PLD ε of every planned event equals it (from below, within allocation.TOLERANCE)."""

from __future__ import annotations

import math

import pytest
import yaml

from pipelines.config import allocated_section, load_params
from pipelines.errors import InputError
from pipelines.privacy.accountant import calibrate_noise_multiplier, epsilon_pld, gaussian_sigma
from pipelines.privacy.allocation import TOLERANCE, AllocationError, Part, allocate
from pipelines.privacy.events import (
    BOUNDED_RANGE,
    GaussianEvent,
    NonPrivateEvent,
    PoissonGaussianEvent,
    PureEpsilonEvent,
)

DELTA = 1e-5


def dpsgd(eps: float) -> list:
    """A DP-SGD plan at ε (q = 0.1, 200 steps), calibrated as the generators do."""
    return [PoissonGaussianEvent(calibrate_noise_multiplier(eps, DELTA, 0.1, 200), 0.1, 200)]


def gaussian(eps: float) -> list:
    """Two one-shot Gaussian releases sharing ε (PEARL-like)."""
    sigma = gaussian_sigma(eps / 2, DELTA, 1.0)
    return [GaussianEvent(sigma, 1.0), GaussianEvent(sigma, 1.0)]


def selections(eps: float) -> list:
    """Ten bounded-range exponential-mechanism selections at ε/10 each (MST/AIM-like)."""
    return [PureEpsilonEvent(eps / 10, BOUNDED_RANGE)] * 10


MIXED = [Part("dpsgd", dpsgd), Part("gaussian", gaussian), Part("selections", selections)]


def within(eps: float, target: float) -> bool:
    return (1 - TOLERANCE) * target <= eps <= target


@pytest.mark.parametrize("release", [0.5, 1.0, 4.0])
@pytest.mark.slow
def test_composed_epsilon_is_the_release_epsilon_for_mixed_event_kinds(release):
    alloc = allocate(MIXED, release, DELTA)
    assert within(epsilon_pld(alloc.events, DELTA), release)  # recomputed from the plans' events
    assert alloc.epsilon_composed == pytest.approx(epsilon_pld(alloc.events, DELTA))
    parts = alloc.parts.values()
    assert all(not p.pinned and p.share == pytest.approx(1 / 3) for p in parts)
    # composition is sub-additive: the calibrated targets add up to more than the release ε (scale > 1)
    assert alloc.scale > 1 and sum(p.epsilon for p in parts) > release
    assert all(p.epsilon_planned <= p.epsilon * (1 + 1e-9) for p in parts)  # each part plans within its target


@pytest.mark.integration
def test_shares_set_the_ratio_of_allocated_epsilons():
    alloc = allocate(
        [Part("dpsgd", dpsgd, share=3.0), Part("gaussian", gaussian), Part("selections", selections, share=0.5)],
        1.0,
        DELTA,
    )
    eps = {n: p.epsilon for n, p in alloc.parts.items()}
    assert eps["dpsgd"] / eps["gaussian"] == pytest.approx(3.0) and eps["selections"] / eps[
        "gaussian"
    ] == pytest.approx(0.5)
    assert within(alloc.epsilon_composed, 1.0)


@pytest.mark.integration
def test_a_pinned_part_keeps_its_epsilon_and_the_others_share_the_rest():
    alloc = allocate(
        [Part("dpsgd", dpsgd, epsilon=0.6), Part("gaussian", gaussian), Part("selections", selections)], 1.5, DELTA
    )
    pinned = alloc.parts["dpsgd"]
    assert pinned.pinned and pinned.epsilon == 0.6 and pinned.share is None and pinned.events == tuple(dpsgd(0.6))
    assert alloc.parts["gaussian"].epsilon == pytest.approx(alloc.parts["selections"].epsilon)
    assert within(epsilon_pld(alloc.events, DELTA), 1.5)


@pytest.mark.integration
def test_pinned_parts_over_the_release_epsilon_are_refused():
    with pytest.raises(AllocationError, match=r"pinned parts \['dpsgd'\] alone compose to ε = 2.*release ε 1"):
        allocate([Part("dpsgd", dpsgd, epsilon=2.0), Part("gaussian", gaussian)], 1.0, DELTA)
    only_pinned = allocate([Part("dpsgd", dpsgd, epsilon=0.5)], 1.0, DELTA)  # spends less than it may: stated
    assert only_pinned.scale is None and only_pinned.epsilon_composed == pytest.approx(0.5, rel=1e-3)


@pytest.mark.integration
def test_non_private_parts_are_outside_the_composed_epsilon():
    alloc = allocate(
        [Part("reference", lambda e: [NonPrivateEvent("epsilon: inf")], epsilon=math.inf), Part("gaussian", gaussian)],
        1.0,
        DELTA,
    )
    assert alloc.non_private == ["reference"] and within(alloc.epsilon_composed, 1.0)
    everything_off = allocate(
        [Part("gaussian", lambda e: [NonPrivateEvent("inf")] if math.isinf(e) else gaussian(e))], math.inf, DELTA
    )
    assert everything_off.parts["gaussian"].epsilon == math.inf and everything_off.non_private == ["gaussian"]


def test_a_part_that_spends_nothing_needs_no_calibration():
    alloc = allocate([Part("critic", lambda e: []), Part("dpsgd", dpsgd, epsilon=0.4)], 1.0, DELTA)
    assert alloc.scale == 1.0 and alloc.parts["critic"].epsilon_planned == 0.0


def test_a_plan_that_does_not_grow_with_its_target_is_refused():
    with pytest.raises(AllocationError, match="does not grow with its target"):
        allocate([Part("stuck", lambda e: gaussian(0.2))], 1.0, DELTA)


def write(tmp_path, edit) -> str:
    params = yaml.safe_load(open("params.yaml").read())
    edit(params)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return str(path)


def test_default_configuration_shares_one_release_epsilon():
    config = load_params("params.yaml")
    assert config.privacy.release_epsilon == 1.0
    assert all(config.generator(g).get("epsilon") is None for g in config.generators)  # every generator allocated
    assert allocated_section(config.generator("dpwgan"), 0.25) == {
        **{k: v for k, v in config.generator("dpwgan").items() if k != "share"},
        "epsilon": 0.25,
    }


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda p: p["privacy"].update(release_epsilon=0), r"'privacy.release_epsilon': must be a positive number"),
        (lambda p: p["privacy"].update(release_epsilon="lots"), r"'privacy.release_epsilon': must be a positive"),
        (lambda p: p["dpwgan"].update(share=-1), r"'dpwgan.share': must be a positive finite number"),
        (lambda p: p["dpwgan"].update(share=True), r"'dpwgan.share': must be a positive finite number"),
        (
            lambda p: p["dpwgan"].update(epsilon=2.0, share=2.0),
            r"'dpwgan.share': given together with 'dpwgan.epsilon'.*"
            r"Fix: remove 'share:'",
        ),
        (lambda p: p.setdefault("weights", {}).update(epsilon=1.0, share=2.0), r"'weights.share': given together with"),
        (lambda p: p.setdefault("weights", {}).update(share=0), r"'weights.share': must be a positive finite number"),
        (lambda p: p["dpwgan"].update(shares=2.0), r"'dpwgan.shares'.*did you mean 'share'"),
    ],
)
def test_bad_release_budget_configuration_is_one_clear_error(tmp_path, edit, match):
    with pytest.raises(InputError, match=match):
        load_params(write(tmp_path, edit))


def test_pinned_and_inf_release_epsilon_parse(tmp_path):
    config = load_params(
        write(tmp_path, lambda p: (p["privacy"].update(release_epsilon="inf"), p["ppem"].update(epsilon=1.0)))
    )
    assert config.privacy.release_epsilon == math.inf and config.generator("ppem")["epsilon"] == 1.0


@pytest.mark.parametrize(
    "path", ["params/adult.yaml", "params/adult-paper.yaml", "params/importance-weights-paper.yaml"]
)
def test_paper_scale_params_files_parse_with_their_pins(path):
    config = load_params(path)
    assert config.privacy.release_epsilon > 1 and config.generator("dpwgan")["epsilon"] is not None
