"""MLP builders shared by the generators' networks (Linear layers, each hidden one followed by an activation
block; the nn.Sequential indices, the saved state dicts' keys, are those of the flat list of modules) and
their initialisation from an explicit seed (`initialise`), never from torch's process-wide RNG."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

Activation = Callable[[int], list[nn.Module]]


def mlp(sizes: list[int], activation: Activation, activate_output: bool = False) -> nn.Sequential:
    """Linear(sizes[i], sizes[i+1]) for each i, each followed by `activation(width)`'s modules except the
    output layer (unless `activate_output`)."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2 or activate_output:
            layers += activation(b)
    return nn.Sequential(*layers)


def layer_norm_leaky(width: int) -> list[nn.Module]:
    """LayerNorm → LeakyReLU(0.2): per-example normalisation, safe under per-example clipping (WGAN critic)."""
    return [nn.LayerNorm(width), nn.LeakyReLU(0.2)]


def leaky(width: int) -> list[nn.Module]:
    """LeakyReLU(0.2) alone (DP-auto-GAN's autoencoder, Appendix C.3)."""
    return [nn.LeakyReLU(0.2)]


def elu(width: int) -> list[nn.Module]:
    """ELU (the MMD-GAN networks of the Diesendruck thesis, chapter 4)."""
    return [nn.ELU()]


def batch_norm_relu(width: int) -> list[nn.Module]:
    """BatchNorm → ReLU (PEARL's fc-bn-relu, App. H): mixes a batch's rows, for networks that never see data."""
    return [nn.BatchNorm1d(width), nn.ReLU()]


def initialise(module: nn.Module, seed: int) -> nn.Module:
    """Re-draw every parameter of `module` from one torch.Generator seeded by `seed`, in module order, with
    PyTorch's default rules: Linear weights Kaiming-uniform (a = √5, i.e. U(±1/√fan_in)) and biases
    U(±1/√fan_in); LayerNorm / BatchNorm affine ones and zeros (their running statistics reset). No global
    RNG is touched, so generators may be built concurrently. A module with other parameters is refused:
    its owner must initialise it explicitly."""
    rng = torch.Generator().manual_seed(int(seed))
    with torch.no_grad():
        for sub in module.modules():
            own = list(sub.parameters(recurse=False))
            if isinstance(sub, nn.Linear):
                nn.init.kaiming_uniform_(sub.weight, a=math.sqrt(5), generator=rng)
                if sub.bias is not None:
                    bound = 1 / math.sqrt(sub.in_features) if sub.in_features > 0 else 0.0
                    nn.init.uniform_(sub.bias, -bound, bound, generator=rng)
            elif isinstance(sub, (nn.LayerNorm, nn.BatchNorm1d)):
                sub.reset_parameters()
            elif own:
                raise TypeError(
                    f"initialise: {type(sub).__name__} has parameters this function does not know "
                    f"how to draw; initialise them from an explicit generator in its owner"
                )
    return module
