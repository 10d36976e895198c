"""Weighted analyses (pipelines/evaluation/weighted.py) against closed forms and the paper's §4.3 example."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.linear_model import LogisticRegression

from pipelines.evaluation import weighted
from pipelines.stats.two_sample import mmd_permutation_test
from pipelines.weights.discriminator import critic_log_weights


def test_weighted_wasserstein1_closed_form():
    """Synthetic {0, 1} weighted 3:1 against real {0, 0, 0, 1}: W₁ = 0; unweighted: |1/2 − 1/4| = 1/4."""
    syn, real = np.array([[0.0], [1.0]]), np.array([[0.0], [0.0], [0.0], [1.0]])
    assert weighted.weighted_wasserstein1(syn, np.array([3.0, 1.0]), real) == pytest.approx(0.0, abs=1e-12)
    assert weighted.weighted_wasserstein1(syn, None, real) == pytest.approx(0.25)


def test_weighted_mmd_with_uniform_weights_is_the_unbiased_mmd():
    rng = np.random.default_rng(0)
    x, z = rng.normal(size=(40, 3)), rng.normal(0.5, 1, size=(50, 3))
    reference = mmd_permutation_test(x, z, n_permutations=1, bandwidth=1.0).statistic
    assert weighted.weighted_mmd2(x, None, z) == pytest.approx(reference, rel=1e-9)
    assert weighted.weighted_mmd2(x, np.full(40, 7.0), z) == pytest.approx(reference, rel=1e-9)


@pytest.mark.integration
def test_true_weights_remove_the_shift():
    """p_G = N(0, 1), p_D = N(1, 1): w = p_D/p_G; weighted distances fall to the noise floor."""
    rng = np.random.default_rng(1)
    syn, real = rng.normal(0, 1, (1500, 1)), rng.normal(1, 1, (1500, 1))
    w = np.exp(syn[:, 0] - 0.5)
    assert weighted.weighted_wasserstein1(syn, w, real) < 0.3 * weighted.weighted_wasserstein1(syn, None, real)
    assert weighted.weighted_mmd2(syn, w, real) < 0.2 * weighted.weighted_mmd2(syn, None, real)


def test_integer_weights_equal_duplicated_rows_for_logistic_regression():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(60, 2)), rng.integers(0, 2, 60)
    x_test, y_test = rng.normal(size=(80, 2)), rng.integers(0, 2, 80)
    w = rng.integers(1, 4, 60).astype(float)
    lr = {"logistic_regression": weighted.WEIGHTED_CLASSIFIERS["logistic_regression"]}
    with_weights = weighted.weighted_auroc(x, y, w, x_test, y_test, classifiers=lr)
    dup = weighted.weighted_auroc(
        np.repeat(x, w.astype(int), 0), np.repeat(y, w.astype(int)), None, x_test, y_test, classifiers=lr
    )
    # mean-one scaling keeps the regularisation per unit of weight: weights w/mean(w) on 60 rows equal
    # the duplicated table (Σw rows) only up to C; AUROC of the near-identical fits agrees closely
    assert with_weights["logistic_regression"] == pytest.approx(dup["logistic_regression"], abs=0.02)


def test_laplace_posterior_map_matches_penalised_logistic_regression():
    rng = np.random.default_rng(3)
    x = np.hstack([np.ones((300, 1)), rng.normal(size=(300, 2))])
    y = (rng.uniform(size=300) < 1 / (1 + np.exp(-(x @ [0.5, 1.0, -1.0])))).astype(int)
    post = weighted.iw_bayes_logistic(x, y, None, prior_var=10.0)
    ref = LogisticRegression(C=10.0, fit_intercept=False, tol=1e-12, max_iter=10_000).fit(x, y).coef_[0]
    assert post.mean == pytest.approx(ref, abs=1e-5)
    assert np.all(np.linalg.eigvalsh(post.cov) > 0)
    assert weighted.mahalanobis(post.mean, post) == 0.0


def section_4_3(gamma: float, n: int, seed: int) -> tuple[float, float]:
    """§4.3: p_D = N((−1.25, 1.25), [[1, .5], [.5, 1]]), p_G = N((2, −2.5), [[4, .2], [.2, 4]]), labels
    σ(θᵀ[1, x]) with θ_D = (1.5, 1, 2.5), θ_G = (−1.5, 1, −2.5); synthetic from γ p_G + (1 − γ) p_D.
    Returns (Mahalanobis distance to the real posterior mean) with true weights and without."""
    rng = np.random.default_rng(seed)
    d = multivariate_normal([-1.25, 1.25], [[1, 0.5], [0.5, 1]])
    g = multivariate_normal([2, -2.5], [[4, 0.2], [0.2, 4]])
    th_d, th_g = np.array([1.5, 1.0, 2.5]), np.array([-1.5, 1.0, -2.5])

    def draw(from_g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = np.where(from_g[:, None], g.rvs(len(from_g), random_state=rng), d.rvs(len(from_g), random_state=rng))
        design = np.hstack([np.ones((len(x), 1)), x])
        theta = np.where(from_g[:, None], th_g, th_d)
        y = (rng.uniform(size=len(x)) < 1 / (1 + np.exp(-np.sum(design * theta, 1)))).astype(int)
        return design, y

    x_real, y_real = draw(np.zeros(n, bool))
    x_syn, y_syn = draw(rng.uniform(size=n) < gamma)

    def lik(x, y, th):
        p = 1 / (1 + np.exp(-(x @ th)))
        return np.where(y == 1, p, 1 - p)

    p_d = d.pdf(x_syn[:, 1:]) * lik(x_syn, y_syn, th_d)
    p_syn = gamma * g.pdf(x_syn[:, 1:]) * lik(x_syn, y_syn, th_g) + (1 - gamma) * p_d
    real = weighted.iw_bayes_logistic(x_real, y_real, None, 10.0)
    iw = weighted.iw_bayes_logistic(x_syn, y_syn, p_d / p_syn, 10.0)
    plain = weighted.iw_bayes_logistic(x_syn, y_syn, None, 10.0)
    return weighted.mahalanobis(iw.mean, real), weighted.mahalanobis(plain.mean, real)


def test_importance_weighted_posterior_targets_the_real_posterior():
    """Two independent real-data posteriors are √(2χ²₃) ≈ 2.4 apart in this metric; IW doubles the variance
    here (ESS ≈ n/2), so the IW distance stays at that noise floor while the unweighted one is the bias."""
    with_w, without = section_4_3(gamma=0.5, n=4000, seed=0)
    assert with_w < 7 and without > 4 * with_w


def test_critic_mapping_is_self_normalised_exp():
    lw = critic_log_weights(np.array([0.0, np.log(3.0)]), temperature=1.0)
    assert np.exp(lw) == pytest.approx([0.5, 1.5])
