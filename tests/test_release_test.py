"""The DP release test (pipelines/privacy/release_test.py): its weights, threshold, sensitivity, power and audit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipelines.config import Release, section
from pipelines.data.schema import Column
from pipelines.errors import InputError
from pipelines.privacy.audit import epsilon_lower_bound
from pipelines.privacy.noise import NoiseSource
from pipelines.evaluation.attacks.distance import Near, gower_features, nearest, within
from pipelines.privacy.release_test import near_counts, planned_event, release_test, split_weights, threshold

COLUMNS = [
    *(Column(name=f"x{j}", kind="continuous", lower=0.0, upper=1.0) for j in range(4)),
    Column(name="y", kind="categorical", categories=("a", "b", "c")),
]
RADIUS = 0.01
SETTINGS = Release().model_dump()


def table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {**{f"x{j}": rng.uniform(0, 1, n).round(4) for j in range(4)}, "y": rng.choice(["a", "b", "c"], n)}
    )


def rng_of(i: int) -> np.random.Generator:
    return NoiseSource(noise_seed=i).streams(private=True, seed=0).numpy("release_test")


def test_split_weights_are_the_holdout_fraction_in_lowest_terms():
    assert [split_weights(f) for f in (0.2, 0.25, 0.3, 0.5)] == [(1, 4), (1, 3), (3, 7), (1, 1)]
    assert planned_event(0.1, 0.2).sensitivity == 4 and math.isclose(planned_event(0.1, 0.2).epsilon, 0.1)
    assert planned_event(0.5, 0.3).sensitivity == 7 and math.isclose(planned_event(0.5, 0.3).scale, 14.0)


def test_threshold_known_answers_at_its_two_limits():
    # ε large: the noise vanishes, τ = a·n̂·0.05 + Φ⁻¹(0.99)·√(a·b·n̂/(1 − f)) = 22.75 + 2.326348·√2275
    assert threshold(455, 0.2, 1e4, 0.05, 0.99) == pytest.approx(22.75 + 2.3263479 * math.sqrt(2275), abs=0.01)
    # n̂ = 0: the discrete Laplace alone, P(Y > x) = q^(x+1)/(1 + q) at an integer x, q = e^(−1/t), t = 400
    q = math.exp(-1 / 400)
    tau = threshold(0, 0.2, 0.01, 0.05, 0.99)
    assert q ** (math.floor(tau) + 2) / (1 + q) < 0.01 < q ** math.floor(tau) / (1 + q) and 1500 < tau < 1570


def test_threshold_at_confidence_one_half_is_the_excess_allowance_and_settings_are_range_checked():
    assert threshold(455, 0.2, 0.1, 0.05, 0.5) == pytest.approx(22.75, abs=1e-3)  # G + Y is symmetric: median 0
    for key, value in (("test_epsilon", 0.0005), ("test_confidence", 0.4), ("test_excess_max", 1.5)):
        with pytest.raises(InputError, match=rf"'release\.{key}': must be"):
            section("release", {key: value})


def test_fresh_tables_are_refused_at_most_one_minus_confidence_of_the_time():
    """Z drawn from its worst-case null (every row near S: Z = a·M − (a + b)·Binomial(M, f)) plus the discrete
    Laplace, 200,000 times: refused ≈ 1 % at confidence 0.99 (measured 1.00 % at ε = 0.01, 1.02 % at ε = 0.1;
    standard error 0.02 %); the sum-of-variances threshold z·√(σ² + 2t²) refuses 1.84 % at ε = 0.01."""
    rng, m, draws = np.random.default_rng(7), 569, 200_000
    for epsilon, limit in ((0.01, 0.0105), (0.1, 0.0105)):
        t = 4 / epsilon
        noise = rng.geometric(1 - math.exp(-1 / t), draws) - rng.geometric(1 - math.exp(-1 / t), draws)
        z = m - 5 * rng.binomial(m, 0.2, draws) + noise
        tau = threshold(455, 0.2, epsilon, 0.0, 0.99)
        assert (z > tau).mean() <= limit
        if epsilon == 0.01:
            assert (z > 2.3263479 * math.sqrt(2275 + 2 * t * t)).mean() > 0.017


def test_one_record_moves_the_statistic_by_at_most_the_sensitivity():
    """Add/remove one record, anywhere (a copy of a row, a row near S, a far row; train or holdout side):
    |ΔZ| ≤ Δ = 4, and a holdout row near S reaches it (the bound is tight)."""
    train, holdout, synth = table(200, 1), table(50, 2), pd.concat([table(150, 3), table(200, 1).head(40)])
    a, b = split_weights(0.2)

    def z(tr: pd.DataFrame, ho: pd.DataFrame) -> int:
        n_t, n_h = near_counts([tr], [ho], [synth], COLUMNS, RADIUS)
        return a * n_t - b * n_h

    base, moves = z(train, holdout), []
    for i in (0, 5, 39, 40, 199):  # rows copied into S (i < 40) and rows that are not
        row = train.iloc[[i]]
        moves += [
            z(train.drop(train.index[i]), holdout),
            z(pd.concat([train, row]), holdout),
            z(train, pd.concat([holdout, row])),
        ]
    for i in (0, 49):
        moves.append(z(train, holdout.drop(holdout.index[i])))
    assert max(abs(m - base) for m in moves) == 4


WIDE = [Column(name=f"z{j}", kind="continuous", lower=0.0, upper=1.0) for j in range(40)]


@pytest.mark.parametrize(
    "columns, radius",
    [
        (COLUMNS, RADIUS),  # one pattern coordinate + a KD-tree
        ([*COLUMNS, *WIDE[:20]], 1 / 25),  # a mismatch (1/25) at the radius
        ([*COLUMNS, *WIDE], 0.01),
    ],
)  # 45 features: every pair
def test_within_answers_as_every_pair_does(columns, radius):
    """`within` (the release test's count) against the all-pairs nearest distance it replaces, on rows at the radius
    exactly, just inside and just outside it, copies, and rows that differ only in the category."""
    rng = np.random.default_rng(3)
    names = [c.name for c in columns]
    pool = pd.DataFrame({n: rng.uniform(0, 1, 300).round(3) for n in names if n != "y"}).assign(
        y=rng.choice(["a", "b", "c"], 300)
    )[names]
    step = radius * len(columns)  # a numeric difference of `step` is a Gower distance `radius`
    near = pool.iloc[:60].copy()
    near.loc[near.index[:20], "x0"] = (near["x0"].iloc[:20] + step * np.array([1.0, 0.999, 1.001, 0.5] * 5)).clip(0, 1)
    near.loc[near.index[20:40], "y"] = near["y"].iloc[20:40].map({"a": "b", "b": "c", "c": "a"})
    far = pool.iloc[60:120].assign(**{f"x{j}": (lambda f, j=j: (f[f"x{j}"] + 0.5) % 1) for j in range(4)})
    targets = pd.concat([near, far], ignore_index=True)
    t, s_ = gower_features(targets, columns), gower_features(pool, columns)
    expected = nearest(t, s_)[0][:, 0] <= radius + 1e-12
    assert 20 < expected.sum() < len(targets) - 20
    np.testing.assert_array_equal(within(t, s_, radius + 1e-12, columns), expected)
    in_parts = Near((s_[:100], s_[100:250], s_[250:]), radius + 1e-12, columns)  # the pool given in parts
    np.testing.assert_array_equal(np.concatenate([in_parts.within(t[:50]), in_parts.within(t[50:])]), expected)
    if 1 / len(columns) > radius:  # by pattern: a target whose pattern the pool lacks
        no_c = Near([s_[pool["y"].to_numpy() != "c"]], radius + 1e-12, columns)
        c_rows = targets["y"].to_numpy() == "c"
        assert c_rows.any() and not no_c.within(t[c_rows]).any()


def test_a_table_that_copies_its_training_rows_is_refused_and_a_fresh_one_passes():
    train, holdout = table(455, 10), table(114, 11)
    for synth, expected in ((train.sample(frac=1.0, random_state=0), False), (table(455, 12), True)):
        counts = near_counts([train], [holdout], [synth], COLUMNS, RADIUS)
        bits = [release_test(counts, 455, 0.2, SETTINGS, rng_of(i)).passed for i in range(50)]
        assert bits == [expected] * 50, (counts, sum(bits))
    copied = near_counts([train], [holdout], [train], COLUMNS, RADIUS)
    assert copied[0] == 455 and copied[1] < 10
    parts = lambda f, *cuts: [f.iloc[a:b] for a, b in zip((0, *cuts), (*cuts, len(f)))]  # noqa: E731
    assert near_counts(parts(train, 100, 300), parts(holdout, 57), parts(train, 1, 200), COLUMNS, RADIUS) == copied


@pytest.mark.slow
def test_audit_release_test_on_its_code_path():
    """Clopper-Pearson lower bound of ε from the noisy statistic on D and D' = D + one holdout row near S (the
    worst case, ΔZ = −4): below the claimed ε = 1, above it with half the noise (test_epsilon 2, the same
    claim)."""
    train, holdout, synth = table(60, 20), table(15, 21), table(60, 22)
    neighbour = pd.concat([holdout, synth.iloc[[0]]])
    settings = {**SETTINGS, "test_epsilon": 1.0}
    counts = [near_counts([train], [h], [synth], COLUMNS, RADIUS) for h in (holdout, neighbour)]
    assert counts[1][1] == counts[0][1] + 1

    def scores(s: dict, c: tuple[int, int], offset: int, runs: int) -> np.ndarray:
        return np.array([release_test(c, 60, 0.2, s, rng_of(offset + i)).noisy_statistic for i in range(runs)], float)

    at_claim = epsilon_lower_bound(scores(settings, counts[0], 0, 1000), scores(settings, counts[1], 10**6, 1000), 0.0)
    half = {**settings, "test_epsilon": 2.0}
    at_half = epsilon_lower_bound(
        scores(half, counts[0], 2 * 10**6, 2000), scores(half, counts[1], 3 * 10**6, 2000), 0.0
    )
    assert at_claim < 1.0 < at_half, (at_claim, at_half)
