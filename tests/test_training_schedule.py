"""Every DP-SGD loop runs exactly the schedule its plan accounts for, and ε = inf never reads OS entropy.

The accountant charges PoissonGaussianEvent(σ, q, T) per planned phase. That is only the spend if the loop
(i) draws exactly T Poisson batches, (ii) each from the n real rows at exactly the planned rate q, and
(iii) privatises each batch with the planned number of Gaussian releases, each at noise multiplier σ and
divided by the public q·n. The recorders below wrap `poisson_sample` and `clip_and_noise` where each loop
calls them (the generators' own training code, not a copy) and check (i)-(iii) for DP-WGAN, both phases of
DP-auto-GAN, PPEM's energy and generator steps, and the priv_mlp weight estimator.

The second part runs every registered generator and the non-private weight estimators at ε = inf with
`noise_seed` unset and OS entropy made to fail: non-private paths derive their streams from the public
seed (pipelines/privacy/noise.py), so they are reproducible and a test on them is deterministic.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable

import numpy as np
import pytest

from pipelines.generators.base import Budget
from pipelines.generators.registry import make_generator
from pipelines.privacy import dpsgd
from pipelines.privacy.events import NonPrivateEvent, PoissonGaussianEvent

from support.generators import MIXED, mixed_data
from support.ledger import FakeSession

DELTA = 1e-5


class Schedule:
    """What a training loop did, in order: ("batch", phase, n, q) per Poisson draw and ("release", phase, σ,
    divisor) per Gaussian release, recorded by wrapping the functions each module calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch, self.log = monkeypatch, []

    def wrap(self, module: Any, phase: str) -> "Schedule":
        """Record `module`'s calls of poisson_sample and (if it calls it) clip_and_noise under `phase`."""
        for name, kind, keys in (
            ("poisson_sample", "batch", ("n", "sample_rate")),
            ("clip_and_noise", "release", ("noise_multiplier", "expected_batch_size")),
        ):
            if hasattr(module, name):
                self.monkeypatch.setattr(module, name, self._recorder(getattr(dpsgd, name), kind, phase, keys))
        return self

    def _recorder(self, fn: Callable, kind: str, phase: str, keys: tuple[str, str]) -> Callable:
        signature = inspect.signature(fn)

        def recorded(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            self.log.append((kind, phase, *(bound.arguments[k] for k in keys)))
            return fn(*args, **kwargs)

        return recorded

    def batches(self, phase: str, n: int | None = None) -> list[tuple[int, float]]:
        return [(e[2], e[3]) for e in self.log if e[:2] == ("batch", phase) and (n is None or e[2] == n)]

    def releases_per_batch(self, phase: str) -> list[list[tuple[float, float]]]:
        """The (σ, divisor) of the Gaussian releases that follow each Poisson draw of `phase`."""
        out: list[list[tuple[float, float]]] = []
        for kind, p, *args in self.log:
            if p != phase:
                continue
            if kind == "batch":
                out.append([])
            else:
                assert out, f"{phase}: a Gaussian release before the first Poisson batch"
                out[-1].append(tuple(args))
        return out


def planned_events(gen: Any) -> list[PoissonGaussianEvent]:
    return list(gen.privacy.events)


def assert_phase(
    schedule: Schedule, phase: str, event: PoissonGaussianEvent, n: int, sigma: float, releases: int, n_rows: int
) -> None:
    """T = event.steps batches of the n real rows at q = event.sample_rate, each privatised by `releases`
    Gaussian releases at noise multiplier σ divided by q·n̂ (n̂ = `n_rows`, the plan's public count)."""
    batches = schedule.batches(phase)
    assert len(batches) == event.steps, f"{phase}: {len(batches)} Poisson batches, planned T = {event.steps}"
    assert set(batches) == {(n, event.sample_rate)}, f"{phase}: batches drawn as {set(batches)}"
    per_batch = schedule.releases_per_batch(phase)
    assert [len(r) for r in per_batch] == [releases] * event.steps
    assert_releases(per_batch, sigma, event.sample_rate * n_rows)


def assert_releases(per_batch: list[list[tuple[float, float]]], sigma: float, divisor: float) -> None:
    """Every Gaussian release at noise multiplier σ, divided by the public expected batch size."""
    for sigma_used, divisor_used in (r for rs in per_batch for r in rs):
        assert sigma_used == sigma and divisor_used == pytest.approx(divisor)


# -- DP-SGD schedules ------------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("n_hat", [50, 40])
def test_dpwgan_runs_the_planned_critic_steps_at_the_planned_rate(monkeypatch, n_hat):
    """Planned for the public count n̂ (here also one that differs from the n = 50 rows actually held): the
    batches are drawn from all n rows at q = B/n̂ and the divisor is q·n̂."""
    import pipelines.generators.wgan as wgan

    schedule = Schedule(monkeypatch).wrap(wgan, "critic")
    n = 50
    gen = make_generator(
        "dpwgan",
        MIXED,
        {
            "epochs": 1,
            "batch_size": 10,
            "critic_hidden": [8],
            "generator_hidden": [8],
            "latent_dim": 4,
            "noise_seed": 0,
            "calibration": {"share": 0},
        },
        "cpu",
    )  # the method's schedule alone
    gen.plan(n_hat, Budget(2.0, DELTA))
    gen.fit(mixed_data(n), FakeSession())
    (event,) = planned_events(gen)
    assert (event.sample_rate, event.steps) == (10 / n_hat, math.ceil(n_hat / 10))  # T = ceil(epochs / q)
    assert_phase(schedule, "critic", event, n, event.noise_multiplier, releases=1, n_rows=gen.privacy.n_rows)


@pytest.mark.integration
def test_a_step_cap_shortens_the_planned_and_the_run_schedule(monkeypatch):
    """T = min(ceil(epochs/q), max_steps): the loop draws exactly the capped number of batches the plan charges."""
    import pipelines.generators.wgan as wgan

    schedule = Schedule(monkeypatch).wrap(wgan, "critic")
    gen = make_generator(
        "dpwgan",
        MIXED,
        {
            "epochs": 1,
            "batch_size": 10,
            "max_steps": 3,
            "critic_hidden": [8],
            "generator_hidden": [8],
            "latent_dim": 4,
            "noise_seed": 0,
            "calibration": {"share": 0},
        },
        "cpu",
    )
    gen.fit(mixed_data(50), FakeSession(), Budget(2.0, DELTA))
    (event,) = planned_events(gen)
    assert (event.sample_rate, event.steps) == (10 / 50, 3)  # uncapped: ceil(1 / 0.2) = 5
    assert_phase(schedule, "critic", event, 50, event.noise_multiplier, releases=1, n_rows=50)


@pytest.mark.parametrize(
    "name,n_hat,steps",
    [
        ("dpwgan", 39074, (10000,)),
        ("dpwgan", 16000, (7500,)),
        ("dpwgan", 1000, (469,)),
        ("dp_auto_gan", 39074, (25000, 10000)),
        ("dp_auto_gan", 16000, (25000, 7500)),
        ("ppem", 39074, (6400, 1600)),
        ("ppem", 1000, (626, 156)),
    ],
)
@pytest.mark.slow
def test_default_step_caps_bind_only_on_large_tables(name, n_hat, steps):
    """The defaults' caps (dpwgan 10,000; dp_auto_gan 25,000 / 10,000; PPEM 8,000 = 6,400 energy + 1,600
    generator steps) at Adult's 39,074 training rows; below them the epochs rule is unchanged (PPEM at 1,000 rows:
    ceil(100 / 0.128) = 782 steps)."""
    params = {"calibration": {"share": 0}, **({"protected": ["income"]} if name == "ppem" else {})}
    gen = make_generator(name, MIXED, params, "cpu")
    assert tuple(e.steps for e in gen.plan(n_hat, Budget(1.0, DELTA)).events) == steps


@pytest.mark.slow
def test_dp_auto_gan_runs_both_planned_phases_at_their_rates(monkeypatch):
    import pipelines.generators.dp_auto_gan as dp_auto_gan
    import pipelines.generators.wgan as wgan

    schedule = Schedule(monkeypatch).wrap(dp_auto_gan, "autoencoder").wrap(wgan, "critic")
    n = 60
    gen = make_generator(
        "dp_auto_gan",
        MIXED,
        {
            "autoencoder_epochs": 1,
            "autoencoder_batch_size": 20,
            "epochs": 1,
            "batch_size": 12,
            "autoencoder_hidden": [8],
            "latent_dim": 3,
            "critic_hidden": [8],
            "generator_hidden": [8],
            "noise_dim": 4,
            "noise_seed": 0,
            "calibration": {"share": 0},
        },
        "cpu",
    )
    gen.fit(mixed_data(n), FakeSession(), Budget(2.0, DELTA))
    autoencoder, critic = planned_events(gen)
    assert (autoencoder.steps, critic.steps) == (3, 5)
    n_hat = gen.privacy.n_rows
    assert_phase(schedule, "autoencoder", autoencoder, n, autoencoder.noise_multiplier, releases=1, n_rows=n_hat)
    assert_phase(schedule, "critic", critic, n, critic.noise_multiplier, releases=1, n_rows=n_hat)
    assert [e[1] for e in schedule.log if e[0] == "batch"] == ["autoencoder"] * 3 + ["critic"] * 5  # phase 1 first


@pytest.mark.slow
def test_ppem_runs_the_planned_energy_and_generator_steps(monkeypatch):
    """T batches; T − T_G of them privatised by two releases (ξ, γ: σ/√2 composed) and T_G, the generator
    steps, by three (ξ, γ, υ: σ/√3 composed), each release at the plan's σ over q·n."""
    import pipelines.generators.ppem as ppem

    schedule = Schedule(monkeypatch).wrap(ppem, "ppem")
    n = 80
    gen = make_generator(
        "ppem",
        MIXED,
        {
            "steps": 7,
            "energy_steps": 3,
            "batch_size": 16,
            "hidden": 8,
            "latent_dim": 4,
            "protected": ["age", "income"],
            "noise_seed": 0,
            "calibration": {"share": 0},
        },
        "cpu",
    )
    gen.fit(mixed_data(n), FakeSession(), Budget(2.0, DELTA))
    energy, generator = planned_events(gen)
    sigma, q = gen.privacy.noise_multiplier, 16 / n
    assert (energy.steps, generator.steps) == (5, 2) and energy.sample_rate == generator.sample_rate == q
    assert energy.noise_multiplier == pytest.approx(sigma / math.sqrt(2))
    assert generator.noise_multiplier == pytest.approx(sigma / math.sqrt(3))
    assert len(schedule.batches("ppem")) == energy.steps + generator.steps
    assert set(schedule.batches("ppem")) == {(n, q)}
    per_batch = schedule.releases_per_batch("ppem")
    assert [len(r) for r in per_batch] == [2, 2, 3, 2, 2, 3, 2]  # generator steps after every 3rd
    assert_releases(per_batch, sigma, q * gen.privacy.n_rows)


@pytest.mark.integration
def test_priv_mlp_runs_the_planned_lots_at_the_planned_rate(monkeypatch):
    """Algorithm 1: T lots, each drawing the N_D private rows and the N_G synthetic rows at q = L/(N_D + N_G),
    one Gaussian release per lot at σ over q·(N_D + N_G)."""
    from pipelines.weights import estimators, relaxed_dpsgd

    schedule = Schedule(monkeypatch).wrap(relaxed_dpsgd, "priv_mlp")
    n_real, n_synthetic = 40, 60
    settings = {"epochs": 1, "batch_size": 25, "hidden": [8], "noise_seed": 0}
    plan = estimators.plan("priv_mlp", settings, MIXED, n_real, n_synthetic, 2.0, DELTA)
    (event,) = plan.events
    q = 25 / (n_real + n_synthetic)
    assert (event.sample_rate, event.steps) == (q, 4)
    estimators.estimate(plan, settings, mixed_data(n_real), mixed_data(n_synthetic, seed=1))
    assert schedule.batches("priv_mlp", n_real) == [(n_real, q)] * event.steps
    assert schedule.batches("priv_mlp", n_synthetic) == [(n_synthetic, q)] * event.steps
    releases = [e[2:] for e in schedule.log if e[0] == "release"]
    assert len(releases) == event.steps
    assert_releases([releases], event.noise_multiplier, q * (n_real + n_synthetic))


@pytest.mark.parametrize(
    "name, params",
    [
        ("dpwgan", {"epochs": 1, "batch_size": 10, "critic_hidden": [8], "generator_hidden": [8], "latent_dim": 4}),
        (
            "ppem",
            {
                "steps": 4,
                "energy_steps": 2,
                "batch_size": 10,
                "hidden": 8,
                "latent_dim": 4,
                "protected": ["age", "income"],
            },
        ),
    ],
)
def test_non_private_loops_keep_the_planned_schedule(monkeypatch, name, params):
    """ε = inf trains on the same schedule (T batches at q), without noise."""
    import pipelines.generators.ppem as ppem
    import pipelines.generators.wgan as wgan

    schedule = Schedule(monkeypatch).wrap(wgan if name == "dpwgan" else ppem, name)
    gen = make_generator(name, MIXED, params, "cpu")
    gen.fit(mixed_data(50), FakeSession(), Budget(math.inf, DELTA))
    assert planned_events(gen)[0] == NonPrivateEvent("epsilon: inf")
    assert schedule.batches(name) == [(50, gen.privacy.sample_rate)] * gen.privacy.steps
    assert gen.privacy.steps == (5 if name == "dpwgan" else 4)


# -- ε = inf: streams from the public seed, never OS entropy ---------------------------------------------

NON_PRIVATE = {
    "dpwgan": {"steps": 4, "batch_size": 16, "critic_hidden": [8], "generator_hidden": [8], "latent_dim": 4},
    "dp_auto_gan": {
        "autoencoder_steps": 3,
        "steps": 3,
        "autoencoder_batch_size": 16,
        "batch_size": 16,
        "autoencoder_hidden": [8],
        "latent_dim": 3,
        "critic_hidden": [8],
        "generator_hidden": [8],
        "noise_dim": 4,
    },
    "ppem": {
        "steps": 4,
        "energy_steps": 2,
        "batch_size": 16,
        "hidden": 8,
        "latent_dim": 4,
        "protected": ["age", "income"],
    },
    "pearl": {"frequencies": 16, "steps": 5, "batch_size": 16, "hidden": [8], "latent_dim": 4},
    "iw_mmd_gan": {"steps": 5, "batch_size": 16, "hidden": [8], "code_dim": 4, "frequencies": 16, "n_critic": 2},
    "support_points": {"n_points": 4, "burn_in": 20, "steps": 40, "thin": 10},
}


@pytest.fixture
def no_os_entropy(monkeypatch):
    """OS entropy (the only source pipelines/privacy/noise.py has) fails the test if drawn."""
    import pipelines.privacy.noise as noise

    def refuse(_bits: int) -> int:
        raise AssertionError("a non-private path drew OS entropy; derive its streams from the public seed")

    monkeypatch.setattr(noise.secrets, "randbits", refuse)


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(NON_PRIVATE))
def test_non_private_generators_are_a_function_of_the_public_seed(no_os_entropy, name):
    def run(seed: int) -> np.ndarray:
        gen = make_generator(name, MIXED, {**NON_PRIVATE[name], "seed": seed}, "cpu")
        gen.fit(mixed_data(48), FakeSession(), Budget(math.inf, DELTA))
        return gen.sample(20, 1)

    first = run(0)
    np.testing.assert_array_equal(first, run(0))
    assert not np.array_equal(first, run(3))


@pytest.mark.parametrize("estimator", ["logreg", "mlp"])
def test_non_private_weight_estimators_are_a_function_of_the_public_seed(no_os_entropy, estimator):
    from pipelines.weights import estimators

    real, synthetic = mixed_data(40), mixed_data(60, seed=1)

    def run(seed: int) -> np.ndarray:
        settings = {"epochs": 1, "batch_size": 25, "hidden": [8], "seed": seed}
        plan = estimators.plan(estimator, settings, MIXED, len(real), len(synthetic), math.inf, DELTA)
        return estimators.estimate(plan, settings, real, synthetic)[0]

    np.testing.assert_array_equal(run(0), run(0))
    if estimator == "mlp":
        assert not np.array_equal(run(0), run(3))


def test_private_paths_still_draw_os_entropy_without_a_noise_seed():
    from pipelines.privacy.noise import NoiseSource

    source, seeded = NoiseSource(), NoiseSource(noise_seed=7)
    assert source.material("g:noise") != source.material("g:noise")
    assert source.material("g:noise", private=False, seed=0) == source.material("g:noise", private=False, seed=0)
    assert source.material("g:noise", private=False, seed=0) != source.material("g:noise", private=False, seed=1)
    assert seeded.material("g:noise", private=False, seed=0) == seeded.material("g:noise", private=False, seed=1)
    assert seeded.material("g:noise") == seeded.material("g:noise") != seeded.material("g:noise", private=False, seed=0)
    with pytest.raises(ValueError, match="public seed"):
        source.material("g:noise", private=False)
