"""PEARL: private embeddings and adversarial reconstruction learning (Liew, Takahashi & Ueno,
../shared/papers/pearl-private-embeddings.txt, §3-5, appendices D, E, H; design notes: docs/pearl.md).

Release: the only two accesses to data (`pipelines.generators.mechanisms.embeddings`, one GaussianEvent each).
  1. Auxiliary information (§5.1, App. D): the mean pairwise distance ℓ̂ of the records' features.
  2. The characteristic-function embedding (eq. 6) at k frequencies ω_j = u_j/ℓ̂, u_j ~ N(0, I_d)
     drawn from `seed`: the sampling distribution N(0, ℓ̂⁻² I) (the median heuristic's analogue).
     When the schema's target is binary or categorical the release is class-conditional (App. H:
     "we train both networks conditioned on the class labels"): noisy class counts and class-wise sums
     in one Gaussian event. Features are every column except the target.
Budget split (`aux_share` s, data-independent; paper: equal): the releases get noise multipliers
z/√s and z/√(1−s). Two Gaussians compose exactly as one of multiplier (Σ z_i⁻²)^(−1/2) = z (μ-GDP,
Dong, Roth & Su 2022), so s is the auxiliary release's share of μ² (of the RDP budget, the paper's
accounting), and z is the smallest multiplier whose PLD ε at δ meets the target (`PEARLPlan`).
The DP noise comes from the `NoiseSource` passed to `fit` (OS entropy or a steward's key), never the public
`seed`: the noisy embedding is saved with the model, and noise drawn from the public `seed` could be
regenerated and subtracted (`noise_seed` exists for tests).

Training is post-processing (Algorithm 1, App. E). Generator G_θ(z, y) (App. H): fc-bn-relu ×2, fc,
then per block tanh for numerics, mapped affinely to our [0, 1] encoding as (tanh + 1)/2, a two-way
softmax for binaries (= a sigmoid), a softmax per categorical block. It minimises the weighted
empirical CFD (eq. 7, 8) to the sanitised embedding,
    CFD²_w(θ, β) = Σ_c p̂_c Σ_j w_j(β) |φ̂_c(ω_j) − φ_G,c(ω_j)|²,
φ_G,c the empirical CF of a batch generated with label c. The critic (eq. 1, 8) maximises it over
the sampling distribution N(0, diag e^{2β}) through Lemma 1's self-normalised importance weights
w_j(β) ∝ N(ω_j; 0, diag e^{2β}) / N(ω_j; 0, ℓ̂⁻² I) on the fixed frequencies (parametric, per
dimension, as §4 recommends; at β = −log ℓ̂, w_j = 1/k and CFD²_w is eq. 7), within the set
P = {β : the weights' effective sample size ≥ critic_min_ess·k} (ours, `FrequencyCritic`: unconstrained,
the weights collapse onto one frequency on Adult). One generator step then one critic step (projected
onto P), Adam lr 0.01 each (App. H). `critic: false` is the "w/o critic" ablation.
Sampling: y ~ p̂, x = G(z, y) with each categorical block set to its argmax and each binary to the
larger of its two softmax outputs (App. H: the layout's one discretiser, `project_to_layout`); numerics
(tanh + 1)/2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from pipelines import progress
from pipelines.data.layout import Block, Layout, sub_layout
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.networks import batch_norm_relu, initialise, mlp
from pipelines.generators.sampling import sample_rows
from pipelines.privacy.accountant import calibrate_noise_scale
from pipelines.generators.mechanisms.embeddings import (
    capped_distance_sum,
    cf_features,
    class_embeddings,
    distance_event,
    embedding_event,
    embedding_sums,
    encoded_diameter,
    mean_distance,
    release_embedding,
    release_mean_distance,
)
from pipelines.privacy.events import Event, NonPrivateEvent
from pipelines.privacy.noise import Streams
from pipelines.privacy.plan import PrivacyPlan

DISCRETE_TARGETS = ("binary", "categorical")


@dataclass(frozen=True, kw_only=True)
class PEARLPlan(PrivacyPlan):
    """PEARL's two Gaussian releases (module docstring): k frequencies, the auxiliary release's share s of
    μ², the multipliers z/√s (mean pairwise distance, Δ₂ = (n̂ − 1)D) and z/√(1−s) (embedding sums,
    Δ₂ = √(2k) class-conditional, √k otherwise); both 0 when ε = ∞. D is the features' encoded diameter."""

    frequencies: int
    aux_share: float
    distance_noise_multiplier: float
    embedding_noise_multiplier: float
    diameter: float
    conditional: bool
    kind: ClassVar[str] = "pearl"


def target_block(layout: Layout) -> Block | None:
    """The schema's target block if it is binary or categorical (the release is then class-conditional)."""
    return next((b for b in layout.blocks if b.is_target and b.kind in DISCRETE_TARGETS), None)


def class_count(block: Block | None) -> int:
    return 0 if block is None else (2 if block.kind == "binary" else block.width)


def labels_of(x: torch.Tensor, block: Block) -> torch.Tensor:
    """Class codes of the target block: argmax of a one-hot block, x ≥ 0.5 for a binary column. Every
    row gets exactly one class, whatever its values, so each record lands in one class's sums."""
    if block.kind == "binary":
        return (x[:, block.start] >= 0.5).long()
    return x[:, block.start : block.stop].argmax(1)


class TabularGenerator(nn.Module):
    """App. H: fc-bn-relu, fc-bn-relu, fc, then tanh / softmax per layout block (module docstring)."""

    def __init__(self, layout: Layout, latent_dim: int, n_classes: int, hidden: list[int]) -> None:
        super().__init__()
        self.layout, self.latent_dim, self.n_classes = layout, latent_dim, n_classes
        self.body = mlp([latent_dim + n_classes, *hidden, layout.width], batch_norm_relu)

    def forward(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Rows in `layout`'s encoding from latents z and one-hot labels y (width 0 without target): a softmax
        per categorical block, a sigmoid per binary (the two-way softmax), (tanh + 1)/2 per numeric. Sampling
        takes each block's argmax (`PrivateGenerator.sample`'s `project_to_layout`: App. H's rule)."""
        logits = self.body(torch.cat([z, y], dim=1))
        out = []
        for b in self.layout.blocks:
            ell = logits[:, b.start : b.stop]
            if b.kind == "categorical":
                out.append(torch.softmax(ell, dim=1))
            elif b.kind == "binary":
                out.append(torch.sigmoid(ell))
            else:
                out.append((torch.tanh(ell) + 1) / 2)
        return torch.cat(out, dim=1)


class FrequencyCritic(nn.Module):
    """The fixed frequencies ω_j = u_j/ℓ̂ and the critic's sampling distribution p_β = N(0, diag e^{2β});
    `weights` are Lemma 1's self-normalised importance weights w.r.t. the proposal p₀ = N(0, ℓ̂⁻² I).

    The critic's set P (eq. 8) is {p_β : ESS(β) ≥ min_ess·k}, ESS = 1/Σ_j w_j² the weights' effective
    sample size: Lemma 1's estimate is only as good as the frequencies that still carry weight, and
    in d ≈ 100 dimensions unconstrained per-dimension scales collapse the weights onto one frequency
    within ~100 Adam steps (measured on Adult), after which the generator fits that one frequency.
    `project` keeps β in P by shrinking it towards the proposal.
    """

    def __init__(self, base: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("base", base)  # u_j (k, d), drawn without data
        self.register_buffer("length_scale", torch.ones(()))  # ℓ̂, the released mean distance
        self.log_scale = nn.Parameter(torch.zeros(base.shape[1]))  # β

    def reset(self, length_scale: float) -> None:
        """Proposal N(0, ℓ̂⁻² I); β starts there (uniform weights)."""
        with torch.no_grad():
            self.length_scale.fill_(length_scale)
            self.log_scale.fill_(-math.log(length_scale))

    @property
    def frequencies(self) -> torch.Tensor:
        return self.base / self.length_scale

    def weights(self, log_scale: torch.Tensor | None = None) -> torch.Tensor:
        """w_j = p_β(ω_j)/p₀(ω_j) / Σ_l p_β(ω_l)/p₀(ω_l) at β = `log_scale` (default: the parameter);
        `log_scale` (m, d) gives the (k, m) weights of m values of β at once."""
        beta = self.log_scale if log_scale is None else log_scale
        w = torch.softmax(
            self._log_density(beta.reshape(-1, beta.shape[-1])) - self._log_density(self._proposal()[None]), dim=0
        )
        return w if beta.dim() == 2 else w[:, 0]

    def effective_sample_size(self, log_scale: torch.Tensor | None = None) -> torch.Tensor:
        """1/Σ_j w_j², per value of β."""
        return 1 / self.weights(log_scale).detach().double().pow(2).sum(0)

    def project(self, min_ess: float, grid: int = 64) -> None:
        """β ← β₀ + t(β − β₀) with the largest t ∈ [0, 1] keeping ESS ≥ min_ess·k, searched on a grid of
        `grid` values of t and again on a grid inside the bracket found (t to within 1/grid²)."""
        target = min_ess * self.base.shape[0]
        with torch.no_grad():
            if self.effective_sample_size() >= target:
                return
            start, step = self._proposal(), self.log_scale - self._proposal()
            lo, width = 0.0, 1.0
            for _ in range(2):
                ts = lo + width * torch.arange(1, grid + 1, dtype=step.dtype) / grid
                ok = self.effective_sample_size(start + ts[:, None] * step) >= target
                lo = lo + width * int(ok.cumprod(0).sum()) / grid  # largest t before the first failure
                width /= grid
            self.log_scale.copy_(start + lo * step)

    def _log_density(self, beta: torch.Tensor) -> torch.Tensor:
        """log N(ω_j; 0, diag e^{2β}) up to a constant, (k, m) for m values of β (m, d)."""
        return -(beta.sum(1) + 0.5 * self.frequencies**2 @ torch.exp(-2 * beta).T)

    def _proposal(self) -> torch.Tensor:
        return -torch.log(self.length_scale).expand_as(self.log_scale)


class ReleasedEmbedding(nn.Module):
    """The sanitised release after post-processing: class proportions p̂ (C,) and CFs φ̂_c (C, 2k)."""

    def __init__(self, n_classes: int, k: int) -> None:
        super().__init__()
        self.register_buffer("proportions", torch.ones(max(n_classes, 1)) / max(n_classes, 1))
        self.register_buffer("embeddings", torch.zeros(max(n_classes, 1), 2 * k))


def weighted_cfd(target: torch.Tensor, generated: torch.Tensor, proportions: torch.Tensor) -> torch.Tensor:
    """Per-frequency discrepancy Σ_c p̂_c |φ̂_c(ω_j) − φ_G,c(ω_j)|², shape (k,); CFD²_w = Σ_j w_j·this."""
    sq = (target - generated) ** 2
    k = sq.shape[1] // 2
    return (proportions[:, None] * (sq[:, :k] + sq[:, k:])).sum(0)


class PEARL(PrivateGenerator):
    """PEARL generator (module docstring). `params`: the params.yaml section over
    `pipelines.generators.params.pearl.Params`."""

    name = "pearl"
    input_note = " (the encoded diameter D that bounds the distance release's sensitivity assumes [0, 1])"

    def build(self) -> None:
        """The networks from the public params: G_θ initialised from `seed`, the frequencies' directions
        u_j ~ N(0, I_d) drawn from `seed` + 1 (no data), the released embedding's buffers."""
        p = self.params
        self.target = target_block(self.layout)
        self.n_classes = class_count(self.target)
        features = [b for b in self.layout.blocks if b is not self.target]
        self.feature_cols = [c for b in features for c in range(b.start, b.stop)]
        self.diameter = encoded_diameter(features)
        k = int(p.frequencies)
        self.generator = TabularGenerator(sub_layout(features), int(p.latent_dim), self.n_classes, list(p.hidden))
        initialise(self.generator, int(p.seed)).to(self.device)
        base = torch.randn(k, len(self.feature_cols), generator=torch.Generator().manual_seed(int(p.seed) + 1))
        self.critic = FrequencyCritic(base).to(self.device)  # u_j ~ N(0, I_d)
        self.embedding = ReleasedEmbedding(self.n_classes, k).to(self.device)

    @property
    def networks(self) -> dict[str, nn.Module]:
        return {"generator": self.generator, "critic": self.critic, "embedding": self.embedding}

    @property
    def length_scale(self) -> float:
        """ℓ̂, the released mean pairwise distance (App. D; 1 before `fit`): post-processing of a DP release."""
        return float(self.critic.length_scale)

    # -- privacy plan ------------------------------------------------------------------------
    def _plan(self, n_rows: int, budget: Budget) -> PEARLPlan:
        """The mean-distance and embedding events for n̂ = `n_rows` under `budget`; data-independent.

        z = smallest multiplier with PLD ε(Gaussian(z/√s) + Gaussian(z/√(1−s)); δ) ≤ ε, s = aux_share.
        ε = inf: both statistics released exactly, one NonPrivateEvent.
        """
        if n_rows < 2:
            raise ValueError(f"pearl needs at least 2 training rows (the mean pairwise distance), got {n_rows}")
        k, s = int(self.params.frequencies), float(self.params.aux_share)
        conditional = self.target is not None

        def events(z: float) -> list[Event]:
            return [
                distance_event(n_rows, self.diameter, z / math.sqrt(s)),
                embedding_event(k, conditional, n_rows, z / math.sqrt(1 - s)),
            ]

        if budget.private:
            z = calibrate_noise_scale(budget.epsilon, budget.delta, events)
            planned, aux_z, emb_z = tuple(events(z)), z / math.sqrt(s), z / math.sqrt(1 - s)
        else:
            planned, aux_z, emb_z = (NonPrivateEvent("epsilon: inf"),), 0.0, 0.0
        return PEARLPlan(
            n_rows=n_rows,
            epsilon=budget.epsilon,
            delta=budget.delta,
            events=planned,
            frequencies=k,
            aux_share=s,
            distance_noise_multiplier=aux_z,
            embedding_noise_multiplier=emb_z,
            diameter=self.diameter,
            conditional=conditional,
        )

    # -- release and training ----------------------------------------------------------------
    def _fit(self, data: np.ndarray, streams: Streams) -> tuple[Event, ...]:
        """Release ℓ̂ then the embedding (the only accesses to the rows), then train (post-processing)."""
        spent = self._release(torch.as_tensor(data, device=self.device), streams)
        self._train()
        return spent

    def _release(self, data: torch.Tensor, streams: Streams) -> tuple[Event, ...]:
        """App. E, lines 1-3: ℓ̂ (App. D), frequencies ω = u/ℓ̂, the sanitised embedding (eq. 6), both releases'
        noise from the stream f"{name}:embedding"."""
        plan = self.privacy
        n = plan.n_rows  # n̂: the public row count, not data.shape[0]
        x = data[:, self.feature_cols]
        labels = labels_of(data, self.target) if self.target is not None else None
        if plan.private:
            rng = streams.numpy(f"{self.name}:embedding")
            length_scale, aux = release_mean_distance(x, self.diameter, plan.distance_noise_multiplier, rng, n=n)
        else:
            length_scale = mean_distance(capped_distance_sum(x, n, self.diameter), n, self.diameter)
        self.critic.reset(length_scale)
        freqs = self.critic.frequencies
        if plan.private:
            sums, emb = release_embedding(x, labels, self.n_classes, freqs, plan.embedding_noise_multiplier, rng, n=n)
        else:
            sums = embedding_sums(x, labels, self.n_classes, freqs)
        proportions, embeddings = class_embeddings(sums, n, self.target is not None)
        self.embedding.proportions.copy_(torch.as_tensor(proportions, dtype=torch.float32))
        self.embedding.embeddings.copy_(torch.as_tensor(embeddings, dtype=torch.float32))
        return (aux, emb) if plan.private else plan.events

    def _train(self) -> None:
        """Alternating minimisation over θ and maximisation over β of CFD²_w (eq. 1, 8; Algorithm 1); the
        generated batches' latents from the public `seed` + 2 (post-processing: no DP noise)."""
        p = self.params
        steps, classes, use_critic = int(p.steps), max(self.n_classes, 1), bool(p.critic)
        per_class = math.ceil(int(p.batch_size) / classes)
        rng = torch.Generator(device=self.device).manual_seed(int(p.seed) + 2)
        y = torch.zeros(classes * per_class, self.n_classes, device=self.device)
        if self.n_classes:
            y = nn.functional.one_hot(
                torch.arange(classes, device=self.device).repeat_interleave(per_class), classes
            ).float()
        opt_g = torch.optim.Adam(self.generator.parameters(), lr=float(p.lr))
        opt_c = torch.optim.Adam(self.critic.parameters(), lr=float(p.lr_critic))
        target, proportions = self.embedding.embeddings, self.embedding.proportions
        k = target.shape[1] // 2
        log = progress.TrainingLog(self.name, steps)
        self.generator.train()
        for step in range(1, steps + 1):
            z = torch.randn(classes * per_class, self.generator.latent_dim, generator=rng, device=self.device)
            phi = cf_features(self.generator(z, y), self.critic.frequencies).view(classes, per_class, 2 * k).mean(1)
            disc = weighted_cfd(target, phi, proportions)
            w = self.critic.weights() if use_critic else torch.full_like(disc, 1 / k)
            opt_g.zero_grad(set_to_none=True)
            loss = (w.detach() * disc).sum()
            loss.backward()
            opt_g.step()
            if use_critic:
                opt_c.zero_grad(set_to_none=True)
                (-(w * disc.detach()).sum()).backward()
                opt_c.step()
                self.critic.project(float(p.critic_min_ess))
            if log.step(step):
                log.line(
                    step,
                    f"  CFD²_w {loss.item():.5f}  uniform CFD² {disc.mean().item():.5f}"
                    f"  weights' ESS {self.critic.effective_sample_size():.0f}/{k}",
                )
        self.generator.eval()

    # -- sampling ----------------------------------------------------------------------------
    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n rows in layout order: y ~ p̂, G(z, y) (`sample` takes each block's argmax)."""
        self.generator.eval()
        return sample_rows(n, self.layout.width, rng, self.device, self._rows)

    def _rows(self, m: int, rng: torch.Generator) -> torch.Tensor:
        """m rows in layout order: labels y ~ p̂ into the target block (if any), G(z, y) into the features."""
        rows = torch.zeros(m, self.layout.width, device=self.device)
        y = torch.zeros(m, 0, device=self.device)
        if self.n_classes:
            codes = torch.multinomial(self.embedding.proportions, m, replacement=True, generator=rng)
            y = nn.functional.one_hot(codes, self.n_classes).float()
            cols = (
                slice(self.target.start, self.target.start + 1)
                if self.target.kind == "binary"
                else slice(self.target.start, self.target.stop)
            )
            rows[:, cols] = y[:, 1:] if self.target.kind == "binary" else y
        z = torch.randn(m, self.generator.latent_dim, generator=rng, device=self.device)
        rows[:, self.feature_cols] = self.generator(z, y)
        return rows
