"""DP-SGD building blocks with `torch.func` (Abadi et al. 2016, Alg. 1).

One private step is

    B ~ Poisson(q)                              each record included independently w.p. q
    g_i = ∇_θ ℓ(θ; x_i)                         per-example gradients, i in B
    ḡ  = (Σ_i g_i · min(1, C/‖g_i‖₂) + N(0, σ²C² I)) / (q·n)

and T such steps are what the accountant composes as PoissonGaussianEvent(σ, q, T).

Opacus is not used on purpose: a GAN critic's loss mixes terms that touch a real record
(−D(x_i), the gradient penalty on interpolates of x_i) with fake-only terms. Only the former
go through `per_example_grads` + `clip_and_noise`; fake-only terms depend on already-private
parameters and get a plain gradient added after privatisation (ARCHITECTURE rule 3, Pitfalls).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, vmap


def sampling_schedule(batch_size: float, n_rows: int, steps: int | None, epochs: float | None) -> tuple[float, int]:
    """(q, T) of a DP-SGD run on the public row count n̂ = `n_rows`: q = min(1, batch_size/n̂) (the lot
    size L = q·n̂ of Abadi et al. 2016, §3.1), and T = `steps`, or ceil(epochs/q) when `steps` is None
    (an epoch is 1/q steps). Data-independent: T steps are PoissonGaussianEvent(σ, q, T)."""
    q = min(1.0, batch_size / n_rows)
    return q, int(steps) if steps is not None else int(math.ceil(epochs / q))


def poisson_sample(n: int, sample_rate: float, generator: torch.Generator) -> torch.Tensor:
    """Indices of a Poisson sample of range(n): each row kept independently with prob `sample_rate`.

    The batch size is Binomial(n, q) and may be 0; an empty batch makes the step pure noise,
    which is exactly what the subsampled-Gaussian accountant assumes.
    """
    if not 0.0 < sample_rate <= 1.0:
        raise ValueError(f"sample_rate must lie in (0, 1], got {sample_rate}")
    keep = torch.rand(n, generator=generator, device=generator.device) < sample_rate
    return keep.nonzero().squeeze(1)


def _example_loss(model: nn.Module, loss_fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    buffers = {k: b.detach() for k, b in model.named_buffers()}

    def example_loss(p: dict[str, torch.Tensor], *example: torch.Tensor) -> torch.Tensor:
        def forward(inputs: torch.Tensor) -> torch.Tensor:
            return functional_call(model, (p, buffers), (inputs,))
        return loss_fn(forward, *(e.unsqueeze(0) for e in example))
    return example_loss


def per_example_grads(model: nn.Module, loss_fn: Callable[..., torch.Tensor],
                      *batched_inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-example gradients {name: Tensor(B, *param.shape)} of `loss_fn` w.r.t. `model`'s parameters.

    `loss_fn(forward, *example)` returns the scalar loss of ONE example: `forward` is the model
    as a function of its input (with the parameters being differentiated), each tensor in
    `example` is one row of the corresponding `batched_inputs` with a leading batch dimension
    of 1. Computed as vmap(grad(loss)) over functional_call; `loss_fn` may itself take
    `torch.func.grad` of `forward` w.r.t. its input (a gradient penalty), which nests under vmap.
    """
    params = {k: p.detach() for k, p in model.named_parameters() if p.requires_grad}
    if batched_inputs[0].shape[0] == 0:
        return {k: p.new_zeros((0, *p.shape)) for k, p in params.items()}
    in_dims = (None,) + (0,) * len(batched_inputs)
    return vmap(grad(_example_loss(model, loss_fn)), in_dims=in_dims)(params, *batched_inputs)


def summed_grads(model: nn.Module, loss_fn: Callable[..., torch.Tensor],
                 *batched_inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    """∇ Σ_i loss_fn(example i) as {name: Tensor(1, *param.shape)}: the non-private path (no clipping),
    the per-example losses vmapped and differentiated by one backward pass (same `loss_fn` contract)."""
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    if batched_inputs[0].shape[0] == 0:
        return {k: p.new_zeros((1, *p.shape)) for k, p in params.items()}
    in_dims = (None,) + (0,) * len(batched_inputs)
    total = vmap(_example_loss(model, loss_fn), in_dims=in_dims)(params, *batched_inputs).sum()
    grads = torch.autograd.grad(total, list(params.values()), allow_unused=True)
    return {k: (torch.zeros_like(p) if g is None else g).unsqueeze(0) for (k, p), g in zip(params.items(), grads)}


def example_grads(model: nn.Module, loss_fn: Callable[..., torch.Tensor], clip_norm: float,
                  *batched_inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    """`per_example_grads` when clipping (finite `clip_norm`); else `summed_grads`, which is all that the
    unclipped sum in `clip_and_noise` needs and costs one backward pass instead of B."""
    fn = summed_grads if math.isinf(clip_norm) else per_example_grads
    return fn(model, loss_fn, *batched_inputs)


def clip_factors(per_example: dict[str, torch.Tensor], clip_norm: float) -> torch.Tensor:
    """min(1, C/‖g_i‖₂) per example (B,), the norm taken over ALL parameters jointly (norm 0 -> 1)."""
    sq = sum(torch.linalg.vector_norm(g.flatten(1), dim=1).square() for g in per_example.values())
    return (clip_norm / sq.sqrt()).clamp(max=1.0)


def clip_per_example(per_example: dict[str, torch.Tensor], clip_norm: float) -> dict[str, torch.Tensor]:
    """clip_C(g_i) = g_i · min(1, C/‖g_i‖₂) per example, the norm taken over ALL parameters jointly.

    Every clipped example has joint L2 norm <= C; clip_norm = inf returns the input unchanged.
    Two parts of one example's loss clipped to C₁ and C₂ sum to norm <= C₁ + C₂ (triangle inequality).
    """
    if math.isinf(clip_norm):
        return per_example
    factor = clip_factors(per_example, clip_norm)
    return {k: g * factor.view(-1, *([1] * (g.dim() - 1))) for k, g in per_example.items()}


def clip_and_noise(per_example: dict[str, torch.Tensor], clip_norm: float, noise_multiplier: float,
                   expected_batch_size: float, generator: torch.Generator, draws: int | None = None,
                   coupled: dict[str, torch.Tensor] | None = None,
                   coupled_clip: float = 0.0) -> dict[str, torch.Tensor]:
    """The privatised mean gradient (Σ_i clip_C(g_i) + N(0, σ²Δ² I)) / (q·n) of Abadi et al. Alg. 1.

    Sensitivity: clip_C(g) = g · min(1, C/‖g‖₂), with ‖g‖₂ taken over ALL parameters jointly, so
    every clipped per-example gradient has L2 norm <= C. Adding or removing one record adds or
    removes one term of the sum and changes nothing else (the divisor q·n is a public constant,
    never the realised batch size), so the sum has L2 sensitivity Δ = C under add/remove-one, and
    adding N(0, (σΔ)²) to every coordinate is the Gaussian mechanism with noise multiplier σ.
    With the batch drawn by `poisson_sample` at rate q, T such steps are exactly
    PoissonGaussianEvent(σ, q, T) for the accountant.

    `coupled`: the gradient h(B) of a term that depends on the whole batch B jointly (e.g. a
    statistic that pairs records, such as the linear KSD), clipped as ONE vector to C_α =
    `coupled_clip` and added to the sum. Adding a record x to B changes the sum by
    clip_C(g_x) + clip(h(B ∪ {x})) − clip(h(B)), of norm <= C + 2C_α, for every B: both clipped
    vectors lie in the C_α-ball, whatever the coupling. So Δ = C + 2C_α and the noise std is σ·Δ;
    a function of the batch with sensitivity Δ for every B has the Gaussian dominating pair
    (N(Δ, σ²Δ²), N(0, σ²Δ²)), and Poisson subsampling amplifies any mechanism with a dominating
    pair exactly as it does the sum (Zhu, Dong & Wang 2022, Thm. 9), so the step is still
    PoissonGaussianEvent(σ, q, ·).

    Non-private mode: clip_norm = inf disables clipping and noise_multiplier = 0 adds no noise
    (then the result is the plain sum / (q·n)). A positive σ with clip_norm = inf is refused.
    `draws`: if given, return that many independent noisy outputs stacked on a leading
    dimension (same clipped sum, fresh noise each) — for audits that need many runs of one step.
    """
    if not clip_norm > 0:
        raise ValueError(f"clip_norm must be positive (inf: no clipping), got {clip_norm}")
    if not (noise_multiplier >= 0 and math.isfinite(noise_multiplier)):
        raise ValueError(f"noise_multiplier must be finite and >= 0, got {noise_multiplier}")
    if noise_multiplier > 0 and math.isinf(clip_norm):
        raise ValueError("noise needs a finite clip_norm: with clip_norm = inf the sensitivity is unbounded")
    if not expected_batch_size > 0:
        raise ValueError(f"expected_batch_size must be positive, got {expected_batch_size}")
    if math.isinf(clip_norm):
        summed = {k: g.sum(0) for k, g in per_example.items()}
    else:  # Σ_i clip_C(g_i) as one contraction, without materialising the clipped copies
        factor = clip_factors(per_example, clip_norm)
        summed = {k: torch.tensordot(factor, g, dims=([0], [0])) for k, g in per_example.items()}
    sensitivity = clip_norm
    if coupled is not None:
        if not coupled_clip > 0 or math.isinf(coupled_clip) != math.isinf(clip_norm):
            raise ValueError(f"coupled_clip must be positive, and infinite exactly when clip_norm is; "
                             f"got {coupled_clip} with clip_norm {clip_norm}")
        clipped = clip_per_example({k: g.unsqueeze(0) for k, g in coupled.items()}, coupled_clip)
        summed = {k: s + clipped[k][0] for k, s in summed.items()}
        sensitivity = clip_norm + 2 * coupled_clip
    std = noise_multiplier * sensitivity
    shape = () if draws is None else (draws,)
    out = {}
    for name, s in summed.items():
        if std > 0:
            s = s + std * torch.randn(shape + s.shape, generator=generator, device=s.device, dtype=s.dtype)
        elif draws is not None:
            s = s.expand(shape + s.shape)
        out[name] = s / expected_batch_size
    return out
