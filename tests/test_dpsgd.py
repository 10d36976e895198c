"""DP-SGD machinery: formula tests and an empirical privacy audit of one private step (rule 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.audit import epsilon_lower_bound
from pipelines.privacy.dpsgd import (
    SecureGenerator,
    clip_and_noise,
    clip_per_example,
    per_example_grads,
    poisson_sample,
    standard_normal,
    uniform,
)
from pipelines.privacy.events import PoissonGaussianEvent
from pipelines.privacy.noise import secure_numpy

GP_LAMBDA = 10.0


def critic(width: int = 5, hidden: int = 8, layer_norm: bool = True, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    layers = [nn.Linear(width, hidden)] + ([nn.LayerNorm(hidden)] if layer_norm else [])
    return nn.Sequential(*layers, nn.LeakyReLU(0.2), nn.Linear(hidden, 1))


def wgan_gp_loss(forward, x, fake, u):
    """Real-touching WGAN-GP critic loss −D(x) + λ(‖∇_x̂ D(x̂)‖ − 1)², summed over the rows given."""
    x_hat = (u * x + (1 - u) * fake).requires_grad_(True)
    (g,) = torch.autograd.grad(forward(x_hat).sum(), x_hat, create_graph=True)
    return -forward(x).sum() + GP_LAMBDA * ((torch.sqrt(g.pow(2).sum(-1) + 1e-12) - 1) ** 2).sum()


def batch(n: int, width: int = 5, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, width, generator=g), torch.rand(n, width, generator=g), torch.rand(n, 1, generator=g)


def joint_norms(per_example: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in per_example.values()))


def flat(grads: dict[str, torch.Tensor], lead: int = 0) -> torch.Tensor:
    """Concatenate a gradient dict into vectors (keeping `lead` leading dimensions)."""
    return torch.cat([g.flatten(lead) for g in grads.values()], dim=lead)


# -- formula tests ----------------------------------------------------------------------------


def test_per_example_grads_match_autograd_loop_with_gradient_penalty():
    model = critic()
    x, fake, u = batch(7)
    got = per_example_grads(model, wgan_gp_loss, x, fake, u).materialised()
    for i in range(len(x)):
        model.zero_grad()
        x_hat = (u[i] * x[i] + (1 - u[i]) * fake[i]).unsqueeze(0).requires_grad_()
        (g,) = torch.autograd.grad(model(x_hat).sum(), x_hat, create_graph=True)
        loss = -model(x[i : i + 1]).sum() + GP_LAMBDA * (g.norm() - 1) ** 2
        loss.backward()
        for name, p in model.named_parameters():
            torch.testing.assert_close(got[name][i], p.grad, atol=1e-5, rtol=1e-4)


@pytest.mark.integration
def test_per_example_grads_with_a_gradient_penalty_free_their_graph():
    """The double backward's graph must die with the call: recorded uses of the probes that formed a cycle through
    autograd nodes Python cannot collect would leak memory at every PPEM step (gigabytes on a large table). After
    warm-up calls, more calls leave no more live tensors behind."""
    import gc

    model = critic()
    x, fake, u = batch(7)

    def live_tensors() -> int:
        gc.collect()
        return sum(issubclass(type(o), torch.Tensor) for o in gc.get_objects())

    per_example_grads(model, wgan_gp_loss, x, fake, u).materialised()
    before = live_tensors()
    for _ in range(5):
        per_example_grads(model, wgan_gp_loss, x, fake, u).materialised()
    assert live_tensors() == before


def test_per_example_grads_of_empty_batch_are_empty():
    model = critic()
    x, fake, u = batch(0)
    got = per_example_grads(model, wgan_gp_loss, x, fake, u).materialised()
    assert {k: tuple(v.shape) for k, v in got.items()} == {k: (0, *p.shape) for k, p in model.named_parameters()}


def test_clipping_bounds_every_joint_norm_and_keeps_small_examples():
    model = critic()
    x, fake, u = batch(32)
    per_example = per_example_grads(model, wgan_gp_loss, 20 * x, fake, u).materialised()  # some large, some small
    norms = joint_norms(per_example)
    clip = float(norms.median())
    clipped = clip_per_example(per_example, clip)
    new = joint_norms(clipped)
    assert torch.all(new <= clip * (1 + 1e-5))
    small = norms <= clip
    torch.testing.assert_close(new[small], norms[small])
    torch.testing.assert_close(new[~small], torch.full_like(new[~small], clip))
    cos = torch.nn.functional.cosine_similarity(flat(per_example, 1), flat(clipped, 1), dim=1)
    torch.testing.assert_close(cos, torch.ones_like(cos))  # clipping rescales, never rotates


def test_clip_and_noise_without_noise_is_clipped_sum_over_expected_batch_size():
    model = critic()
    per_example = per_example_grads(model, wgan_gp_loss, *batch(16)).materialised()
    clip, expected = 0.5, 12.5  # the divisor is the constant q·n, not the realised batch size 16
    got = clip_and_noise(per_example, clip, 0.0, expected, torch.Generator().manual_seed(0))
    want = {k: v.sum(0) / expected for k, v in clip_per_example(per_example, clip).items()}
    for k in want:
        torch.testing.assert_close(got[k], want[k])


def test_factored_norms_and_clipped_sum_equal_the_materialised_ones():
    """The ghost norms (both uses of a weight under the gradient penalty, cross terms included) and the factored
    clipped sum equal the ones computed from B materialised copies; so does the sum of two clipped terms."""
    model = critic(hidden=6)
    x, fake, u = batch(9)
    factored = per_example_grads(model, wgan_gp_loss, 20 * x, fake, u)
    dense = factored.materialised()
    torch.testing.assert_close(factored.sq_norms().sqrt(), joint_norms(dense))
    clip = float(joint_norms(dense).median())
    for got, want in (
        (factored, dense),
        (
            clip_per_example(factored, clip / 2) + clip_per_example(factored, clip / 3),
            {k: v + clip_per_example(dense, clip / 3)[k] for k, v in clip_per_example(dense, clip / 2).items()},
        ),
    ):
        out = clip_and_noise(got, clip, 0.0, 4.0, torch.Generator())
        ref = clip_and_noise(want, clip, 0.0, 4.0, torch.Generator())
        for k in ref:
            torch.testing.assert_close(out[k], ref[k], atol=1e-5, rtol=1e-4)
    over = clip_per_example(factored, clip) + clip_per_example(factored, clip)  # bound 2C: clipped again to C
    assert over.bound == 2 * clip
    doubled = {k: 2 * v for k, v in clip_per_example(dense, clip).items()}
    out, ref = (clip_and_noise(x, clip, 0.0, 1.0, torch.Generator()) for x in (over, doubled))
    for k in ref:
        torch.testing.assert_close(out[k], ref[k], atol=1e-5, rtol=1e-4)


def test_non_private_mode_does_no_clipping_and_no_noise():
    model = critic()
    per_example = per_example_grads(model, wgan_gp_loss, *batch(16)).materialised()
    got = clip_and_noise(per_example, math.inf, 0.0, 16.0, torch.Generator().manual_seed(0))
    for k, v in per_example.items():
        torch.testing.assert_close(got[k], v.mean(0))
    with pytest.raises(ValueError, match="finite clip_norm"):
        clip_and_noise(per_example, math.inf, 1.0, 16.0, torch.Generator())


def test_noise_std_is_sigma_clip_over_expected_batch_size():
    sigma, clip, expected = 1.7, 0.8, 25.0
    zeros = {"w": torch.zeros(3, 100, 50), "b": torch.zeros(3, 50)}  # 5050 coordinates, pure noise
    out = flat(clip_and_noise(zeros, clip, sigma, expected, torch.Generator().manual_seed(0)))
    d = out.numel()
    chi2 = float((out * expected / (sigma * clip)).pow(2).sum())  # ~ chi-square(d) if the std is right
    assert abs(chi2 - d) < 5 * math.sqrt(2 * d)
    assert abs(float(out.mean())) < 5 * sigma * clip / expected / math.sqrt(d)


def test_empty_batch_step_is_pure_noise():
    model = critic()
    empty = per_example_grads(model, wgan_gp_loss, *batch(0)).materialised()
    out = clip_and_noise(empty, 1.0, 2.0, 10.0, torch.Generator().manual_seed(0))
    assert {k: v.shape for k, v in out.items()} == {k: p.shape for k, p in model.named_parameters()}
    assert float(flat(out).std()) == pytest.approx(2.0 * 1.0 / 10.0, rel=0.25)


def test_poisson_sample_batch_sizes_are_binomial():
    n, q, draws = 200, 0.1, 4000
    gen = torch.Generator().manual_seed(0)
    sizes = np.array([len(poisson_sample(n, q, gen)) for _ in range(draws)])
    mean, var = n * q, n * q * (1 - q)
    assert abs(sizes.mean() - mean) < 5 * math.sqrt(var / draws)
    assert sizes.var(ddof=1) == pytest.approx(var, rel=0.1)
    idx = poisson_sample(n, q, gen)
    assert idx.dtype == torch.long and torch.all(idx[1:] > idx[:-1]) and (len(idx) == 0 or idx.max() < n)
    assert len(poisson_sample(n, 1e-9, gen)) == 0  # an empty batch is allowed
    with pytest.raises(ValueError):
        poisson_sample(n, 0.0, gen)


# -- empirical audit (privacy rule 4, docs/architecture.md) ------------------------------------------------------

AUDIT_DELTA = 1e-5
AUDIT_RUNS = 200_000  # per data set
AUDIT_SIGMA = 3.0  # one Gaussian step at q = 1: claimed ε ≈ 1.27 at δ = 1e-5


def audit_scores(
    per_example: dict, direction: torch.Tensor, clip: float, sigma: float, expected: float, seed: int
) -> np.ndarray:
    """Projections on `direction` of AUDIT_RUNS independent outputs of the real clip_and_noise."""
    gen, scores = torch.Generator().manual_seed(seed), []
    for _ in range(AUDIT_RUNS // 50_000):
        out = clip_and_noise(per_example, clip, sigma, expected, gen, draws=50_000)
        scores.append((flat(out, 1) @ direction).numpy())
    return np.concatenate(scores)


@pytest.fixture(scope="module")
def neighbours():
    """Per-example grads of a small real critic (WGAN-GP loss) on D and on D' = D + one canary.

    The canary row is huge, so its unclipped gradient is > 1e3 times the clipping norm: without
    clipping one step would reveal it almost surely.
    """
    model = critic(layer_norm=False)  # no LayerNorm: it would normalise the canary's scale away
    x, fake, u = batch(16)
    canary = 1e4 * torch.ones(1, x.shape[1])
    d = per_example_grads(model, wgan_gp_loss, x, fake, u).materialised()
    canary_grads = per_example_grads(model, wgan_gp_loss, canary, fake[:1], u[:1]).materialised()
    d_prime = {k: torch.cat([d[k], canary_grads[k]]) for k in d}
    clip = 1.0
    assert float(joint_norms(canary_grads)[0]) > 1e3 * clip
    direction = flat(canary_grads, 1)[0]
    direction = direction / direction.norm()  # = the direction of the canary's clipped gradient
    return d, d_prime, direction, clip


def claimed_epsilon(sigma: float) -> float:
    return epsilon_pld([PoissonGaussianEvent(sigma, 1.0, 1)], AUDIT_DELTA)


def audit(neighbours, clip: float, noise_multiplier: float) -> float:
    d, d_prime, direction, _ = neighbours
    expected = float(len(next(iter(d.values()))))  # q = 1: the public constant n
    s0 = audit_scores(d, direction, clip, noise_multiplier, expected, seed=10)
    s1 = audit_scores(d_prime, direction, clip, noise_multiplier, expected, seed=11)
    return epsilon_lower_bound(s0, s1, AUDIT_DELTA)


def test_audit_lower_bound_stays_below_claimed_epsilon(neighbours):
    claim = claimed_epsilon(AUDIT_SIGMA)
    assert 1.0 < claim < 2.0
    assert audit(neighbours, neighbours[3], AUDIT_SIGMA) < claim


def test_audit_detects_half_the_noise(neighbours):
    """The audit is sensitive: with σ halved but the claim kept, the lower bound exceeds the claim."""
    assert audit(neighbours, neighbours[3], AUDIT_SIGMA / 2) > claimed_epsilon(AUDIT_SIGMA)


def test_audit_detects_broken_clipping(neighbours):
    """Same noise std σ·C, but clipping at 1e6·C (i.e. effectively none): the canary shows."""
    clip = neighbours[3]
    huge = 1e6 * clip
    assert audit(neighbours, huge, AUDIT_SIGMA * clip / huge) > claimed_epsilon(AUDIT_SIGMA)


# -- the subsampled step: Poisson sampling's amplification, audited through poisson_sample and clip_and_noise ------

SUBSAMPLED_Q, SUBSAMPLED_SIGMA = 0.5, 1.0  # claimed ε ≈ 3.53 at δ = 1e-5


def subsampled_outputs(with_canary: bool, sigma: float, seed: int) -> np.ndarray:
    """AUDIT_RUNS outputs of one DP-SGD step on D = {} or D' = {canary} (add/remove one record), projected on the
    canary's clipped gradient: the lot comes from the real `poisson_sample` on the CSPRNG (one call over AUDIT_RUNS
    one-row data sets: each index kept independently, so each run's lot independently), the sum and noise from the
    real `clip_and_noise` (secure mode), C = 1 and divisor 1. {} vs {canary} is the subsampled Gaussian's
    dominating pair, so the audit's bound approaches the claim."""
    gen = SecureGenerator(secure_numpy(bytes([seed]) * 16))
    canary, empty = {"w": torch.full((1, 4), 10.0)}, {"w": torch.zeros(0, 4)}  # the canary's norm 20 clips to 1
    kept = len(poisson_sample(AUDIT_RUNS, SUBSAMPLED_Q, gen)) if with_canary else 0
    parts = [
        (clip_and_noise(rows, 1.0, sigma, 1.0, gen, draws=k)["w"].reshape(k, -1) @ torch.full((4,), 0.5))
        for rows, k in ((canary, kept), (empty, AUDIT_RUNS - kept))
        if k
    ]
    return torch.cat(parts).numpy()


def subsampled_audit(sigma: float) -> float:
    seeds = (1, 2) if sigma == SUBSAMPLED_SIGMA else (3, 4)
    return epsilon_lower_bound(
        subsampled_outputs(False, sigma, seeds[0]), subsampled_outputs(True, sigma, seeds[1]), AUDIT_DELTA
    )


@pytest.mark.integration
def test_subsampled_step_audit_stays_below_the_claim_and_detects_half_the_noise():
    """Lower bounds at seeds 1-4: 1.63 < claim 3.53; 4.28 at σ/2."""
    claim = epsilon_pld([PoissonGaussianEvent(SUBSAMPLED_SIGMA, SUBSAMPLED_Q, 1)], AUDIT_DELTA)
    assert 3.0 < claim < 4.0
    assert subsampled_audit(SUBSAMPLED_SIGMA) < claim
    assert subsampled_audit(SUBSAMPLED_SIGMA / 2) > claim


# -- a batch-coupled term (PPEM's KSD penalty): Δ = C + 2C_α -----------------------------------

COUPLED_CLIP = 0.5


def test_coupled_term_is_clipped_and_the_noise_covers_c_plus_two_c_alpha():
    sigma, clip, expected = 1.3, 0.8, 20.0
    zeros = {"w": torch.zeros(3, 100, 50), "b": torch.zeros(3, 50)}
    huge = {"w": torch.full((100, 50), 7.0), "b": torch.full((50,), 7.0)}
    clean = flat(clip_and_noise(zeros, clip, 0.0, expected, torch.Generator(), coupled=huge, coupled_clip=COUPLED_CLIP))
    assert float(clean.norm()) * expected == pytest.approx(COUPLED_CLIP, rel=1e-5)  # clipped to C_α
    out = flat(
        clip_and_noise(
            zeros,
            clip,
            sigma,
            expected,
            torch.Generator().manual_seed(0),
            coupled={k: torch.zeros_like(v) for k, v in huge.items()},
            coupled_clip=COUPLED_CLIP,
        )
    )
    d = out.numel()
    chi2 = float((out * expected / (sigma * (clip + 2 * COUPLED_CLIP))).pow(2).sum())
    assert abs(chi2 - d) < 5 * math.sqrt(2 * d)
    with pytest.raises(ValueError, match="coupled_clip"):
        clip_and_noise(zeros, clip, sigma, expected, torch.Generator(), coupled=huge, coupled_clip=math.inf)


@pytest.fixture(scope="module")
def coupled_neighbours():
    """The worst case of the derivation: the added record's clipped gradient is C·v and it flips the
    batch-coupled gradient from −C_α·v to +C_α·v, so the sum moves by exactly (C + 2C_α)·v."""
    clip, n, size = 1.0, 16, 40
    g = torch.Generator().manual_seed(3)
    base = {"w": torch.randn(n, size, generator=g) * 0.1}
    v = torch.randn(size, generator=g)
    v = v / v.norm()
    d = (base, {"w": -10 * v})
    d_prime = ({"w": torch.cat([base["w"], 10 * v[None]])}, {"w": 10 * v})
    return d, d_prime, v, clip


def coupled_audit(neighbours, noise_multiplier: float) -> float:
    (d, d_prime, v, clip), expected = neighbours, 16.0
    scores = []
    for (per_example, coupled), seed in ((d, 20), (d_prime, 21)):
        gen, s = torch.Generator().manual_seed(seed), []
        for _ in range(AUDIT_RUNS // 50_000):
            out = clip_and_noise(
                per_example,
                clip,
                noise_multiplier,
                expected,
                gen,
                draws=50_000,
                coupled=coupled,
                coupled_clip=COUPLED_CLIP,
            )
            s.append((out["w"] @ v).numpy())
        scores.append(np.concatenate(s))
    return epsilon_lower_bound(scores[0], scores[1], AUDIT_DELTA)


def test_coupled_audit_stays_below_claim_and_detects_half_the_noise(coupled_neighbours):
    claim = claimed_epsilon(AUDIT_SIGMA)
    assert coupled_audit(coupled_neighbours, AUDIT_SIGMA) < claim
    assert coupled_audit(coupled_neighbours, AUDIT_SIGMA / 2) > claim


# -- a private step's other draws (latents, head uniforms, interpolation weights): the CSPRNG, never torch's MT19937 --

KEY = bytes(range(16))


def flipped(bit: int) -> bytes:
    """KEY with bit `bit` of the AES key flipped (0: the lowest; 127: the highest)."""
    key = bytearray(KEY)
    key[15 - bit // 8] ^= 1 << (bit % 8)
    return bytes(key)


def secure(key: bytes = KEY) -> SecureGenerator:
    return SecureGenerator(secure_numpy(key))


@pytest.mark.parametrize("draw", [standard_normal, uniform])
def test_secure_draws_are_fixed_by_all_128_key_bits_and_nothing_else(draw):
    """The same key gives the same draws whatever torch's global generator holds; a key one bit away, the lowest
    or the highest (equal modulo 2**32, where two torch seeds would collide), gives others."""
    torch.manual_seed(0)
    first = draw(secure(), (64, 4))
    torch.manual_seed(1)
    assert torch.equal(first, draw(secure(), (64, 4)))
    for bit in (0, 127):
        assert not torch.equal(first, draw(secure(flipped(bit)), (64, 4)))
    assert first.shape == (64, 4) and first.dtype == torch.float32 and first.device.type == "cpu"
    assert draw(secure(), (3,), "cpu", torch.float64).dtype == torch.float64


def test_a_secure_generator_is_no_torch_generator_so_torch_refuses_it():
    """No private draw can fall back to a torch state: torch's samplers refuse a SecureGenerator."""
    with pytest.raises(TypeError):
        torch.rand(3, generator=secure())
    with pytest.raises(TypeError):
        torch.randn(3, generator=secure())


def test_secure_uniforms_have_the_moments_of_u01_on_the_grid_of_their_dtype():
    """10^5 float32 uniforms of a fixed key: mean 0.5 ± 0.01 and variance 1/12 ± 0.003 (standard errors 0.0009 and
    0.00024), all in [0, 1) on the 2^-24 grid of float32. U[0, 2), a normal or a constant miss these bounds."""
    u = uniform(secure(), (100_000,)).double()
    assert abs(u.mean().item() - 0.5) < 0.01 and abs(u.var().item() - 1 / 12) < 0.003
    assert u.min().item() >= 0.0 and u.max().item() < 1.0
    assert torch.equal(u * 2**24, torch.floor(u * 2**24))


def test_secure_uniforms_are_rounded_down_so_the_cast_never_reaches_one():
    """The largest float64 uniform, 1 − 2^-53, rounds to 1.0 in float32; rounded down to the float32 grid it is
    1 − 2^-24 (a Gumbel draw −log(−log u) stays finite), and float64 keeps it as it is."""

    class Top:
        """A CSPRNG whose every uniform is the largest float64 below 1."""

        def random(self, shape):
            return np.full(shape, 1 - 2.0**-53)

    top = SecureGenerator(Top())
    assert torch.equal(uniform(top, (2,), dtype=torch.float32), torch.full((2,), 1 - 2.0**-24))
    assert torch.equal(uniform(top, (2,), dtype=torch.float64), torch.full((2,), 1 - 2.0**-53, dtype=torch.float64))


def test_secure_normals_have_the_moments_of_n01():
    """10^5 float32 normals of a fixed key: mean 0 ± 0.02, standard deviation 1 ± 0.015 and kurtosis 3 ± 0.1
    (standard errors 0.0032, 0.0022 and 0.015). The mean of four normals not doubled (sd 0.5), or uniforms, miss."""
    z = standard_normal(secure(), (100_000,)).double()
    mean, sd = z.mean().item(), z.std().item()
    kurtosis = (((z - mean) / sd) ** 4).mean().item()
    assert abs(mean) < 0.02 and abs(sd - 1.0) < 0.015 and abs(kurtosis - 3.0) < 0.1


def test_a_torch_generator_draws_as_torch_does():
    """The non-private path (a public seed; sampling a trained model) is torch.randn and torch.rand, unchanged."""

    def seeded() -> torch.Generator:
        return torch.Generator().manual_seed(3)

    assert torch.equal(standard_normal(seeded(), (5, 2)), torch.randn(5, 2, generator=seeded()))
    assert torch.equal(uniform(seeded(), (5, 2)), torch.rand(5, 2, generator=seeded()))
    assert torch.equal(
        uniform(seeded(), (4,), dtype=torch.float64), torch.rand(4, generator=seeded(), dtype=torch.float64)
    )
