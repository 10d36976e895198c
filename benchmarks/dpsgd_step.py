"""Wall time of one private DP-WGAN critic step vs the same step without privacy (CPU, 2 threads).

private:     wgan.critic_gradient — per-example grads (torch.func, nested grad for the gradient
             penalty), split clipping, Gaussian noise (Abadi et al. 2016, Alg. 1)
non-private: plain autograd on the batch-mean WGAN-GP loss (Gulrajani et al. 2017, Eq. 3)
Same critic, same batch, same run; medians over --repeats after warm-up.

    .venv/bin/python benchmarks/dpsgd_step.py --repeats 50
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from pipelines.generators.dpwgan import DEFAULTS
from pipelines.generators.wgan import Critic, critic_gradient


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def non_private_step(critic: Critic, real: torch.Tensor, fake: torch.Tensor, u: torch.Tensor,
                     gp_lambda: float) -> None:
    critic.zero_grad(set_to_none=True)
    x_hat = (u * real + (1 - u) * fake).requires_grad_()
    (g,) = torch.autograd.grad(critic(x_hat).sum(), x_hat, create_graph=True)
    penalty = gp_lambda * ((g.pow(2).sum(1) + 1e-12).sqrt() - 1).pow(2).mean()
    (critic(fake).mean() - critic(real).mean() + penalty).backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--widths", type=int, nargs="+", default=[31, 110], help="31: breast cancer, 110: adult")
    parser.add_argument("--batch", type=int, default=DEFAULTS["batch_size"])
    parser.add_argument("--hidden", type=int, nargs="+", default=DEFAULTS["critic_hidden"])
    args = parser.parse_args()
    torch.set_num_threads(2)
    gp_lambda = float(DEFAULTS["gp_lambda"])
    print(f"critic hidden {args.hidden}, batch {args.batch}, {torch.get_num_threads()} threads, "
          f"median of {args.repeats}")
    print(f"{'width':>5} {'params':>7} {'private ms':>11} {'non-private ms':>15} {'ratio':>6}")
    for width in args.widths:
        torch.manual_seed(0)
        critic = Critic(width, args.hidden)
        real, fake, fake_term = (torch.rand(args.batch, width) for _ in range(3))
        u = torch.rand(args.batch, 1)
        rng = torch.Generator().manual_seed(0)
        private = median_ms(lambda: critic_gradient(critic, real, fake, u, fake_term, 1.0, 1.0, float(args.batch),
                                                    gp_lambda, rng), args.repeats)
        plain = median_ms(lambda: non_private_step(critic, real, fake, u, gp_lambda), args.repeats)
        n_params = sum(p.numel() for p in critic.parameters())
        print(f"{width:>5} {n_params:>7} {private:>11.2f} {plain:>15.2f} {private / plain:>6.1f}")


if __name__ == "__main__":
    main()
