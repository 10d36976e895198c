"""Drawing synthetic rows in chunks: one torch.Generator seeded from the caller's NumPy rng, a bounded batch
per forward pass."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

CHUNK = 8192  # rows per forward pass: bounds the memory of sampling, not its result

Draw = Callable[[int, torch.Generator], torch.Tensor]


def sample_rows(n: int, width: int, rng: np.random.Generator, device: str, draw: Draw) -> np.ndarray:
    """n rows (float32, `width` columns): `draw(m, g)` returns the next m rows (m ≤ CHUNK), called in row
    order under no_grad with one torch.Generator `g` on `device` seeded by 63 bits of `rng`, so the draws
    and their order do not depend on the chunking's memory use."""
    g = torch.Generator(device=device).manual_seed(int(rng.integers(2**63)))
    out = np.empty((n, width), dtype=np.float32)
    with torch.no_grad():
        for i in range(0, n, CHUNK):
            m = min(CHUNK, n - i)
            out[i : i + m] = draw(m, g).cpu().numpy()
    return out
