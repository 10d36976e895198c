"""The project's factored per-example clipping vs Opacus's fast gradient clipping ("ghost" mode), side by side.

Only for the sum-of-examples losses, where Opacus applies. Opacus's ghost clipping has no double backward, so
it cannot run the WGAN critic or PPEM's gradient penalties. Two losses are compared:

  dp_auto_gan ae   dp_auto_gan.autoencoder_gradient (joint encoder+decoder clipping, C1 = 1, batch 64)
  priv_mlp         relaxed_dpsgd.relaxed_dpsgd_gradient (a lot of 32 private + 32 synthetic rows, C = 1)

Opacus: GradSampleModuleFastGradientClipping(use_ghost_clipping=True). The hooks capture activations and
backprops; a first backward of Σℓ_i gives the per-example norms; a second backward of Σ c_i ℓ_i gives the
clipped sum. Noise N(0, σ²C²) and the divisor q·n are added as `clip_and_noise` adds them. With σ = 0 both paths
must return the same gradient, and the printed max |diff| checks that. The two are timed alternately (medians).

    .venv/bin/python -m benchmarks.opacus_ghost --repeats 50
"""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Callable

import torch
from opacus.grad_sample import GradSampleModuleFastGradientClipping
from torch import nn

from benchmarks.dpsgd_step import alternating_medians, encoded_rows, layout_of
from pipelines.generators.dp_auto_gan import Autoencoder, autoencoder_gradient, reconstruction_loss
from pipelines.weights import relaxed_dpsgd
from pipelines.config import WeightEstimator


def opacus_gradient(
    gsm: GradSampleModuleFastGradientClipping,
    per_example_loss: Callable[[], torch.Tensor],
    clip: float,
    sigma: float,
    expected: float,
    rng: torch.Generator,
) -> dict[str, torch.Tensor]:
    """Opacus ghost clipping: (Σ_i clip_C ∇ℓ_i + N(0, σ²C²)) / expected."""
    gsm.zero_grad(set_to_none=True)
    gsm.enable_hooks()
    losses = per_example_loss()
    losses.sum().backward(retain_graph=True)
    coef = gsm.get_clipping_coef()
    gsm.disable_hooks()
    gsm.zero_grad(set_to_none=True)
    (coef * losses).sum().backward()
    return {
        n: (p.grad + sigma * clip * torch.randn(p.shape, generator=rng)) / expected
        for n, p in gsm._module.named_parameters()
    }


def wrapped(model: nn.Module, make: Callable[[], nn.Module], clip: float) -> GradSampleModuleFastGradientClipping:
    twin = make()
    twin.load_state_dict(model.state_dict())
    return GradSampleModuleFastGradientClipping(twin, max_grad_norm=clip, use_ghost_clipping=True, loss_reduction="sum")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--widths", type=int, nargs="+", default=[31, 110])
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rng, clip = torch.Generator().manual_seed(0), 1.0
    print(f"1 torch thread, 1-min load {os.getloadavg()[0]:.2f}, medians of {args.repeats} alternating calls")
    print(f"{'step':<24} {'factored ms':>12} {'opacus ghost ms':>16} {'max |diff| at σ = 0':>20}")
    for width in args.widths:
        layout = layout_of(width)
        ae, loss, batch = Autoencoder(width, [60], 15), reconstruction_loss(layout), encoded_rows(layout, 64)
        gsm = wrapped(ae, lambda: Autoencoder(width, [60], 15), clip)
        numeric = [c for b in layout.blocks if b.kind != "categorical" for c in range(b.start, b.stop)]

        def ae_losses() -> torch.Tensor:  # reconstruction_loss row by row (the σ = 0 diff checks they agree)
            logits = gsm(batch)
            out = nn.functional.binary_cross_entropy_with_logits(
                logits[:, numeric], batch[:, numeric], reduction="none"
            ).sum(1)
            for b in layout.blocks:
                if b.kind == "categorical":
                    out = out - (batch[:, b.start : b.stop] * torch.log_softmax(logits[:, b.start : b.stop], 1)).sum(1)
            return out

        model = relaxed_dpsgd.classifier(width, list(WeightEstimator().hidden))
        real, synthetic = torch.rand(32, width), torch.rand(32, width)
        lot, label = torch.cat([real, synthetic]), torch.cat([torch.ones(32), torch.zeros(32)])
        gsm_mlp = wrapped(model, lambda: relaxed_dpsgd.classifier(width, list(WeightEstimator().hidden)), clip)

        def mlp_losses() -> torch.Tensor:
            return nn.functional.softplus((1 - 2 * label) * gsm_mlp(lot).squeeze(-1))

        cases = [
            (
                f"dp_auto_gan ae  d={width}",
                lambda s: autoencoder_gradient(ae, loss, batch, clip, s, 64.0, rng),
                lambda s: opacus_gradient(gsm, ae_losses, clip, s, 64.0, rng),
            ),
            (
                f"priv_mlp  d={width}",
                lambda s: relaxed_dpsgd.relaxed_dpsgd_gradient(model, real, synthetic, clip, s, 64.0, rng),
                lambda s: opacus_gradient(gsm_mlp, mlp_losses, clip, s, 64.0, rng),
            ),
        ]
        for name, ours, theirs in cases:
            a, b = ours(0.0), theirs(0.0)
            diff = max(float((a[k] - b[k]).abs().max()) for k in a)
            mine, opacus = alternating_medians(lambda: ours(1.0), lambda: theirs(1.0), args.repeats)
            print(f"{name:<24} {mine:>12.2f} {opacus:>16.2f} {diff:>20.1e}", flush=True)


if __name__ == "__main__":
    main()
