"""PPEM: the privacy plan, the KSD penalty (Eq. 18), the private marginal step and its audit,
training → sampling → persistence, and the α-LMDP gate (including that it can fail)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import chi2

from pipelines.data.layout import Block, Layout
from pipelines.data.transform import Encoder
from pipelines.generators.base import Budget
from pipelines.generators import ppem
from pipelines.generators.ppem import PPEM, Energy, ksd_penalty, marginal_energy_gradient, split_columns
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.audit import epsilon_lower_bound
from pipelines.privacy.events import NonPrivateEvent, PoissonGaussianEvent
from pipelines.gates.ppem import alpha_lmdp_gate
from pipelines.stats.ksd import linear_terms, normalized_linear_ksd

from support.ledger import FakeSession

SMALL = {
    "hidden": 16,
    "latent_dim": 8,
    "steps": 12,
    "batch_size": 64,
    "gate_bootstrap": 200,
    "gate_permutations": 200,
    "protected": ["mean_radius", "mean_texture"],
    "noise_seed": 0,
    "calibration": {"share": 0.0},
}  # the method alone (calibration: tests/test_calibration.py)


@pytest.fixture(scope="module")
def cancer(bc_schema, bc_raw):
    enc = Encoder(bc_schema)
    return enc, np.asarray(enc.encode(bc_raw), dtype=np.float32)


@pytest.mark.integration
def test_plan_composes_the_releases_of_one_batch_and_meets_the_budget(cancer):
    enc, X = cancer
    gen = PPEM(enc.layout, {**SMALL, "steps": 50, "energy_steps": 5})
    events = list(gen.plan(len(X), Budget(1.0, 1e-5)).events)
    sigma, q = gen.privacy.noise_multiplier, 64 / len(X)
    assert events == [
        PoissonGaussianEvent(sigma / math.sqrt(2), q, 40),
        PoissonGaussianEvent(sigma / math.sqrt(3), q, 10),
    ]
    assert (gen.privacy.sample_rate, gen.privacy.steps, gen.privacy.generator_steps) == (q, 50, 10)
    assert 0.97 < epsilon_pld(events, 1e-5) <= 1.0
    assert gen.plan(len(X), Budget(math.inf, 1e-5)).events == (NonPrivateEvent("epsilon: inf"),)


def test_protected_columns_must_be_named_numeric_and_leave_a_rest(cancer, adult_schema):
    enc, _ = cancer
    adult = Encoder(adult_schema).layout
    with pytest.raises(ValueError, match=r"\['race', 'sex'\] are not numeric"):
        split_columns(adult, None)  # Adult's schema protects sex and race: categorical
    with pytest.raises(ValueError, match="set ppem.protected"):
        split_columns(enc.layout, None)  # breast cancer's schema protects nothing
    with pytest.raises(ValueError, match="unknown columns"):
        split_columns(enc.layout, ["radius"])
    with pytest.raises(ValueError, match="at least one column outside"):
        split_columns(Layout((Block("a", "continuous", 0, 1), Block("b", "integer", 1, 2))), ["a", "b"])
    x_prime, rest = split_columns(adult, ["age", "hours_per_week"])
    assert x_prime == [adult.block("age").start, adult.block("hours_per_week").start]
    assert sorted(x_prime + rest) == list(range(adult.width))


def test_ksd_penalty_is_eq18_with_the_energy_score():
    torch.manual_seed(0)
    energy = Energy(2, 0, 8)
    x = torch.rand(40, 2)
    penalty, s = ksd_penalty(energy, x, 0.05, 10.0)
    xr = x.clone().requires_grad_(True)
    score = -torch.autograd.grad(energy(xr).sum(), xr)[0]
    expected = float(normalized_linear_ksd(linear_terms(x, score)))
    assert float(s) == pytest.approx(expected, rel=1e-5)
    assert float(penalty.detach()) == pytest.approx(10.0 * max(0.0, chi2.ppf(0.95, 1) - expected), rel=1e-5)
    inactive, _ = ksd_penalty(energy, x, 0.999999, 10.0)  # critical value ≈ 0: the penalty is off
    assert float(inactive.detach()) == 0.0


# -- the private marginal step on neighbouring data sets (rule 4) -------------------------------

AUDIT_DELTA, AUDIT_SIGMA, AUDIT_RUNS, KSD_CLIP = 1e-5, 3.0, 100_000, 0.5


def marginal_outputs(real: torch.Tensor, sigma: float, seed: int, draws: int | None = None) -> torch.Tensor:
    torch.manual_seed(0)
    energy = Energy(2, 0, 16)
    g = torch.Generator().manual_seed(1)
    paired, u, fake = (
        torch.rand(len(real), 2, generator=g),
        torch.rand(len(real), 1, generator=g),
        torch.rand(32, 2, generator=g),
    )
    grads, _ = marginal_energy_gradient(
        energy,
        real,
        paired,
        u,
        fake,
        1.0,
        KSD_CLIP,
        sigma,
        16.0,
        10.0,
        1.0,
        1.0,
        0.05,
        10.0,
        torch.Generator().manual_seed(seed),
        draws=draws,
    )
    return torch.cat([v.flatten(1 if draws else 0) for v in grads.values()], dim=-1)


@pytest.fixture(scope="module")
def marginal_neighbours():
    """D: 16 rows; D′ = D plus a far-away canary (changing its own terms AND the batch-coupled KSD term)."""
    real = torch.rand(16, 2, generator=torch.Generator().manual_seed(2))
    real_prime = torch.cat([real, torch.tensor([[40.0, -40.0]])])
    shift = (marginal_outputs(real_prime, 0.0, 0) - marginal_outputs(real, 0.0, 0)) * 16.0  # un-normalised
    return real, real_prime, shift


def test_marginal_step_sensitivity_is_at_most_c_plus_two_c_alpha(marginal_neighbours):
    *_, shift = marginal_neighbours
    assert 0.3 < float(shift.norm()) <= 1.0 + 2 * KSD_CLIP + 1e-5


@pytest.mark.integration
def test_marginal_step_audit_stays_below_the_claim(marginal_neighbours):
    real, real_prime, shift = marginal_neighbours
    direction = shift / shift.norm()
    s0 = np.concatenate(
        [(marginal_outputs(real, AUDIT_SIGMA, 10 + i, 50_000) @ direction).numpy() for i in range(AUDIT_RUNS // 50_000)]
    )
    s1 = np.concatenate(
        [
            (marginal_outputs(real_prime, AUDIT_SIGMA, 20 + i, 50_000) @ direction).numpy()
            for i in range(AUDIT_RUNS // 50_000)
        ]
    )
    claim = epsilon_pld([PoissonGaussianEvent(AUDIT_SIGMA, 1.0, 1)], AUDIT_DELTA)
    assert epsilon_lower_bound(s0, s1, AUDIT_DELTA) < claim


# -- training, sampling, persistence ------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(cancer):
    enc, X = cancer
    gen = PPEM(enc.layout, SMALL)
    session = FakeSession()
    gen.fit(X, session, Budget(1.0, 1e-5))
    return gen, session


@pytest.mark.integration
def test_fit_reserves_then_records_the_plan_and_uses_private_networks(trained):
    gen, session = trained
    assert session.reserved == session.recorded == list(gen.plan(gen.privacy.n_rows, Budget(1.0, 1e-5)).events)
    norms = [type(m) for m in gen.gen_c.modules()]
    assert torch.nn.LayerNorm in norms and torch.nn.BatchNorm1d not in norms  # DP-trained G_υ
    # G_ω draws the fakes of the per-example terms in train mode: no cross-record normalisation either
    assert not any(isinstance(m, torch.nn.BatchNorm1d) for m in gen.gen_m.modules())
    assert any(isinstance(m, torch.nn.LayerNorm) for m in gen.gen_m.modules())


@pytest.mark.integration
def test_samples_decode_and_survive_save_and_load(trained, cancer, tmp_path):
    gen, _ = trained
    enc, _ = cancer
    out = gen.sample(300, 4)
    assert out.shape == (300, enc.layout.width) and out.min() >= 0 and out.max() <= 1
    decoded = enc.decode(out)
    assert list(decoded.columns) == [c.name for c in enc.schema.columns]
    gen.save(tmp_path)
    again = PPEM.load(tmp_path)
    np.testing.assert_array_equal(again.sample(300, 4), out)
    assert again.privacy == gen.privacy


# -- the α-LMDP gate ------------------------------------------------------------------------------


def test_gate_passes_for_the_trained_model(trained, cancer):
    gen, _ = trained
    result = gen.alpha_lmdp_gate(cancer[1])
    assert result.passed and result.evidence["ksd"]["p_value"] <= 0.05
    assert result.evidence["rows_used"] == len(cancer[1]) and "outside_dp" in result.evidence


def test_gate_needs_both_tests_to_reject():
    """Real x′ ~ N(0.5, 0.1²I). The gate passes only when the KSD test rejects the model's density AND
    the MMD test tells the generated x′ from the real x′; each test alone can make it refuse."""
    rng = np.random.default_rng(0)
    real = (0.5 + 0.1 * rng.standard_normal((400, 2))).astype(np.float32)
    like_real = (0.5 + 0.1 * rng.standard_normal((400, 2))).astype(np.float32)
    shifted = (0.3 + 0.1 * rng.standard_normal((400, 2))).astype(np.float32)
    exact, wrong = (lambda x: -(x - 0.5) / 0.01), (lambda x: -(x - 0.3) / 0.01)

    def gate(score, generated):
        return alpha_lmdp_gate(score, real, generated, 0.05, 500, 200, 2000, 0)

    both = gate(wrong, shifted)
    assert both.passed and both.evidence["ksd"]["p_value"] <= 0.05 and both.evidence["mmd"]["p_value"] <= 0.05
    assert both.evidence["refused_because"] == []
    density_is_real = gate(exact, shifted)  # E_ξ is the data's density: KSD cannot reject
    assert not density_is_real.passed and density_is_real.evidence["ksd"]["p_value"] > 0.05
    assert [r.split(" (")[0] for r in density_is_real.evidence["refused_because"]] == [
        "the KSD test cannot reject that the real protected marginal fits the energy model"
    ]
    samples_are_real = gate(wrong, like_real)  # G_ω reproduces the marginal: MMD cannot reject
    assert not samples_are_real.passed and samples_are_real.evidence["mmd"]["p_value"] > 0.05
    assert samples_are_real.evidence["rejects_h0_real_marginal_fits_model"]
    assert not gate(exact, like_real).passed


@pytest.mark.slow
def test_gate_refuses_a_trained_ppem_without_the_penalty_that_fits_the_marginal():
    """λ_α = 0 on a smooth 1-D protected marginal (200 rows of 0.2 + 0.6·Beta(2, 2)) that G_ω learns:
    its samples match the real mean and spread, so the MMD test cannot reject and the gate refuses,
    although the KSD test still rejects (E_ξ is no density model; docs/architecture.md, departure 9).
    Settings under which G_ω fits: the paper's λ_D = 1, K = 1 on unit-scale data expressed on a
    [0, 1] encoding of spread 0.1 (K = 10, λ_L = 0.01) and a slower generator (lr 1e-4); with the
    D.1 defaults G_ω collapses onto a bound in 1-D (measured: mean 0.16 vs 0.51). Training is stochastic
    and depends on the initial draws: with seed 4, G_ω fits under noise_seed 1, 0 and 2 (|Δ mean|, |Δ sd|
    = (0.024, 0.009), (0.021, 0.012), (0.021, 0.007)); over seeds 0-12 with noise_seed 1 it fits for seed
    4 only (others |Δ mean| 0.031-0.177, where the MMD test rejects: not the case under test). The first
    assertion checks that this run is the case under test."""
    rng = np.random.default_rng(0)
    a = rng.beta(2, 2, 200) * 0.6 + 0.2
    b = (rng.random(200) < a).astype(np.float32)
    X = np.column_stack([a, 1 - b, b]).astype(np.float32)
    layout = Layout((Block("a", "continuous", 0, 1), Block("b", "binary", 1, 3)))
    gen = PPEM(
        layout,
        {
            "epsilon": "inf",
            "alpha_lambda": 0.0,
            "protected": ["a"],
            "hidden": 64,
            "latent_dim": 16,
            "noise_seed": 1,
            "seed": 4,
            "batch_size": 64,
            "steps": 2000,
            "lipschitz": 10.0,
            "gp_lambda": 0.01,
            "lr_generator": 1e-4,
            "gate_bootstrap": 500,
            "gate_permutations": 500,
        },
    )
    gen.fit(X, FakeSession(), Budget(math.inf, 1e-5))
    fake = gen.sample(2000, 1)[:, 0]
    assert abs(fake.mean() - a.mean()) < 0.03 and abs(fake.std() - a.std()) < 0.03
    result = gen.alpha_lmdp_gate(X)
    assert not result.passed
    assert result.evidence["mmd"]["p_value"] > 0.05 and result.evidence["ksd"]["p_value"] <= 0.05
    assert len(result.evidence["refused_because"]) == 1 and "MMD" in result.evidence["refused_because"][0]


def test_gate_subsamples_real_rows_to_max_rows(trained, cancer):
    gen, _ = trained
    result = alpha_lmdp_gate(gen.score, cancer[1][:, gen.x_prime], cancer[1][:100, gen.x_prime], 0.05, 100, 100, 150, 0)
    assert result.evidence["rows_used"] == 150 and result.evidence["ksd"]["n"] == 150


@pytest.mark.slow
def test_non_private_ppem_keeps_the_prediction_task(bc_schema, bc_raw):
    """Appendix D.1 settings, ε = inf, 2 protected columns: train-synthetic-test-real logistic regression
    AUROC ≥ 0.9 (measured 0.977 vs 1.0 on real; the paper's Table 1 reports 0.922 on credit cards),
    and the α-LMDP gate passes (the KSD test rejects the real protected marginal)."""
    from pipelines.data.transform import train_holdout_split
    from pipelines.evaluation.utility import tstr_auroc

    train, holdout = train_holdout_split(bc_raw, 0.2, 0)
    enc = Encoder(bc_schema)
    gen = PPEM(enc.layout, {"epsilon": "inf", "protected": ["mean_radius", "mean_texture"], "noise_seed": 0})
    gen.fit(enc.encode(train), FakeSession(), Budget(math.inf, 1e-5))
    synth = enc.decode(gen.sample(len(train), 0))
    auroc = tstr_auroc(train, synth, holdout, bc_schema.columns, bc_schema.target, 0)
    assert auroc["models"]["logistic_regression"]["tstr"] >= 0.9
    assert gen.alpha_lmdp_gate(enc.encode(train)).passed


@pytest.mark.integration
def test_private_training_draws_latents_head_uniforms_and_u_from_the_csprng(monkeypatch):
    """G_ω's and G_υ's latents, G_υ's output-head uniforms (G_ω's numeric x′ heads draw none), in the energy and the
    generator steps, and the interpolation weights u come from the step's CSPRNG."""
    from support.generators import MIXED, Recorded, assert_drawn_from_the_key, fit_keyed, record_inputs

    def draws(key: bytes, torch_seed: int) -> Recorded:
        seen: Recorded = {}
        gen = PPEM(
            MIXED,
            {
                "epsilon": 2.0,
                "steps": 3,
                "energy_steps": 2,
                "batch_size": 16,
                "hidden": 8,
                "latent_dim": 4,
                "protected": ["age", "income"],
                "calibration": {"share": 0.0},
            },
        )
        record_inputs(seen, "G_ω latents", gen.gen_m.first, 0)
        record_inputs(seen, "G_υ latents", gen.gen_c.first, 0)
        record_inputs(seen, "G_υ head uniforms", gen.gen_c.heads, 1)

        def recorded(energy, real, paired_fake, u, *args, **kwargs):
            seen.setdefault("u", []).append(u.clone())
            return marginal_energy_gradient(energy, real, paired_fake, u, *args, **kwargs)

        monkeypatch.setattr(ppem, "marginal_energy_gradient", recorded)
        fit_keyed(monkeypatch, gen, key, torch_seed)
        return seen

    assert_drawn_from_the_key(draws)


@pytest.mark.slow
def test_networks_follow_the_plan_built_in_fit_not_in_plan(tmp_path):
    """Constructed for ε = inf (the paper's BatchNorm generators), planned private: plan() builds nothing,
    fit() rebuilds LayerNorm generators before training, and load() rebuilds the saved kind."""
    from support.generators import MIXED, mixed_data

    def norms(gen: PPEM) -> set[type]:
        return {type(m) for net in (gen.gen_m, gen.gen_c) for m in net.modules()} & {
            torch.nn.BatchNorm1d,
            torch.nn.LayerNorm,
        }

    gen = PPEM(
        MIXED,
        {
            "epsilon": "inf",
            "steps": 2,
            "energy_steps": 2,
            "batch_size": 16,
            "hidden": 8,
            "latent_dim": 4,
            "protected": ["age", "income"],
            "noise_seed": 0,
        },
    )
    networks = gen.networks
    gen.plan(40, Budget(1.0, 1e-5))
    assert gen.networks == networks and norms(gen) == {torch.nn.BatchNorm1d}
    gen.fit(mixed_data(40), FakeSession())
    assert norms(gen) == {torch.nn.LayerNorm}
    gen.save(tmp_path)
    again = PPEM.load(tmp_path)
    assert norms(again) == {torch.nn.LayerNorm}
    np.testing.assert_array_equal(again.sample(50, 2), gen.sample(50, 2))
