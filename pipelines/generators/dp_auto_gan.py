"""DP-auto-GAN (Tantipongpipat et al., ../shared/papers/dp-auto-gan-mixed-type.txt §3, Algorithms 1-4,
Appendix C.3): an autoencoder, then a WGAN in its latent space; the release is (G_w, De_θ).

Phase 1 (§3.1, Algorithm 2). En_φ: R^n → R^d and De_θ: R^d → R^n are MLPs with LeakyReLU(0.2) (C.3:
n-60-15 and 15-60-n, no normalisation). Per record, the reconstruction loss dist(De_θ(En_φ(x)), x) of
Eq. 1 is taken block by block of the layout from the decoder's logits ℓ:
    numeric, binary coordinate j:  BCE(sigmoid(ℓ_j), x_j)             (the paper's dist; for numeric
                                   x_j ∈ [0, 1] a proper loss, minimised at sigmoid(ℓ_j) = x_j)
    categorical block c:           −Σ_k x_k log softmax(ℓ_c)_k         (cross-entropy of the one-hot block)
Phase 2 (§3.2, Algorithms 3, 4). G_w: N(0, I) → R^d (C.3: blocks Linear → BatchNorm → LeakyReLU, each
block's output added to the next one's where the widths agree). A fake row is heads(De_θ(G_w(z))),
judged by the critic D_y against real encoded rows; the decoder is frozen, so the generator step
updates w only and reads no data. `heads` (`pipelines.generators.heads`) are sigmoid for numerics and
a relaxed sample of the Bernoulli / categorical distribution the logits define for discrete blocks:
their threshold / argmax, which `sample()` returns (`project_to_layout`), is an exact sample of the
distribution the reconstruction loss fits.

Privacy (add/remove-one neighbours, Poisson sampling; every trained parameter is a function of the
data, the release is (G_w, De_θ); the encoder is never released and `save` does not write it).

Departure from Algorithm 2 and Proposition 3. The paper noises only the decoder's gradient g_θ and
updates φ with the exact Σ_i ∇_φ dist_i. Then φ_t is a non-private function of the whole data set,
and the decoder's step-t sum Σ_{i∈B} clip_C1 ∇_θ dist(De_θ(En_φt(x_i)), x_i) reads φ_t: on a
neighbour D ∪ {x*}, φ_t moves, so EVERY term of the sum changes (each code En_φt(x_i) moves), not just
one added term. The sum's sensitivity is then up to (2|B| + 1)·C1, not C1, and the noise N(0, σ²C1²)
does not give PoissonGaussian(σ, q, T); Proposition 3's proof treats the decoder's training M1 as a
DP mechanism, which holds only for a public (or already private) φ. So we run DP-SGD on the joint
per-example gradient g_i = (∇_φ dist_i, ∇_θ dist_i): ONE L2 norm over encoder and decoder parameters,
clipped to C1, Gaussian noise N(0, σ1²C1²) on both parts (`dpsgd.clip_and_noise`: adding a record
adds one term of norm ≤ C1 and changes nothing else, since every term depends only on its record and
on (φ_t, θ_t), outputs of earlier private steps; Δ = C1). T1 steps are PoissonGaussianEvent(σ1, q1, T1);
(φ, θ) are DP and the decoder is released by post-processing. The paper's "half the noise" is what
cannot be had: the noise covers dim φ + dim θ coordinates.

Phase 2 reuses DP-WGAN's audited critic step (`wgan.critic_gradient`): real-row terms −D(x_i) and the
gradient penalty on x̂_i = u·x_i + (1−u)·f_i clipped to C/2 each and noised (Δ = C), fake-only terms
clipped without noise. Real rows enter the critic in the encoded space, never through En_φ; fakes
depend only on (w, θ), which are private. T2 critic steps are PoissonGaussianEvent(σ2, q2, T2).
The ledger composes both events with the PLD accountant, at least as tight as the paper's RDP
composition (Corollary 2).

Split rule (`autoencoder_share` s, data-independent): σ1°, σ2° are calibrated so that each phase alone
spends s·ε and (1 − s)·ε at δ; composing at one δ costs less than the sum of the two ε, so both are
then scaled by one factor k, the smallest with PLD ε(PG(kσ1°, q1, T1) + PG(kσ2°, q2, T2); δ) ≤ ε.
ε = inf: no clipping, no noise, a NonPrivateEvent per phase.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from pipelines import progress
from pipelines.data.layout import Layout
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.heads import OutputHeads
from pipelines.generators.losses import Forward
from pipelines.generators.networks import initialise, leaky, mlp
from pipelines.generators.sampling import sample_rows
from pipelines.generators.wgan import Critic, train_wgan
from pipelines.privacy.accountant import calibrate_noise_multiplier, calibrate_noise_scale
from pipelines.privacy.dpsgd import (
    Rng,
    clip_and_noise,
    example_grads,
    poisson_sample,
    sampling_schedule,
    standard_normal,
)
from pipelines.privacy.events import Event, NonPrivateEvent, PoissonGaussianEvent
from pipelines.privacy.noise import Streams
from pipelines.privacy.plan import DPSGDPlan


@dataclass(frozen=True, kw_only=True)
class DPAutoGANPlan(DPSGDPlan):
    """Both phases' DP-SGD parameters: the critic phase's (σ2, q2, T2, C) are DPSGDPlan's fields, the
    autoencoder phase's (σ1, q1, T1, C1) the `autoencoder_` ones; `events` holds one event per phase,
    autoencoder first (∞ clipping and σ = 0 when ε = ∞)."""

    autoencoder_noise_multiplier: float
    autoencoder_sample_rate: float
    autoencoder_steps: int
    autoencoder_clip_norm: float
    kind: ClassVar[str] = "dp_auto_gan"


class Autoencoder(nn.Module):
    """En_φ: n → hidden → d (LeakyReLU after every layer, C.3) and De_θ: d → reversed(hidden) → n logits.
    forward(x) = De_θ(En_φ(x)), the logits the reconstruction loss and the output heads read."""

    def __init__(self, width: int, hidden: list[int], latent_dim: int) -> None:
        super().__init__()
        self.encoder = mlp([width, *hidden, latent_dim], leaky, activate_output=True)
        self.decoder = mlp([latent_dim, *reversed(hidden), width], leaky)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


class LatentGenerator(nn.Module):
    """G_w: z → latent code (C.3): blocks Linear(no bias) → BatchNorm → LeakyReLU(0.2); from the second
    block on, a block's input is added to its output where the widths agree (ResNet). BatchNorm is
    fine here: G_w never sees data (and `wgan.train_wgan` draws the critic's fakes in eval mode)."""

    def __init__(self, noise_dim: int, hidden: list[int], latent_dim: int) -> None:
        super().__init__()
        sizes = [noise_dim, *hidden, latent_dim]
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(a, b, bias=False), nn.BatchNorm1d(b), nn.LeakyReLU(0.2))
            for a, b in zip(sizes[:-1], sizes[1:])
        )
        self.noise_dim = noise_dim

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.blocks[0](z)
        for block in self.blocks[1:]:
            out = block(h)
            h = out + h if out.shape == h.shape else out
        return h


def reconstruction_loss(layout: Layout, device: str = "cpu") -> Any:
    """Σ over the rows given of dist(De_θ(En_φ(x)), x) (Eq. 1, block by block as in the module docstring), for
    `per_example_grads`: `forward` maps rows to the decoder's logits."""
    cols = torch.tensor(
        [c for b in layout.blocks if b.kind != "categorical" for c in range(b.start, b.stop)],
        dtype=torch.long,
        device=device,
    )
    blocks = [(b.start, b.stop) for b in layout.blocks if b.kind == "categorical"]

    def loss(forward: Forward, x: torch.Tensor) -> torch.Tensor:
        logits = forward(x)
        total = nn.functional.binary_cross_entropy_with_logits(
            logits.index_select(1, cols), x.index_select(1, cols), reduction="sum"
        )
        for start, stop in blocks:
            total = total - (x[:, start:stop] * torch.log_softmax(logits[:, start:stop], dim=1)).sum()
        return total

    return loss


def autoencoder_gradient(
    autoencoder: nn.Module,
    loss: Any,
    batch: torch.Tensor,
    clip_norm: float,
    noise_multiplier: float,
    expected_batch_size: float,
    generator: Rng,
    draws: int | None = None,
) -> dict[str, torch.Tensor]:
    """One phase-1 gradient (Algorithm 2 with joint clipping, module docstring), over ALL parameters φ, θ:
    (Σ_{i∈B} clip_C1(∇_{φ,θ} dist_i) + N(0, σ1²C1² I)) / (q1·n); sensitivity Δ = C1.
    `draws` repeats the noise draw (audits), adding a leading dimension."""
    return clip_and_noise(
        example_grads(autoencoder, loss, clip_norm, batch),
        clip_norm,
        noise_multiplier,
        expected_batch_size,
        generator,
        draws=draws,
    )


class DPAutoGAN(PrivateGenerator):
    """DP-auto-GAN generator (module docstring). `params`: the params.yaml section over
    `pipelines.generators.params.dp_auto_gan.Params`."""

    name = "dp_auto_gan"

    def build(self) -> None:
        """(En_φ, De_θ), G_w and the critic, initialised from the public seed, seed + 1, seed + 2."""
        p, seed = self.params, int(self.params.seed)
        self.autoencoder = Autoencoder(self.layout.width, list(p.autoencoder_hidden), int(p.latent_dim))
        self.generator = LatentGenerator(int(p.noise_dim), list(p.generator_hidden), int(p.latent_dim))
        self.critic = Critic(self.layout.width, list(p.critic_hidden))
        for i, net in enumerate((self.autoencoder, self.generator, self.critic)):
            initialise(net, seed + i).to(self.device)
        self.heads = OutputHeads(self.layout, float(p.gumbel_tau)).to(self.device)

    @property
    def decoder(self) -> nn.Module:
        return self.autoencoder.decoder

    @property
    def networks(self) -> dict[str, nn.Module]:
        """The released networks (G_w, De_θ), the ones `save` writes: the encoder and the critic are not
        needed to sample and are not written."""
        return {"decoder": self.decoder, "generator": self.generator}

    # -- privacy plan ------------------------------------------------------------------------
    def _plan(self, n_rows: int, budget: Budget) -> DPAutoGANPlan:
        """Both phases' spend for n̂ = `n_rows` under `budget`; data-independent (public row count only).

        q1 = min(1, autoencoder_batch_size/n̂), T1 = autoencoder_steps or min(ceil(autoencoder_epochs/q1),
        autoencoder_max_steps);
        q2, T2 likewise for the critic; σ1, σ2 by the split rule (module docstring).
        """
        p = self.params
        (q1, t1), (q2, t2) = (
            sampling_schedule(
                p.autoencoder_batch_size, n_rows, p.autoencoder_steps, p.autoencoder_epochs, p.autoencoder_max_steps
            ),
            sampling_schedule(p.batch_size, n_rows, p.steps, p.epochs, p.max_steps),
        )
        if budget.private:
            s = float(p.autoencoder_share)
            base1 = calibrate_noise_multiplier(s * budget.epsilon, budget.delta, q1, t1)
            base2 = calibrate_noise_multiplier((1 - s) * budget.epsilon, budget.delta, q2, t2)

            def events(k: float) -> list[Event]:
                return [PoissonGaussianEvent(k * base1, q1, t1), PoissonGaussianEvent(k * base2, q2, t2)]

            planned: list[Event] = events(calibrate_noise_scale(budget.epsilon, budget.delta, events))
            sigma1, sigma2 = planned[0].noise_multiplier, planned[1].noise_multiplier
            clip1, clip2 = float(p.autoencoder_clip_norm), float(p.clip_norm)
        else:
            sigma1 = sigma2 = 0.0
            clip1 = clip2 = math.inf
            planned = [NonPrivateEvent("epsilon: inf (autoencoder)"), NonPrivateEvent("epsilon: inf (critic)")]
        return DPAutoGANPlan(
            n_rows=n_rows,
            epsilon=budget.epsilon,
            delta=budget.delta,
            events=tuple(planned),
            autoencoder_noise_multiplier=sigma1,
            autoencoder_sample_rate=q1,
            autoencoder_steps=t1,
            autoencoder_clip_norm=clip1,
            noise_multiplier=sigma2,
            sample_rate=q2,
            steps=t2,
            clip_norm=clip2,
        )

    # -- training ----------------------------------------------------------------------------
    def _fit(self, data: np.ndarray, streams: Streams) -> tuple[Event, ...]:
        """Algorithm 1: phase 1 (T1 private autoencoder steps), then phase 2 (T2 private critic steps,
        `train_wgan`) on a frozen decoder; the plan's events are exactly spent."""
        plan, rows = self.privacy, torch.as_tensor(data, device=self.device)
        self._train_autoencoder(rows, *streams.training(f"{self.name}:autoencoder", self.device))
        self.autoencoder.eval()  # phase 2: the decoder is frozen (the generator step updates w only)
        train_wgan(
            self.name,
            self.critic,
            self.generator,
            self._fake,
            rows,
            plan.sample_rate,
            plan.steps,
            plan.noise_multiplier,
            plan.clip_norm,
            self.params,
            *streams.training(f"{self.name}:wgan", self.device),
            n_rows=plan.n_rows,
        )
        return plan.events

    def _train_autoencoder(self, data: torch.Tensor, rng: Rng, sample_rng: Rng) -> None:
        """Phase 1: T1 DP-SGD steps on the joint (encoder, decoder) per-example gradient (module docstring)."""
        p, plan, n = self.params, self.privacy, data.shape[0]
        q, clip, sigma = plan.autoencoder_sample_rate, plan.autoencoder_clip_norm, plan.autoencoder_noise_multiplier
        loss = reconstruction_loss(self.layout, self.device)
        opt = torch.optim.Adam(self.autoencoder.parameters(), lr=p.autoencoder_lr, betas=(0.9, 0.999))
        params, steps = dict(self.autoencoder.named_parameters()), plan.autoencoder_steps
        log = progress.TrainingLog(f"{self.name}:autoencoder", steps, f"{self.name} autoencoder")
        self.autoencoder.train()
        for step in range(1, steps + 1):
            batch = data[poisson_sample(n, q, sample_rng).to(self.device)]
            grads = autoencoder_gradient(self.autoencoder, loss, batch, clip, sigma, q * plan.n_rows, rng)
            for name, param in params.items():
                param.grad = grads[name]
            opt.step()
            if log.step(step):
                # A reconstruction loss on real rows is not covered by DP: it is shown only when ε = inf.
                shown = "" if sigma > 0 else f"  batch reconstruction loss {self._batch_loss(loss, batch):.4f}"
                log.line(step, shown)

    def _batch_loss(self, loss: Any, batch: torch.Tensor) -> float:
        """Mean per-record reconstruction loss of `batch` (progress output, non-private runs only)."""
        with torch.no_grad():
            return loss(self.autoencoder, batch).item() / max(1, len(batch))

    def _fake(self, n: int, rng: Rng) -> torch.Tensor:
        """heads(De_θ(G_w(z))), z ~ N(0, I): n fake rows in the encoded layout, latents and head uniforms from `rng`
        (a private run's CSPRNG in training)."""
        z = standard_normal(rng, (n, self.generator.noise_dim), self.device)
        return self.heads(self.decoder(self.generator(z)), self.heads.uniforms(n, rng))

    # -- sampling ----------------------------------------------------------------------------
    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """heads(De_θ(G_w(z))): binary values near {0, 1} and categorical blocks near one-hot (their threshold /
        argmax are exact samples; `sample` discretises them)."""
        self.generator.eval(), self.decoder.eval()
        return sample_rows(n, self.layout.width, rng, self.device, self._fake)
