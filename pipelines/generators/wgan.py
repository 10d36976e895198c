"""The private WGAN-GP machinery shared by DP-WGAN and DP-auto-GAN's phase 2: the critic network, the
private critic step, and the alternating critic / generator training loop.

Critic loss (Gulrajani et al. 2017, Eq. 3), split by what touches a real record:

    L_D = E_f[D(f)]  +  E_x[ −D(x) + λ (‖∇_x̂ D(x̂)‖₂ − 1)² ],   x̂ = u·x + (1−u)·f,  u ~ U[0,1]
          fake-only      real-touching: per-example, clipped + noised

Each critic step Poisson-samples real rows at rate q = batch_size / n, pairs every sampled x_i with
a fresh fake f_i and u_i, and privatises the real-touching per-example gradients with DP-SGD
(Abadi et al. 2016, Alg. 1; `pipelines.privacy.dpsgd`). Clipping is split: ∇(−D(x_i)) is clipped to
C/2 and ∇ of the penalty term to C/2, so their sum has norm ≤ C (triangle inequality) and
`clip_and_noise(·, C, σ)` adds N(0, σ²C²) and divides by q·n: sensitivity C, as accounted.

The fake-only term depends only on the (already private) critic and generator, so it gets no noise
and is added after privatisation (privacy rule 3, docs/architecture.md). It is taken over a fixed number
`batch_size` of fakes (never the realised real batch size, which is private) and each ∇D(f_j) is
clipped to the same C/2 as ∇(−D(x_i)), without noise. Why: with a plain fake gradient but clipped
real gradients the critic descends E[D(f)] − c·E[D(x)] with c < 1, which rewards lowering D
everywhere; measured on breast cancer at ε = 3 the output offset drifted to D ≈ −16 (both real and
fake) within 300 steps, starving the penalty and the generator of signal. Clipping both sides alike
removes the drift (D stays O(1)). With ε = inf there is no clipping (C = inf) and no noise.

The fakes of a critic step are drawn with the generator in eval mode, so each fake is a function of
its own latent draw only: a generator with BatchNorm in train mode would normalise the fakes over a
batch whose size b + batch_size contains the private batch size b, coupling every record's term (and
the un-noised fake-only term) to whether one record was sampled. The generator minimises
−E_z D(G(z)) in train mode on a fixed `batch_size` fakes; it sees data only through the private
critic: post-processing. T critic steps spend exactly PoissonGaussianEvent(σ, q, T).

Every draw of a training step (the fakes' latents and head uniforms, u, the noise) comes from the noise stream
`rng`, the Poisson batches from `sample_rng`: in a private run both are CSPRNGs (`dpsgd.SecureGenerator`,
through `dpsgd.standard_normal` and `dpsgd.uniform`), never torch's MT19937.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from pipelines import progress
from pipelines.generators.losses import Forward, input_gradient_penalty
from pipelines.generators.networks import layer_norm_leaky, mlp
from pipelines.parameters import Encoded
from pipelines.privacy.dpsgd import (
    Rng,
    clip_and_noise,
    clip_per_example,
    per_example_grads,
    poisson_sample,
    summed,
    uniform,
)

FakeSampler = Callable[[int, Rng], torch.Tensor]


class Critic(nn.Module):
    """WGAN critic: Linear → LayerNorm → LeakyReLU(0.2) blocks (never BatchNorm: it mixes examples,
    so one record would influence every other example's gradient and per-example clipping breaks)."""

    def __init__(self, width: int, hidden: list[int]) -> None:
        super().__init__()
        self.net = mlp([width, *hidden, 1], layer_norm_leaky)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


def _critic_rows(b: int, m: int, gp_lambda: float) -> Callable[[Forward, torch.Tensor], torch.Tensor]:
    """The critic's per-row terms over rows [x_1..x_b; f_1..f_m; x̂_1..x̂_b] (one forward pass, one input
    gradient): −D(x_i), D(f_j) and λ(‖∇_x̂ D(x̂_i)‖₂ − 1)², each row's term reading its row only."""

    def loss(forward: Forward, rows: torch.Tensor) -> torch.Tensor:
        rows = rows.detach().requires_grad_(True)
        out = forward(rows)
        (g,) = torch.autograd.grad(out[b + m :].sum(), rows, create_graph=True)
        return out[b : b + m].sum() - out[:b].sum() + input_gradient_penalty(g[b + m :], gp_lambda)

    return loss


def critic_gradient(
    critic: nn.Module,
    real: torch.Tensor,
    paired_fake: torch.Tensor,
    u: torch.Tensor,
    fake: torch.Tensor,
    clip_norm: float,
    noise_multiplier: float,
    expected_batch_size: float,
    gp_lambda: float,
    generator: Rng,
    draws: int | None = None,
) -> dict[str, torch.Tensor]:
    """Gradient of one private critic step (module docstring): {parameter name: gradient}.

    real (B, d) with its paired fakes (B, d) and interpolation weights u (B, 1): the real-touching
    terms, ∇(−D(x_i)) and ∇λ(‖∇D(x̂_i)‖−1)² each clipped to C/2, then `clip_and_noise` (C, σ, q·n).
    fake (m, d), m fixed: the fake-only term (1/m) Σ_j clip_{C/2}(∇D(f_j)), no noise. All 2B + m terms'
    gradients come from one pass (`_critic_rows`), each clipped on its own.
    `draws` repeats the noise draw (audits), adding a leading dimension.
    """
    b, m = real.shape[0], fake.shape[0]
    x_hat = u * real + (1 - u) * paired_fake
    terms = clip_per_example(
        per_example_grads(critic, _critic_rows(b, m, gp_lambda), torch.cat([real, fake, x_hat])), clip_norm / 2
    )
    private = clip_and_noise(
        terms.select(slice(0, b)) + terms.select(slice(b + m, None)),
        clip_norm,
        noise_multiplier,
        expected_batch_size,
        generator,
        draws=draws,
    )
    fake_term = summed(terms.select(slice(b, b + m)))
    return {k: private[k] + fake_term[k] / m for k in private}


def train_wgan(
    label: str,
    critic: nn.Module,
    generator: nn.Module,
    fake: FakeSampler,
    data: torch.Tensor,
    sample_rate: float,
    steps: int,
    noise_multiplier: float,
    clip_norm: float,
    params: Encoded,
    rng: Rng,
    sample_rng: Rng,
    n_rows: int | None = None,
) -> None:
    """`steps` private critic steps, one generator step after every `n_critic` (module docstring).

    Poisson batches are drawn over the actual rows of `data` at rate q = `sample_rate` (= B/n̂); the noised
    gradient sum is divided by the data-independent expected batch size q·n̂, n̂ = `n_rows` (the public
    training row count; None: the rows of `data`, when their count is public, e.g. a plain array).

    `fake(n, rng)`: n fakes from the generator's current parameters (`generator`: the module whose
    parameters the generator step updates), its latents and uniforms drawn from `rng` by `dpsgd.standard_normal`
    and `dpsgd.uniform`, as u is here. `params`: batch_size, n_critic, lr_critic,
    lr_generator, gp_lambda. Both networks use Adam with betas (0.5, 0.9).
    """
    n, q = data.shape[0], sample_rate
    expected = q * (n if n_rows is None else n_rows)
    n_fake, private = int(params.batch_size), noise_multiplier > 0
    opt_d = torch.optim.Adam(critic.parameters(), lr=params.lr_critic, betas=(0.5, 0.9))
    opt_g = torch.optim.Adam(generator.parameters(), lr=params.lr_generator, betas=(0.5, 0.9))
    critic_params = dict(critic.named_parameters())
    log, g_loss = progress.TrainingLog(label, steps), float("nan")
    critic.train()
    for step in range(1, steps + 1):
        real = data[poisson_sample(n, q, sample_rng).to(data.device)]
        b = real.shape[0]
        generator.eval()
        with torch.no_grad():
            fakes = fake(b + n_fake, rng)
        u = uniform(rng, (b, 1), data.device)
        grads = critic_gradient(
            critic, real, fakes[:b], u, fakes[b:], clip_norm, noise_multiplier, expected, float(params.gp_lambda), rng
        )
        for name, param in critic_params.items():
            param.grad = grads[name]
        opt_d.step()

        if step % int(params.n_critic) == 0:
            generator.train()
            opt_g.zero_grad(set_to_none=True)
            loss = -critic(fake(n_fake, rng)).mean()
            loss.backward(inputs=list(generator.parameters()))
            opt_g.step()
            g_loss = loss.item()
        if log.step(step):
            # A critic loss on real rows is not covered by DP: it is shown only when ε = inf.
            with torch.no_grad():
                fake_score = critic(fakes[b:]).mean().item()
                loss_d = "" if private else f"  critic loss {fake_score - critic(real).mean().item():+.4f}"
            log.line(step, f"{loss_d}  D(fake) {fake_score:+.4f}  generator loss {g_loss:+.4f}")
    generator.eval(), critic.eval()
