"""Pairwise association and the correlation-matrix difference between real and synthetic tables.

Pearson r between numeric columns, Cramér's V between categorical/binary columns (schema categories, plus
one "outside the schema" category) and the correlation ratio η between a numeric and a categorical column.
These read real rows, so they are not covered by the DP guarantee.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from pipelines.evaluation.fidelity import NUMERIC_KINDS
from pipelines.evaluation.marginals import cell_codes, numeric_values


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r = cov(x, y) / (σ_x σ_y); 0 when either column is constant (no association is measurable)."""
    sx, sy = x.std(), y.std()
    return 0.0 if sx == 0 or sy == 0 else float(np.mean((x - x.mean()) * (y - y.mean())) / (sx * sy))


Coded = tuple[np.ndarray, int]  # a column's categories as 0..k−1 (the ones that occur, in order) and k


def _compact(codes: np.ndarray) -> Coded:
    """`codes` renumbered 0..k−1 over the values that occur (sorted), and k."""
    _, index = np.unique(codes, return_inverse=True)
    index = index.reshape(-1)
    return index, int(index.max()) + 1 if index.size else 0


def cramers_v(a: np.ndarray, b: np.ndarray) -> float:
    """Cramér's V = √(χ² / (n · (min(r, c) − 1))) of the contingency table of two integer-coded columns,
    χ² = Σ (O − E)² / E, E = row total · column total / n, over the r × c categories that occur.
    0 when either column has a single occurring category."""
    return _cramers_v(_compact(a), _compact(b))


def _cramers_v(a: Coded, b: Coded) -> float:
    (ai, r), (bi, c) = a, b
    if min(r, c) < 2:
        return 0.0
    observed = np.bincount(ai * c + bi, minlength=r * c).reshape(r, c).astype(float)
    n = len(ai)
    expected = observed.sum(1, keepdims=True) * observed.sum(0, keepdims=True) / n
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    return float(np.sqrt(chi2 / (n * (min(r, c) - 1))))


def correlation_ratio(codes: np.ndarray, y: np.ndarray) -> float:
    """Correlation ratio η = √(Σ_k n_k (ȳ_k − ȳ)² / Σ_i (y_i − ȳ)²) of a numeric y across the categories
    `codes` (Pearson 1905): the numeric–categorical analogue of |r|. 0 when y is constant."""
    return _correlation_ratio(_compact(codes), y)


def _correlation_ratio(codes: Coded, y: np.ndarray) -> float:
    total = float(((y - y.mean()) ** 2).sum())
    if total == 0:
        return 0.0
    k, _ = codes
    n_k = np.bincount(k)
    means = np.bincount(k, weights=y) / n_k
    return float(np.sqrt((n_k * (means - y.mean()) ** 2).sum() / total))


def association_matrix(frame: pd.DataFrame, columns: Sequence[Any]) -> np.ndarray:
    """Symmetric matrix of pairwise association: Pearson r between numeric columns, Cramér's V between
    categorical/binary columns (schema categories, anything else one extra category) and the correlation
    ratio η between a numeric and a categorical column. Diagonal 1. Each categorical column is coded once."""
    numeric = {c.name: c.kind in NUMERIC_KINDS for c in columns}
    values = {
        c.name: numeric_values(frame, c) if numeric[c.name] else _compact(cell_codes(frame, c, 1)[0]) for c in columns
    }
    m = np.eye(len(columns))
    for i, a in enumerate(columns):
        for j in range(i + 1, len(columns)):
            b = columns[j]
            x, y = values[a.name], values[b.name]
            if numeric[a.name] and numeric[b.name]:
                m[i, j] = _pearson(x, y)
            elif not numeric[a.name] and not numeric[b.name]:
                m[i, j] = _cramers_v(x, y)
            else:
                m[i, j] = _correlation_ratio(y, x) if numeric[a.name] else _correlation_ratio(x, y)
            m[j, i] = m[i, j]
    return m


def real_associations(train: pd.DataFrame, holdout: pd.DataFrame, columns: Sequence[Any]) -> dict | None:
    """The real side of ``correlation_difference`` (JSON): A(R), and the mean |A(R) − A(T)| over the pairs;
    None with fewer than two columns."""
    columns = list(columns)
    if len(columns) < 2:
        return None
    real = association_matrix(train, columns)
    iu = np.triu_indices(len(columns), 1)
    return {
        "matrix": real.tolist(),
        "holdout_reference": float(np.abs(real - association_matrix(holdout, columns))[iu].mean()),
    }


def correlation_difference(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    n_worst: int = 5,
    real: dict | None = None,
) -> dict:
    """|A(R) − A(S)| over the column pairs of the association matrices (``association_matrix``) of the real
    training rows R and the synthetic rows S: mean, max and the `n_worst` pairs; the same mean for the real
    holdout T against R is the sampling-noise floor. 0 = every pairwise association reproduced. `real`:
    ``real_associations`` of the same R, T and columns, computed earlier."""
    columns = list(columns)
    if len(columns) < 2:
        return {"skipped": "the schema has fewer than two columns"}
    cached = real_associations(train, holdout, columns) if real is None else real
    real = np.asarray(cached["matrix"], dtype=float)
    diff = np.abs(real - association_matrix(synth, columns))
    iu = np.triu_indices(len(columns), 1)
    order = np.argsort(-diff[iu])[:n_worst]
    return {
        "pairs": len(iu[0]),
        "mean_abs_diff": float(diff[iu].mean()),
        "max_abs_diff": float(diff[iu].max()),
        "holdout_reference_mean_abs_diff": cached["holdout_reference"],
        "measures": "Pearson r (numeric pairs), Cramér's V (categorical pairs), correlation ratio η (mixed)",
        "worst": [
            {
                "columns": [columns[iu[0][k]].name, columns[iu[1][k]].name],
                "real": float(real[iu][k]),
                "abs_diff": float(diff[iu][k]),
            }
            for k in order
        ],
    }
