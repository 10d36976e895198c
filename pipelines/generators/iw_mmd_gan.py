"""Importance-weighted MMD-GAN (Diesendruck thesis, ../shared/papers/diesendruck-iw-gan-support-points-thesis.txt:
chapter 3, and chapter 4's MMD-GAN architecture; design notes and evidence: docs/iw-mmd-gan.md).

Goal (§3.2): samples from a target P given training rows from a modified M·P, by weighting every real-data term
of the loss with w(x) ∝ 1/M(x) (`iw_weights`: class rebalancing to target proportions, or a regressor
fitted on a public labelled file, §3.3.3), using one of Table 3.1's estimators (`iw_estimators`):
uniform (eq. 3.2), iw (eq. 3.3), sniw (eq. 3.5), miw (eq. 3.4), id (§3.2.5).

Two modes, chosen by ε:

* ε = inf (NON-PRIVATE, planned as a NonPrivateEvent: the saved plan's ε is inf, `not plan.private`):
  - kernel `adversarial` (default): MMD-GAN (Li et al. 2017) as in chapter 4: the kernel is a Gaussian mixture on
    the codes of an autoencoder (encoder and decoder 3×100 ELU, bottleneck 64) that the discriminator trains to
    maximise the weighted MMD² (weighted 0.1 in its loss) while reconstructing real and generated rows; the
    generator (3×100 ELU) minimises the weighted MMD² of the codes. RMSProp, learning rate 1e-3. With w ≡ 1 this
    is chapter 4's non-private baseline.
  - kernel `fixed`: §3.3.1's setting, a fixed Gaussian mixture kernel on the rows (no discriminator).
  Every estimator is available; the rows are read at every step.
* ε finite (PRIVATE): the rows enter only through ONE Gaussian release of the importance-weighted random-feature
  kernel mean embedding (`pipelines.generators.mechanisms.weighted_embedding`; Δ₂ = w_max·√(2k) for sniw, w_max·√k for
  iw and uniform), σ calibrated by the PLD accountant. The generator then minimises the random-feature MMD²
  (1/k)‖μ̃_P − mean_j φ(G(z_j))‖² to the released μ̃_P: post-processing. Available: uniform, iw (public
  normaliser n), sniw (noisy weight total); miw and id need the rows at every step and are refused, as is the
  adversarial kernel (its encoder would be trained on the rows).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from pipelines import progress
from pipelines.data.layout import Layout
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.heads import OutputHeads
from pipelines.generators.iw_estimators import duplicate_indices, estimator_mmd2, weighted_mean
from pipelines.generators.iw_weights import WeightFunction, weight_function
from pipelines.generators.networks import elu, initialise, mlp
from pipelines.parameters import GeneratorParams
from pipelines.generators.params.iw_mmd_gan import PRIVATE_ESTIMATORS
from pipelines.generators.sampling import sample_rows
from pipelines.privacy.accountant import calibrate_noise_scale
from pipelines.generators.mechanisms.embeddings import cf_features
from pipelines.privacy.events import Event, NonPrivateEvent
from pipelines.privacy.noise import Streams
from pipelines.privacy.plan import PrivacyPlan
from pipelines.generators.mechanisms.weighted_embedding import (
    mean_embedding,
    random_frequencies,
    release_weighted_embedding,
    weighted_embedding_event,
)


@dataclass(frozen=True, kw_only=True)
class IWMMDGANPlan(PrivacyPlan):
    """What one IW-MMD-GAN fit spends and how (module docstring): Table 3.1's `estimator`, the `kernel`
    (random_features when private; adversarial or fixed when ε = ∞), k `frequencies`, the weights' public bound
    `w_max` and the release's noise multiplier (0 when ε = ∞); `weights` describes the public weight function
    (its kind and public parameters, saved with the model)."""

    estimator: str
    kernel: str
    frequencies: int
    w_max: float
    noise_multiplier: float
    weights: dict[str, Any]
    kind: ClassVar[str] = "iw_mmd_gan"


FakeSampler = Callable[[int, torch.Generator], torch.Tensor]


class Generator(nn.Module):
    """z ~ N(0, I) → ELU MLP → one output head per layout block (`heads.OutputHeads`)."""

    def __init__(self, layout: Layout, latent_dim: int, hidden: list[int], tau: float) -> None:
        super().__init__()
        self.heads = OutputHeads(layout, tau)
        self.net = mlp([latent_dim, *hidden, layout.width], elu)
        self.latent_dim = latent_dim

    def forward(self, n: int, generator: torch.Generator) -> torch.Tensor:
        z = torch.randn(n, self.latent_dim, generator=generator, device=generator.device)
        return self.heads(self.net(z), self.heads.uniforms(n, generator))


class Autoencoder(nn.Module):
    """MMD-GAN's discriminator: encoder width → hidden → code_dim, decoder back (ELU)."""

    def __init__(self, width: int, hidden: list[int], code_dim: int) -> None:
        super().__init__()
        self.encoder = mlp([width, *hidden, code_dim], elu)
        self.decoder = mlp([code_dim, *reversed(hidden), width], elu)


class RandomFeatureTarget(nn.Module):
    """The private mode's frequencies ω (k, d) and the released (post-processed) mean embedding μ̃_P (2k,)."""

    def __init__(self, freqs: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("freqs", freqs.float())
        self.register_buffer("embedding", torch.zeros(2 * freqs.shape[0]))


def train_weighted_mmd(
    sample_fake: FakeSampler,
    parameters: list[nn.Parameter],
    real: torch.Tensor,
    w: torch.Tensor,
    estimator: str,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    bandwidths: list[float],
    groups: int,
    seed: int,
    autoencoder: Autoencoder | None = None,
    n_critic: int = 5,
    mmd_weight: float = 0.1,
    label: str = "iw_mmd_gan",
) -> None:
    """Non-private training with Table 3.1's `estimator` on real rows `real` (weights `w`).

    Fixed kernel (`autoencoder` None): each step minimises estimator_mmd2(x_batch, G(z)) under the Gaussian mixture
    `bandwidths`, over `parameters` (the generator's). Adversarial (MMD-GAN): each generator step follows
    `n_critic` discriminator steps minimising  weighted_mean(‖x − dec(enc x)‖²) + mean ‖y − dec(enc y)‖²
    − mmd_weight·MMD²_w(enc x, enc y), and the generator minimises MMD²_w(enc x, enc G(z)); kernels on the codes
    use `bandwidths`. Real batches are drawn without replacement, from the ⌈w⌉-duplicated rows for `id`."""
    device = real.device
    rng = torch.Generator(device=device).manual_seed(seed)
    pool = torch.as_tensor(
        duplicate_indices(w.cpu().numpy()) if estimator == "id" else np.arange(len(real)), device=device
    )
    b = min(batch_size, len(pool))

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        idx = pool[torch.randperm(len(pool), generator=rng, device=device)[:b]]
        return real[idx], w[idx]

    def mmd2(x: torch.Tensor, y: torch.Tensor, wx: torch.Tensor) -> torch.Tensor:
        return estimator_mmd2(estimator, x, y, wx, bandwidths, groups, rng)

    opt_g = torch.optim.RMSprop(parameters, lr=lr)
    opt_d = torch.optim.RMSprop(autoencoder.parameters(), lr=lr) if autoencoder is not None else None
    log = progress.TrainingLog(label, steps)
    for step in range(1, steps + 1):
        if autoencoder is not None:
            for _ in range(n_critic):
                x, wx = batch()
                with torch.no_grad():
                    y = sample_fake(b, rng)
                hx, hy = autoencoder.encoder(x), autoencoder.encoder(y)
                recon = (
                    weighted_mean(estimator, (autoencoder.decoder(hx) - x).pow(2).sum(1), wx)
                    + (autoencoder.decoder(hy) - y).pow(2).sum(1).mean()
                )
                opt_d.zero_grad(set_to_none=True)
                (recon - mmd_weight * mmd2(hx, hy, wx)).backward()
                opt_d.step()
        x, wx = batch()
        y = sample_fake(b, rng)
        if autoencoder is not None:
            x, y = autoencoder.encoder(x), autoencoder.encoder(y)
        loss = mmd2(x, y, wx)
        opt_g.zero_grad(set_to_none=True)
        loss.backward()
        opt_g.step()
        if log.step(step):
            log.line(step, f"  {estimator} MMD² {loss.item():.5f}")


def train_embedding_matching(
    sample_fake: FakeSampler,
    parameters: list[nn.Parameter],
    target: torch.Tensor,
    freqs: torch.Tensor,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    label: str = "iw_mmd_gan",
) -> None:
    """Private mode's post-processing: minimise the random-feature MMD² (1/k)‖μ̃_P − mean_j φ(G(z_j))‖²."""
    rng = torch.Generator(device=target.device).manual_seed(seed)
    opt = torch.optim.RMSprop(parameters, lr=lr)
    k = freqs.shape[0]
    log = progress.TrainingLog(label, steps)
    for step in range(1, steps + 1):
        loss = (target - cf_features(sample_fake(batch_size, rng), freqs).mean(0)).pow(2).sum() / k
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if log.step(step):
            log.line(step, f"  random-feature MMD² {loss.item():.5f}")


class IWMMDGAN(PrivateGenerator):
    """Importance-weighted MMD-GAN (module docstring). `params`: the params.yaml section over
    `pipelines.generators.params.iw_mmd_gan.Params`."""

    name = "iw_mmd_gan"

    def __init__(
        self, layout: Layout, params: GeneratorParams | dict[str, Any] | None = None, device: str = "cpu"
    ) -> None:
        """The calibration sums this generator's importance weights (`calibration_weights`) instead of counting."""
        super().__init__(layout, params, device, weights=self.calibration_weights)

    def build(self) -> None:
        """The networks from the public `seed` (generator: seed, autoencoder: seed + 3; the frequencies:
        seed + 1; training batches: seed + 2), drawn without data."""
        p = self.params
        self._weight_fn: WeightFunction | None = None
        self.generator = Generator(self.layout, int(p.latent_dim), list(p.hidden), float(p.gumbel_tau))
        self.autoencoder = Autoencoder(self.layout.width, list(p.hidden), int(p.code_dim))
        initialise(self.generator, int(p.seed)).to(self.device)
        initialise(self.autoencoder, int(p.seed) + 3).to(self.device)
        freqs = random_frequencies(int(p.frequencies), self.layout.width, list(p.bandwidths), int(p.seed) + 1)
        self.target = RandomFeatureTarget(freqs).to(self.device)

    @property
    def weight_fn(self) -> WeightFunction:
        """The public weight function of rows of the table's layout (its rebalance column and regressor file are
        the table's; built on first use: a loaded model never needs it)."""
        if self._weight_fn is None:
            self._weight_fn = weight_function(self.params.weights, self.table_layout, int(self.params.seed))
        return self._weight_fn

    @property
    def w_max(self) -> float:
        """The weights' public bound: the weight function's own, lowered to the `w_max` parameter if given."""
        cap = self.params.w_max
        return min(self.weight_fn.bound, math.inf if cap is None else float(cap))

    def importance_weights(self, rows: np.ndarray) -> np.ndarray:
        """w(x) of the method's rows (`self.layout`), clipped to the public `w_max`: the weights training uses and the
        calibration sums (the weight function reads the rows' table-layout values, `encoding.table_rows`, exact on
        them)."""
        return np.minimum(self.weight_fn(self.encoding.table_rows(rows)), self.w_max)

    def calibration_weights(self) -> tuple[Callable[[np.ndarray], np.ndarray], float] | None:
        """With `weights` set, the calibration measures importance-weighted marginals (the same weights as
        training, of rows of the table's layout, bound `w_max`), so that the calibrated samples keep the weighted
        target w·p instead of being raked back to the real rows' own marginals; None (counts) with `weights: null`."""
        if self.params.weights is None:
            return None
        return (lambda rows: self.importance_weights(self.encoding.model_rows(rows))), self.w_max

    @property
    def networks(self) -> dict[str, nn.Module]:
        return {"generator": self.generator, "autoencoder": self.autoencoder, "target": self.target}

    # -- privacy plan ------------------------------------------------------------------------
    def _plan(self, n_rows: int, budget: Budget) -> IWMMDGANPlan:
        """One GaussianEvent (the weighted embedding, z from the PLD accountant) if ε is finite, else one
        NonPrivateEvent; refuses estimator/kernel combinations that cannot be private. Data-independent."""
        p, est = self.params, self.params.estimator
        k, self_normalised = int(p.frequencies), est == "sniw"
        if n_rows < 2:
            raise ValueError(f"iw_mmd_gan needs at least 2 training rows, got {n_rows}")
        if budget.private:
            if est not in PRIVATE_ESTIMATORS:
                raise ValueError(
                    f"iw_mmd_gan.estimator '{est}' needs the training rows at every step and has no "
                    f"private release; with a finite epsilon use one of {PRIVATE_ESTIMATORS} (the "
                    f"duplicated embedding of 'id' is 'sniw' with weights ⌈w⌉), or set epsilon: inf "
                    f"(non-private, released only when privacy.internal_release is true)"
                )
            if p.kernel == "adversarial":
                raise ValueError(
                    "iw_mmd_gan.kernel 'adversarial' trains the MMD-GAN encoder on the rows and has no "
                    "private release; with a finite epsilon use kernel: auto or fixed (random features "
                    "of the fixed Gaussian mixture), or set epsilon: inf"
                )
            w_max = self.w_max if est != "uniform" else 1.0
            z = calibrate_noise_scale(
                budget.epsilon, budget.delta, lambda s: [weighted_embedding_event(k, self_normalised, n_rows, w_max, s)]
            )
            planned: tuple[Event, ...] = (weighted_embedding_event(k, self_normalised, n_rows, w_max, z),)
            kernel = "random_features"
        else:
            kernel = "adversarial" if p.kernel == "auto" else p.kernel
            z, w_max = 0.0, self.w_max
            planned = (
                NonPrivateEvent(
                    f"epsilon: inf (iw_mmd_gan: {est} estimator, {kernel} kernel, rows read at every step)"
                ),
            )
        return IWMMDGANPlan(
            n_rows=n_rows,
            epsilon=budget.epsilon,
            delta=budget.delta,
            events=planned,
            estimator=est,
            kernel=kernel,
            frequencies=k,
            w_max=w_max,
            noise_multiplier=z,
            weights={"kind": self.weight_fn.kind, **self.weight_fn.info},
        )

    # -- training ----------------------------------------------------------------------------
    def _fit(self, data: np.ndarray, streams: Streams) -> tuple[Event, ...]:
        """Private: release the weighted embedding (the one access to the rows) and train on it
        (post-processing). Non-private: train on the rows (`train_weighted_mmd`)."""
        plan, p = self.privacy, self.params
        w = torch.as_tensor(
            np.ones(len(data)) if plan.estimator == "uniform" else self.importance_weights(data), device=self.device
        )  # float64
        real = torch.as_tensor(data, device=self.device)
        self.generator.train()
        if plan.private:
            spent: tuple[Event, ...] = (self._release(real, w, streams),)
            del real, w
            train_embedding_matching(
                self.generator,
                list(self.generator.parameters()),
                self.target.embedding,
                self.target.freqs,
                steps=int(p.steps),
                batch_size=int(p.batch_size),
                lr=float(p.lr),
                seed=int(p.seed) + 2,
            )
        else:
            spent = plan.events
            adversarial = plan.kernel == "adversarial"
            train_weighted_mmd(
                self.generator,
                list(self.generator.parameters()),
                real,
                w.float(),
                plan.estimator,
                steps=int(p.steps),
                batch_size=int(p.batch_size),
                lr=float(p.lr),
                bandwidths=list(p.code_bandwidths if adversarial else p.bandwidths),
                groups=int(p.groups),
                seed=int(p.seed) + 2,
                autoencoder=self.autoencoder if adversarial else None,
                n_critic=int(p.n_critic),
                mmd_weight=float(p.mmd_weight),
            )
        self.generator.eval()
        return spent

    def _release(self, real: torch.Tensor, w: torch.Tensor, streams: Streams) -> Event:
        """The weighted random-feature embedding sums + Gaussian noise from the stream "iw_mmd_gan embedding",
        post-processed into μ̃_P (`mean_embedding`: over the public n̂, or the noisy weight total for sniw)."""
        plan = self.privacy
        self_normalised = plan.estimator == "sniw"
        sums, event = release_weighted_embedding(
            real.double(),
            w,
            self.target.freqs.double(),
            self_normalised,
            plan.w_max,
            plan.noise_multiplier,
            streams.numpy("iw_mmd_gan embedding"),
            n=plan.n_rows,
        )
        self.target.embedding.copy_(
            torch.as_tensor(mean_embedding(sums, plan.n_rows, self_normalised), dtype=torch.float32)
        )
        return event

    # -- sampling ----------------------------------------------------------------------------
    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Relaxed rows from the generator's heads (`sample` thresholds binaries at 0.5 and sets categorical
        blocks to their argmax: exact samples of the heads' Bernoulli / categorical distributions)."""
        self.generator.eval()
        return sample_rows(n, self.layout.width, rng, self.device, self.generator)
