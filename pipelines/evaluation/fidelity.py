"""Marginal fidelity: per-column distance between real and synthetic marginals.

Categorical and binary columns use total variation distance over the schema's categories (values
outside the schema's list are pooled into one extra "outside schema" bucket, so a generator that
emits them is penalised rather than ignored). Numeric columns use Wasserstein-1 on [0, 1] after
scaling both samples by the schema bounds. Both metrics lie in [0, 1]; 0 means identical marginals.
Nothing is learnt from the data: categories and scales come from the schema only.

These metrics read real rows, so they are not covered by the DP guarantee.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy.stats import wasserstein_distance

from pipelines.errors import InputError

NUMERIC_KINDS = ("continuous", "integer")
CATEGORICAL_KINDS = ("categorical", "binary")


def _category_distribution(values: pd.Series, categories: Sequence[Any]) -> np.ndarray:
    """Empirical probabilities of each schema category, plus a last entry for anything else (incl. missing)."""
    n = len(values)
    if n == 0:
        return np.zeros(len(categories) + 1)
    counts = np.array([(values == c).sum() for c in categories], dtype=float)
    return np.append(counts, n - counts.sum()) / n


def scale_by_bounds(x: np.ndarray, lower: float, upper: float, column: str) -> np.ndarray:
    """(x - lower) / (upper - lower) clipped to [0, 1]: the schema bounds, never the data's range."""
    if not upper > lower:
        raise InputError(
            f"numeric bounds must satisfy lower < upper, got [{lower}, {upper}].",
            column=column,
            fix="correct the bounds in the public schema.",
        )
    return np.clip((x - lower) / (upper - lower), 0.0, 1.0)


def _scaled_numeric(values: pd.Series, lower: float, upper: float, column: str) -> np.ndarray:
    """Non-missing values mapped to [0, 1] by the schema bounds (clipped)."""
    return scale_by_bounds(pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float), lower, upper, column)


def marginal_distances(real: pd.DataFrame, synth: pd.DataFrame, columns: Sequence[Any]) -> dict[str, dict]:
    """Per schema column: {"metric": "tv" | "w1", "value": float}.

    `columns`: objects with .name, .kind, .lower, .upper, .categories (schema columns).
    """
    out: dict[str, dict] = {}
    for col in columns:
        for frame, label in ((real, "real"), (synth, "synthetic")):
            if col.name not in frame.columns:
                raise InputError(
                    f"the {label} table has no such column.",
                    column=col.name,
                    fix="decode the table with the same public schema.",
                )
        if col.kind in CATEGORICAL_KINDS:
            p = _category_distribution(real[col.name], col.categories)
            q = _category_distribution(synth[col.name], col.categories)
            out[col.name] = {"metric": "tv", "value": float(0.5 * np.abs(p - q).sum())}
        elif col.kind in NUMERIC_KINDS:
            a = _scaled_numeric(real[col.name], col.lower, col.upper, col.name)
            b = _scaled_numeric(synth[col.name], col.lower, col.upper, col.name)
            if a.size == 0 or b.size == 0:
                raise InputError(
                    f"the column has no numeric values in the {'real' if a.size == 0 else 'synthetic'} table.",
                    column=col.name,
                    fix="check the generator's decoded output and the holdout split.",
                )
            out[col.name] = {"metric": "w1", "value": float(wasserstein_distance(a, b))}
        else:
            raise InputError(
                f"unknown column kind '{col.kind}'.",
                column=col.name,
                fix="use one of continuous, integer, categorical, binary.",
            )
    return out


def summarise(distances: dict[str, dict]) -> dict[str, float | None]:
    """Mean and max of each metric over columns; None where the schema has no column of that metric."""
    summary: dict[str, float | None] = {}
    for metric in ("tv", "w1"):
        vals = [d["value"] for d in distances.values() if d["metric"] == metric]
        summary[f"mean_{metric}"] = float(np.mean(vals)) if vals else None
        summary[f"max_{metric}"] = float(np.max(vals)) if vals else None
    return summary
