"""Output heads shared by the generators: raw network outputs → values in the encoded layout.

continuous/integer: sigmoid, a value in [0, 1]. binary: relaxed Bernoulli ("Gumbel-sigmoid",
Maddison et al. 2017) sigmoid((ℓ + log u − log(1−u))/τ), u ~ U(0, 1); thresholding it at 0.5 is
an exact Bernoulli(sigmoid(ℓ)) sample. categorical: Gumbel-softmax (Jang et al. 2017)
softmax((ℓ + g)/τ), g = −log(−log u); its argmax is an exact sample of softmax(ℓ). Small τ gives
near-one-hot rows like the real ones, so a critic cannot tell fakes apart by their soft values alone.

The uniforms u are an explicit input (drawn by `uniforms` from the caller's generator: the CSPRNG of a private
training run, a torch.Generator on the public seed otherwise), so outputs are reproducible and the heads run
under `torch.func.vmap` (no random ops inside).
"""

from __future__ import annotations

import torch
from torch import nn

from pipelines.data.layout import Layout
from pipelines.privacy.dpsgd import Rng, uniform

KINDS = ("continuous", "integer", "binary", "categorical")


class OutputHeads(nn.Module):
    """One head per Layout block; `noise_width` uniforms per row (binary columns, then each categorical block)."""

    def __init__(self, layout: Layout, tau: float) -> None:
        super().__init__()
        unknown = {b.kind for b in layout.blocks} - set(KINDS)
        if unknown:
            raise ValueError(f"unknown block kinds {sorted(unknown)}; known: {KINDS}")
        self.tau = tau
        for name, kinds in (("numeric_cols", ("continuous", "integer")), ("binary_cols", ("binary",))):
            cols = [c for b in layout.blocks if b.kind in kinds for c in range(b.start, b.stop)]
            self.register_buffer(name, torch.tensor(cols, dtype=torch.long), persistent=False)
        self.categorical = [(b.start, b.stop) for b in layout.blocks if b.kind == "categorical"]
        self.noise_widths = [len(self.binary_cols)] + [stop - start for start, stop in self.categorical]

    @property
    def noise_width(self) -> int:
        return sum(self.noise_widths)

    def uniforms(self, n: int, generator: Rng) -> torch.Tensor:
        """U[0, 1) draws (n, noise_width) on the generator's device (`dpsgd.uniform`: from the CSPRNG of a
        SecureGenerator), one call per head group in a fixed order."""
        parts = [uniform(generator, (n, w)) for w in self.noise_widths]
        return torch.cat(parts, dim=1)

    def forward(self, logits: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        pieces = torch.split(u, self.noise_widths, dim=1)
        out = torch.zeros_like(logits)
        out = out.index_copy(1, self.numeric_cols, torch.sigmoid(logits.index_select(1, self.numeric_cols)))
        b = pieces[0].clamp(1e-6, 1 - 1e-6)
        relaxed = torch.sigmoid((logits.index_select(1, self.binary_cols) + b.log() - (-b).log1p()) / self.tau)
        out = out.index_copy(1, self.binary_cols, relaxed)
        for (start, stop), uc in zip(self.categorical, pieces[1:]):
            gumbel = -(-uc.clamp_min(1e-20).log()).log()
            block = torch.softmax((logits[:, start:stop] + gumbel) / self.tau, dim=1)
            out = torch.cat([out[:, :start], block, out[:, stop:]], dim=1)
        return out
