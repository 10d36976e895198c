"""Per-example loss terms shared by the adversarially trained generators (for
`pipelines.privacy.dpsgd.per_example_grads`: `forward` is the network as a function of its input, and a
term returns the sum over the rows given of each row's loss, no row reading another)."""

from __future__ import annotations

from collections.abc import Callable

import torch

Forward = Callable[[torch.Tensor], torch.Tensor]


def input_gradient_penalty(g: torch.Tensor, gp_lambda: float, target: float = 1.0) -> torch.Tensor:
    """Σ_rows λ(‖g_row‖₂ − K)² of input gradients g (rows, d) (Gulrajani et al. 2017, Eq. 3; PPEM §3.7)."""
    return gp_lambda * ((torch.sqrt(g.pow(2).sum(-1) + 1e-12) - target) ** 2).sum()


def gradient_penalty(gp_lambda: float, width: int | None = None, target: float = 1.0) -> Callable[..., torch.Tensor]:
    """λ(‖∇_x̂ D(x̂)‖₂ − K)², x̂ = u·x + (1−u)·f (Gulrajani et al. 2017, Eq. 3 with K = 1; PPEM §3.7).

    `target` K: the Lipschitz constant aimed at, in the units of x. A K-Lipschitz function of x is a
    1-Lipschitz function of K·x, so K = 1 on data standardised to unit scale (the paper) matches
    K ≈ 1/(spread) on data encoded to [0, 1].

    `width`: the norm covers only the first `width` input columns, for a network whose input is
    [x, c] with a conditioning part c that is the same in x and f (PPEM's conditional energy
    E_γ(x*|x′): the Lipschitz constraint is on x*); None: all columns.
    """

    def loss(forward: Forward, x: torch.Tensor, fake: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        x_hat = (u * x + (1 - u) * fake).detach().requires_grad_(True)
        (g,) = torch.autograd.grad(forward(x_hat).sum(), x_hat, create_graph=True)
        g = g if width is None else g[..., :width]
        return input_gradient_penalty(g, gp_lambda, target)

    return loss
