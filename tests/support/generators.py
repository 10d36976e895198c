"""The generators' shared test material: MIXED, a small layout of every column kind, and its seeded rows; the
tiny configurations of the generator contract; a table that refuses a read before the reservation; and the checks
that a fit refuses bad input and draws every private step's randomness from the CSPRNG key alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from pipelines.data.layout import Block, Layout
from pipelines.generators import wgan
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.privacy.dpsgd import SecureGenerator
from pipelines.privacy.noise import Streams, secure_numpy

from support.ledger import FakeSession

MIXED = Layout(
    (
        Block("age", "integer", 0, 1),
        Block("income", "continuous", 1, 2),
        Block("smoker", "binary", 2, 3),
        Block("region", "categorical", 3, 6, protected=True),
        Block("outcome", "binary", 6, 7, is_target=True),
    )
)
FAST = {"steps": 6, "batch_size": 16, "critic_hidden": [8], "generator_hidden": [8], "latent_dim": 4, "noise_seed": 0}


def mixed_data(n: int, seed: int = 0) -> np.ndarray:
    """`n` seeded encoded rows of MIXED (the region block one-hot, every value in [0, 1])."""
    rng = np.random.default_rng(seed)
    region = np.eye(3)[rng.integers(0, 3, n)]
    cols = [rng.random(n), rng.beta(2, 5, n), rng.integers(0, 2, n), *region.T, rng.integers(0, 2, n)]
    return np.column_stack(cols).astype(np.float32)


class GuardedData:
    """Encoded matrix whose values cannot be read before the session has reserved; len() is public."""

    def __init__(self, x: np.ndarray, session: FakeSession) -> None:
        self._x, self._session = x, session

    def __len__(self) -> int:
        return len(self._x)

    def __array__(self, dtype=None, copy=None):
        if "reserve" not in self._session.calls:
            raise AssertionError("private data read before session.reserve()")
        self._session.calls.append("read")
        return self._x.astype(dtype or self._x.dtype)


def assert_fit_rejects_bad_input(gen) -> None:
    """`gen.fit` refuses encoded values outside [0, 1] naming the column and the fix, and a matrix of another
    width than the layout's (base.check_encoded). The row count may differ from the planned public n̂."""
    gen.plan(50, Budget(1.0, 1e-5))
    bad = mixed_data(50)
    bad[3, 1] = 1.7
    with pytest.raises(ValueError, match="column 'income'.*outside \\[0, 1\\].*Encoder"):
        gen.fit(bad, FakeSession())
    with pytest.raises(ValueError, match="expected \\(rows, "):
        gen.fit(mixed_data(50)[:, :-1], FakeSession())


# the generator contract's tiny configuration of each generator (tests/test_generator_contract.py); a name
# without one is built from its defaults
TINY: dict[str, dict[str, Any]] = {
    "dpwgan": {"steps": 4, "batch_size": 32, "critic_hidden": [8], "generator_hidden": [8], "latent_dim": 4},
    "ppem": {
        "steps": 4,
        "energy_steps": 2,
        "batch_size": 32,
        "hidden": 8,
        "latent_dim": 4,
        "protected": ["mean_radius", "mean_texture"],
        "gate_bootstrap": 20,
        "gate_permutations": 20,
    },
    "dp_auto_gan": {
        "autoencoder_steps": 4,
        "steps": 4,
        "autoencoder_batch_size": 32,
        "batch_size": 32,
        "autoencoder_hidden": [8],
        "latent_dim": 3,
        "critic_hidden": [8],
        "generator_hidden": [8],
        "noise_dim": 4,
    },
    "pearl": {"frequencies": 8, "steps": 4, "batch_size": 32, "hidden": [8], "latent_dim": 4},
    "iw_mmd_gan": {"steps": 4, "batch_size": 32, "hidden": [8], "code_dim": 4, "frequencies": 8, "n_critic": 1},
    "support_points": {"n_points": 4, "burn_in": 100, "steps": 100, "thin": 10, "support_steps": 20},
    "mst": {"n_bins": 4, "iters": 20},
    "aim": {"n_bins": 4, "iters": 20, "max_rounds": 2, "final_iters": 20, "three_way": False, "max_model_size": 1.0},
}
TINY["private_selection"] = {
    "candidates": ["pearl", "support_points"],
    "mean_trials": 2,
    "sections": {g: TINY[g] for g in ("pearl", "support_points")},
}


# -- every draw of a private training step comes from the CSPRNG -----------------------------------------------

CRITIC_GRADIENT = wgan.critic_gradient
Recorded = dict[str, list[torch.Tensor]]


def csprng_key(flip_bit: int | None = None) -> bytes:
    """A fixed 16-byte AES key for a training step's noise stream; `flip_bit`: with that bit (0: the lowest) flipped."""
    key = bytearray(range(16))
    if flip_bit is not None:
        key[15 - flip_bit // 8] ^= 1 << (flip_bit % 8)
    return bytes(key)


def fit_keyed(monkeypatch: pytest.MonkeyPatch, gen: PrivateGenerator, key: bytes, torch_seed: int) -> None:
    """A private fit of `gen` on 64 rows, every DP-SGD noise stream (`Streams.training`) the CSPRNG keyed by `key`,
    every Poisson stream one with a fixed key (the same batches whatever `key`), after torch's global generator
    is seeded by `torch_seed`: what no private draw may depend on."""
    monkeypatch.setattr(
        Streams,
        "training",
        lambda self, context, device="cpu": (
            SecureGenerator(secure_numpy(key), device),
            SecureGenerator(secure_numpy(bytes(16))),
        ),
    )
    torch.manual_seed(torch_seed)
    gen.plan(64, Budget(2.0, 1e-5))
    gen.fit(mixed_data(64), FakeSession())


def record_inputs(seen: Recorded, name: str, module: torch.nn.Module, position: int) -> None:
    """Append argument `position` of every call of `module` to seen[name] (latents, head uniforms)."""
    module.register_forward_pre_hook(lambda _, args: seen.setdefault(name, []).append(args[position].clone()))


def record_critic_steps(monkeypatch: pytest.MonkeyPatch, seen: Recorded) -> None:
    """Append the interpolation weights u that every critic step hands to `wgan.critic_gradient` to seen["u"]."""

    def recorded(critic, real, paired_fake, u, *args, **kwargs):
        seen.setdefault("u", []).append(u.clone())
        return CRITIC_GRADIENT(critic, real, paired_fake, u, *args, **kwargs)

    monkeypatch.setattr(wgan, "critic_gradient", recorded)


def assert_drawn_from_the_key(draws: Callable[[bytes, int], Recorded]) -> None:
    """Each kind of draw of `draws(key, torch_seed)` ({name: tensors in call order}, from a private fit) depends on
    the CSPRNG key alone: the same key gives identical tensors whatever torch's global generator was seeded with,
    a key one bit away different ones at the first call (the same networks, the same Poisson batch)."""
    base, again, other = draws(csprng_key(), 0), draws(csprng_key(), 1), draws(csprng_key(flip_bit=0), 0)
    assert base and base.keys() == again.keys() == other.keys()
    for name, tensors in base.items():
        assert len(tensors) == len(again[name]) > 0
        assert all(torch.equal(x, y) for x, y in zip(tensors, again[name])), name
        first, flipped = tensors[0], other[name][0]
        assert first.numel() > 0 and first.shape == flipped.shape and not torch.equal(first, flipped), name
