"""Wall time of every DP-SGD generator's private step vs the same step without privacy, at default sizes.

One row per private step the generators run (the code the training loops call, on networks built with the
defaults of pipelines/generators/params/*.py and pipelines/weights/estimators.py):

  wgan critic        wgan.critic_gradient (DP-WGAN; DP-auto-GAN's phase 2 runs the same step at the same
                     default sizes): −D(x_i) and the gradient penalty clipped to C/2 each, fake term clipped
  dp_auto_gan ae     dp_auto_gan.autoencoder_gradient: joint encoder+decoder clipping (phase 1)
  ppem energy ξ      ppem.marginal_energy_gradient: E(x′_i) + penalty clipped, KSD penalty P_α coupled
  ppem energy γ      the conditional energy's release (real, margin and penalty terms clipped together)
  ppem generator υ   PPEM._conditional_generator_gradient (G_υ reads the real x′_i)
  priv_mlp           relaxed_dpsgd.relaxed_dpsgd_gradient (the importance-weight classifier)

private:     the function above with a finite clip norm and σ = 1 (per-example gradients, clipping, noise)
non-private: plain autograd on the batch loss of the same terms (one forward, one backward; the gradient
             penalties by create_graph), what a non-private implementation would run.
Same networks, same batch, same process; the two are timed alternately, `--repeats` times each after
warm-up, so machine load hits both alike: the ratio of the medians is the figure to read.

    .venv/bin/python -m benchmarks.dpsgd_step --repeats 50 --threads 1               # the product's noise
    .venv/bin/python -m benchmarks.dpsgd_step --repeats 50 --threads 1 --noise torch # before issue 28
    python -m benchmarks.dpsgd_step --repeats 50 --device cuda    # on a GPU: networks and batches there, as the
                                                                  # generators put them (built on the CPU, moved)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Iterator

import torch
from torch import nn

from pipelines.data.layout import Block, Layout
from pipelines.generators import ppem as ppem_module
from pipelines.generators.dp_auto_gan import Autoencoder, autoencoder_gradient, reconstruction_loss
from pipelines.generators.params import dp_auto_gan, dpwgan, ppem
from pipelines.generators.wgan import Critic, critic_gradient
from pipelines.privacy.dpsgd import SecureGenerator
from pipelines.stats.ksd import linear_terms, normalized_linear_ksd
from pipelines.privacy.noise import secure_numpy
from pipelines.weights import relaxed_dpsgd
from pipelines.config import WeightEstimator

Step = Callable[[], object]
AUTO_GAN, WGAN, WEIGHTS = dp_auto_gan.Params(), dpwgan.Params(), WeightEstimator()  # the defaults


def alternating_medians(private: Step, plain: Step, repeats: int) -> tuple[float, float]:
    """Median ms of each, timed alternately (after 3 warm-up calls each)."""
    private, plain = synced(private), synced(plain)
    for _ in range(3):
        private(), plain()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, out in ((private, times[0]), (plain, times[1])):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times[0]), 1e3 * statistics.median(times[1])


NOISE = {"source": "secure"}
DEVICE = {"name": "cpu"}


def dev(x: torch.Tensor | nn.Module) -> torch.Tensor | nn.Module:
    """`x` on the benchmark's device (networks are initialised on the CPU from seeded CPU generators, then moved,
    as the generators do: `networks.initialise`)."""
    return x.to(DEVICE["name"])


def synced(fn: Step) -> Step:
    """`fn`, returning once the device has finished its work (CUDA runs kernels asynchronously)."""
    if DEVICE["name"] == "cpu":
        return fn

    def call() -> object:
        out = fn()
        torch.cuda.synchronize()
        return out

    return call


def noise_rng() -> torch.Generator:
    """The private step's generator: the product's `SecureGenerator` (noise and batches from the AES-CTR CSPRNG,
    Opacus' secure-mode sum of four normals; `--noise secure`, the default) or a plain torch generator (the noise
    path before issue 28; `--noise torch`), so the two can be compared."""
    if NOISE["source"] == "torch":
        return torch.Generator(DEVICE["name"]).manual_seed(0)
    return SecureGenerator(secure_numpy(bytes(16)), DEVICE["name"])


def backward(net: nn.Module, loss: torch.Tensor) -> None:
    net.zero_grad(set_to_none=True)
    loss.backward()


def penalty(
    net: Callable[[torch.Tensor], torch.Tensor],
    real: torch.Tensor,
    fake: torch.Tensor,
    u: torch.Tensor,
    lam: float,
    target: float = 1.0,
    width: int | None = None,
) -> torch.Tensor:
    """Batch-mean gradient penalty λ(‖∇D(x̂)‖ − K)² (non-private, create_graph)."""
    x_hat = (u * real + (1 - u) * fake).requires_grad_()
    (g,) = torch.autograd.grad(net(x_hat).sum(), x_hat, create_graph=True)
    g = g if width is None else g[:, :width]
    return lam * ((g.pow(2).sum(1) + 1e-12).sqrt() - target).pow(2).mean()


def wgan_critic(width: int, sigma: float) -> tuple[Step, Step]:
    batch, lam = int(WGAN.batch_size), float(WGAN.gp_lambda)
    critic = dev(Critic(width, list(WGAN.critic_hidden)))
    real, paired, fake = (dev(torch.rand(batch, width)) for _ in range(3))
    u, rng = dev(torch.rand(batch, 1)), noise_rng()

    def private() -> object:
        return critic_gradient(critic, real, paired, u, fake, float(WGAN.clip_norm), sigma, float(batch), lam, rng)

    def plain() -> None:
        backward(critic, critic(fake).mean() - critic(real).mean() + penalty(critic, real, paired, u, lam))

    return private, plain


def layout_of(width: int, protected: int = 0) -> Layout:
    """`protected` continuous columns, then 8 more, then 4-level categoricals up to `width` encoded columns."""
    blocks, start = [], 0
    for i in range(protected + 8):
        blocks.append(Block(f"n{i}", "continuous", start, start + 1, protected=i < protected))
        start += 1
    while start < width:
        stop = min(width, start + 4)
        blocks.append(Block(f"c{len(blocks)}", "categorical", start, stop))
        start = stop
    return Layout(tuple(blocks))


def encoded_rows(layout: Layout, n: int) -> torch.Tensor:
    rows = torch.rand(n, layout.width)
    for b in layout.blocks:
        if b.kind == "categorical":
            rows[:, b.start : b.stop] = nn.functional.one_hot(
                torch.randint(b.stop - b.start, (n,)), b.stop - b.start
            ).float()
    return rows


def autoencoder(width: int, sigma: float) -> tuple[Step, Step]:
    layout = layout_of(width)
    net = dev(Autoencoder(width, list(AUTO_GAN.autoencoder_hidden), int(AUTO_GAN.latent_dim)))
    batch, loss = dev(encoded_rows(layout, int(AUTO_GAN.autoencoder_batch_size))), reconstruction_loss(layout)
    rng = noise_rng()

    def private() -> object:
        return autoencoder_gradient(
            net, loss, batch, float(AUTO_GAN.autoencoder_clip_norm), sigma, float(len(batch)), rng
        )

    return private, lambda: backward(net, loss(net, batch) / len(batch))


def ppem_steps(width: int, protected: int, sigma: float) -> Iterator[tuple[str, Step, Step]]:
    """PPEM's three releases on one built PPEM (private networks) at default sizes."""
    layout, p = layout_of(width, protected), ppem.Params(epsilon=1.0)
    model = ppem_module.PPEM(layout, p, device=DEVICE["name"])
    batch, m, lam = int(p.batch_size), float(p.margin), float(p.gp_lambda)
    rows = dev(encoded_rows(layout, batch))
    xp, xs = rows[:, model.x_prime], rows[:, model.x_star]
    rng, clip = noise_rng(), float(p.clip_norm)
    with torch.no_grad():
        fake_m, fake_c = model._marginal(2 * batch, rng), model._conditional(xp, rng)
    u, e_m, e_c = dev(torch.rand(batch, 1)), model.energy_m, model.energy_c

    def marginal() -> object:
        return ppem_module.marginal_energy_gradient(
            e_m,
            xp,
            fake_m[:batch],
            u,
            fake_m[batch:],
            clip,
            float(p.ksd_clip),
            sigma,
            float(batch),
            m,
            lam,
            float(p.lipschitz),
            float(p.alpha),
            float(p.alpha_lambda),
            rng,
        )

    def marginal_plain() -> None:
        x = xp.detach().requires_grad_()
        score = -torch.autograd.grad(e_m(x).sum(), x, create_graph=True)[0]
        ksd = float(p.alpha_lambda) * torch.relu(3.84 - normalized_linear_ksd(linear_terms(x, score)))
        loss = (
            e_m(xp).mean()
            + torch.relu(m - e_m(fake_m[batch:])).mean()
            + penalty(e_m, xp, fake_m[:batch], u, lam, float(p.lipschitz))
            + ksd
        )
        backward(e_m, loss)

    yield "ppem energy ξ (+KSD)", marginal, marginal_plain

    cond_loss = ppem_module._conditional_energy_loss(m, lam, len(model.x_star), float(p.lipschitz))
    real_c, fake_cc = torch.cat([xs, xp], 1), torch.cat([fake_c, xp], 1)

    def conditional() -> object:
        grads = ppem_module.example_grads(e_c, cond_loss, clip, real_c, fake_cc, u)
        return ppem_module.clip_and_noise(grads, clip, sigma, float(batch), rng)

    yield "ppem energy γ", conditional, lambda: backward(e_c, cond_loss(e_c, real_c, fake_cc, u) / batch)

    def generator_plain() -> None:
        inp = model._conditional_input(xp, rng)
        backward(model.gen_c, e_c(torch.cat([model.gen_c(inp), xp], 1)).mean())

    yield (
        "ppem generator υ",
        lambda: model._conditional_generator_gradient(xp, rng, clip, sigma, float(batch)),
        generator_plain,
    )


def priv_mlp(width: int, sigma: float) -> tuple[Step, Step]:
    model = dev(relaxed_dpsgd.classifier(width, list(WEIGHTS.hidden)))
    half = int(WEIGHTS.batch_size) // 2  # the lot: L in expectation over real + synthetic rows
    real, synthetic, rng = dev(torch.rand(half, width)), dev(torch.rand(half, width)), noise_rng()

    def private() -> object:
        return relaxed_dpsgd.relaxed_dpsgd_gradient(
            model, real, synthetic, float(WEIGHTS.clip_norm), sigma, float(2 * half), rng
        )

    def plain() -> None:
        loss = nn.functional.softplus(-model(real)).sum() + nn.functional.softplus(model(synthetic)).sum()
        backward(model, loss / (2 * half))

    return private, plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--widths", type=int, nargs="+", default=[31, 110], help="31: breast cancer, 110: adult")
    parser.add_argument("--ppem-width", type=int, default=60, help="PPEM's encoded width (issue 20: ~60 columns)")
    parser.add_argument("--ppem-protected", type=int, default=4, help="protected (x′) columns of the PPEM table")
    parser.add_argument(
        "--noise",
        choices=("secure", "torch"),
        default="secure",
        help="secure: the product's CSPRNG noise (issue 28); torch: the earlier torch.randn noise",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where networks and batches live")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1: what pipelines.runtime gives each of two tasks on two cores)",
    )
    args = parser.parse_args()
    NOISE["source"], DEVICE["name"] = args.noise, args.device
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    sigma = 1.0
    load = os.getloadavg()[0]
    where = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"
    print(
        f"{where}: {torch.get_num_threads()} torch thread(s), {os.cpu_count()} cores, 1-min load {load:.2f}, "
        f"medians of {args.repeats} alternating calls, {args.noise} noise"
    )
    cases: list[tuple[str, Step, Step]] = []
    for width in args.widths:
        cases.append((f"wgan critic  d={width}", *wgan_critic(width, sigma)))
        cases.append((f"dp_auto_gan ae  d={width}", *autoencoder(width, sigma)))
        cases.append((f"priv_mlp  d={width}", *priv_mlp(width, sigma)))
    cases += [
        (f"{name}  d={args.ppem_width}", *fns) for name, *fns in ppem_steps(args.ppem_width, args.ppem_protected, sigma)
    ]
    print(f"{'step':<30} {'private ms':>11} {'non-private ms':>15} {'ratio':>6}")
    for name, private, plain in cases:
        p_ms, n_ms = alternating_medians(private, plain, args.repeats)
        print(f"{name:<30} {p_ms:>11.2f} {n_ms:>15.2f} {p_ms / n_ms:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
