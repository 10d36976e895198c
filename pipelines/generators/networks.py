"""MLP builders shared by the generators' networks: Linear layers, each hidden one followed by an
activation block. Layers are created in order, so a seeded torch RNG initialises them reproducibly, and the
nn.Sequential indices (the saved state dicts' keys) are those of the flat list of modules."""
from __future__ import annotations

from collections.abc import Callable

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
