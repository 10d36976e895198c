"""Whole-table fidelity: kernel MMD with a permutation p-value, Wasserstein-1 between the full tables, and
the detection AUC of a classifier trained to tell real from synthetic rows.

Rows are represented by ``utility.featurise`` (schema-driven: numeric scaled to [0, 1] by the schema bounds,
binary 0/1, categorical one-hot), so nothing is learnt from the data. Every metric compares the real training
rows R with the synthetic rows S and, where it has one, reports the same number for the real holdout T
against R (the sampling-noise floor). They read real rows: not covered by the DP guarantee.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from sklearn.base import ClassifierMixin
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from threadpoolctl import threadpool_limits

from pipelines.evaluation.marginals import capped_rows, row_sample, wasserstein1
from pipelines.evaluation.utility import featurise
from pipelines.stats.two_sample import mmd_permutation_test


# the scorecard's detection classifier, on one thread: with n_jobs > 1 a forest's predict_proba adds its trees' votes
# in the order the threads finish, so scores differ in the last bits between runs and a tie in the AUC can move
FOREST = (
    "random forest, 100 trees",
    lambda seed: RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=1),
)


def mmd_test(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    columns: Sequence[Any],
    n_permutations: int,
    max_rows: int | None,
    seed: int,
    bandwidth: float | None = None,
) -> dict:
    """Gaussian-kernel MMD²_u between R and S (Gretton et al. 2012, eq. 3; the MMD of PEARL appendix I.1),
    with its permutation p-value (H₀: one distribution); bandwidth = median pooled distance unless given.
    At most `max_rows` seeded rows per side (the Gram matrix grows as rows²)."""
    rng = np.random.default_rng(seed)
    r, s = (featurise(f.iloc[row_sample(len(f), max_rows, rng)], columns) for f in (train, synth))
    test = mmd_permutation_test(r, s, n_permutations=n_permutations, seed=seed, bandwidth=bandwidth)
    return {
        "mmd2_u": test.statistic,
        "p_value": test.p_value,
        "bandwidth": test.bandwidth,
        "n_permutations": n_permutations,
        "rows": {"real": test.n_x, "synthetic": test.n_y},
    }


def wasserstein1_reference(
    train: pd.DataFrame, holdout: pd.DataFrame, n_synth: int, columns: Sequence[Any], max_rows: int | None, seed: int
) -> float:
    """W1(R, T) of ``table_wasserstein1`` (the holdout reference) for a synthetic table of `n_synth` rows."""
    rows = capped_rows([len(train), n_synth, len(holdout)], max_rows, seed)
    return wasserstein1(featurise(train.iloc[rows[0]], columns), featurise(holdout.iloc[rows[2]], columns))


def table_wasserstein1(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    max_rows: int | None,
    seed: int,
    reference: float | None = None,
) -> dict:
    """Exact W1(R, S) = min_π Σ π_ij ‖r_i − s_j‖₂ between the featurised tables (POT network simplex), on
    seeded subsamples of at most `max_rows` rows per side; `holdout_reference` = W1(R, T) (`reference`:
    ``wasserstein1_reference`` of the same arguments, computed earlier)."""
    rows = capped_rows([len(train), len(synth), len(holdout)], max_rows, seed)
    r, s = featurise(train.iloc[rows[0]], columns), featurise(synth.iloc[rows[1]], columns)
    if reference is None:
        reference = wasserstein1_reference(train, holdout, len(synth), columns, max_rows, seed)
    return {"w1": wasserstein1(r, s), "holdout_reference": reference, "rows": {"real": len(r), "synthetic": len(s)}}


def detection_auc(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    columns: Sequence[Any],
    max_rows: int | None,
    seed: int,
    folds: int = 5,
    classifier: tuple[str, Callable[[int], ClassifierMixin]] = FOREST,
) -> dict:
    """AUC of a classifier (default: a random forest, 100 trees) telling real from synthetic rows, from its
    out-of-fold scores (stratified `folds`-fold cross-validation) on a balanced sample of min(|R|, |S|,
    `max_rows`) rows each. `classifier`: (description, seed → unfitted model). 0.5: indistinguishable;
    1: every row recognised."""
    rng = np.random.default_rng(seed)
    n = min(len(train), len(synth), max_rows or len(train))
    x = np.vstack([featurise(f.iloc[rng.choice(len(f), n, replace=False)], columns) for f in (train, synth)])
    y = np.repeat([1, 0], n)
    label, make_model = classifier
    model = make_model(seed)
    with threadpool_limits(limits=1):
        score = cross_val_predict(
            model, x, y, cv=StratifiedKFold(folds, shuffle=True, random_state=seed), method="predict_proba"
        )[:, 1]
    return {
        "auc": float(roc_auc_score(y, score)),
        "rows_per_class": n,
        "folds": folds,
        "classifier": f"{label}, out-of-fold scores",
    }
