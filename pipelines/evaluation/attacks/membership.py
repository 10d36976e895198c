"""Membership inference against a synthetic table: is a real record one of the generator's training rows?

Two attackers score each target x; higher means "member":
- distance to closest record (DCR): s(x) = −min_{y∈S} d(x, y), d the Gower distance;
- DOMIAS (van Breugel et al. 2023, eq. 2): s(x) = log p̂_S(x) − log p̂_ref(x), the density ratio of the
  synthetic data to a reference sample of the population (real rows the generator never saw), both Gaussian
  kernel density estimates. Overfitting shows as local over-density of S at members relative to the population.

Targets: m training rows (members) and m holdout rows (non-members); the rest of the holdout is the reference
sample, disjoint from the non-member targets. Reported: ROC AUC with a percentile bootstrap interval (members
and non-members resampled separately) and the TPR at 1 % FPR (Carlini et al. 2022's low-FPR regime).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy.stats import rankdata
from sklearn.metrics import roc_curve

from pipelines.evaluation.attacks.distance import gower_features, nearest
from pipelines.evaluation.marginals import row_sample
from pipelines.evaluation.utility import featurise

LOW_FPR = 0.01


@dataclass(frozen=True)
class TargetSplit:
    """Members (training rows), non-members and a disjoint reference sample (both holdout rows)."""

    members: pd.DataFrame
    non_members: pd.DataFrame
    reference: pd.DataFrame


def split_targets(
    train: pd.DataFrame,
    holdout: pd.DataFrame,
    max_rows: int | None,
    rng: np.random.Generator,
    reference_max_rows: int | None = None,
) -> TargetSplit:
    """m = min(|train|, ⌊|holdout|/2⌋, max_rows) seeded members and non-members; the remaining holdout rows
    (at least m) are the reference sample, a seeded sample of `reference_max_rows` of them above it (drawn last, so
    a holdout under the cap splits as without it)."""
    m = min(len(train), len(holdout) // 2, max_rows or len(train))
    if m < 2:
        raise ValueError(f"membership attacks need at least 4 holdout rows, got {len(holdout)}")
    order = rng.permutation(len(holdout))
    members = train.iloc[np.sort(rng.choice(len(train), m, replace=False))]
    rest = np.sort(order[m:])
    return TargetSplit(
        members, holdout.iloc[np.sort(order[:m])], holdout.iloc[rest[row_sample(len(rest), reference_max_rows, rng)]]
    )


def auc(member_scores: np.ndarray, non_member_scores: np.ndarray) -> float:
    """Mann-Whitney form of the ROC AUC: (Σ ranks of members − m(m+1)/2) / (m n), ties at mid-rank."""
    m, n = len(member_scores), len(non_member_scores)
    ranks = rankdata(np.concatenate([member_scores, non_member_scores]))
    return float((ranks[:m].sum() - m * (m + 1) / 2) / (m * n))


def attack_roc(
    member_scores: np.ndarray, non_member_scores: np.ndarray, n_bootstrap: int, rng: np.random.Generator
) -> dict:
    """AUC = P(s(member) > s(non-member)) (+½ ties) with its 95 % percentile bootstrap interval and bootstrap
    standard error (check@gen's membership gate uses AUC − z·se at its family-wise level), and the largest
    TPR whose FPR is at most 1 %."""
    y = np.repeat([1, 0], [len(member_scores), len(non_member_scores)])
    scores = np.concatenate([member_scores, non_member_scores])
    fpr, tpr, _ = roc_curve(y, scores)
    boot = [
        auc(rng.choice(member_scores, len(member_scores)), rng.choice(non_member_scores, len(non_member_scores)))
        for _ in range(n_bootstrap)
    ]
    return {
        "auc": auc(member_scores, non_member_scores),
        "auc_ci95": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
        "auc_se": float(np.std(boot, ddof=1)),
        "tpr_at_1pct_fpr": float(tpr[fpr <= LOW_FPR].max()),
        "roc": {"fpr": fpr.round(4).tolist(), "tpr": tpr.round(4).tolist()},
    }


def dcr_scores(targets: np.ndarray, synth: np.ndarray) -> np.ndarray:
    """−(Gower distance to the closest synthetic row); rows are ``gower_features``."""
    return -nearest(targets, synth)[0][:, 0]


KDE_CHUNK = 256  # points per block of squared distances (256 × 50,000 pool rows: 100 MB)


def kde_log_density(sample: np.ndarray, points: np.ndarray) -> np.ndarray:
    """log p̂(points) of an isotropic Gaussian KDE fitted to `sample`, bandwidth by Scott's rule
    h = σ̄ · n^(−1/(d+4)), σ̄ the mean per-feature standard deviation of `sample` (floor 10⁻³):

        log p̂(x) = logsumexp_j(−‖x − y_j‖² / 2h²) − log n − (d/2)·log(2πh²),

    exactly, by blocks of squared distances ‖x‖² + ‖y‖² − 2x·y (a matrix product). scikit-learn's
    `KernelDensity` gives the same numbers (to 1e-9; tests/test_privacy_risk.py) from a KD-tree, which in the
    ~100 one-hot dimensions of a featurised table prunes nothing, so it is far slower on large tables."""
    sample, points = np.asarray(sample, dtype=float), np.asarray(points, dtype=float)
    n, d = sample.shape
    h = max(float(sample.std(axis=0).mean()), 1e-3) * n ** (-1 / (d + 4))
    yy = np.einsum("ij,ij->i", sample, sample)
    out = np.empty(len(points))
    for lo in range(0, len(points), KDE_CHUNK):
        x = points[lo : lo + KDE_CHUNK]
        e = x @ sample.T  # in place from here: e = −‖x − y‖² / 2h², then its log-sum-exp by rows
        e *= 2.0
        e -= np.einsum("ij,ij->i", x, x)[:, None]
        e -= yy[None, :]
        np.minimum(e, 0.0, out=e)
        e *= 1.0 / (2.0 * h * h)
        top = e.max(axis=1)
        e -= top[:, None]
        np.exp(e, out=e)
        out[lo : lo + KDE_CHUNK] = np.log(e.sum(axis=1)) + top
    return out - np.log(n) - 0.5 * d * np.log(2.0 * np.pi * h * h)


def domias_scores(targets: np.ndarray, synth: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """log p̂_S(x) − log p̂_ref(x) (DOMIAS eq. 2) on featurised rows."""
    return kde_log_density(synth, targets) - kde_log_density(reference, targets)


def membership_inference(
    split: TargetSplit, synth: pd.DataFrame, columns: Sequence[Any], n_bootstrap: int, rng: np.random.Generator
) -> dict:
    """Both attacks' ROC summaries (``attack_roc``) on the split's members against its non-members."""
    g = {
        k: gower_features(f, columns)
        for k, f in (("members", split.members), ("non_members", split.non_members), ("synth", synth))
    }
    f = {
        k: featurise(fr, columns)
        for k, fr in (
            ("members", split.members),
            ("non_members", split.non_members),
            ("synth", synth),
            ("reference", split.reference),
        )
    }
    return {
        "n_members": len(split.members),
        "n_non_members": len(split.non_members),
        "n_reference": len(split.reference),
        "dcr": attack_roc(
            dcr_scores(g["members"], g["synth"]), dcr_scores(g["non_members"], g["synth"]), n_bootstrap, rng
        ),
        "domias": attack_roc(
            domias_scores(f["members"], f["synth"], f["reference"]),
            domias_scores(f["non_members"], f["synth"], f["reference"]),
            n_bootstrap,
            rng,
        ),
    }
