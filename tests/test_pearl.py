"""PEARL: the two releases (sensitivity formulas, worst-case pairs; their empirical audits through fit are in
tests/audit_cases_release.py), the plan and its
budget split, Lemma 1's importance weights against a closed form, the §4 two-sample demonstration, and
the generator contract (reserve before read, layout, persistence)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats
from support.generators import MIXED, GuardedData, assert_fit_rejects_bad_input, mixed_data
from support.ledger import FakeSession

from pipelines.data.layout import Block, Layout
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.registry import make_generator
from pipelines.generators.pearl import PEARL, FrequencyCritic, PEARLPlan, weighted_cfd
from pipelines.privacy.accountant import epsilon_pld
from pipelines.generators.mechanisms.embeddings import (
    capped_distance_sum,
    class_embeddings,
    distance_event,
    distance_sum_sensitivity,
    embedding_event,
    embedding_sums,
    encoded_diameter,
    mean_distance,
    pairwise_distance_sum,
    release_embedding,
    release_mean_distance,
)
from pipelines.privacy.events import GaussianEvent, NonPrivateEvent

from benchmarks.cf_two_sample import rejection_rates  # the §4 demonstration

DELTA = 1e-5
FAST = {
    "frequencies": 16,
    "steps": 20,
    "batch_size": 64,
    "hidden": [16, 16],
    "latent_dim": 4,
    "noise_seed": 0,
    "calibration": {"share": 0.0},
}  # the method alone (calibration: tests/test_calibration.py)
NUMERIC = Layout((Block("a", "continuous", 0, 1), Block("b", "integer", 1, 2)))  # no target: unconditional


def freqs(k: int, d: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(k, d, generator=torch.Generator().manual_seed(seed))


def fitted(params: dict, epsilon: float = 1.0, n: int = 200, layout: Layout = MIXED) -> PEARL:
    gen = PEARL(layout, {**FAST, **params})
    data = mixed_data(n) if layout is MIXED else np.random.default_rng(0).random((n, layout.width)).astype(np.float32)
    gen.fit(data, FakeSession(), Budget(epsilon, DELTA))
    return gen


# -- the embedding release (eq. 6) -------------------------------------------------------------------


def test_embedding_sums_closed_form():
    """x = 0: cos = 1, sin = 0 at every frequency. x = π/2 with ω = (1): cos = 0, sin = 1."""
    k, x = 5, torch.zeros(4, 3)
    labels = torch.tensor([0, 1, 1, 1])
    s = embedding_sums(x, labels, 2, freqs(k, 3))
    expected = np.zeros((2, 2 * k + 1))
    expected[:, 0] = [math.sqrt(k), 3 * math.sqrt(k)]
    expected[:, 1 : k + 1] = [[1], [3]]
    np.testing.assert_allclose(s, expected, atol=1e-12)
    one = embedding_sums(torch.full((2, 1), math.pi / 2), None, 0, torch.ones(1, 1))
    np.testing.assert_allclose(one, [[0.0, 2.0]], atol=1e-6)


@pytest.mark.parametrize("conditional", [True, False])
def test_embedding_sensitivity_is_attained_by_every_added_record(conditional):
    """‖S(D ∪ {x}) − S(D)‖₂ = √(2k) (class-conditional) or √k, whatever x and the frequencies."""
    k, rng = 40, np.random.default_rng(1)
    event = embedding_event(k, conditional, 100, 1.0)
    assert event.l2_sensitivity == pytest.approx(math.sqrt(2 * k) if conditional else math.sqrt(k))
    f = freqs(k, 6, seed=2) * 3
    x = torch.as_tensor(rng.random((100, 6)))
    y = torch.as_tensor(rng.integers(0, 3, 100)) if conditional else None
    for extra in (torch.zeros(1, 6), torch.ones(1, 6), torch.as_tensor(rng.random((1, 6)))):
        xs = torch.cat([x, extra])
        ys = torch.cat([y, torch.tensor([2])]) if conditional else None
        diff = embedding_sums(xs, ys, 3, f.double()) - embedding_sums(x, y, 3, f.double())
        assert np.linalg.norm(diff) == pytest.approx(event.l2_sensitivity, rel=1e-9)
        if conditional:  # only class 2's row moves, its count by exactly one (weighted √k)
            assert np.abs(diff[:2]).max() < 1e-9 and diff[2, 0] == pytest.approx(math.sqrt(k))


def test_class_embeddings_post_processing():
    k = 4
    sums = np.array(
        [
            [math.sqrt(k) * 3, *[1.5] * (2 * k)],
            [math.sqrt(k) * 1, *[-0.5] * (2 * k)],
            [-math.sqrt(k) * 2, *[0.3] * (2 * k)],
        ]
    )
    p, phi = class_embeddings(sums, 4, conditional=True)
    np.testing.assert_allclose(p, [0.75, 0.25, 0.0])  # negative noisy count clipped to 0
    np.testing.assert_allclose(phi[0], 0.5)
    np.testing.assert_allclose(phi[1], -0.5)
    np.testing.assert_allclose(phi[2], 0.3)  # count floored at 1
    p, phi = class_embeddings(np.full((1, 2 * k), 8.0), 4, conditional=False)
    np.testing.assert_allclose(p, [1.0])
    np.testing.assert_allclose(phi, 2.0)  # ÷ public n


def test_releases_add_the_planned_noise():
    """The release wrappers add N(0, (zΔ₂)²) per coordinate and return the planned events."""
    rng = np.random.default_rng(13)
    x, y = torch.as_tensor(rng.random((50, 4))), torch.as_tensor(rng.integers(0, 2, 50))
    f = freqs(500, 4, seed=14).double()
    noisy, event = release_embedding(x, y, 2, f, 3.0, rng)
    assert event == embedding_event(500, True, 50, 3.0) and event.sigma == pytest.approx(3.0 * math.sqrt(1000))
    noise = (noisy - embedding_sums(x, y, 2, f)).ravel() / event.sigma
    assert stats.kstest(noise, "norm").pvalue > 1e-3
    ell, aux = release_mean_distance(x, 2.0, 0.5, rng)
    assert aux == distance_event(50, 2.0, 0.5) and 0.02 <= ell <= 2.0


# -- the auxiliary release: mean pairwise distance (appendix D) ------------------------------------------


def test_pairwise_distance_closed_forms():
    x = torch.tensor([[0.0], [0.5], [1.0]])
    assert pairwise_distance_sum(x, 1.0) == pytest.approx(2.0)  # 0.5 + 1 + 0.5
    assert mean_distance(2.0, 3, 1.0) == pytest.approx(2 / 3)
    onehots = torch.eye(3)  # three categories: √2 apart
    assert pairwise_distance_sum(onehots, math.sqrt(2), chunk=2) == pytest.approx(3 * math.sqrt(2))
    assert pairwise_distance_sum(torch.tensor([[0.0], [5.0]]), 1.0) == pytest.approx(1.0)  # clipped at D
    assert mean_distance(-3.0, 3, 2.0) == pytest.approx(0.02)  # floored at 1% of D
    # MIXED without its target: 2 numeric + 1 binary + 1 categorical block → D = √(1 + 1 + 1 + 2)
    assert encoded_diameter(MIXED.blocks[:4]) == pytest.approx(math.sqrt(5))


def test_distance_sensitivity_holds_for_any_row_count():
    """Δ₂ = (n̂ − 1)D for the pair sum over the n̂ rows of smallest hash priority, whatever the actual row count N:
    brute force over random add/remove-one pairs with N above, at and below n̂ never exceeds it and comes within
    3 % of it for N ≥ n̂ − 1 (of N·D below; rows near one corner, the record near the opposite one); the sum over
    all N rows would move by
    ≈ N·D. The selection depends on the rows' values only (a permutation changes nothing), and the plan names Δ₂."""
    rng = np.random.default_rng(5)
    n_hat, diameter = 8, math.sqrt(2)
    bound = distance_sum_sensitivity(n_hat, diameter)
    assert bound == pytest.approx((n_hat - 1) * diameter)
    for n_rows in (5, n_hat - 1, n_hat, n_hat + 1, 12):
        worst = 0.0
        for _ in range(40):
            x = torch.as_tensor(rng.uniform(0, 0.01, (n_rows, 2)), dtype=torch.float32)
            record = torch.as_tensor(1 - rng.uniform(0, 0.01, (1, 2)), dtype=torch.float32)
            for d, d_prime in ((x, torch.cat([x, record])), (x[1:], x)):  # add a record; remove one
                change = abs(capped_distance_sum(d_prime, n_hat, diameter) - capped_distance_sum(d, n_hat, diameter))
                assert change <= bound * (1 + 1e-6), f"N = {n_rows}: |ΔT| = {change} > (n̂ − 1)D = {bound}"
                worst = max(worst, change / bound)
        attainable = min(n_rows, n_hat - 1) / (n_hat - 1)  # N < n̂ − 1 rows: adding one adds N terms ≤ D
        assert worst > 0.97 * attainable, f"N = {n_rows}: the worst pair reached only {worst:.3f} of (n̂ − 1)D"
        perm = torch.as_tensor(rng.permutation(n_rows))
        assert capped_distance_sum(x[perm], n_hat, diameter) == pytest.approx(capped_distance_sum(x, n_hat, diameter))
    # the uncapped sum over all 12 + 1 rows moves by ≈ 12·D, beyond the bound
    assert pairwise_distance_sum(torch.cat([x, record]), diameter) - pairwise_distance_sum(x, diameter) > 1.5 * bound
    gen = PEARL(MIXED, FAST)
    aux, _ = gen.plan(50, Budget(1.0, DELTA)).events
    assert aux.l2_sensitivity == pytest.approx(49 * encoded_diameter(MIXED.blocks[:4]))


# -- plan and budget split ---------------------------------------------------------------------------


@pytest.mark.parametrize("share", [0.5, 0.2])
def test_plan_splits_the_budget_and_composes_to_the_target(share):
    budget = Budget(1.0, DELTA)
    gen = PEARL(MIXED, {**FAST, "aux_share": share})
    aux, emb = gen.plan(1000, budget).events
    assert gen.plan(1000, budget) == PEARL(MIXED, {**FAST, "aux_share": share, "seed": 9}).plan(1000, budget)
    assert aux.l2_sensitivity == pytest.approx(999 * math.sqrt(5))  # (n̂ − 1)D
    assert emb.l2_sensitivity == pytest.approx(math.sqrt(2 * 16))
    # multipliers z/√s and z/√(1−s): their composition is one Gaussian of multiplier z
    z = (aux.noise_multiplier**-2 + emb.noise_multiplier**-2) ** -0.5
    assert aux.noise_multiplier**-2 / z**-2 == pytest.approx(share)
    assert 0.99 <= epsilon_pld([aux, emb], DELTA) <= 1.0
    assert epsilon_pld([aux, emb], DELTA) == pytest.approx(epsilon_pld([GaussianEvent(z, 1.0)], DELTA), abs=1e-6)


def test_plan_non_private_and_bad_parameters():
    gen = PEARL(MIXED, FAST)
    plan = gen.plan(10, Budget(math.inf, DELTA))
    assert plan.events == (NonPrivateEvent("epsilon: inf"),) and not plan.private
    assert plan.distance_noise_multiplier == plan.embedding_noise_multiplier == 0.0
    with pytest.raises(ValueError, match="at least 2 training rows"):
        gen.plan(1, Budget(1.0, DELTA))
    with pytest.raises(ValueError, match="aux_share"):
        PEARL(MIXED, {"aux_share": 1.0})
    with pytest.raises(ValueError, match="critic_min_ess"):
        PEARL(MIXED, {"critic_min_ess": 2})
    with pytest.raises(ValueError, match="unknown pearl parameters"):
        PEARL(MIXED, {"epochs": 3})
    assert isinstance(make_generator("pearl", MIXED, FAST, "cpu"), PrivateGenerator)


# -- Lemma 1 and the critic ----------------------------------------------------------------------------


def test_importance_weights_are_uniform_at_the_proposal_and_estimate_the_cfd():
    """1-D P = N(0, 1), Q = N(μ, 1): |φ_P(ω) − φ_Q(ω)|² = 2e^{−ω²}(1 − cos μω). Frequencies from the
    proposal N(0, 1); the critic's N(0, s²) re-weights them, and Σ_j w_j |…|² must approach
    E_{ω~N(0,s²)} = 2(1 − exp(−μ²s² / 2(1 + 2s²))) / √(1 + 2s²)  (s² < 2: finite weight variance)."""
    critic = FrequencyCritic(freqs(200_000, 1, seed=11))
    critic.reset(1.0)
    w = critic.weights()
    np.testing.assert_allclose(w.detach().numpy(), 1 / 200_000, rtol=1e-5)
    mu = 1.5
    omega = critic.frequencies[:, 0].double()
    gap = 2 * torch.exp(-(omega**2)) * (1 - torch.cos(mu * omega))
    for s in (0.5, 1.3):
        with torch.no_grad():
            critic.log_scale.fill_(math.log(s))
            estimate = float((critic.weights().double() * gap).sum())
        exact = 2 * (1 - math.exp(-(mu**2) * s**2 / (2 * (1 + 2 * s**2)))) / math.sqrt(1 + 2 * s**2)
        assert estimate == pytest.approx(exact, rel=0.01)


def test_projection_keeps_the_critic_in_its_set():
    """β far from the proposal collapses the weights (ESS ≪ k); `project` pulls β back along the segment
    to the proposal until ESS = min_ess·k (to bisection accuracy), and leaves a feasible β alone."""
    critic = FrequencyCritic(freqs(1000, 50, seed=12))
    critic.reset(2.0)
    start = critic.log_scale.detach().clone()
    with torch.no_grad():
        critic.log_scale.add_(torch.linspace(-1.0, 1.0, 50))
    assert critic.effective_sample_size() < 10
    critic.project(0.5)
    assert 500 <= critic.effective_sample_size() < 501
    moved = (critic.log_scale.detach() - start) / torch.linspace(-1.0, 1.0, 50)
    np.testing.assert_allclose(moved.numpy(), moved[0].item(), rtol=1e-4)  # same direction, shorter
    feasible = critic.log_scale.detach().clone()
    critic.project(0.4)
    assert torch.equal(critic.log_scale.detach(), feasible)


def test_weighted_cfd_per_frequency():
    target = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])  # k = 2: [cos₁, cos₂, sin₁, sin₂]
    generated = torch.zeros(2, 4)
    np.testing.assert_allclose(weighted_cfd(target, generated, torch.tensor([0.25, 0.75])).numpy(), [0.25, 0.25])


@pytest.mark.slow
def test_reweighting_never_loses_power_figure_2_reduced():
    """§4 / App. C at reduced size (n = 300, 20 trials, 100 permutations, 8 frequency draws): the
    re-weighted ("optimized") set rejects at least as often as the unoptimized one at every dimension and
    clearly more in high dimension, where the normal set has lost its power; our critic's weights (fitted
    on a pilot sample) never lose power either."""
    rates = {}
    for d in (2, 10, 20):
        runs = [rejection_rates(d, n=300, trials=20, permutations=100, seed=s) for s in range(8)]
        rates[d] = {k: np.mean([r[k] for r in runs]) for k in runs[0]}
    for d, r in rates.items():
        assert r["optimized"] >= r["unoptimized"] and r["critic"] >= r["unoptimized"], (d, r)
    for d in (10, 20):
        assert rates[d]["optimized"] - rates[d]["unoptimized"] >= 0.25, rates
    assert rates[2]["normal"] >= 0.9 and rates[20]["normal"] <= 0.15, rates


# -- the generator contract ----------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("pre_plan", [True, False])
def test_fit_reserves_before_reading_and_records_the_plan(pre_plan):
    session = FakeSession()
    gen = PEARL(MIXED, FAST)
    data = GuardedData(mixed_data(80), session)
    if pre_plan:
        planned = list(gen.plan(80, Budget(2.0, DELTA)).events)
        gen.fit(data, session)
    else:
        gen.fit(data, session, Budget(2.0, DELTA))
        planned = session.reserved
    assert session.calls == ["reserve", "read", "record"]
    assert session.reserved == planned == session.recorded
    assert [type(e) for e in planned] == [GaussianEvent, GaussianEvent]


def test_fit_rejects_bad_input_with_the_column_and_the_fix():
    assert_fit_rejects_bad_input(PEARL(MIXED, FAST))


@pytest.mark.integration
def test_sample_respects_layout_and_the_released_class_proportions():
    gen = fitted({"steps": 30}, epsilon=math.inf, n=400)
    x = gen.sample(2000, 3)
    assert x.dtype == np.float32 and x.shape == (2000, MIXED.width)
    assert np.all((x >= 0) & (x <= 1))
    np.testing.assert_array_equal(x[:, 3:6].sum(1), 1.0)
    assert set(np.unique(x[:, [2, 6]])) <= {0.0, 1.0}
    true_rate = mixed_data(400)[:, 6].mean()
    assert gen.embedding.proportions[1].item() == pytest.approx(true_rate, abs=1e-6)  # ε = inf: exact
    assert x[:, 6].mean() == pytest.approx(true_rate, abs=0.04)  # 4.5 binomial sd
    assert gen.sample(0, 1).shape == (0, MIXED.width)
    u = fitted({}, layout=NUMERIC).sample(50, 0)  # no target
    assert u.shape == (50, 2) and np.all((u >= 0) & (u <= 1))


@pytest.mark.parametrize("critic, steps", [(False, 400), (True, 1200)])
@pytest.mark.slow
def test_training_fits_the_marginals_without_noise(critic, steps):
    """ε = inf on MIXED (uniform, Beta(2, 5), Bernoulli, 3 categories, Bernoulli target): every column
    mean of the samples within 0.04 of the data's (measured: ≤ 0.03)."""
    data = mixed_data(2000, seed=1)
    gen = PEARL(
        MIXED, {**FAST, "frequencies": 200, "steps": steps, "batch_size": 512, "hidden": [64, 64], "critic": critic}
    )
    gen.fit(data, FakeSession(), Budget(math.inf, DELTA))
    np.testing.assert_allclose(gen.sample(4000, 2).mean(0), data.mean(0), atol=0.04)


def test_critic_ablation_keeps_uniform_weights_and_critic_moves_them():
    off = fitted({"critic": False})
    on = fitted({"critic": True})
    np.testing.assert_allclose(off.critic.weights().detach().numpy(), 1 / 16, rtol=1e-5)
    assert not np.allclose(on.critic.weights().detach().numpy(), 1 / 16, rtol=1e-3)


def test_noise_is_secret_by_default_and_seeded_only_on_request():
    a, b = fitted({"noise_seed": None}), fitted({"noise_seed": None})
    assert not torch.equal(a.embedding.embeddings, b.embedding.embeddings)
    c, d = fitted({"noise_seed": 4}), fitted({"noise_seed": 4})
    assert torch.equal(c.embedding.embeddings, d.embedding.embeddings)
    np.testing.assert_array_equal(c.sample(100, 1), d.sample(100, 1))


@pytest.mark.parametrize("epsilon", [1.0, math.inf])
def test_save_load_round_trip(tmp_path, epsilon):
    gen = fitted({"seed": 3}, epsilon=epsilon)
    gen.save(tmp_path)
    meta = json.loads(
        (tmp_path / "pearl.json").read_text(), parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}")
    )
    assert meta["generator"] == "pearl"
    loaded = PEARL.load(tmp_path)
    assert isinstance(loaded.privacy, PEARLPlan) and loaded.privacy.frequencies == FAST["frequencies"]
    np.testing.assert_array_equal(gen.sample(300, 9), loaded.sample(300, 9))
    assert loaded.privacy == gen.privacy and loaded.params == gen.params and loaded.layout == gen.layout
    assert torch.equal(loaded.critic.frequencies, gen.critic.frequencies)
    assert loaded.length_scale == gen.length_scale != 1.0  # the released ℓ̂ travels too
