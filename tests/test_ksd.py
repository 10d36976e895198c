"""KSD statistics: closed forms against autograd, Stein's identity, and the paper's section 5.1."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import chi2, kstest, norm
from torch import Tensor, nn

from pipelines.stats.ksd import (
    KSDTest,
    ksd_bootstrap_test,
    ksd_u_statistic,
    linear_ksd,
    linear_terms,
    linear_test_pvalue,
    median_bandwidth,
    normalized_linear_ksd,
    normalized_linear_pvalue,
    stein_kernel,
    stein_kernel_matrix,
)

# Appendix C.1: the 1-D GMM of section 5.1 (weights 0.2 each; the last column is σ², not σ).
GMM_MEANS = torch.tensor([6.9734, 7.1579, 2.4358, 9.2579, 3.0420], dtype=torch.float64)
GMM_VARS = torch.tensor([0.2622, 0.9046, 0.4533, 0.0773, 0.7823], dtype=torch.float64)
CHI2_CRIT = chi2.ppf(0.95, df=1)
Z_CRIT = norm.ppf(0.95)


def rbf(x: Tensor, y: Tensor, ell: float) -> Tensor:
    return torch.exp(-(x - y).pow(2).sum(-1) / (2 * ell**2))


def stein_kernel_by_autograd(x: Tensor, y: Tensor, sx: Tensor, sy: Tensor, ell: float) -> Tensor:
    """Eq. 15 with every kernel derivative taken by autograd, one row at a time."""
    out = []
    for xi, yi, si, ti in zip(x, y, sx, sy):
        xi, yi = xi.clone().requires_grad_(), yi.clone().requires_grad_()
        k = rbf(xi, yi, ell)
        grad_x, grad_y = torch.autograd.grad(k, (xi, yi), create_graph=True)
        trace = sum(torch.autograd.grad(grad_y[a], xi, retain_graph=True)[0][a] for a in range(len(xi)))
        out.append(k * si @ ti + si @ grad_y + grad_x @ ti + trace)
    return torch.stack(out).detach()


@pytest.mark.parametrize("d", [1, 3])
def test_stein_kernel_matches_autograd(d: int) -> None:
    g = torch.Generator().manual_seed(d)
    x, y, sx, sy = (torch.randn(6, d, generator=g, dtype=torch.float64) for _ in range(4))
    for ell in (0.4, 1.7):
        expected = stein_kernel_by_autograd(x, y, sx, sy, ell)
        torch.testing.assert_close(stein_kernel(x, y, sx, sy, ell), expected, rtol=1e-12, atol=1e-12)


def test_matrix_agrees_with_row_pairs_and_dtype() -> None:
    g = torch.Generator().manual_seed(0)
    x, s = (torch.randn(7, 3, generator=g, dtype=torch.float64) for _ in range(2))
    u = stein_kernel_matrix(x, s, 0.9)
    pairwise = stein_kernel(x[:, None], x[None], s[:, None], s[None], 0.9)
    torch.testing.assert_close(u, pairwise, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(u.diagonal(), stein_kernel(x, x, s, s, 0.9))
    u32 = stein_kernel_matrix(x.float(), s.float(), torch.tensor(0.9))
    assert u32.dtype == torch.float32
    torch.testing.assert_close(u32.double(), u, rtol=1e-4, atol=1e-5)


def test_median_bandwidth_hand_examples() -> None:
    odd = torch.tensor([[0.0], [1.0], [3.0]])  # distances 1, 3, 2
    even = torch.tensor([[0.0], [1.0], [3.0], [7.0]])  # 1, 3, 7, 2, 6, 4
    plane = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 4.0]])  # 5, 4, 3
    assert median_bandwidth(odd).item() == 2.0
    assert median_bandwidth(even).item() == 3.5
    assert median_bandwidth(plane).item() == 4.0
    assert median_bandwidth(torch.zeros(5, 2)).item() == 1.0  # zero-median guard
    batched = median_bandwidth(torch.stack([plane, 2 * plane]))
    torch.testing.assert_close(batched, torch.tensor([4.0, 8.0]))


@pytest.mark.integration
def test_stein_identity_u_statistic() -> None:
    """Exact score: U ≈ 0 within its standard error; score of N(μ, I): U ≈ ‖μ‖²(1 + 2/ℓ²)^(−d/2).

    With s_q = s_p + μ, Stein's identity leaves KSD = μᵀE[k(x, x')]μ, and x − x' ~ N(0, 2I).
    """
    g = torch.Generator().manual_seed(0)
    n, d, ell = 2000, 2, 1.0
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    u = stein_kernel_matrix(x, -x, ell).fill_diagonal_(0)
    null = ksd_u_statistic(x, -x, ell)
    se = math.sqrt(2 * u.pow(2).sum().item() / (n * (n - 1))) / math.sqrt(n * (n - 1))
    wrong = ksd_u_statistic(x, -(x - 1.0), ell)
    print(f"\nU exact score {null.item():.2e} (se {se:.1e}); wrong score {wrong.item():.4f} vs 2/3")
    assert null.item() == pytest.approx(u.sum().item() / (n * (n - 1)))
    assert abs(null.item()) < 3 * se
    assert wrong.item() == pytest.approx(d * (1 + 2 / ell**2) ** (-d / 2), abs=0.1)
    assert wrong.item() > 100 * se


def test_normalized_linear_ksd_hand_vector() -> None:
    h = torch.tensor([1.0, 2.0, -1.0, 3.0], dtype=torch.float64)
    # m = 4, Σh = 5, Σh² = 15: 3·25/(4·15); t = √4·mean/sd and Ŝ_l,n = t²/(1 + t²/(m − 1)).
    t = 2 * h.mean() / h.std()
    assert normalized_linear_ksd(h).item() == pytest.approx(1.25, rel=1e-14)
    assert (t**2 / (1 + t**2 / 3)).item() == pytest.approx(1.25, rel=1e-12)
    assert linear_ksd(h).item() == 1.25
    assert linear_test_pvalue(h) == pytest.approx(norm.sf(t.item()), rel=1e-12)
    assert linear_test_pvalue(h) == pytest.approx(0.07161, abs=1e-4)
    assert normalized_linear_pvalue(CHI2_CRIT) == pytest.approx(0.05)
    batched = normalized_linear_ksd(torch.stack([h, -h, 2 * h]))
    torch.testing.assert_close(batched, torch.full((3,), 1.25, dtype=torch.float64))


@pytest.mark.parametrize("values", [[2.0], [], [0.0, 0.0, 0.0]])
def test_normalized_linear_ksd_degenerate_is_zero_with_finite_grad(values: list[float]) -> None:
    h = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    out = normalized_linear_ksd(h)
    out.backward()
    assert out.item() == 0.0
    assert torch.isfinite(h.grad).all() and (h.grad == 0).all()


def test_penalty_gradients_flow_to_the_score() -> None:
    """Ŝ_l,n through linear_terms is differentiable in the score (gradcheck), and in an energy net."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 2, generator=g, dtype=torch.float64)
    ell = median_bandwidth(x)
    theta = torch.tensor([0.3, -0.2], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda th: normalized_linear_ksd(linear_terms(x, -(x - th), ell)), (theta,))

    torch.manual_seed(0)
    energy = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1)).double()
    xr = x.clone().requires_grad_()
    score = -torch.autograd.grad(energy(xr).sum(), xr, create_graph=True)[0]
    normalized_linear_ksd(linear_terms(x, score)).backward()
    first = energy[0].weight.grad  # the output bias does not enter the score
    assert torch.isfinite(first).all() and first.abs().sum() > 0


# --- Paper section 5.1 / Figure 2: Ŝ_l,n vs Ŝ_l on the C.1 GMM, vectorised over sets ----------


def gmm_sample(means: Tensor, variances: Tensor, n: int, g: torch.Generator) -> Tensor:
    """n draws per set from equally weighted 1-D GMMs, parameters (sets, K) -> (sets, n, 1)."""
    idx = torch.randint(means.shape[-1], (means.shape[0], n), generator=g)
    mu, var = torch.gather(means, 1, idx), torch.gather(variances, 1, idx)
    return (mu + var.sqrt() * torch.randn(mu.shape, generator=g, dtype=torch.float64))[..., None]


def gmm_score(x: Tensor) -> Tensor:
    """Exact score of the C.1 GMM: Σ_k r_k(x)·(μ_k − x)/σ²_k, responsibilities by softmax."""
    log_comp = -((x - GMM_MEANS) ** 2) / (2 * GMM_VARS) - 0.5 * torch.log(GMM_VARS)
    return (torch.softmax(log_comp, -1) * (GMM_MEANS - x) / GMM_VARS).sum(-1, keepdim=True)


def test_gmm_score_is_the_gradient_of_the_log_density() -> None:
    x = torch.linspace(0.0, 11.0, 50, dtype=torch.float64)[:, None].requires_grad_()
    log_density = torch.logsumexp(
        math.log(0.2) - (x - GMM_MEANS) ** 2 / (2 * GMM_VARS) - 0.5 * torch.log(2 * math.pi * GMM_VARS), dim=-1
    )
    grad = torch.autograd.grad(log_density.sum(), x)[0]
    torch.testing.assert_close(gmm_score(x.detach()), grad, rtol=1e-12, atol=1e-12)


def set_statistics(x: Tensor) -> tuple[Tensor, Tensor]:
    """Ŝ_l,n and the linear test's t = √m·Ŝ_l/sd(h) per set, median bandwidth per set."""
    h = linear_terms(x, gmm_score(x))
    return normalized_linear_ksd(h), h.shape[-1] ** 0.5 * linear_ksd(h) / h.std(-1)


def simulate(n_sets: int, n: int, null: bool, g: torch.Generator) -> tuple[Tensor, Tensor]:
    """Statistics over n_sets sets of n draws: from the C.1 GMM (null) or a fresh random GMM each."""
    per_chunk = max(1, (1 << 24) // n**2)  # bounds the (sets, n, n) distance tensor
    out = []
    for start in range(0, n_sets, per_chunk):
        size = min(per_chunk, n_sets - start)
        if null:
            means, variances = GMM_MEANS.expand(size, 5), GMM_VARS.expand(size, 5)
        else:
            means = 2 + 8 * torch.rand(size, 5, generator=g, dtype=torch.float64)
            variances = 0.05 + 0.95 * torch.rand(size, 5, generator=g, dtype=torch.float64)
        out.append(set_statistics(gmm_sample(means, variances, n, g)))
    return torch.cat([s for s, _ in out]), torch.cat([t for _, t in out])


@pytest.mark.parametrize("n_sets", [1000, pytest.param(10_000, marks=pytest.mark.slow)])
def test_section_5_1_null_distribution(n_sets: int) -> None:
    s_ln, t = simulate(n_sets, 128, null=True, g=torch.Generator().manual_seed(1))
    mean, q95 = s_ln.mean().item(), s_ln.quantile(0.95).item()
    type1 = (s_ln > CHI2_CRIT).double().mean().item()
    type1_linear = (t > Z_CRIT).double().mean().item()
    print(
        f"\nnull, {n_sets} sets of 128: Ŝ_l,n mean {mean:.3f}, 95th pct {q95:.3f}, "
        f"type-I {type1:.4f} (linear test {type1_linear:.4f}), min {s_ln.min().item():.2e}"
    )
    assert (s_ln >= 0).all()
    assert 0.85 <= mean <= 1.15
    assert 3.0 <= q95 <= 4.2
    assert 0.015 <= type1 <= 0.07
    assert 0.015 <= type1_linear <= 0.08


@pytest.mark.slow
@pytest.mark.parametrize("n_sets", [500, 2_000])
def test_section_5_1_power_rises_with_n(n_sets: int) -> None:
    """The paper's Figure 2 trend on random GMM alternatives. 2,000 sets per n, not the paper's 10,000: the power
    estimates' standard error is then at most 0.011, a third of the 0.03 slack the monotonicity check allows, at a
    fifth of the time the paper's 10,000 sets take."""
    g = torch.Generator().manual_seed(2)
    sizes = [32, 64, 128, 256, 512]
    power_ln, power_linear = [], []
    for n in sizes:
        s_ln, t = simulate(n_sets, n, null=False, g=g)
        power_ln.append((s_ln > CHI2_CRIT).double().mean().item())
        power_linear.append((t > Z_CRIT).double().mean().item())
    print(f"\npower over {n_sets} random alternatives per n:")
    for n, a, b in zip(sizes, power_ln, power_linear):
        print(f"  n={n:4d}: Ŝ_l,n {a:.3f}, linear {b:.3f}")
    for power in (power_ln, power_linear):
        assert all(later >= earlier - 0.03 for earlier, later in zip(power, power[1:]))
        assert power[-1] >= power[0] + 0.2
    assert power_ln[-1] >= 0.6 * power_linear[-1]


# --- Bootstrap test of Liu et al. (2016) -------------------------------------------------------


def test_bootstrap_null_calibration() -> None:
    rng = np.random.default_rng(0)
    p = np.array(
        [ksd_bootstrap_test(x, -x, n_bootstrap=200, seed=r).p_value for r, x in enumerate(rng.normal(size=(200, 100)))]
    )
    rate = float(np.mean(p <= 0.05))
    uniform = kstest(p, "uniform").pvalue
    print(f"\nbootstrap null: rejection rate {rate:.3f}, KS vs uniform p {uniform:.3f}")
    assert 0.01 <= rate <= 0.10  # Binomial(200, 0.05): mean 10, sd 3.1
    assert uniform > 0.01


def test_bootstrap_power_statistic_and_determinism() -> None:
    rng = np.random.default_rng(1)
    sets = rng.normal(size=(40, 100))
    p = np.array([ksd_bootstrap_test(x, -(x - 0.5), n_bootstrap=200, seed=0).p_value for x in sets])
    print(f"\nbootstrap power, data N(0,1), score N(0.5,1), n=100: {np.mean(p <= 0.05):.3f}")
    assert np.mean(p <= 0.05) >= 0.8

    x = torch.as_tensor(sets[0])[:, None]
    result = ksd_bootstrap_test(x, -x, n_bootstrap=300, seed=7)
    assert isinstance(result, KSDTest)
    assert result == ksd_bootstrap_test(sets[0], -sets[0], n_bootstrap=300, seed=7)
    assert result.statistic == pytest.approx(ksd_u_statistic(x, -x).item(), rel=1e-12)
    assert result.bandwidth == pytest.approx(median_bandwidth(x).item())
    assert result.to_dict() == {
        "statistic": result.statistic,
        "n": 100,
        "bandwidth": result.bandwidth,
        "p_value": result.p_value,
        "n_bootstrap": 300,
    }


def test_bootstrap_rejects_the_gmm_alternative() -> None:
    g = torch.Generator().manual_seed(3)
    means = 2 + 8 * torch.rand(1, 5, generator=g, dtype=torch.float64)
    variances = 0.05 + 0.95 * torch.rand(1, 5, generator=g, dtype=torch.float64)
    x = gmm_sample(means, variances, 300, g)[0]
    null_x = gmm_sample(GMM_MEANS[None], GMM_VARS[None], 300, g)[0]
    assert ksd_bootstrap_test(x, gmm_score(x), n_bootstrap=500).p_value <= 0.01
    assert ksd_bootstrap_test(null_x, gmm_score(null_x), n_bootstrap=500).p_value > 0.05
