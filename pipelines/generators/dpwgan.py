"""DP-WGAN: the DP-GAN baseline (WGAN-GP critic trained with DP-SGD, generator by post-processing).

Critic loss (Gulrajani et al. 2017, Eq. 3), split by what touches a real record:

    L_D = E_f[D(f)]  +  E_x[ −D(x) + λ (‖∇_x̂ D(x̂)‖₂ − 1)² ],   x̂ = u·x + (1−u)·f,  u ~ U[0,1]
          fake-only      real-touching: per-example, clipped + noised

Each critic step Poisson-samples real rows at rate q = batch_size / n, pairs every sampled x_i with
a fresh fake f_i and u_i, and privatises the real-touching per-example gradients with DP-SGD
(Abadi et al. 2016, Alg. 1; `pipelines.privacy.dpsgd`). Clipping is split: ∇(−D(x_i)) is clipped to
C/2 and ∇ of the penalty term to C/2, so their sum has norm ≤ C (triangle inequality) and
`clip_and_noise(·, C, σ)` adds N(0, σ²C²) and divides by q·n: sensitivity C, as accounted.

The fake-only term depends only on the (already private) critic and generator, so it gets no noise
and is added after privatisation (ARCHITECTURE rule 3). It is taken over a fixed number
`batch_size` of fakes (never the realised real batch size, which is private) and each ∇D(f_j) is
clipped to the same C/2 as ∇(−D(x_i)), without noise. Why: with a plain fake gradient but clipped
real gradients the critic descends E[D(f)] − c·E[D(x)] with c < 1, which rewards lowering D
everywhere; measured on breast cancer at ε = 3 the output offset drifted to D ≈ −16 (both real and
fake) within 300 steps, starving the penalty and the generator of signal. Clipping both sides alike
removes the drift (D stays O(1)). With ε = inf there is no clipping (C = inf) and no noise.

The generator minimises −E_z D(G(z)) and sees data only through the private critic: post-processing.
T critic steps spend exactly PoissonGaussianEvent(σ, q, T); σ is calibrated with the PLD accountant.
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from pipelines.data.layout import Layout
from pipelines.generators.base import Budget, LedgerSession, load_networks, merge_params, read_meta, save_networks
from pipelines.generators.heads import OutputHeads
from pipelines.generators.losses import Forward, gradient_penalty
from pipelines.privacy.accountant import calibrate_noise_multiplier
from pipelines.privacy.dpsgd import clip_and_noise, clip_per_example, example_grads, poisson_sample
from pipelines.privacy.events import Event, NonPrivateEvent, PoissonGaussianEvent, event_from_dict, event_to_dict

DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,             # target ε; "inf" trains without clipping or noise
    "delta": 1e-5,              # used only when fit() gets no budget and plan() was not called
    "epochs": 60,               # T = ceil(epochs / q) critic (DP-SGD) steps ...
    "steps": None,              # ... unless steps (T) is given instead
    "batch_size": 128,          # expected real batch size q·n (Poisson sampling)
    "n_critic": 2,              # critic steps per generator step
    "clip_norm": 1.0,           # per-example L2 clipping norm C
    "lr_critic": 2e-3,          # Adam, betas (0.5, 0.9), for both networks
    "lr_generator": 2e-3,
    "gp_lambda": 10.0,          # λ of the gradient penalty
    "latent_dim": 32,
    "critic_hidden": [32],      # small on purpose: DP noise grows with the number of critic parameters
    "generator_hidden": [64, 64],
    "gumbel_tau": 0.2,          # temperature of the relaxed binary / categorical output heads
    "seed": 0,
}




def _mlp(sizes: list[int]) -> nn.Sequential:
    """Linear → LayerNorm → LeakyReLU(0.2) hidden blocks, then a linear output layer."""
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-2], sizes[1:-1]):
        layers += [nn.Linear(a, b), nn.LayerNorm(b), nn.LeakyReLU(0.2)]
    layers.append(nn.Linear(sizes[-2], sizes[-1]))
    return nn.Sequential(*layers)


class Critic(nn.Module):
    """WGAN critic: Linear → LayerNorm → LeakyReLU(0.2) blocks (never BatchNorm: it mixes examples,
    so one record would influence every other example's gradient and per-example clipping breaks)."""

    def __init__(self, width: int, hidden: list[int]) -> None:
        super().__init__()
        self.net = _mlp([width, *hidden, 1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


class Generator(nn.Module):
    """MLP from N(0, I) latents to the encoded layout, one output head per Layout block
    (`pipelines.generators.heads`: sigmoid numerics, relaxed Bernoulli / Gumbel-softmax discretes)."""

    def __init__(self, layout: Layout, latent_dim: int, hidden: list[int], tau: float) -> None:
        super().__init__()
        self.heads = OutputHeads(layout, tau)
        self.net = _mlp([latent_dim, *hidden, layout.width])
        self.latent_dim = latent_dim

    def forward(self, z: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return self.heads(self.net(z), self.heads.uniforms(z.shape[0], generator))


def _neg_critic(forward: Forward, x: torch.Tensor) -> torch.Tensor:
    """Real-row Wasserstein term −D(x_i) of one example."""
    return -forward(x).sum()


def _critic(forward: Forward, f: torch.Tensor) -> torch.Tensor:
    """Fake-row Wasserstein term D(f_j) of one example."""
    return forward(f).sum()


def critic_gradient(critic: nn.Module, real: torch.Tensor, paired_fake: torch.Tensor, u: torch.Tensor,
                    fake: torch.Tensor, clip_norm: float, noise_multiplier: float, expected_batch_size: float,
                    gp_lambda: float, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Gradient of one DP-WGAN critic step (module docstring): {parameter name: gradient}.

    real (B, d) with its paired fakes (B, d) and interpolation weights u (B, 1): the real-touching
    terms, ∇(−D(x_i)) and ∇λ(‖∇D(x̂_i)‖−1)² each clipped to C/2, then `clip_and_noise` (C, σ, q·n).
    fake (m, d), m fixed: the fake-only term (1/m) Σ_j clip_{C/2}(∇D(f_j)), no noise.
    """
    half = clip_norm / 2
    wass = clip_per_example(example_grads(critic, _neg_critic, half, real), half)
    gp = clip_per_example(example_grads(critic, gradient_penalty(gp_lambda), half, real, paired_fake, u), half)
    private = clip_and_noise({k: wass[k] + gp[k] for k in wass}, clip_norm, noise_multiplier,
                             expected_batch_size, generator)
    fake_term = clip_per_example(example_grads(critic, _critic, half, fake), half)
    return {k: private[k] + fake_term[k].sum(0) / fake.shape[0] for k in private}


class DPWGAN:
    """DP-WGAN generator (see module docstring). `params`: the params.yaml section; DEFAULTS fill gaps."""

    name = "dpwgan"

    def __init__(self, layout: Layout, params: dict | None = None, device: str = "cpu") -> None:
        self.layout, self.device = layout, device
        self.params = merge_params(self.name, DEFAULTS, params)
        p = self.params
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(p["seed"]))
            self.generator = Generator(layout, int(p["latent_dim"]), list(p["generator_hidden"]),
                                       float(p["gumbel_tau"])).to(device)
            self.critic = Critic(layout.width, list(p["critic_hidden"])).to(device)
        self.privacy: dict[str, Any] | None = None  # set by plan(): n_rows, ε, δ, σ, q, T, C, events

    # -- privacy plan ------------------------------------------------------------------------
    def plan(self, n_rows: int, budget: Budget) -> list[Event]:
        """The DP-SGD spend for `n_rows` rows under `budget`; data-independent (public row count only).

        q = min(1, batch_size/n), T = steps or ceil(epochs/q), σ = smallest noise multiplier with
        PLD ε(σ, q, T; δ) ≤ budget.ε. ε = inf: no clipping, no noise, a NonPrivateEvent.
        """
        if n_rows < 1:
            raise ValueError(f"n_rows must be >= 1, got {n_rows}")
        p = self.params
        q = min(1.0, p["batch_size"] / n_rows)
        steps = int(p["steps"]) if p["steps"] is not None else int(math.ceil(p["epochs"] / q))
        if budget.private:
            sigma, clip = calibrate_noise_multiplier(budget.epsilon, budget.delta, q, steps), float(p["clip_norm"])
            events: list[Event] = [PoissonGaussianEvent(sigma, q, steps)]
        else:
            sigma, clip = 0.0, math.inf
            events = [NonPrivateEvent("epsilon: inf")]
        self.privacy = {"n_rows": n_rows, "epsilon": budget.epsilon, "delta": budget.delta,
                        "noise_multiplier": sigma, "sample_rate": q, "steps": steps, "clip_norm": clip,
                        "events": [event_to_dict(e) for e in events]}
        return events

    # -- training ----------------------------------------------------------------------------
    def fit(self, X: Any, session: LedgerSession, budget: Budget | None = None) -> None:
        """Reserve the planned spend, then train; finally record the events actually spent.

        The plan comes from `budget` (with len(X), the public row count) if given, else from an
        earlier plan() call, else from params' epsilon/delta. X is not read before reserve().
        """
        if budget is not None or self.privacy is None:
            budget = budget or Budget(self.params["epsilon"], float(self.params["delta"]))
            self.plan(len(X), budget)
        planned = [event_from_dict(e) for e in self.privacy["events"]]
        session.reserve(planned)

        data = torch.as_tensor(np.asarray(X, dtype=np.float32), device=self.device)
        if data.shape != (self.privacy["n_rows"], self.layout.width):
            raise ValueError(f"X has shape {tuple(data.shape)}, planned ({self.privacy['n_rows']}, "
                             f"{self.layout.width})")
        self._train(data)
        session.record(planned)

    def _train(self, data: torch.Tensor) -> None:
        p, priv = self.params, self.privacy
        n, q, steps = data.shape[0], priv["sample_rate"], priv["steps"]
        sigma, clip, private = priv["noise_multiplier"], priv["clip_norm"], priv["noise_multiplier"] > 0
        expected, n_fake = q * n, int(p["batch_size"])
        rng = torch.Generator(device=self.device).manual_seed(int(p["seed"]))
        sample_rng = torch.Generator().manual_seed(int(p["seed"]) + 1)
        opt_d = torch.optim.Adam(self.critic.parameters(), lr=p["lr_critic"], betas=(0.5, 0.9))
        opt_g = torch.optim.Adam(self.generator.parameters(), lr=p["lr_generator"], betas=(0.5, 0.9))
        critic_params = dict(self.critic.named_parameters())
        start, report_every, g_loss = time.perf_counter(), max(1, steps // 10), float("nan")
        self.generator.train(), self.critic.train()
        for step in range(1, steps + 1):
            real = data[poisson_sample(n, q, sample_rng).to(self.device)]
            b = real.shape[0]
            with torch.no_grad():
                fake = self._fake(b + n_fake, rng)
            u = torch.rand(b, 1, generator=rng, device=self.device)
            grads = critic_gradient(self.critic, real, fake[:b], u, fake[b:], clip, sigma, expected,
                                    float(p["gp_lambda"]), rng)
            for name, param in critic_params.items():
                param.grad = grads[name]
            opt_d.step()

            if step % int(p["n_critic"]) == 0:
                opt_g.zero_grad(set_to_none=True)
                loss = -self.critic(self._fake(n_fake, rng)).mean()
                loss.backward(inputs=list(self.generator.parameters()))
                opt_g.step()
                g_loss = loss.item()
            if step % report_every == 0 or step == steps:
                # A critic loss on real rows is not covered by DP: it is printed only when ε = inf.
                with torch.no_grad():
                    fake_score = self.critic(fake[b:]).mean().item()
                    critic = "" if private else f"  critic loss {fake_score - self.critic(real).mean().item():+.4f}"
                print(f"dpwgan step {step}/{steps}{critic}  D(fake) {fake_score:+.4f}  generator loss {g_loss:+.4f}"
                      f"  {time.perf_counter() - start:.1f}s", file=sys.stderr, flush=True)
        self.generator.eval(), self.critic.eval()

    def _fake(self, n: int, rng: torch.Generator) -> torch.Tensor:
        z = torch.randn(n, self.generator.latent_dim, generator=rng, device=self.device)
        return self.generator(z, rng)

    # -- sampling and persistence ------------------------------------------------------------
    def sample(self, n: int, seed: int) -> np.ndarray:
        """n synthetic encoded rows, float32, layout.width columns, all in [0, 1]; binary values near {0, 1}
        and categorical blocks near one-hot (decode by threshold / argmax: exact samples)."""
        rng = torch.Generator(device=self.device).manual_seed(int(seed))
        self.generator.eval()
        with torch.no_grad():
            chunks = [self._fake(min(8192, n - i), rng).cpu() for i in range(0, n, 8192)]
        out = torch.cat(chunks) if chunks else torch.empty(0, self.layout.width)
        return out.numpy().astype(np.float32)

    def save(self, directory: Path) -> None:
        """Write generator.pt, critic.pt and dpwgan.json (params, layout, privacy plan)."""
        save_networks(directory, self.name, {"generator": self.generator, "critic": self.critic}, {
            "generator": self.name, "params": self.params, "layout": self.layout.to_dict(), "privacy": self.privacy})

    @classmethod
    def load(cls, directory: Path, device: str = "cpu") -> "DPWGAN":
        meta = read_meta(directory, cls.name)
        model = cls(Layout.from_dict(meta["layout"]), meta["params"], device)
        load_networks(directory, {"generator": model.generator, "critic": model.critic}, device)
        model.privacy = meta["privacy"]
        return model
