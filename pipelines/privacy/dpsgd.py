"""DP-SGD building blocks (Abadi et al. 2016, Alg. 1): the one place where gradients are clipped and noised.

One private step is

    B ~ Poisson(q)                              each record included independently w.p. q
    g_i = ∇_θ ℓ(θ; x_i)                         per-example gradients, i in B
    ḡ  = (Σ_i g_i · min(1, C/‖g_i‖₂) + N(0, σ²C² I)) / (q·n)

and T such steps are what the accountant composes as PoissonGaussianEvent(σ, q, T).

Per-example gradients are kept factored (`ExampleGrads`, ghost norms): the clipped sum costs about
two non-private steps, the gradient penalty's double backward included. Opacus is not used: its
ghost clipping has no double backward (the gradient penalties of the WGAN critic and PPEM) and it
owns the noise and the optimiser step, while a GAN critic's loss mixes terms that touch a real record
(−D(x_i), the gradient penalty on interpolates of x_i) with fake-only terms. Only the former go
through `per_example_grads` + `clip_and_noise`; fake-only terms depend on already-private parameters
and get a plain gradient added after privatisation (privacy rule 3 and its pitfall, docs/architecture.md). Where Opacus
applies (sums of per-example terms) it was measured slower than this path (benchmarks/opacus_ghost.py);
private vs non-private steps: benchmarks/dpsgd_step.py; both in docs/performance.md.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from pipelines.privacy.samplers import kept_indices


def sampling_schedule(
    batch_size: float, n_rows: int, steps: int | None, epochs: float | None, max_steps: int | None = None
) -> tuple[float, int]:
    """(q, T) of a DP-SGD run on the public row count n̂ = `n_rows`: q = min(1, batch_size/n̂) (the lot
    size L = q·n̂ of Abadi et al. 2016, §3.1), and T = `steps`, or min(ceil(epochs/q), `max_steps`) when
    `steps` is None (an epoch is 1/q steps; `max_steps` None: no cap). The cap bounds the compute of a default
    run on a large table (epochs at fixed L cost ∝ n̂) and spends the same ε over fewer, less noisy steps.
    Data-independent: T steps are PoissonGaussianEvent(σ, q, T)."""
    q = min(1.0, batch_size / n_rows)
    if steps is not None:
        return q, int(steps)
    assert epochs is not None, "a schedule needs steps or epochs"
    t = int(math.ceil(epochs / q))
    return q, t if max_steps is None else min(t, int(max_steps))


class SecureGenerator:
    """The random source of a private DP-SGD run: a CSPRNG (`secure`: a NumPy Generator over AES-CTR, from
    `pipelines.privacy.noise.Streams.torch`) and the torch `device` its draws are put on. Every random value of
    a private training step comes from `secure`: the Gaussian noise (`clip_and_noise`), the Poisson batches
    (`poisson_sample`) and, through `standard_normal` and `uniform`, the fakes' latents and output-head uniforms
    and the gradient penalty's interpolation weights. None comes from torch's MT19937, whose seeds keep 32 bits
    (2**32 guesses would recover all its draws, and where each step's draws start depends on the private batch
    sizes of the steps before). It is no torch.Generator, so torch refuses it and no private draw can fall back
    to a torch state. This is Opacus' secure mode without torchcsprng."""

    def __init__(self, secure: np.random.Generator, device: str | torch.device = "cpu") -> None:
        self.secure, self.device = secure, torch.device(device)


# where a DP-SGD step draws: a private run's SecureGenerator, or a torch.Generator on the public seed (a non-private
# run, sampling a trained model)
Rng = torch.Generator | SecureGenerator


def secure_normal(
    rng: np.random.Generator, shape: tuple[int, ...], device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """N(0, 1) draws for DP-SGD noise, as Opacus' secure mode makes them: the mean of four float64 standard
    normals times 2 (exactly N(0, 1) in distribution), so that no single floating-point normal's low bits are
    exposed (Holohan & Braghin 2021), from the CSPRNG `rng`, then cast to `dtype` on `device`."""
    total = rng.standard_normal(shape)
    for _ in range(3):
        total += rng.standard_normal(shape)
    return torch.from_numpy(total / 2.0).to(device=device, dtype=dtype)


def standard_normal(
    generator: Rng, shape: tuple[int, ...], device: str | torch.device | None = None, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """N(0, 1) draws of `shape` on `device` (None: the generator's) in `dtype` (None: torch's default): from a
    SecureGenerator's CSPRNG as the DP noise is drawn (`secure_normal`), from a torch.Generator by torch.randn
    (a non-private run's public seed, or sampling a trained model)."""
    device = generator.device if device is None else torch.device(device)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if isinstance(generator, SecureGenerator):
        return secure_normal(generator.secure, tuple(shape), device, dtype)
    return torch.randn(shape, generator=generator, device=device, dtype=dtype)


def uniform(
    generator: Rng, shape: tuple[int, ...], device: str | torch.device | None = None, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """U[0, 1) draws of `shape` on `device` (None: the generator's) in `dtype` (None: torch's default): from a
    SecureGenerator's CSPRNG, its float64 uniforms (multiples of 2^-53) rounded down to multiples of 2^-p, p the
    significand bits of `dtype` (24 for float32), so that the cast is exact and never gives 1 (the grid of
    torch.rand; a value of 1 would make a Gumbel draw infinite); from a torch.Generator by torch.rand."""
    device = generator.device if device is None else torch.device(device)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if isinstance(generator, SecureGenerator):
        grid = 2.0 / torch.finfo(dtype).eps  # 2^p
        draws = np.floor(generator.secure.random(tuple(shape)) * grid) / grid
        return torch.from_numpy(draws).to(device=device, dtype=dtype)
    return torch.rand(shape, generator=generator, device=device, dtype=dtype)


def poisson_sample(n: int, sample_rate: float, generator: Rng | np.random.Generator) -> torch.Tensor:
    """Indices of a Poisson sample of range(n): each row kept independently with prob `sample_rate`.

    The batch size is Binomial(n, q) and may be 0; an empty batch makes the step pure noise,
    which is exactly what the subsampled-Gaussian accountant assumes. A `SecureGenerator` draws the
    inclusions from its CSPRNG (the batch must stay secret), a NumPy generator from its own stream, both exactly
    at the float q and one random byte per row (`samplers.kept_indices`); a plain torch generator (non-private
    runs) compares torch uniforms with q.
    """
    if not 0.0 < sample_rate <= 1.0:
        raise ValueError(f"sample_rate must lie in (0, 1], got {sample_rate}")
    source = generator.secure if isinstance(generator, SecureGenerator) else generator
    if isinstance(source, np.random.Generator):
        return torch.from_numpy(kept_indices(lambda k: np.frombuffer(source.bytes(k), np.uint8), n, sample_rate))
    keep = torch.rand(n, generator=source, device=source.device) < sample_rate
    return keep.nonzero().squeeze(1)


class ExampleGrads:
    """The gradients of B examples' losses, example by example, w.r.t. a model's parameters, kept factored.

    A Linear weight W enters a loss through products with per-example vectors: h_i = W a_i in the forward
    pass and, when the loss holds an input gradient (a gradient penalty), δa_i = Wᵀ δh_i in its backward
    pass. Each use u contributes the outer product g_u,i a_u,iᵀ to example i's gradient, so
        ∇_W ℓ_i = Σ_u g_u,i a_u,iᵀ        ‖∇_W ℓ_i‖² = Σ_u,v (g_u,i · g_v,i)(a_u,i · a_v,i)
    (the "ghost norm" of Goodfellow 2015 / Li et al. 2022 (arXiv:2110.05679 §4), extended to the second use),
    and Σ_i c_i ∇_W ℓ_i = Σ_u (c ∘ g_u)ᵀ a_u: norms and clipped sums without materialising B copies of W.
    `dense` holds the other parameters' (biases, LayerNorm affines) per-example gradients as (B, *shape);
    `factored` the weights' pairs (g (B, out), a (B, in)). `names` keeps the model's parameter order.
    `bound`: a proven bound on every example's joint L2 norm: set to C only by `clip_per_example` (clipped to
    C), kept by `select`, added by `+` (triangle inequality), ∞ otherwise; `clip_and_noise` skips re-clipping
    what is already bounded by its clip norm.
    """

    def __init__(
        self,
        names: list[str],
        shapes: dict[str, torch.Size],
        batch: int,
        dense: dict[str, torch.Tensor],
        factored: dict[str, list[tuple[torch.Tensor, torch.Tensor]]],
        bound: float = math.inf,
    ) -> None:
        self.names, self.shapes, self.batch, self.dense, self.factored = names, shapes, batch, dense, factored
        self.bound = bound

    @classmethod
    def of_dict(cls, per_example: dict[str, torch.Tensor]) -> ExampleGrads:
        """Materialised per-example gradients {name: (B, *shape)} as an ExampleGrads."""
        first = next(iter(per_example.values()))
        return cls(
            list(per_example), {k: g.shape[1:] for k, g in per_example.items()}, first.shape[0], dict(per_example), {}
        )

    def sq_norms(self) -> torch.Tensor:
        """‖g_i‖² over ALL parameters jointly, (B,): the dense parts' squares, and per weight the sum over use
        pairs (u, v) of (g_u,i · g_v,i)(a_u,i · a_v,i), as the elementwise product of two (B, U, U) Gram matrices."""
        parts = [g.flatten(1) for g in self.dense.values()]
        total = torch.cat(parts, 1).square().sum(1) if parts else None
        for pairs in self.factored.values():
            g = torch.stack([g for g, _ in pairs], 1)
            a = torch.stack([a for _, a in pairs], 1)
            norms = ((g @ g.transpose(1, 2)) * (a @ a.transpose(1, 2))).sum((1, 2))
            total = norms if total is None else total + norms
        return total if total is not None else torch.zeros(self.batch)

    def scaled(self, factor: torch.Tensor) -> ExampleGrads:
        """Example i's gradient times factor[i]."""
        return ExampleGrads(
            self.names,
            self.shapes,
            self.batch,
            {k: g * factor.view(-1, *([1] * (g.dim() - 1))) for k, g in self.dense.items()},
            {k: [(g * factor[:, None], a) for g, a in pairs] for k, pairs in self.factored.items()},
        )

    def select(self, rows: slice) -> ExampleGrads:
        """The examples `rows` (a slice of the batch)."""
        batch = len(range(self.batch)[rows])
        return ExampleGrads(
            self.names,
            self.shapes,
            batch,
            {k: g[rows] for k, g in self.dense.items()},
            {k: [(g[rows], a[rows]) for g, a in pairs] for k, pairs in self.factored.items()},
            self.bound,
        )

    def __add__(self, other: ExampleGrads) -> ExampleGrads:
        """Example by example sum of two ExampleGrads of the same examples and parameters."""
        dense = {
            k: self.dense[k] + other.dense[k]
            if k in self.dense and k in other.dense
            else self.dense[k]
            if k in self.dense
            else other.dense[k]
            for k in {*self.dense, *other.dense}
        }
        factored = {k: self.factored.get(k, []) + other.factored.get(k, []) for k in {*self.factored, *other.factored}}
        return ExampleGrads(self.names, self.shapes, self.batch, dense, factored, self.bound + other.bound)

    def summed(self) -> dict[str, torch.Tensor]:
        """Σ_i g_i as {name: Tensor(*shape)}."""
        out = {}
        for k in self.names:
            total = self.dense[k].sum(0) if k in self.dense else None
            for g, a in self.factored.get(k, []):
                total = g.T @ a if total is None else total + g.T @ a
            assert total is not None, f"no gradient for {k}"
            out[k] = total.reshape(self.shapes[k])
        return out

    def materialised(self) -> dict[str, torch.Tensor]:
        """{name: Tensor(B, *shape)}: B copies of every parameter (tests, audits and small models)."""
        out = {}
        for k in self.names:
            total = self.dense.get(k)
            for g, a in self.factored.get(k, []):
                outer = torch.einsum("bo,bi->boi", g, a)
                total = outer if total is None else total + outer
            assert total is not None, f"no gradient for {k}"
            out[k] = total.reshape(self.batch, *self.shapes[k])
        return out


class _ProbedLinear(torch.autograd.Function):
    """a Wᵀ with W fixed; its backward δa = δh W + z (z = 0, a probe of shape (B, in)) records (δh, z), so that
    a loss differentiated through this backward (a gradient penalty) yields the weight's second use."""

    @staticmethod
    def forward(
        ctx: Any,
        a: torch.Tensor,
        weight: torch.Tensor,
        probe: torch.Tensor,
        uses: list[tuple[torch.Tensor, torch.Tensor]],
    ) -> torch.Tensor:
        ctx.save_for_backward(weight, probe)
        ctx.uses = uses
        return a @ weight.T

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, None, None, None]:
        weight, probe = ctx.saved_tensors
        if not torch.is_grad_enabled():  # a first-order backward: the weight's forward use only
            return grad_out @ weight, None, None, None
        ctx.uses.append((grad_out, probe))
        return grad_out @ weight + probe, None, None, None


_LAYERS: weakref.WeakKeyDictionary[nn.Module, list[tuple[str, nn.Module]]] = weakref.WeakKeyDictionary()


def _probed_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name prefix, layer) of `model`'s layers with parameters, all Linear or LayerNorm (else TypeError); read
    once per model (its structure is fixed once built)."""
    if model not in _LAYERS:
        layers: list[tuple[str, nn.Module]] = []
        for prefix, module in model.named_modules():
            if not any(True for _ in module.parameters(recurse=False)):
                continue
            if not isinstance(module, (nn.Linear, nn.LayerNorm)):
                raise TypeError(
                    f"per-example gradients: {type(module).__name__} ({prefix}) is not supported; only "
                    f"Linear and LayerNorm layers (no BatchNorm: it mixes examples)"
                )
            layers.append((f"{prefix}." if prefix else "", module))
        _LAYERS[model] = layers
    return _LAYERS[model]


class _Probes:
    """While entered, `model`'s Linear and LayerNorm layers run with per-example probes: zero (B, ·) tensors added
    where a parameter's per-example gradient can be read off (class ExampleGrads); their forwards are restored on
    exit. Any other layer with parameters is refused (BatchNorm, for one, mixes the examples)."""

    def __init__(self, model: nn.Module) -> None:
        self.layers = _probed_layers(model)
        self.dense: list[tuple[str, torch.Tensor]] = []  # (name, probe whose grad is dense)
        self.forward_uses: list[tuple[str, torch.Tensor, torch.Tensor]] = []  # (weight, a, output probe)
        self.backward_uses: list[tuple[str, list[tuple[torch.Tensor, torch.Tensor]]]] = []

    def __enter__(self) -> _Probes:
        for prefix, module in self.layers:
            probed: Callable[[Any, str, torch.Tensor], torch.Tensor] = (
                self._linear if isinstance(module, nn.Linear) else self._layer_norm
            )
            module.forward = (lambda m, pre, f: lambda x: f(m, pre, x))(module, prefix, probed)
        return self

    def __exit__(self, *exc: object) -> None:
        for _, module in self.layers:
            del module.forward

    @staticmethod
    def _rows(x: torch.Tensor) -> None:
        if x.dim() != 2:
            raise ValueError(f"per-example gradients need (batch, features) inputs, got {tuple(x.shape)}")

    def _linear(self, module: nn.Linear, prefix: str, a: torch.Tensor) -> torch.Tensor:
        self._rows(a)
        weight, bias = module.weight, module.bias
        out_probe = torch.zeros(a.shape[0], weight.shape[0], dtype=a.dtype, device=a.device, requires_grad=True)
        in_probe = torch.zeros_like(a, requires_grad=True)
        uses: list[tuple[torch.Tensor, torch.Tensor]] = []
        if weight.requires_grad:
            self.forward_uses.append((prefix + "weight", a.detach(), out_probe))
            self.backward_uses.append((prefix + "weight", uses))
        h = _ProbedLinear.apply(a, weight.detach(), in_probe, uses) + out_probe
        if bias is None:
            return h
        if bias.requires_grad:
            self.dense.append((prefix + "bias", out_probe))
        return h + bias.detach()

    def _layer_norm(self, module: nn.LayerNorm, prefix: str, x: torch.Tensor) -> torch.Tensor:
        self._rows(x)
        y = F.layer_norm(x, module.normalized_shape, None, None, module.eps)
        for name, param, combine in (("weight", module.weight, torch.mul), ("bias", module.bias, torch.add)):
            if param is not None:
                probe = torch.zeros_like(x, requires_grad=True)
                if param.requires_grad:
                    self.dense.append((prefix + name, probe))
                y = combine(y, param.detach() + probe)
        return y


def per_example_grads(
    model: nn.Module, loss_fn: Callable[..., torch.Tensor], *batched_inputs: torch.Tensor
) -> ExampleGrads:
    """Per-example gradients of `loss_fn` w.r.t. `model`'s parameters, factored (`ExampleGrads`).

    `loss_fn(forward, *rows)` returns the SUM over the rows given of each row's loss, and a row's loss may
    read no other row: `forward` is the model as a function of its input, each tensor of `rows` holds the
    corresponding `batched_inputs` (one row per example). The loss may take `torch.autograd.grad` of `forward`
    w.r.t. its input with create_graph=True (a gradient penalty). One forward and one backward pass over the
    batch (two with a penalty, as in the non-private step), with zero probes on the Linear and LayerNorm
    layers' outputs whose gradients are the per-example factors; any other layer with parameters is refused.
    """
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    names, shapes = list(params), {k: p.shape for k, p in params.items()}
    batch = batched_inputs[0].shape[0]
    if batch == 0:
        return ExampleGrads(names, shapes, 0, {k: params[k].new_zeros((0, *shapes[k])) for k in names}, {})
    with _Probes(model) as probes:
        total = loss_fn(model, *batched_inputs)
    targets = (
        [p for _, p in probes.dense]
        + [p for _, _, p in probes.forward_uses]
        + [z for _, uses in probes.backward_uses for _, z in uses]
    )
    found = dict(zip(map(id, targets), torch.autograd.grad(total, targets, allow_unused=True)))

    def got(probe: torch.Tensor) -> torch.Tensor | None:
        return found[id(probe)]

    dense: dict[str, torch.Tensor] = {}
    for name, probe in probes.dense:
        if (g := got(probe)) is not None:
            dense[name] = dense[name] + g if name in dense else g
    factored: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    for name, a, probe in probes.forward_uses:
        if (g := got(probe)) is not None:
            factored.setdefault(name, []).append((g, a))
    for name, uses in probes.backward_uses:
        for grad_out, probe in uses:
            if (g := got(probe)) is not None:
                factored.setdefault(name, []).append((grad_out.detach(), g))
        # the autograd node's ctx.uses holds grad_out, whose graph holds that node: a cycle through C++ objects
        # that Python's collector cannot free (PPEM leaked ~2 MB per step, 22 GB at 16,000 Adult rows). Break it.
        uses.clear()
    for name in names:  # parameters the loss does not reach (e.g. the output bias under a gradient penalty)
        if name not in dense and name not in factored:
            if params[name].dim() == 1:
                dense[name] = params[name].new_zeros((batch, *shapes[name]))
            else:
                factored[name] = [
                    (params[name].new_zeros(batch, shapes[name][0]), params[name].new_zeros(batch, shapes[name][1]))
                ]
    return ExampleGrads(names, shapes, batch, dense, factored)


def summed_grads(
    model: nn.Module, loss_fn: Callable[..., torch.Tensor], *batched_inputs: torch.Tensor
) -> dict[str, torch.Tensor]:
    """∇ Σ_i loss_fn(example i) as {name: Tensor(1, *param.shape)}: the non-private path (no clipping), one
    backward pass over the batch (same `loss_fn` contract as `per_example_grads`)."""
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    if batched_inputs[0].shape[0] == 0:
        return {k: p.new_zeros((1, *p.shape)) for k, p in params.items()}
    total = loss_fn(model, *batched_inputs)
    grads = torch.autograd.grad(total, list(params.values()), allow_unused=True)
    return {k: (torch.zeros_like(p) if g is None else g).unsqueeze(0) for (k, p), g in zip(params.items(), grads)}


def example_grads(
    model: nn.Module, loss_fn: Callable[..., torch.Tensor], clip_norm: float, *batched_inputs: torch.Tensor
) -> ExampleGrads:
    """`per_example_grads` when clipping (finite `clip_norm`); else `summed_grads` as one "example", which is all
    that the unclipped sum in `clip_and_noise` needs."""
    if math.isinf(clip_norm):
        return ExampleGrads.of_dict(summed_grads(model, loss_fn, *batched_inputs))
    return per_example_grads(model, loss_fn, *batched_inputs)


PerExample = ExampleGrads | dict[str, torch.Tensor]


def _factored(per_example: PerExample) -> ExampleGrads:
    return per_example if isinstance(per_example, ExampleGrads) else ExampleGrads.of_dict(per_example)


def clip_factors(per_example: PerExample, clip_norm: float) -> torch.Tensor:
    """min(1, C/‖g_i‖₂) per example (B,), the norm taken over ALL parameters jointly (norm 0 -> 1)."""
    return (clip_norm / _factored(per_example).sq_norms().sqrt()).clamp(max=1.0)


def clip_per_example(per_example: PerExample, clip_norm: float) -> PerExample:
    """clip_C(g_i) = g_i · min(1, C/‖g_i‖₂) per example, the norm taken over ALL parameters jointly; the
    same kind (ExampleGrads or a {name: (B, *shape)} dict) as given.

    Every clipped example has joint L2 norm <= C; clip_norm = inf returns the input unchanged.
    Two parts of one example's loss clipped to C₁ and C₂ sum to norm <= C₁ + C₂ (triangle inequality).
    """
    if math.isinf(clip_norm):
        return per_example
    clipped = _factored(per_example).scaled(clip_factors(per_example, clip_norm))
    clipped.bound = clip_norm
    return clipped if isinstance(per_example, ExampleGrads) else clipped.materialised()


def summed(per_example: PerExample) -> dict[str, torch.Tensor]:
    """Σ_i g_i as {name: Tensor(*shape)}."""
    return _factored(per_example).summed()


def clip_and_noise(
    per_example: PerExample,
    clip_norm: float,
    noise_multiplier: float,
    expected_batch_size: float,
    generator: Rng,
    draws: int | None = None,
    coupled: dict[str, torch.Tensor] | None = None,
    coupled_clip: float = 0.0,
) -> dict[str, torch.Tensor]:
    """The privatised mean gradient (Σ_i clip_C(g_i) + N(0, σ²Δ² I)) / (q·n) of Abadi et al. Alg. 1.

    Sensitivity: clip_C(g) = g · min(1, C/‖g‖₂), with ‖g‖₂ taken over ALL parameters jointly, so
    every clipped per-example gradient has L2 norm <= C (an ExampleGrads whose `bound` is <= C, i.e. built by
    `clip_per_example` and sums of clipped parts, is summed as it is). Adding or removing one record adds or
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
    bounded = isinstance(per_example, ExampleGrads) and per_example.bound <= clip_norm  # clipped already
    total = summed(per_example if bounded else clip_per_example(per_example, clip_norm))
    sensitivity = clip_norm
    if coupled is not None:
        if not coupled_clip > 0 or math.isinf(coupled_clip) != math.isinf(clip_norm):
            raise ValueError(
                f"coupled_clip must be positive, and infinite exactly when clip_norm is; "
                f"got {coupled_clip} with clip_norm {clip_norm}"
            )
        clipped = clip_per_example({k: g.unsqueeze(0) for k, g in coupled.items()}, coupled_clip)
        assert isinstance(clipped, dict)  # clip_per_example returns the kind it is given
        total = {k: s + clipped[k][0] for k, s in total.items()}
        sensitivity = clip_norm + 2 * coupled_clip
    std = noise_multiplier * sensitivity
    shape = () if draws is None else (draws,)
    if std > 0:  # one N(0, std²) draw for all coordinates, split by parameter
        first = next(iter(total.values()))
        size = shape + (sum(s.numel() for s in total.values()),)
        flat = standard_normal(generator, size, first.device, first.dtype)
        pieces = flat.split([s.numel() for s in total.values()], dim=-1)
        return {
            name: (s + std * z.reshape(shape + s.shape)) / expected_batch_size
            for (name, s), z in zip(total.items(), pieces)
        }
    return {
        name: (s if draws is None else s.expand(shape + s.shape)) / expected_batch_size for name, s in total.items()
    }
