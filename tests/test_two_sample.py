"""MMD permutation test: hand-computed statistic, exact small-case p-value, level and power."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import pdist

from pipelines.stats.two_sample import MMDTest, mmd_permutation_test


def mmd2_by_loops(x: np.ndarray, y: np.ndarray, ell: float) -> float:
    """Unbiased MMD²_u (Gretton et al. 2012, eq. 3) written out term by term."""

    def k(a: np.ndarray, b: np.ndarray) -> float:
        return math.exp(-float(np.sum((a - b) ** 2)) / (2 * ell**2))

    n, m = len(x), len(y)
    xx = sum(k(x[i], x[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    yy = sum(k(y[i], y[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    xy = sum(k(a, b) for a in x for b in y) / (n * m)
    return xx + yy - 2 * xy


def test_two_by_two_hand_value_and_exact_permutation_p() -> None:
    """x = {0, 1}, y = {2, 4}, ℓ = 1: MMD²_u = e^−½ + e^−2 − ½(e^−2 + e^−8 + e^−½ + e^−4.5).

    Of the 6 equally likely splits only the observed one and its mirror reach the observed value,
    so the permutation p-value tends to 1/3.
    """
    e = math.exp
    expected = e(-0.5) + e(-2) - 0.5 * (e(-2) + e(-8) + e(-0.5) + e(-4.5))
    result = mmd_permutation_test(np.array([0.0, 1.0]), np.array([2.0, 4.0]), n_permutations=4000, bandwidth=1.0)
    assert result.statistic == pytest.approx(expected, rel=1e-12)
    assert result.p_value == pytest.approx(1 / 3, abs=0.03)  # binomial sd 0.0075


def test_statistic_and_median_bandwidth_match_direct_formulas() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(9, 2)), rng.normal(size=(6, 2)) + 0.3
    result = mmd_permutation_test(torch.as_tensor(x), y, n_permutations=10)
    ell = float(np.median(pdist(np.vstack([x, y]))))
    assert result.bandwidth == pytest.approx(ell, rel=1e-12)
    assert result.statistic == pytest.approx(mmd2_by_loops(x, y, ell), rel=1e-10)
    assert isinstance(result, MMDTest)
    assert result.to_dict() == {
        "statistic": result.statistic,
        "n_x": 9,
        "n_y": 6,
        "bandwidth": result.bandwidth,
        "p_value": result.p_value,
        "n_permutations": 10,
    }


def test_level_under_the_null() -> None:
    rng = np.random.default_rng(1)
    p = np.array(
        [
            mmd_permutation_test(rng.normal(size=(30, 2)), rng.normal(size=(25, 2)), n_permutations=200, seed=r).p_value
            for r in range(200)
        ]
    )
    rate = float(np.mean(p <= 0.05))
    print(f"\nMMD null rejection rate at 0.05 over 200 replications: {rate:.3f}")
    assert 0.01 <= rate <= 0.10  # Binomial(200, 0.05): mean 10, sd 3.1


def test_detects_a_mean_shift_and_is_deterministic() -> None:
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(100, 2)), rng.normal(size=(100, 2)) + 0.5
    result = mmd_permutation_test(x, y, n_permutations=500, seed=3)
    assert result.p_value == 1 / 501
    same = mmd_permutation_test(rng.normal(size=(40, 1)), rng.normal(size=(40, 1)), seed=4)
    assert same.p_value > 0.05
    first, again = (mmd_permutation_test(x[:40], x[40:80], seed=5) for _ in range(2))
    assert first == again


def test_needs_two_points_per_sample() -> None:
    with pytest.raises(ValueError, match="two points"):
        mmd_permutation_test(np.zeros((1, 2)), np.ones((5, 2)))
