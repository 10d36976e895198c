"""DP-WGAN: the DP-GAN baseline (WGAN-GP critic trained with DP-SGD, generator by post-processing).

The critic step, its sensitivity (real-row terms clipped to C/2 + C/2 and noised, fake-only terms
clipped to C/2 without noise, and why) and the training loop are in `pipelines.generators.wgan`,
shared with DP-auto-GAN's phase 2. T critic steps spend exactly PoissonGaussianEvent(σ, q, T);
σ is calibrated with the PLD accountant.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from pipelines.data.layout import Layout
from pipelines.generators.base import Budget, BudgetSession, check_encoded, merge_params, reserve_plan
from pipelines.generators.heads import OutputHeads
from pipelines.generators.networks import layer_norm_leaky, mlp
from pipelines.generators.persistence import load_model, save_model
from pipelines.generators.sampling import sample_rows
from pipelines.generators.wgan import Critic, train_wgan
from pipelines.privacy.accountant import calibrate_noise_multiplier
from pipelines.privacy.dpsgd import sampling_schedule
from pipelines.privacy.events import Event, NonPrivateEvent, PoissonGaussianEvent, event_to_dict
from pipelines.privacy.noise import training_generators

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
    "seed": 0,                  # initialisation and sampling (public)
    "noise_seed": None,         # DP noise and Poisson batches: None = OS entropy (pipelines/privacy/noise.py);
                                # an integer is for tests only: a published noise seed voids the guarantee
}


class Generator(nn.Module):
    """MLP from N(0, I) latents to the encoded layout, one output head per Layout block
    (`pipelines.generators.heads`: sigmoid numerics, relaxed Bernoulli / Gumbel-softmax discretes)."""

    def __init__(self, layout: Layout, latent_dim: int, hidden: list[int], tau: float) -> None:
        super().__init__()
        self.heads = OutputHeads(layout, tau)
        self.net = mlp([latent_dim, *hidden, layout.width], layer_norm_leaky)
        self.latent_dim = latent_dim

    def forward(self, z: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return self.heads(self.net(z), self.heads.uniforms(z.shape[0], generator))


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
        q, steps = sampling_schedule(p["batch_size"], n_rows, p["steps"], p["epochs"])
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
    def fit(self, X: Any, session: BudgetSession, budget: Budget | None = None) -> None:
        """Reserve the planned spend, then train; finally record the events actually spent.

        The plan comes from `budget` (with len(X), the public row count) if given, else from an
        earlier plan() call, else from params' epsilon/delta. X is not read before reserve().
        """
        planned = reserve_plan(self, len(X), session, budget)

        data = torch.as_tensor(np.asarray(X, dtype=np.float32), device=self.device)
        check_encoded(self.name, self.layout, data)  # rows may differ from the public n̂ the plan used
        self._train(data)
        session.record(planned)

    def _train(self, data: torch.Tensor) -> None:
        p, priv = self.params, self.privacy
        rng, sample_rng = training_generators(p["noise_seed"], self.name, self.device,
                                              private=math.isfinite(priv["epsilon"]), seed=p["seed"])
        train_wgan(self.name, self.critic, self.generator, self._fake, data, priv["sample_rate"], priv["steps"],
                   priv["noise_multiplier"], priv["clip_norm"], p, rng, sample_rng, public_rows=priv["n_rows"])

    def _fake(self, n: int, rng: torch.Generator) -> torch.Tensor:
        z = torch.randn(n, self.generator.latent_dim, generator=rng, device=self.device)
        return self.generator(z, rng)

    # -- sampling and persistence ------------------------------------------------------------
    def sample(self, n: int, seed: int) -> np.ndarray:
        """n synthetic encoded rows, float32, layout.width columns, all in [0, 1]; binary values near {0, 1}
        and categorical blocks near one-hot (decode by threshold / argmax: exact samples)."""
        self.generator.eval()
        return sample_rows(n, self.layout.width, seed, self.device, self._fake)

    @property
    def networks(self) -> dict[str, nn.Module]:
        return {"generator": self.generator, "critic": self.critic}

    def save(self, directory: Path) -> None:
        """Write generator.pt, critic.pt and dpwgan.json (params, layout, privacy plan)."""
        save_model(directory, self, self.networks)

    @classmethod
    def load(cls, directory: Path, device: str = "cpu") -> "DPWGAN":
        return load_model(cls, directory, device)
