"""Audit cases (tests/audit_harness.py) for the DP-SGD mechanisms, each run on the owner's own training loop.

Every case builds its owner with a tiny configuration (one training step, batch_size >= n so q = 1),
plans it with the real plan() for the public row count |D'|, scales the planned noise multiplier by
`noise_scale` after planning, and runs the owner's real entry point (the generator's `fit`, with the plan
already made and a session that accepts it; `estimators.estimate` for priv_mlp, on the `io.MatrixFile`s the weight
stage hands it) once per run with
`noise_seed` = a function of (run, neighbour, noise scale). The privatised output is the gradient the
loop hands to its optimiser (captured at `optimizer.step`): every release of a step goes to one
optimiser (PPEM: ξ → the marginal energy's Adam, γ → the conditional energy's, υ → G_υ's).

Neighbours: D = a few rows in the middle of the encoded cube; D' = D plus a canary row at a corner,
whose clipped gradient reaches its clip. The score of a run is the projection of its captured gradient
on a fixed direction v: the mean, over `DIRECTION_RUNS` noise-free runs of the same loop (σ = 0), of
grad(D') − grad(D), normalised. v is computed from the code itself, so it follows the canary's clipped
terms whatever the network. The networks start from the public `seed`, then from a documented worst
case (`aligned_linear_critic`, `worst_case_ppem`; DP must hold for every parameter value) in which the
canary's terms add up to (nearly) the full sensitivity along one direction and nothing but the DP noise
varies between runs: otherwise the audit could not reach the claim at half the noise. The releases of
one step (PPEM's ξ, γ, υ; DP-auto-GAN's two phases) share the runs of one `Runner`; `noise_scale`
scales every planned multiplier of the owner.

Claims: a step that makes k releases on one batch is planned as one PoissonGaussianEvent with noise
multiplier σ/√k; each release alone is a Gaussian mechanism with multiplier σ (its own sensitivity
and noise), so a case auditing one release claims ε(PoissonGaussianEvent(√k · planned, 1, 1); δ), the
decomposition that tests/test_privacy_contract.py checks. The audit δ is 1e-2 (a point on the same
privacy curve): with ~2,000 runs of a real training loop, a claim at δ = 1e-5 is out of reach of any
Clopper-Pearson bound, while at δ = 1e-2 half the noise is detected with margin.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import tempfile
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audit_harness import AuditCase
from support.ledger import FakeSession
from pipelines.data.layout import Block, Layout
from pipelines.generators.base import Budget
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import Event, PoissonGaussianEvent

AUDIT_DELTA = 1e-2
RELEASE_SIGMA = 1.3  # target noise multiplier of ONE release: claim ≈ 1.63 at δ = 1e-2
N_BASE = 8  # |D|; D' adds the canary
DIRECTION_RUNS = 16

LAYOUT = Layout(
    (
        Block("a", "continuous", 0, 1, protected=True),
        Block("b", "continuous", 1, 2, protected=True),
        Block("c", "continuous", 2, 3),
        Block("d", "binary", 3, 4),
    )
)
D = torch.full((N_BASE, LAYOUT.width), 0.5)
D_PRIME = torch.cat([D, torch.tensor([[1.0, 0.0, 1.0, 1.0]])])


def release_claim(noise_multiplier: float) -> float:
    """ε at AUDIT_DELTA of one Gaussian release with this noise multiplier (q = 1, T = 1)."""
    return epsilon_pld([PoissonGaussianEvent(noise_multiplier, 1.0, 1)], AUDIT_DELTA)


def budget_for(k: int) -> Budget:
    """The budget whose one-step plan (q = 1) gives each of k releases the multiplier RELEASE_SIGMA."""
    return Budget(release_claim(RELEASE_SIGMA / math.sqrt(k)), AUDIT_DELTA)


@contextlib.contextmanager
def captured_steps() -> Iterator[list[tuple[torch.nn.Parameter, list[torch.Tensor]]]]:
    """Record, at every Adam / SGD step, (first parameter, [grad of each parameter]) in call order."""
    log: list[tuple[torch.nn.Parameter, list[torch.Tensor]]] = []
    originals = {cls: cls.step for cls in (torch.optim.Adam, torch.optim.SGD)}

    def wrap(original: Callable) -> Callable:
        def step(self: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
            params = [p for g in self.param_groups for p in g["params"]]
            log.append(
                (params[0], [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in params])
            )
            return original(self, *args, **kwargs)

        return step

    try:
        for cls, original in originals.items():
            cls.step = wrap(original)
        yield log
    finally:
        for cls, original in originals.items():
            cls.step = original


class Runner:
    """Runs an owner's real training loop on D or D' and keeps, per run, the release of each target.

    `setup()` -> (owner, run(owner, data, noise_seed)); `targets`: {name: owner -> the module whose
    optimiser step carries that release}. The releases of one step share the runs of one Runner (each
    case's test is valid on its own; the cases of one step are then not independent of each other).
    """

    def __init__(
        self,
        setup: Callable[[], tuple[Any, Callable[[Any, torch.Tensor, int], None]]],
        targets: dict[str, Callable[[Any], torch.nn.Module]],
        neighbours: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        self.setup, self.targets = setup, targets
        self.d, self.d_prime = neighbours or (D, D_PRIME)
        self._cache: dict[tuple[bool, float, int], dict[str, torch.Tensor]] = {}

    @lru_cache(maxsize=None)
    def _state(self) -> tuple[Any, Callable, dict[str, dict[str, torch.Tensor]]]:
        owner, run = self.setup()
        start = {name: {k: v.clone() for k, v in net.state_dict().items()} for name, net in owner.networks.items()}
        return owner, run, start

    def releases(self, neighbour: bool, sigma_scale: float, seed: int) -> dict[str, torch.Tensor]:
        """{target: the gradient its optimiser received at its first step} for one run."""
        key = (neighbour, sigma_scale, seed)
        if key not in self._cache:
            owner, run, start = self._state()
            for name, net in owner.networks.items():
                net.load_state_dict(start[name])
            owner.scale_sigma(sigma_scale)
            try:
                with torch.random.fork_rng(devices=[]), captured_steps() as log:
                    torch.manual_seed(seed)
                    run(owner, self.d_prime if neighbour else self.d, seed)
            finally:
                owner.scale_sigma(1.0)
            out = {}
            for name, target in self.targets.items():
                first = next(iter(target(owner).parameters()))
                out[name] = torch.cat([g.flatten() for g in next(grads for p, grads in log if p is first)])
            self._cache[key] = out
        return self._cache[key]


class LoopAudit:
    """The scores of one release (`name` of a Runner target): projections on the canary's direction."""

    def __init__(self, runner: Runner, name: str) -> None:
        self.runner, self.name = runner, name

    def _release(self, neighbour: bool, sigma_scale: float, seed: int) -> torch.Tensor:
        return self.runner.releases(neighbour, sigma_scale, seed)[self.name]

    @lru_cache(maxsize=None)
    def direction(self) -> torch.Tensor:
        shift = sum(self._release(True, 0.0, s) - self._release(False, 0.0, s) for s in range(DIRECTION_RUNS))
        return shift / shift.norm()

    def scores(self, neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
        v = self.direction()
        base = 1_000_000 * (1 + int(neighbour)) + 100_000 * int(round(noise_scale * 10))
        return np.array([float(self._release(neighbour, noise_scale, base + r) @ v) for r in range(n_runs)])


class Owner:
    """The audited object, its networks (reset before every run) and how to scale its planned noise multipliers."""

    def __init__(self, obj: Any, networks: dict[str, torch.nn.Module], scale_sigma: Callable[[float], None]) -> None:
        self.obj, self.networks, self.scale_sigma = obj, networks, scale_sigma


def plan_scaler(gen: Any, fields: tuple[str, ...]) -> Callable[[float], None]:
    """Scale the noise-multiplier `fields` of `gen`'s typed plan (as made before the runs) by a factor: the plan
    is replaced by a copy (`dataclasses.replace`); 1.0 restores the plan itself."""
    planned = gen.privacy

    def scale(factor: float) -> None:
        gen.privacy = dataclasses.replace(planned, **{f: getattr(planned, f) * factor for f in fields})

    return scale


# -- dpwgan: the critic step ------------------------------------------------------------------------

# every owner here runs its method alone (calibration share 0): the calibration is audited by
# tests/audit_cases_calibration.py
DPWGAN_PARAMS = {
    "steps": 1,
    "batch_size": 64,
    "critic_hidden": [],
    "generator_hidden": [8],
    "latent_dim": 4,
    "calibration": {"share": 0.0},
}


def aligned_linear_critic(critic: torch.nn.Module) -> None:
    """Worst-case start for the canary: a linear critic D(x) = w·x + b (critic_hidden: []) has ∇ₓD = w for
    every input, so each record's gradient-penalty term λ(‖w‖ − 1)² has the same parameter gradient
    whatever its fake and u (no run-to-run variance), and with w = −1.5·1/√d (‖w‖ = 1.5 > 1) that
    gradient, ∝ w, points the same way as the canary's ∇(−D(x)) = −(x, 1) at x = 1: both clipped halves
    add up to a shift close to C along one direction."""
    layer = critic.net[0]
    with torch.no_grad():
        layer.weight.fill_(-1.5 / math.sqrt(layer.weight.shape[1]))
        layer.bias.zero_()


def _dpwgan() -> Any:
    from pipelines.generators.dpwgan import DPWGAN

    return DPWGAN(LAYOUT, {**DPWGAN_PARAMS, "noise_seed": 0})


def dpwgan_plan() -> list[Event]:
    return list(_dpwgan().plan(len(D_PRIME), budget_for(1)).events)


def _dpwgan_setup() -> tuple[Owner, Callable]:
    gen = _dpwgan()
    gen.plan(len(D_PRIME), budget_for(1))
    aligned_linear_critic(gen.critic)

    def run(owner: Owner, data: torch.Tensor, seed: int) -> None:
        owner.obj.params = owner.obj.params.model_copy(update={"noise_seed": seed})
        owner.obj.fit(data, FakeSession())

    return Owner(gen, {"critic": gen.critic, "generator": gen.generator}, plan_scaler(gen, ("noise_multiplier",))), run


# -- dp_auto_gan: the autoencoder step and the phase-2 critic step -----------------------------------

DP_AUTO_GAN_PARAMS = {
    "autoencoder_steps": 1,
    "autoencoder_batch_size": 64,
    "autoencoder_hidden": [8],
    "latent_dim": 3,
    "steps": 1,
    "batch_size": 64,
    "critic_hidden": [],
    "noise_dim": 4,
    "generator_hidden": [8],
    "calibration": {"share": 0.0},
}


def _dp_auto_gan() -> Any:
    from pipelines.generators.dp_auto_gan import DPAutoGAN

    return DPAutoGAN(LAYOUT, {**DP_AUTO_GAN_PARAMS, "noise_seed": 0})


def dp_auto_gan_plan() -> list[Event]:
    return list(_dp_auto_gan().plan(len(D_PRIME), _dp_auto_gan_budget()).events)


def _dp_auto_gan_budget() -> Budget:
    """Both phases one step at q = 1, split 50/50 and composed: each phase's multiplier is about
    RELEASE_SIGMA·√2/√2 (two Gaussians composed = one with σ/√2)."""
    return budget_for(2)


def _dp_auto_gan_setup() -> tuple[Owner, Callable]:
    """One setup for both phases: each run trains phase 1 then phase 2; both multipliers are scaled."""
    gen = _dp_auto_gan()
    gen.plan(len(D_PRIME), _dp_auto_gan_budget())
    aligned_linear_critic(gen.critic)

    def run(owner: Owner, data: torch.Tensor, seed: int) -> None:
        owner.obj.params = owner.obj.params.model_copy(update={"noise_seed": seed})
        owner.obj.fit(data, FakeSession())

    nets = {"autoencoder": gen.autoencoder, "critic": gen.critic, "generator": gen.generator}
    return Owner(gen, nets, plan_scaler(gen, ("autoencoder_noise_multiplier", "noise_multiplier"))), run


# -- ppem: the energy step (ξ with the KSD penalty, γ) and the generator step (ξ, γ, υ) --------------

PPEM_PARAMS = {
    "hidden": 8,
    "latent_dim": 4,
    "steps": 1,
    "batch_size": 64,
    "ksd_clip": 0.05,
    "margin": 0.0,
    "gp_lambda": 10.0,
    "calibration": {"share": 0.0},
}
PPEM_LAYOUT = Layout(
    (
        Block("a", "continuous", 0, 1, protected=True),
        Block("b", "continuous", 1, 2, protected=True),
        Block("c", "continuous", 2, 3),
    )
)
PPEM_D = 0.5 + torch.tensor([[0.1, -0.1, 0.0], [-0.1, 0.1, 0.0], [0.2, 0.1, 0.1], [-0.2, 0.0, -0.1]])  # >= 4 rows: KSD


def worst_case_ppem(gen: Any) -> None:
    """A worst-case start (DP must hold for every parameter value) in which the canary's terms reach their
    clips along one direction and nothing but the DP noise varies from run to run:
      - G_ω's and G_υ's latent weights are zero: each fake is a function of x′ alone (the heads of the
        all-numeric layout are sigmoids), so fakes do not vary; with margin 0 the fake terms
        [m − E(f)]₊ vanish (E >= 0);
      - both energies are put in their linear regime on the positive orthant (all weights |w|·3 >= 0,
        biases 0, output bias 20): E(x) ≈ a·x + 20 with a = W₃W₂W₁ > 0 for every encoded input x >= 0,
        so ∇ₓE = a everywhere and every record's gradient penalty λ(‖a‖ − 1)² has one parameter gradient,
        whatever its fake and interpolation weight; the KSD score −∇ₓE is constant too;
      - the canary's x′ points along a (canary_x_prime), where ∇_θE(x′) and ∇_θ(‖a‖ − 1)² point alike
        in the weights (‖a‖ > 1): its two halves clip_{C/2} add up to nearly C, the Δ_ξ = C + 2C_α
        of the derivation less the KSD part (C_α = 0.05 here).
    The steep conditional energy also makes the canary's L_γ and G_υ gradients exceed C."""
    with torch.no_grad():
        gen.gen_m.first.weight.zero_()
        gen.gen_c.first.weight.zero_()
        for energy in (gen.energy_m, gen.energy_c):
            layers = [m for m in energy.modules() if isinstance(m, torch.nn.Linear)]
            for layer in layers:
                layer.weight.abs_().mul_(3.0)
                layer.bias.zero_()
            energy.body[-1].bias.fill_(20.0)


def canary_x_prime(gen: Any) -> torch.Tensor:
    """x′ along a = W₃W₂W₁ of the worst-case marginal energy, scaled into [0, 1]."""
    e = gen.energy_m
    a = (e.body[3].weight @ e.body[1].weight @ e.first.weight).detach().flatten()
    return a / a.max()


def _ppem_neighbours() -> tuple[torch.Tensor, torch.Tensor]:
    gen = _ppem("energy_step")
    worst_case_ppem(gen)
    canary = torch.cat([canary_x_prime(gen), torch.ones(1)])
    return PPEM_D, torch.cat([PPEM_D, canary[None]])


PPEM_CONFIGS = {"energy_step": {"energy_steps": 2}, "generator_step": {"energy_steps": 1}}


def _ppem(config: str) -> Any:
    from pipelines.generators.ppem import PPEM

    return PPEM(PPEM_LAYOUT, {**PPEM_PARAMS, **PPEM_CONFIGS[config], "noise_seed": 0})


def _ppem_releases(config: str) -> int:
    return 2 if config == "energy_step" else 3


def ppem_plan(config: str) -> Callable[[], list[Event]]:
    return lambda: list(_ppem(config).plan(len(PPEM_D) + 1, budget_for(_ppem_releases(config))).events)


def _ppem_setup(config: str) -> Callable[[], tuple[Owner, Callable]]:
    def setup() -> tuple[Owner, Callable]:
        gen = _ppem(config)
        gen.plan(len(PPEM_D) + 1, budget_for(_ppem_releases(config)))
        worst_case_ppem(gen)

        def run(owner: Owner, data: torch.Tensor, seed: int) -> None:
            owner.obj.params = owner.obj.params.model_copy(update={"noise_seed": seed})
            owner.obj.fit(data, FakeSession())

        return Owner(gen, gen.networks, plan_scaler(gen, ("noise_multiplier",))), run

    return setup


# -- weights:priv_mlp: one relaxed DP-SGD lot (Algorithm 1) ------------------------------------------

PRIV_MLP_SETTINGS = {"hidden": [], "epochs": 1, "batch_size": 4096}  # a logistic model: one step, q = 1
# The canary at the all-ones corner: the linear model's −log σ(f(x)) has gradient −σ(−f(x))·(x, 1), of norm
# ≈ 0.5·√5 > C at the start, so its clipped gradient has norm C in one direction; every other row's lot
# membership and gradient (q = 1, fixed start) are the same in every run.
PRIV_MLP_NEIGHBOURS = (D, torch.cat([D, torch.ones(1, LAYOUT.width)]))
SYNTHETIC = torch.rand(16, LAYOUT.width, generator=torch.Generator().manual_seed(5)).numpy()


def _weight_plan(estimator: str, settings: dict[str, Any]) -> Any:
    """The weight estimator's real plan() for |D'| private rows and the synthetic rows, at budget_for(1)."""
    from pipelines.weights import estimators

    budget = budget_for(1)
    return estimators.plan(estimator, settings, LAYOUT, len(D_PRIME), len(SYNTHETIC), budget.epsilon, budget.delta)


def _priv_mlp_plan() -> Any:
    return _weight_plan("priv_mlp", PRIV_MLP_SETTINGS)


class _Classifier:
    """Holds the classifier that estimate() builds inside each run (captured at `relaxed_dpsgd.classifier`)."""

    current: torch.nn.Module


def _priv_mlp_setup() -> tuple[Owner, Callable]:
    """The weight stage's path: `estimate` reads the real and synthetic rows from `io.MatrixFile`s, as there."""
    from pipelines.io import MatrixFile
    from pipelines.weights import estimators, relaxed_dpsgd

    plan = _priv_mlp_plan()
    holder = _Classifier()
    scratch = tempfile.TemporaryDirectory(prefix="audit-priv-mlp-")  # removed with `run`
    synthetic = MatrixFile.write(Path(scratch.name) / "synthetic.npy", [SYNTHETIC], *SYNTHETIC.shape)

    def run(owner: Owner, data: torch.Tensor, seed: int, scratch: Any = scratch) -> None:
        original = relaxed_dpsgd.classifier
        real = MatrixFile.write(Path(scratch.name) / "real.npy", [data.numpy()], *data.shape)

        def classifier(width: int, hidden: list[int]) -> torch.nn.Sequential:
            holder.current = original(width, hidden)
            return holder.current

        relaxed_dpsgd.classifier = classifier
        try:
            estimators.estimate(plan, {**PRIV_MLP_SETTINGS, "noise_seed": seed}, real, synthetic)
        finally:
            relaxed_dpsgd.classifier = original

    planned = float(plan.details["noise_multiplier"])

    def scale(factor: float) -> None:
        plan.details["noise_multiplier"] = planned * factor

    owner = Owner(plan, {}, scale)
    owner.classifier = holder
    return owner, run


# -- plans and cases ---------------------------------------------------------------------------------

PLANS: dict[tuple[str, str], Callable[[], list[Event]]] = {
    ("dpwgan", "default"): lru_cache(maxsize=None)(dpwgan_plan),
    ("dp_auto_gan", "default"): lru_cache(maxsize=None)(dp_auto_gan_plan),
    **{("ppem", c): lru_cache(maxsize=None)(ppem_plan(c)) for c in PPEM_CONFIGS},
    ("weights:priv_mlp", "default"): lru_cache(maxsize=None)(lambda: _priv_mlp_plan().events),
    # the discriminator estimator releases a function of the already-private critic: an empty plan
    ("weights:discriminator", "default"): lru_cache(maxsize=None)(lambda: _weight_plan("discriminator", {}).events),
}


def _case(owner: str, config: str, event_index: int, mechanism: str, k: int, audit: LoopAudit) -> AuditCase:
    """One of the k releases that planned event `event_index` makes per step (module docstring): its claim is
    the accountant's ε for one step at q = 1 with the event's multiplier times √k."""

    def claim() -> float:
        return release_claim(PLANS[(owner, config)]()[event_index].noise_multiplier * math.sqrt(k))

    return AuditCase(owner, config, event_index, mechanism, claim, AUDIT_DELTA, audit.scores)


PPEM_NEIGHBOURS = _ppem_neighbours()
PPEM_TARGETS = {"ξ": lambda o: o.obj.energy_m, "γ": lambda o: o.obj.energy_c, "υ": lambda o: o.obj.gen_c}


def _ppem_cases(config: str, event_index: int) -> list[AuditCase]:
    k = _ppem_releases(config)
    names = list(PPEM_TARGETS)[:k]
    runner = Runner(_ppem_setup(config), {n: PPEM_TARGETS[n] for n in names}, neighbours=PPEM_NEIGHBOURS)
    step = "energy step" if config == "energy_step" else "generator step"
    what = {
        "ξ": "ξ (marginal energy + KSD penalty, Δ = C + 2C_α)",
        "γ": "γ (conditional energy, Δ = C)",
        "υ": "υ (G_υ on real x′, Δ = C)",
    }
    return [_case("ppem", config, event_index, f"ppem {step}: {what[n]}", k, LoopAudit(runner, n)) for n in names]


DPWGAN_RUNNER = Runner(_dpwgan_setup, {"critic": lambda o: o.obj.critic})
DP_AUTO_GAN_RUNNER = Runner(
    _dp_auto_gan_setup, {"autoencoder": lambda o: o.obj.autoencoder, "critic": lambda o: o.obj.critic}
)
PRIV_MLP_RUNNER = Runner(
    _priv_mlp_setup, {"classifier": lambda o: o.classifier.current}, neighbours=PRIV_MLP_NEIGHBOURS
)

CASES: list[AuditCase] = [
    _case("dpwgan", "default", 0, "dpwgan critic step (WGAN-GP, Δ = C)", 1, LoopAudit(DPWGAN_RUNNER, "critic")),
    _case(
        "dp_auto_gan",
        "default",
        0,
        "dp_auto_gan autoencoder step (joint φ, θ, Δ = C1)",
        1,
        LoopAudit(DP_AUTO_GAN_RUNNER, "autoencoder"),
    ),
    _case(
        "dp_auto_gan",
        "default",
        1,
        "dp_auto_gan phase-2 critic step (Δ = C)",
        1,
        LoopAudit(DP_AUTO_GAN_RUNNER, "critic"),
    ),
    *_ppem_cases("energy_step", 0),
    *_ppem_cases("generator_step", 0),
    _case(
        "weights:priv_mlp",
        "default",
        0,
        "priv_mlp relaxed DP-SGD lot (Algorithm 1, Δ = C)",
        1,
        LoopAudit(PRIV_MLP_RUNNER, "classifier"),
    ),
]
