"""PPEM: Privacy-Preserving Energy Models with α-LMDP (Privacy-Preserving Energy Models paper, §3).

Two energy/generator pairs over a partition x = {x′, x*} of the encoded columns (§3.2):
  marginal     E_ξ(x′) ≥ 0,      G_ω(z)        z ~ N(0, I_l)    over the protected columns x′
  conditional  E_γ(x*|x′) ≥ 0,   G_υ(z′|x′)    z′ ~ N(0, I_l′)  over the rest, given real x′ (§3.3)

Energy losses (Eq. 6, 7, margin m) with the Lipschitz penalty of §3.7 on interpolates:
  L_ξ = E_ξ(x′_i) + [m − E_ξ(G_ω(z_j))]₊ + λ_L(‖∇E_ξ(x̂′_i)‖ − 1)²  + λ_α[F⁻¹_χ²₁(1−α) − Ŝ_l,n]₊   (Eq. 18)
  L_γ = E_γ(x*_i|x′_i) + [m − E_γ(G_υ(z′_i|x′_i)|x′_i)]₊ + λ_L(‖∇_x* E_γ(x̂*_i|x′_i)‖ − 1)²
and generator losses L_ω = E_ξ(G_ω(z)), L_υ = E_γ(G_υ(z′|x′)|x′) (Eq. 6, 7). Ŝ_l,n is the
normalized linear KSD (Eq. 17) of the real batch x′ against p_ξ ∝ exp(−E_ξ), score −∇ₓE_ξ
(`pipelines.stats.ksd`). Algorithm 1: `energy_steps` energy updates per generator update; the
generators are updated on the last energy step's batch. Algorithm 2 samples x′ = G_ω(z), x* = G_υ(z′|x′).

Differential privacy (§3.6), add/remove-one neighbours, Poisson sampling at q = batch/n. One energy
step releases two noisy gradient sums computed from the same Poisson batch B, each a Gaussian
mechanism with noise multiplier σ relative to its own sensitivity Δ (`dpsgd.clip_and_noise`):
  ξ: Σ_{i∈B} [clip_{C/2} ∇E_ξ(x′_i) + clip_{C/2} ∇GP_i]  +  clip_{C_α} ∇P_α(B)      Δ_ξ = C + 2C_α
     P_α pairs the batch's rows, so no per-example split exists; its whole gradient is clipped to
     C_α, and adding a record moves it by at most 2C_α (both values lie in the C_α-ball).
  γ: Σ_{i∈B} clip_C ∇L_γ,i   (the fake term uses the real x′_i, so it is a real-row term)   Δ_γ = C
and each generator step adds a third release on the same B:
  υ: Σ_{i∈B} clip_C ∇_υ E_γ(G_υ(z′_i|x′_i)|x′_i)                                         Δ_υ = C
because G_υ is conditioned on REAL x′ (§3.3). §3.6 says the generators see data only through the
energy models; that holds for G_ω but not for G_υ, whose input is x′_i itself, so its gradient is
privatised too. The k releases on one batch, whitened by their noise, form one Gaussian mechanism
of noise multiplier σ/√k (adaptive composition of Gaussians, Dong, Roth & Su 2022), so T energy
steps, of which T_G also update the generators, are PoissonGaussianEvent(σ/√2, q, T − T_G) +
PoissonGaussianEvent(σ/√3, q, T_G); σ is calibrated with the PLD accountant to meet (ε, δ).
The marginal fake term [m − E_ξ(G_ω(z_j))]₊ touches no record: like DP-WGAN's it is clipped per
fake to C/2 without noise and averaged over a fixed `batch_size` fakes. G_ω is post-processing.
Private networks use no BatchNorm (it mixes examples): in DP mode G_ω and G_υ use LayerNorm instead.

Why G_ω matters although it is post-processing: in a training step it draws the b + batch_size fakes of
the per-example terms in train mode, b = |B| the private batch size. With BatchNorm each fake would be
normalised by the mean and variance over all b + batch_size latents, so adding one record (b → b + 1)
would move EVERY fake f_j, hence every paired interpolate x̂_i = u_i·x′_i + (1−u_i)·f_i in the other
records' penalty terms and the un-noised fake term: the sum would change in more than one term and
Δ_ξ = C + 2C_α would not hold. With LayerNorm each fake is a function of its own latent (and the
already-private ω) only, so under add/remove-one the ξ sum changes by exactly
    clip_{C/2} ∇E_ξ(x′*) + clip_{C/2} ∇GP*           (the added record's own terms, norm <= C)
  + clip_{C_α} ∇P_α(B ∪ {x*}) − clip_{C_α} ∇P_α(B)    (both in the C_α-ball: norm <= 2C_α)
and the fake-only term is identical on both sides (its batch_size fakes, like every fake, latent and u, are
fresh draws of the secret noise stream, a CSPRNG, distributed alike whatever b, so both sides can be coupled to
share them), so Δ_ξ = C + 2C_α by the triangle inequality; the noise is σ·Δ_ξ (`clip_and_noise`).
The same holds for the γ and υ releases with Δ = C: the conditional fakes G_υ(z′_i|x′_i) are per record.
A planned event with zero steps (every step updates the generators: energy_steps = 1) is left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from scipy.stats import chi2
from torch import nn

from pipelines import progress
from pipelines.data.layout import Layout, sub_layout
from pipelines.data.schema import indicator
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.heads import OutputHeads
from pipelines.generators.losses import Forward, gradient_penalty
from pipelines.generators.networks import initialise
from pipelines.parameters import GeneratorParams, parsed
from pipelines.generators.sampling import sample_rows
from pipelines.privacy.accountant import calibrate_noise_scale
from pipelines.privacy.dpsgd import (
    Rng,
    clip_and_noise,
    clip_per_example,
    example_grads,
    per_example_grads,
    poisson_sample,
    sampling_schedule,
    standard_normal,
    summed,
    uniform,
)
from pipelines.privacy.events import Event, NonPrivateEvent, PoissonGaussianEvent
from pipelines.gates.ppem import alpha_lmdp_gate
from pipelines.gates.release import GateResult
from pipelines.stats.ksd import linear_terms, normalized_linear_ksd
from pipelines.privacy.noise import Streams
from pipelines.privacy.plan import DPSGDPlan

NUMERIC = ("continuous", "integer")


@dataclass(frozen=True, kw_only=True)
class PPEMPlan(DPSGDPlan):
    """PPEM's schedule: T = `steps` energy steps at Poisson rate q, of which T_G = `generator_steps` also update
    the generators; `noise_multiplier` is σ of EACH release (ξ, γ, υ; the events carry σ/√2 and σ/√3), `clip_norm`
    C and `ksd_clip` C_α (∞, σ = 0 when ε = ∞)."""

    generator_steps: int
    ksd_clip: float
    kind: ClassVar[str] = "ppem"


def split_columns(layout: Layout, protected: list[str] | None) -> tuple[list[int], list[int]]:
    """Encoded column indices of x′ (the protected numeric columns) and x* (all others)."""
    names = list(protected) if protected is not None else [b.column for b in layout.blocks if b.protected]
    known = {b.column: b for b in layout.blocks}
    if not names:
        raise ValueError("ppem needs protected columns: set ppem.protected in params.yaml or `protected` in the schema")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"ppem.protected names unknown columns {unknown}; columns: {sorted(known)}")
    discrete = [n for n in names if known[n].kind not in NUMERIC]
    if discrete:
        raise ValueError(
            f"ppem.protected columns {discrete} are not numeric: the KSD test of α-LMDP needs a "
            f"density on x′; choose continuous or integer columns"
        )
    nullable = [n for n in names if indicator(n) in known]
    if nullable:
        raise ValueError(
            f"ppem.protected columns {nullable} allow nulls (missing: allowed in the schema): the "
            f"α-LMDP test needs a value in every row; protect columns without nulls"
        )
    if len(set(names)) == len(layout.blocks):
        raise ValueError("ppem needs at least one column outside ppem.protected for the conditional model")
    x_prime = [b.start for b in layout.blocks if b.column in names]
    rest = [c for b in layout.blocks if b.column not in names for c in range(b.start, b.stop)]
    return x_prime, rest


class Energy(nn.Module):
    """E(x | c) = softplus(MLP) ≥ 0 (E: X → R₊, §3.2): 3 linear layers, LeakyReLU(0.2) (Fig. 1).

    Input [x, c]; with a conditioning part c the first layer is two separate linear maps, one
    for x and one for c, concatenated (Fig. 1, conditional energy). No normalisation layers.
    """

    def __init__(self, dim: int, cond_dim: int, hidden: int) -> None:
        super().__init__()
        self.dim = dim
        self.first = nn.Linear(dim, hidden)
        self.first_cond = nn.Linear(cond_dim, hidden) if cond_dim else None
        width = hidden * (2 if cond_dim else 1)
        self.body = nn.Sequential(nn.LeakyReLU(0.2), nn.Linear(width, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, 1))

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        h = self.first(inp[:, : self.dim])
        if self.first_cond is not None:
            h = torch.cat([h, self.first_cond(inp[:, self.dim :])], dim=1)
        return nn.functional.softplus(self.body(h)).squeeze(-1)


class ResidualGenerator(nn.Module):
    """G(z | c): 3 linear layers, normalisation + LeakyReLU(0.2), a residual middle block (Fig. 1).

    Input [z, c, u]: latent z, conditioning c (separate first layer, as in `Energy`), and the
    uniforms u of the output heads. `norm`: 'batch' (the paper) or 'layer' (DP-trained: BatchNorm
    would mix the records of a batch and break per-example clipping).
    """

    def __init__(self, latent: int, cond_dim: int, hidden: int, heads: OutputHeads, width: int, norm: str) -> None:
        super().__init__()
        self.latent, self.cond_dim, self.heads = latent, cond_dim, heads
        self.first = nn.Linear(latent, hidden)
        self.first_cond = nn.Linear(cond_dim, hidden) if cond_dim else None
        inner = hidden * (2 if cond_dim else 1)
        make_norm = {"batch": nn.BatchNorm1d, "layer": nn.LayerNorm}[norm]
        self.norm1, self.mid, self.norm2 = make_norm(inner), nn.Linear(inner, inner), make_norm(inner)
        self.out = nn.Linear(inner, width)
        self.act = nn.LeakyReLU(0.2)

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        z, c, u = torch.split(inp, [self.latent, self.cond_dim, self.heads.noise_width], dim=1)
        h = self.first(z)
        if self.first_cond is not None:
            h = torch.cat([h, self.first_cond(c)], dim=1)
        h = self.act(self.norm1(h))
        h = h + self.act(self.norm2(self.mid(h)))
        return self.heads(self.out(h), u)


def _energy(forward: Forward, x: torch.Tensor) -> torch.Tensor:
    """E(x_i) of one record (the real term of Eq. 6)."""
    return forward(x).sum()


def _margin(m: float) -> Any:
    """[m − E(f_j)]₊ of one fake (Eq. 6)."""

    def loss(forward: Forward, fake: torch.Tensor) -> torch.Tensor:
        return torch.relu(m - forward(fake)).sum()

    return loss


def _conditional_energy_loss(m: float, gp_lambda: float, width: int, lipschitz: float) -> Any:
    """L_γ,i of Eq. 7 + §3.7 for one record: real [x*_i, x′_i], fake [G_υ(z′_i|x′_i), x′_i], weight u_i."""
    penalty = gradient_penalty(gp_lambda, width, lipschitz)

    def loss(forward: Forward, real: torch.Tensor, fake: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return forward(real).sum() + torch.relu(m - forward(fake)).sum() + penalty(forward, real, fake, u)

    return loss


def ksd_penalty(
    energy: nn.Module, x: torch.Tensor, alpha: float, alpha_lambda: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """P_α = λ_α[F⁻¹_χ²₁(1−α) − Ŝ_l,n(x, p_E)]₊ of Eq. 18 with score −∇ₓE (differentiable in E's
    parameters), and Ŝ_l,n itself (detached)."""
    x = x.detach().requires_grad_(True)
    score = -torch.autograd.grad(energy(x).sum(), x, create_graph=True)[0]
    s = normalized_linear_ksd(linear_terms(x, score))
    return alpha_lambda * torch.relu(chi2.ppf(1 - alpha, 1) - s), s.detach()


def ksd_penalty_gradient(
    energy: nn.Module, x: torch.Tensor, alpha: float, alpha_lambda: float
) -> tuple[dict[str, torch.Tensor], float]:
    """∇ P_α(B) of Eq. 18 w.r.t. the energy's parameters, as one batch-level vector, and the batch's
    Ŝ_l,n (nan when not computed). Zero when λ_α = 0, when the batch has < 4 rows (Ŝ_l,n needs
    ⌊n/2⌋ ≥ 2 pairs), or when the penalty is inactive (Ŝ_l,n above the critical value)."""
    params = dict(energy.named_parameters())
    zero = {k: torch.zeros_like(v) for k, v in params.items()}
    if alpha_lambda == 0 or x.shape[0] < 4:
        return zero, float("nan")
    penalty, s = ksd_penalty(energy, x, alpha, alpha_lambda)
    grads = torch.autograd.grad(penalty, list(params.values()), allow_unused=True)
    return {k: (g if g is not None else zero[k]) for k, g in zip(params, grads)}, s.item()


def marginal_energy_gradient(
    energy: nn.Module,
    real: torch.Tensor,
    paired_fake: torch.Tensor,
    u: torch.Tensor,
    fake: torch.Tensor,
    clip_norm: float,
    ksd_clip: float,
    noise_multiplier: float,
    expected_batch_size: float,
    margin: float,
    gp_lambda: float,
    lipschitz: float,
    alpha: float,
    alpha_lambda: float,
    generator: Rng,
    draws: int | None = None,
) -> tuple[dict[str, torch.Tensor], float]:
    """One step's gradient of L_ξ (Eq. 6 + §3.7 + Eq. 18) for the marginal energy (module docstring).

    Private part, on the real batch (B, d′) with paired fakes and weights u (B, 1):
    Σ_i [clip_{C/2} ∇E(x′_i) + clip_{C/2} ∇GP_i] + clip_{C_α} ∇P_α(B) + N(0, σ²(C + 2C_α)²), / q·n.
    Public part, fakes (n_fake, d′): (1/n_fake) Σ_j clip_{C/2} ∇[m − E(f_j)]₊, no noise.
    `draws` repeats the noise draw (audits), adding a leading dimension. Returns (gradient, Ŝ_l,n).
    """
    half = clip_norm / 2
    real_term = clip_per_example(example_grads(energy, _energy, half, real), half)
    gp = clip_per_example(
        example_grads(energy, gradient_penalty(gp_lambda, None, lipschitz), half, real, paired_fake, u), half
    )
    coupled, s = ksd_penalty_gradient(energy, real, alpha, alpha_lambda)
    private = clip_and_noise(
        real_term + gp,
        clip_norm,
        noise_multiplier,
        expected_batch_size,
        generator,
        draws=draws,
        coupled=coupled,
        coupled_clip=ksd_clip,
    )
    fake_term = summed(clip_per_example(example_grads(energy, _margin(margin), half, fake), half))
    return {k: private[k] + fake_term[k] / fake.shape[0] for k in private}, s


class PPEM(PrivateGenerator):
    """PPEM generator (module docstring). `params`: the params.yaml section over
    `pipelines.generators.params.ppem.Params`."""

    name = "ppem"

    def __init__(
        self, layout: Layout, params: GeneratorParams | dict[str, Any] | None = None, device: str = "cpu"
    ) -> None:
        """x′ (`protected`, else the schema's protected columns) stays one scaled value under `numeric_encoding:
        bins` (the KSD test of α-LMDP needs a density on it), and the calibration measures and matches no marginal
        containing x′: α-LMDP promises the generated x′ marginal is NOT the real one (it would hand that back)."""
        p = parsed(self.Params, params, self.name)
        x_prime = set(p.protected) if p.protected is not None else {b.column for b in layout.blocks if b.protected}
        super().__init__(layout, p, device, scaled=x_prime, uncalibrated=x_prime)

    def build(self) -> None:
        """The networks of the run the params describe (LayerNorm generators when params' ε < ∞); `_fit` rebuilds
        them for the plan's privacy if it differs, before training, and `_restore` for the saved kind."""
        self.x_prime, self.x_star = split_columns(self.layout, self.params.protected)
        self._build(math.isfinite(self.params.epsilon))

    def _build(self, private: bool) -> None:
        """Fresh networks from the public seed (energies seed, seed+1; G_ω, G_υ seed+2, seed+3); `private`: no
        cross-record normalisation in the generators (LayerNorm, module docstring), else the paper's BatchNorm."""
        p, d1, d2 = self.params, len(self.x_prime), len(self.x_star)
        hidden, latent, seed = int(p.hidden), int(p.latent_dim), int(p.seed)
        self.private_networks = private
        marginal = sub_layout([b for b in self.layout.blocks if b.start in set(self.x_prime)])
        rest = sub_layout([b for b in self.layout.blocks if b.start in set(self.x_star)])
        norm = "layer" if private else "batch"
        self.energy_m = Energy(d1, 0, hidden)
        self.energy_c = Energy(d2, d1, hidden)
        self.gen_m = ResidualGenerator(latent, 0, hidden, OutputHeads(marginal, 1.0), d1, norm)
        self.gen_c = ResidualGenerator(latent, d1, hidden, OutputHeads(rest, float(p.gumbel_tau)), d2, norm)
        for i, net in enumerate(self.networks.values()):
            initialise(net, seed + i).to(self.device)

    @property
    def networks(self) -> dict[str, nn.Module]:
        return {
            "energy_marginal": self.energy_m,
            "energy_conditional": self.energy_c,
            "generator_marginal": self.gen_m,
            "generator_conditional": self.gen_c,
        }

    # -- privacy plan ------------------------------------------------------------------------
    def _plan(self, n_rows: int, budget: Budget) -> PPEMPlan:
        """The spend for n̂ = `n_rows` under `budget`; data-independent (public row count only), and it builds
        nothing (the networks' kind follows the plan in `_fit`).

        q = min(1, batch/n̂), T = steps or min(ceil(epochs/q), max_steps), T_G = T // energy_steps; σ = smallest
        noise scale with PLD ε(PoissonGaussian(σ/√2, q, T − T_G) + PoissonGaussian(σ/√3, q, T_G); δ)
        ≤ ε (module docstring). ε = inf: no clipping, no noise, a NonPrivateEvent.
        """
        p = self.params
        q, steps = sampling_schedule(p.batch_size, n_rows, p.steps, p.epochs, p.max_steps)
        gen_steps = steps // int(p.energy_steps)

        def events(sigma: float) -> list[Event]:
            counts = ((math.sqrt(2), steps - gen_steps), (math.sqrt(3), gen_steps))
            return [PoissonGaussianEvent(sigma / k, q, t) for k, t in counts if t > 0]

        if budget.private:
            sigma = calibrate_noise_scale(budget.epsilon, budget.delta, events)
            clip, ksd_clip, planned = float(p.clip_norm), float(p.ksd_clip), events(sigma)
        else:
            sigma, clip, ksd_clip, planned = 0.0, math.inf, math.inf, [NonPrivateEvent("epsilon: inf")]
        return PPEMPlan(
            n_rows=n_rows,
            epsilon=budget.epsilon,
            delta=budget.delta,
            events=tuple(planned),
            noise_multiplier=sigma,
            sample_rate=q,
            steps=steps,
            clip_norm=clip,
            generator_steps=gen_steps,
            ksd_clip=ksd_clip,
        )

    # -- training ----------------------------------------------------------------------------
    def _fit(self, data: np.ndarray, streams: Streams) -> tuple[Event, ...]:
        """Algorithm 1 on the rows read, with networks of the plan's kind (rebuilt from the public seed, before
        any training, when the plan's privacy differs from params'); the plan's events are exactly spent."""
        if self.privacy.private != self.private_networks:
            self._build(self.privacy.private)
        rows = torch.as_tensor(data, device=self.device)
        self._train(rows[:, self.x_prime], rows[:, self.x_star], *streams.training(self.name, self.device))
        return self.privacy.events

    def _train(self, xp_all: torch.Tensor, xs_all: torch.Tensor, rng: Rng, sample_rng: Rng) -> None:
        """T energy steps, a generator step after every `energy_steps`-th (Algorithm 1, module docstring); `rng`
        draws the noise, the fakes' latents and head uniforms and the interpolation weights u, `sample_rng` the
        Poisson batches (in a private run both CSPRNGs: `dpsgd.SecureGenerator`)."""
        p, plan = self.params, self.privacy
        n, q, steps = xp_all.shape[0], plan.sample_rate, plan.steps
        sigma, clip, ksd_clip = plan.noise_multiplier, plan.clip_norm, plan.ksd_clip
        # Poisson batches over the n actual rows; the divisor q·n̂ uses the public row count n̂ (plan()).
        expected, n_fake, m, private = q * plan.n_rows, int(p.batch_size), float(p.margin), sigma > 0
        adam = {"betas": (0.5, 0.9)}
        opts = [
            torch.optim.Adam(net.parameters(), lr=p.lr_energy if "energy" in k else p.lr_generator, **adam)
            for k, net in self.networks.items()
        ]
        cond_loss = _conditional_energy_loss(m, float(p.gp_lambda), len(self.x_star), float(p.lipschitz))
        progress_log, log = progress.TrainingLog(self.name, steps), {}
        for net in self.networks.values():
            net.train()
        for step in range(1, steps + 1):
            idx = poisson_sample(n, q, sample_rng).to(self.device)
            xp, xs = xp_all[idx], xs_all[idx]
            b = xp.shape[0]
            with torch.no_grad():
                fake_m = self._marginal(b + n_fake, rng)
                fake_c = self._conditional(xp, rng)
            u = uniform(rng, (b, 1), self.device)

            g_m, log["ksd"] = marginal_energy_gradient(
                self.energy_m,
                xp,
                fake_m[:b],
                u,
                fake_m[b:],
                clip,
                ksd_clip,
                sigma,
                expected,
                m,
                float(p.gp_lambda),
                float(p.lipschitz),
                float(p.alpha),
                float(p.alpha_lambda),
                rng,
            )
            self._step(opts[0], self.energy_m, g_m)

            # conditional energy: every term uses the real x′_i, all clipped together to C
            real_c, fake_c = torch.cat([xs, xp], 1), torch.cat([fake_c, xp], 1)
            g_c = clip_and_noise(
                example_grads(self.energy_c, cond_loss, clip, real_c, fake_c, u), clip, sigma, expected, rng
            )
            self._step(opts[1], self.energy_c, g_c)

            if step % int(p.energy_steps) == 0:
                opts[2].zero_grad(set_to_none=True)
                loss_m = self.energy_m(self._marginal(n_fake, rng)).mean()
                loss_m.backward(inputs=list(self.gen_m.parameters()))
                opts[2].step()
                self._step(opts[3], self.gen_c, self._conditional_generator_gradient(xp, rng, clip, sigma, expected))
                log["generator"] = loss_m.item()
            if progress_log.step(step):
                # Batch statistics on real rows are not covered by DP: shown only when ε = inf.
                ksd = "" if private else f"  batch Ŝ_l,n {log['ksd']:.2f}"
                progress_log.line(step, f"{ksd}  E_ξ(G_ω(z)) {log.get('generator', float('nan')):.3f}")
        for net in self.networks.values():
            net.eval()

    def _conditional_generator_gradient(
        self, xp: torch.Tensor, rng: Rng, clip: float, sigma: float, expected: float
    ) -> dict[str, torch.Tensor]:
        """∇_υ Σ_i E_γ(G_υ(z′_i|x′_i)|x′_i) over the real batch, clipped per record and noised (DP mode)."""
        inp = self._conditional_input(xp, rng)
        if not self.private_networks:  # BatchNorm: a plain batch gradient of the sum / q·n
            loss = self.energy_c(torch.cat([self.gen_c(inp), xp], 1)).sum() / expected
            params = dict(self.gen_c.named_parameters())
            return dict(zip(params, torch.autograd.grad(loss, list(params.values()))))
        d1 = len(self.x_prime)
        latent = int(self.params.latent_dim)

        def loss(forward: Forward, row: torch.Tensor) -> torch.Tensor:
            return self.energy_c(torch.cat([forward(row), row[:, latent : latent + d1]], 1)).sum()

        return clip_and_noise(per_example_grads(self.gen_c, loss, inp), clip, sigma, expected, rng)

    @staticmethod
    def _step(opt: torch.optim.Optimizer, net: nn.Module, grads: dict[str, torch.Tensor]) -> None:
        for name, param in net.named_parameters():
            param.grad = grads[name]
        opt.step()

    def _marginal(self, n: int, rng: Rng) -> torch.Tensor:
        """n draws x′ = G_ω(z), latents and head uniforms from `rng` (a private run's CSPRNG in training)."""
        z = standard_normal(rng, (n, self.gen_m.latent), self.device)
        return self.gen_m(torch.cat([z, self.gen_m.heads.uniforms(n, rng)], 1))

    def _conditional_input(self, xp: torch.Tensor, rng: Rng) -> torch.Tensor:
        """G_υ's inputs [z′, x′, u] for the rows x′, latents and head uniforms from `rng`."""
        n = xp.shape[0]
        z = standard_normal(rng, (n, self.gen_c.latent), self.device)
        return torch.cat([z, xp, self.gen_c.heads.uniforms(n, rng)], 1)

    def _conditional(self, xp: torch.Tensor, rng: Rng) -> torch.Tensor:
        return self.gen_c(self._conditional_input(xp, rng))

    # -- sampling, the α-LMDP gate, persistence ------------------------------------------------
    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Algorithm 2: x′ = G_ω(z), x* = G_υ(z′|x′), assembled in layout order (`sample` discretises them)."""
        return sample_rows(n, self.layout.width, rng, self.device, self._rows)

    def _rows(self, n: int, rng: torch.Generator) -> torch.Tensor:
        """n rows in layout order: x′ = G_ω(z) into the protected columns, x* = G_υ(z′|x′) into the rest."""
        xp = self._marginal(n, rng)
        rows = torch.empty(n, self.layout.width, device=self.device)
        rows[:, self.x_prime] = xp
        rows[:, self.x_star] = self._conditional(xp, rng)
        return rows

    def score(self, x_prime: torch.Tensor) -> torch.Tensor:
        """s_ξ(x′) = −∇ₓ E_ξ(x′), the score of p_ξ ∝ exp(−E_ξ) (no partition function needed, §3.5)."""
        x = torch.as_tensor(x_prime, dtype=torch.float32, device=self.device).detach().requires_grad_(True)
        return -torch.autograd.grad(self.energy_m(x).sum(), x)[0].detach()

    def release_gates(self, real_encoded: Any) -> list[GateResult]:
        """The generator's own gates for `check@ppem` (`PrivateGenerator`'s docstring: run after the ledger gate)."""
        return [self.alpha_lmdp_gate(real_encoded)]

    def alpha_lmdp_gate(self, real_encoded: np.ndarray, seed: int | None = None) -> GateResult:
        """The α-LMDP gate (§5.2.1) on the real encoded training rows: passes iff, at level α, the quadratic
        KSD test rejects H₀: real x′ ~ p_ξ AND the MMD test rejects H₀: G_ω's x′ ~ real x′ (`gates.alpha_lmdp_gate`)."""
        p = self.params
        seed = int(p.seed) if seed is None else seed
        real = self.encoding.model_rows(np.asarray(real_encoded, dtype=np.float32))[:, self.x_prime]
        generated = self.encoding.model_rows(self.sample(min(len(real), int(p.gate_max_rows)), seed))[:, self.x_prime]
        return alpha_lmdp_gate(
            self.score,
            real,
            generated,
            float(p.alpha),
            int(p.gate_bootstrap),
            int(p.gate_permutations),
            int(p.gate_max_rows),
            seed,
        )

    def _state(self) -> dict[str, Any]:
        """The kind of networks trained (LayerNorm when the plan was private), which `load` rebuilds."""
        return {"private_networks": self.private_networks}

    def _restore(self, state: dict[str, Any]) -> None:
        """Rebuild the saved kind of networks before their weights load."""
        if state["private_networks"] != self.private_networks:
            self._build(state["private_networks"])
