"""Analyses of importance-weighted synthetic rows (Ghalebikesabi et al., §3, §4 and appendix B.1).

- weighted Wasserstein-1 and weighted MMD² between weighted synthetic rows and real rows (B.1),
- downstream classifiers fitted with sample weights and scored by AUROC on real rows (§4.2, Table 1),
- the importance-weighted Bayesian logistic regression of eq. (3) by a Laplace approximation, and the
  Mahalanobis distance between its posterior mean and the real-data posterior mean (§4.3, Figure 3);
- `analyses`: all of them on one released table, weighted and unweighted (weights.json's `analysis`).

Weights are normalised inside each analysis (self-normalised importance sampling), so only their ratios
matter. Every function that takes real rows computes something outside the DP guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
from sklearn.base import ClassifierMixin
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.neural_network import MLPClassifier
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

from pipelines.data.schema import Schema
from pipelines.data.transform import Encoder
from pipelines.evaluation.outside_dp import WEIGHTED_ANALYSES
from pipelines.evaluation.transport import pot
from pipelines.evaluation.utility import _labels, capped, featurise
from pipelines.stats.mmd import gaussian_kernel, mmd2_sniw

# §4.2: "benchmark models with default parameters in sklearn" (iteration caps raised so they converge).
WEIGHTED_CLASSIFIERS: dict[str, Callable[[int], ClassifierMixin]] = {
    "logistic_regression": lambda seed: LogisticRegression(max_iter=5000),
    "svm": lambda seed: SVC(random_state=seed),
    "random_forest": lambda seed: RandomForestClassifier(random_state=seed, n_jobs=1),
    "mlp": lambda seed: MLPClassifier(max_iter=500, random_state=seed),
}


def _normalised(weights: np.ndarray | None, n: int) -> np.ndarray:
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"weights must be {n} finite non-negative numbers with a positive sum")
    return w / w.sum()


def _cap(x: np.ndarray, a: np.ndarray, max_rows: int | None, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A uniform random subset of at most `max_rows` rows with their (renormalised) weights."""
    if max_rows is None or len(x) <= max_rows:
        return x, a
    keep = np.sort(rng.choice(len(x), max_rows, replace=False))
    return x[keep], a[keep] / a[keep].sum()


def weighted_wasserstein1(
    synthetic: np.ndarray, weights: np.ndarray | None, real: np.ndarray, max_rows: int | None = 2000, seed: int = 0
) -> float:
    """W₁ between Σ a_i δ_{x_i} (a ∝ w) and the uniform empirical measure of `real`: the optimal-transport
    problem with the Euclidean cost matrix and the weights as the source marginal (appendix B.1),
    solved exactly by POT's network simplex. At most `max_rows` rows per side (seeded subsets)."""
    ot = pot()
    rng = np.random.default_rng(seed)
    x, a = _cap(np.asarray(synthetic, float), _normalised(weights, len(synthetic)), max_rows, rng)
    z, b = _cap(np.asarray(real, float), _normalised(None, len(real)), max_rows, rng)
    return float(ot.emd2(a, b, ot.dist(x, z, metric="euclidean"), numItermax=10_000_000))


def weighted_mmd2(synthetic: np.ndarray, weights: np.ndarray | None, real: np.ndarray, bandwidth: float = 1.0) -> float:
    """Weighted MMD² with the Gaussian kernel ("standard normal kernel": bandwidth 1), appendix B.1.

    With a ∝ w normalised to Σ a = 1: Σ_{i≠j} a_i a_j k(x_i, x_j) / (1 − Σ a_i²)
    + Σ_{i≠j} k(z_i, z_j) / (m(m−1)) − 2 Σ_{i,j} a_i k(x_i, z_j) / m: the self-normalised estimator (the
    Diesendruck thesis' eq. 3.5, `pipelines.stats.mmd.mmd2_sniw`, synthetic rows weighted), in float64 on exact
    distances. For uniform weights this is the unbiased MMD²_u of Gretton et al. (eq. 3); the within-sample term
    drops the diagonal as B.1 does.
    """
    x, z = torch.as_tensor(np.asarray(synthetic, float)), torch.as_tensor(np.asarray(real, float))
    a = torch.as_tensor(_normalised(weights, len(x)))

    def k(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return gaussian_kernel(p, q, (bandwidth,), exact=True)

    return float(mmd2_sniw(k(x, x), k(z, z), k(x, z), a))


def weighted_auroc(
    x: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray | None,
    x_test: np.ndarray,
    y_test: np.ndarray,
    seed: int = 0,
    classifiers: dict | None = None,
) -> dict[str, float | None]:
    """AUROC on (x_test, y_test) of each classifier fitted on (x, y) with `sample_weight` ∝ weights
    (scaled to mean 1, so regularisation strength is as without weights). None where y has one class."""
    w = _normalised(weights, len(x)) * len(x)
    out: dict[str, float | None] = {}
    for name, make in (classifiers or WEIGHTED_CLASSIFIERS).items():
        if np.unique(y[w > 0]).size < 2:
            out[name] = None
            continue
        with threadpool_limits(limits=1):
            model = make(seed).fit(x, y, sample_weight=w)
            score = (
                model.predict_proba(x_test)[:, 1]
                if hasattr(model, "predict_proba")
                else model.decision_function(x_test)
            )
        out[name] = float(roc_auc_score(y_test, score))
    return out


@dataclass(frozen=True)
class LaplacePosterior:
    """N(mean, cov): the Laplace approximation of a (weighted) Bayesian logistic-regression posterior."""

    mean: np.ndarray
    cov: np.ndarray

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.multivariate_normal(self.mean, self.cov, size=n)


def iw_bayes_logistic(
    x: np.ndarray, y: np.ndarray, weights: np.ndarray | None, prior_var: float, iterations: int = 100
) -> LaplacePosterior:
    """π_IW(θ | x) ∝ π(θ) exp(Σ_i w_i log f(y_i | x_i, θ)) (eq. 3), π = N(0, prior_var·I), f the logistic
    likelihood with y ∈ {0, 1}; weights scaled to mean 1 (Σ w = N, the paper's w = p_D/p_G has mean 1
    under p_G). Newton's method to the MAP θ̂, covariance the inverse Hessian of −log π_IW at θ̂."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    w = _normalised(weights, len(x)) * len(x)
    theta = np.zeros(x.shape[1])
    precision = np.eye(x.shape[1]) / prior_var
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-(x @ theta)))
        grad = x.T @ (w * (y - p)) - precision @ theta
        hess = (x * (w * p * (1 - p))[:, None]).T @ x + precision
        step = np.linalg.solve(hess, grad)
        theta = theta + step
        if np.max(np.abs(step)) < 1e-10:
            break
    p = 1 / (1 + np.exp(-(x @ theta)))
    hess = (x * (w * p * (1 - p))[:, None]).T @ x + precision
    return LaplacePosterior(theta, np.linalg.inv(hess))


def mahalanobis(mean: np.ndarray, reference: LaplacePosterior) -> float:
    """√((m − m_ref)ᵀ Σ_ref⁻¹ (m − m_ref)): posterior-mean distance in the reference posterior's metric
    (§4.3, "posterior covariance adjusted distance"; the reference is the real-data posterior)."""
    d = np.asarray(mean, float) - reference.mean
    return float(np.sqrt(d @ np.linalg.solve(reference.cov, d)))


def analyses(
    sch: Schema,
    synth: Callable[[np.ndarray], pd.DataFrame],
    w: np.ndarray,
    train: pd.DataFrame,
    holdout: pd.DataFrame,
    max_rows: int,
    prior_variance: float,
    seed: int,
    real_max_rows: int | None = None,
) -> dict[str, Any]:
    """The paper's Table 1 columns and §4.3's posterior distance for the released rows with weights `w` (rows
    0..len(w)−1 of the synthetic table; `synth(rows)` returns those rows, ascending indices, as a frame), weighted
    and unweighted (outside DP: they read the real rows `train` and `holdout`).

    At most `max_rows` synthetic and holdout rows (seeded subsets): W₁ and MMD² of appendix B.1 against the
    holdout; with a schema target, AUROC on the holdout of classifiers fitted with the weights (§4.2) and the
    Mahalanobis distance of the eq. (3) posterior mean, prior N(0, prior_variance·I), to the real training
    rows' posterior (§4.3), on at most `real_max_rows` holdout and training rows (`utility.capped`, seeded;
    `weights.analysis_real_max_rows`: the cost stops growing with the table)."""
    rng = np.random.default_rng(seed)
    enc = Encoder(sch)
    keep = np.sort(rng.choice(len(w), min(max_rows, len(w)), replace=False))
    rows = synth(keep)  # only the rows measured are read
    xs, xh = enc.encode(rows).astype(float), enc.encode(holdout).astype(float)
    hold = np.sort(rng.choice(len(xh), min(max_rows, len(xh)), replace=False))
    out: dict[str, Any] = {}
    for label, ww in (("weighted", w), ("unweighted", None)):
        sub = None if ww is None else ww[keep]
        out[label] = {
            "wasserstein1": weighted_wasserstein1(xs, sub, xh, max_rows, seed),
            "mmd2": weighted_mmd2(xs, sub, xh[hold]),
        }
    if sch.target is not None:
        col = next(c for c in sch.columns if c.name == sch.target)
        positive = sch.target_positive
        x, y = featurise(rows, sch.columns, sch.target), _labels(rows, col, "synthetic", positive)
        test, real = capped(holdout, real_max_rows, seed), capped(train, real_max_rows, seed)
        x_test, y_test = featurise(test, sch.columns, sch.target), _labels(test, col, "real holdout", positive)
        x_real, y_real = featurise(real, sch.columns, sch.target), _labels(real, col, "real training", positive)
        design = lambda a: np.hstack([np.ones((len(a), 1)), a])  # noqa: E731
        real_post = iw_bayes_logistic(design(x_real), y_real, None, prior_variance)
        for label, ww in (("weighted", w[keep]), ("unweighted", None)):
            if np.unique(y_test).size > 1:
                out[label]["auroc"] = weighted_auroc(x, y, ww, x_test, y_test, seed)
            post = iw_bayes_logistic(design(x), y, ww, prior_variance)
            out[label]["posterior_mahalanobis"] = mahalanobis(post.mean, real_post)
    return {
        **out,
        "rows": {
            "synthetic": len(keep),
            "holdout": len(xh),
            "classifier_holdout": min(len(holdout), real_max_rows or len(holdout)),
            "posterior_training": min(len(train), real_max_rows or len(train)),
        },
        "outside_dp": WEIGHTED_ANALYSES,
    }
