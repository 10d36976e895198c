"""Keyed noise is bound to everything that decides a release, and private streams
come from a CSPRNG with ≥ 128 bits of secret state (pipelines/privacy/noise.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from pipelines.privacy import noise
from pipelines.privacy.dpsgd import SecureGenerator, clip_and_noise, poisson_sample

KEY = bytes.fromhex("ab" * 32)


def keyed(inputs: dict | None = None, stage: str = "bc/train@g", **facts) -> noise.NoiseSource:
    facts = {"params": "p" * 64, "epsilon": 1.0, **facts}
    return noise.NoiseSource.keyed(KEY, lambda: inputs or {"train": "d" * 64}, stage, facts)


def draws(source: noise.NoiseSource, context: str = "g:noise") -> np.ndarray:
    return source.numpy(context).standard_normal(64)


def test_keyed_noise_is_bound_to_inputs_facts_plan_and_context():
    base = draws(keyed().bound(plan={"sigma": 2.0}))
    np.testing.assert_array_equal(base, draws(keyed().bound(plan={"sigma": 2.0})))  # same binding: same noise
    others = [
        draws(keyed({"train": "e" * 64}).bound(plan={"sigma": 2.0})),  # one input differs
        draws(keyed({"train": "d" * 64, "synthetic": "s" * 64}).bound(plan={"sigma": 2.0})),
        draws(keyed(stage="bc/train@h").bound(plan={"sigma": 2.0})),
        draws(keyed(epsilon=3.0).bound(plan={"sigma": 2.0})),  # another allocated ε
        draws(keyed(code="c" * 64).bound(plan={"sigma": 2.0})),  # another code version
        draws(keyed().bound(plan={"sigma": 2.5})),  # another plan
        draws(keyed().bound(plan={"sigma": 2.0}), "g:poisson"),
    ]  # another stream
    for other in others:  # independent standard normals: |corr| of 64 pairs is < 0.6 always
        assert abs(np.corrcoef(base, other)[0, 1]) < 0.6
    assert not np.array_equal(draws(noise.NoiseSource()), draws(noise.NoiseSource()))  # no key: OS entropy
    assert noise.code_version() == noise.code_version() and len(noise.code_version()) == 64


def test_private_streams_use_all_128_key_bits_and_never_a_torch_seed():
    material = bytes(range(32))
    flipped = bytes([material[0] ^ 0x80]) + material[1:]  # differs only in bit 127 of the AES key
    high = noise.secure_numpy(material).standard_normal(8)
    assert not np.array_equal(high, noise.secure_numpy(flipped).standard_normal(8))
    # torch's CPU generator keeps 32 bits of a seed: the flaw the CSPRNG avoids
    assert torch.equal(
        torch.randn(4, generator=torch.Generator().manual_seed(5 + 2**40)),
        torch.randn(4, generator=torch.Generator().manual_seed(5)),
    )
    # DP-SGD noise and Poisson batches come from the generator's CSPRNG; it has no torch state to fall back on
    a, b = SecureGenerator(noise.secure_numpy(material)), SecureGenerator(noise.secure_numpy(flipped))
    grads = {"w": torch.zeros(3, 5)}
    noisy_a = clip_and_noise(grads, 1.0, 2.0, 10.0, a)["w"]
    noisy_b = clip_and_noise(grads, 1.0, 2.0, 10.0, b)["w"]
    assert not torch.equal(noisy_a, noisy_b)
    assert not torch.equal(poisson_sample(200, 0.5, a), poisson_sample(200, 0.5, b))
    with pytest.raises(TypeError):
        torch.rand(3, generator=a)


def test_secure_mode_noise_has_the_planned_scale():
    rng = noise.secure_numpy(bytes(16))
    gen = SecureGenerator(rng)
    out = clip_and_noise({"w": torch.zeros(1, 20_000)}, 1.0, 3.0, 1.0, gen)["w"].double()
    # std of 20,000 draws of N(0, 9): 3 ± 0.05 at 3.3 standard errors (0.015 each)
    assert abs(out.std().item() - 3.0) < 0.05 and abs(out.mean().item()) < 0.08


def _calibration(root: Path) -> tuple[np.ndarray, float, np.ndarray]:
    """The dpwgan model's noisy calibration counts (concatenated), their σ and the exact counts of its rows."""
    from pipelines.generators.registry import generator_class

    model = generator_class("dpwgan").load(root / "models/breast_cancer/dpwgan")
    nm = model.calibration.noisy
    data = pd.read_parquet(root / "data/prepared/breast_cancer/train_encoded.parquet").to_numpy(np.float32)
    exact = [np.bincount(c, minlength=n.size) for c, n in zip(nm.cells(data), nm.counts)]
    return np.concatenate([c.ravel() for c in nm.counts]), nm.sigma, np.concatenate(exact).astype(float)


@pytest.mark.slow
def test_two_keyed_releases_at_different_epsilon_never_share_noise(tmp_path, monkeypatch):
    """The reconstruction this prevents: if a release at ε = 1 and one at ε = 3 under one key drew the same Z (a
    binding holding neither ε nor the plan), their calibration counts y_i = x + σ_i Z would give x back exactly.
    Every private stream of the second release is keyed differently from every stream of the first, and the same
    combination of their counts is off by noise of the planned scale."""
    from support.project import make_root, run_stages
    from tasks.train import train
    from pipelines.config import load_params

    monkeypatch.setenv(noise.KEY_ENV, KEY.hex())
    used: list[bytes] = []
    real_secure = noise.secure_numpy

    def recording(material: bytes) -> np.random.Generator:
        used.append(material)
        return real_secure(material)

    monkeypatch.setattr(noise, "secure_numpy", recording)
    root = make_root(
        tmp_path, {"generators": ["dpwgan"], "weights": {"generators": []}, "dpwgan": {"steps": 10, "batch_size": 64}}
    )
    runs, keys = [], []
    for epsilon in (1.0, 3.0):
        params = yaml.safe_load((root / "params.yaml").read_text())
        params["privacy"]["release_epsilon"] = epsilon
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        run_stages(root, "budget")
        used.clear()
        train(load_params(root / "params.yaml"), "dpwgan", f"eps-{epsilon:g}", root)
        runs.append(_calibration(root))
        keys.append(set(used))
    assert len(keys[0]) >= 3 and not keys[0] & keys[1]  # DP-SGD noise, Poisson, calibration: none shared
    (y1, s1, x), (y2, s2, x2) = runs
    np.testing.assert_array_equal(x, x2)  # the same training rows
    assert s1 > s2 > 0
    reconstructed = (s2 * y1 - s1 * y2) / (s2 - s1)
    scale = s1 * s2 * np.sqrt(2) / (s1 - s2)
    # median |error| of noise of std `scale` over ≥ 100 cells is ≈ 0.674·scale; the reused noise gave 1e-13
    assert len(x) >= 100 and np.median(np.abs(reconstructed - x)) > 0.4 * scale
