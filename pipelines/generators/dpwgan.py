"""DP-WGAN: the DP-GAN baseline (WGAN-GP critic trained with DP-SGD, generator by post-processing).

The critic step, its sensitivity (real-row terms clipped to C/2 + C/2 and noised, fake-only terms
clipped to C/2 without noise, and why) and the training loop are in `pipelines.generators.wgan`,
shared with DP-auto-GAN's phase 2. T critic steps spend exactly PoissonGaussianEvent(σ, q, T);
σ is calibrated with the PLD accountant.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from pipelines.data.layout import Layout
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.heads import OutputHeads
from pipelines.generators.networks import initialise, layer_norm_leaky, mlp
from pipelines.generators.sampling import sample_rows
from pipelines.generators.wgan import Critic, train_wgan
from pipelines.privacy.accountant import calibrate_noise_multiplier
from pipelines.privacy.dpsgd import Rng, sampling_schedule, standard_normal
from pipelines.privacy.events import Event, NonPrivateEvent, PoissonGaussianEvent
from pipelines.privacy.noise import Streams
from pipelines.privacy.plan import DPSGDPlan


class Generator(nn.Module):
    """MLP from N(0, I) latents to the encoded layout, one output head per Layout block
    (`pipelines.generators.heads`: sigmoid numerics, relaxed Bernoulli / Gumbel-softmax discretes)."""

    def __init__(self, layout: Layout, latent_dim: int, hidden: list[int], tau: float) -> None:
        super().__init__()
        self.heads = OutputHeads(layout, tau)
        self.net = mlp([latent_dim, *hidden, layout.width], layer_norm_leaky)
        self.latent_dim = latent_dim

    def forward(self, z: torch.Tensor, generator: Rng) -> torch.Tensor:
        return self.heads(self.net(z), self.heads.uniforms(z.shape[0], generator))


class DPWGAN(PrivateGenerator):
    """DP-WGAN generator (see module docstring). `params`: the params.yaml section over
    `pipelines.generators.params.dpwgan.Params`."""

    name = "dpwgan"

    def build(self) -> None:
        p = self.params
        self.generator = Generator(self.layout, int(p.latent_dim), list(p.generator_hidden), float(p.gumbel_tau))
        self.critic = Critic(self.layout.width, list(p.critic_hidden))
        initialise(self.generator, p.seed).to(self.device)
        initialise(self.critic, int(p.seed) + 1).to(self.device)

    @property
    def networks(self) -> dict[str, nn.Module]:
        return {"generator": self.generator, "critic": self.critic}

    def _plan(self, n_rows: int, budget: Budget) -> DPSGDPlan:
        """The DP-SGD spend for n̂ = `n_rows` under `budget`: q = min(1, batch_size/n̂), T = steps or
        min(ceil(epochs/q), max_steps), σ = smallest noise multiplier with PLD ε(σ, q, T; δ) ≤ budget.ε. ε = inf: no
        clipping, no noise, a NonPrivateEvent."""
        p = self.params
        q, steps = sampling_schedule(p.batch_size, n_rows, p.steps, p.epochs, p.max_steps)
        if budget.private:
            sigma, clip = calibrate_noise_multiplier(budget.epsilon, budget.delta, q, steps), float(p.clip_norm)
            events: tuple[Event, ...] = (PoissonGaussianEvent(sigma, q, steps),)
        else:
            sigma, clip, events = 0.0, math.inf, (NonPrivateEvent("epsilon: inf"),)
        return DPSGDPlan(
            n_rows=n_rows,
            epsilon=budget.epsilon,
            delta=budget.delta,
            events=events,
            noise_multiplier=sigma,
            sample_rate=q,
            steps=steps,
            clip_norm=clip,
        )

    def _fit(self, data: np.ndarray, streams: Streams) -> tuple[Event, ...]:
        """T private critic steps (`train_wgan`) on the rows read; the plan's events are exactly spent."""
        plan = self.privacy
        rng, sample_rng = streams.training(self.name, self.device)
        train_wgan(
            self.name,
            self.critic,
            self.generator,
            self._fake,
            torch.as_tensor(data, device=self.device),
            plan.sample_rate,
            plan.steps,
            plan.noise_multiplier,
            plan.clip_norm,
            self.params,
            rng,
            sample_rng,
            n_rows=plan.n_rows,
        )
        return plan.events

    def _fake(self, n: int, rng: Rng) -> torch.Tensor:
        """n fakes G(z), z ~ N(0, I), latents and head uniforms from `rng` (a private run's CSPRNG in training)."""
        z = standard_normal(rng, (n, self.generator.latent_dim), self.device)
        return self.generator(z, rng)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Relaxed rows from the generator (binary values near {0, 1}, categorical blocks near one-hot)."""
        self.generator.eval()
        return sample_rows(n, self.layout.width, rng, self.device, self._fake)
