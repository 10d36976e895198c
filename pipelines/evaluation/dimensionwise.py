"""Dimension-wise probability and prediction (DP-auto-GAN §4 and appendix B), and the accuracy of
predicting the schema's target (the paper's Table 2).

Notation of §4: R = real training rows, S = synthetic rows, T = real holdout rows. Features come
from ``utility.featurise`` (schema bounds and categories only). Every score is computed on real rows
(R and T), so none of them is covered by the DP guarantee.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
from sklearn.linear_model import LassoCV
from sklearn.metrics import accuracy_score, f1_score, r2_score, roc_auc_score
from threadpoolctl import threadpool_limits

from pipelines.errors import InputError
from pipelines.evaluation.fidelity import CATEGORICAL_KINDS, NUMERIC_KINDS, scale_by_bounds
from pipelines.evaluation.marginals import numeric_values
from pipelines.evaluation.utility import MODELS, featurise, fitted, list_buckets

# Appendix B / §5: which model predicts a column of each kind, and how its fit is scored on T.
TASKS = {
    "binary": ("logistic_regression", "auroc"),
    "categorical": ("random_forest", "f1"),
    "continuous": ("lasso", "r2"),
    "integer": ("lasso", "r2"),
}
# LassoCV picks the lasso's penalty by 5-fold CV over 30 penalties on its own training set (R or S);
# 20000 coordinate-descent sweeps let the smallest penalties converge on collinear columns.
LASSO = {"cv": 5, "alphas": 30, "max_iter": 20000}


def category_codes(frame: pd.DataFrame, col: Any, label: str) -> np.ndarray:
    """Index of each value in the schema's category list; a value outside the list is an error."""
    if col.name not in frame.columns:
        raise InputError(
            f"the {label} table has no such column.",
            column=col.name,
            fix="decode the table with the same public schema.",
        )
    codes = pd.Categorical(frame[col.name], categories=list(col.categories)).codes.astype(int)
    if (codes < 0).any():
        raise InputError(
            f"the {label} table has {int((codes < 0).sum())} value(s) outside the schema's "
            f"categories {list(col.categories)}.",
            column=col.name,
            fix="validate the table against the public schema before evaluation.",
        )
    return codes


def dimension_wise_probability(train: pd.DataFrame, synth: pd.DataFrame, columns: Sequence[Any]) -> dict:
    """Per binary column, the proportion of the schema's second category ("1") in R and in S (§4).

    Returns {"columns": {name: {"positive_class", "real", "synthetic"}}, "mean_abs_diff", "max_abs_diff"};
    with no binary column, no columns and a "reason".
    """
    binary = [c for c in columns if c.kind == "binary"]
    if not binary:
        return {"columns": {}, "reason": "the schema has no binary column"}
    rows = {
        c.name: {
            "positive_class": c.categories[1],
            "real": float(np.mean(category_codes(train, c, "real training") == 1)),
            "synthetic": float(np.mean(category_codes(synth, c, "synthetic") == 1)),
        }
        for c in binary
    }
    diffs = [abs(r["real"] - r["synthetic"]) for r in rows.values()]
    return {"columns": rows, "mean_abs_diff": float(np.mean(diffs)), "max_abs_diff": float(np.max(diffs))}


def _labels(frame: pd.DataFrame, col: Any, label: str) -> np.ndarray:
    """Column k as the label y_k: numeric scaled by the schema bounds, categorical/binary as category codes, a code
    list as its bucket (`utility.list_buckets`, its block in `featurise`; a forest on 2,000 rows
    over the 712 codes present of a 5,000-code list peaked at 1.6 GB, every leaf storing every class; 0.38 GB over
    the 64 buckets)."""
    if col.kind in NUMERIC_KINDS:
        if col.name not in frame.columns:
            raise InputError(
                f"the {label} table has no such column.",
                column=col.name,
                fix="decode the table with the same public schema.",
            )
        return scale_by_bounds(numeric_values(frame, col), col.lower, col.upper, col.name)
    codes = category_codes(frame, col, label)
    if (buckets := list_buckets(col)) is not None:
        return buckets.bucket[codes]
    return codes


def column_score(
    col: Any, train: pd.DataFrame, holdout: pd.DataFrame, columns: Sequence[Any], seed: int, label: str = "training"
) -> float | None:
    """Score on `holdout` of the kind's model (``TASKS``) predicting column k from all the other columns,
    fitted on `train` (appendix B); None when y_k takes a single value in `train` (no model can be fitted).

    Binary: logistic regression, AUROC. Categorical: random forest, F1 averaged over classes weighted
    by their holdout support. Numeric: lasso, R² = 1 − Σ(y − ŷ)² / Σ(y − ȳ)². One BLAS thread (see
    ``utility._test_scores``); the forest fits on its own n_jobs and predicts on one thread (``utility.fitted``).
    """
    y = _labels(train, col, label)
    if np.unique(y).size < 2:
        return None
    x, x_test = featurise(train, columns, col.name), featurise(holdout, columns, col.name)
    y_test = _labels(holdout, col, "real holdout")
    with threadpool_limits(limits=1):
        if col.kind in NUMERIC_KINDS:
            model = LassoCV(**LASSO, random_state=seed).fit(x, y)
            return float(r2_score(y_test, model.predict(x_test)))
        if col.kind == "binary":
            model = fitted(MODELS["logistic_regression"], seed, x, y)
            return float(roc_auc_score(y_test, model.predict_proba(x_test)[:, 1]))
        model = fitted(MODELS["random_forest"], seed, x, y)
        return float(f1_score(y_test, model.predict(x_test), average="weighted", zero_division=0))


def _summary(entries: list[dict]) -> dict:
    """Mean scores on R and S, and the gap real − synthetic (mean and root mean square) over scored columns.

    Scores are clipped to [0, 1] first, as in the plot: an R² below 0 (worse than predicting T's mean)
    means no predictive value, however negative, and would otherwise swamp the mean.
    """
    pairs = np.clip([(e["real"], e["synthetic"]) for e in entries if "dropped" not in e], 0.0, 1.0)
    out: dict[str, Any] = {"n_scored": len(pairs), "n_dropped": sum("dropped" in e for e in entries)}
    if not len(pairs):
        return {**out, "mean_real": None, "mean_synthetic": None, "mean_gap": None, "rms_gap": None}
    gap = pairs[:, 0] - pairs[:, 1]
    return {
        **out,
        "mean_real": float(pairs[:, 0].mean()),
        "mean_synthetic": float(pairs[:, 1].mean()),
        "mean_gap": float(gap.mean()),
        "rms_gap": float(np.sqrt(np.mean(gap**2))),
    }


def real_column_scores(
    train: pd.DataFrame, holdout: pd.DataFrame, columns: Sequence[Any], seed: int
) -> dict[str, float | None]:
    """The real half of ``dimension_wise_prediction``: each column's ``column_score`` fitted on R, for the
    columns that are not constant in T. The same for every generator: the baseline stage computes it once."""
    return {
        col.name: column_score(col, train, holdout, columns, seed, "real training")
        for col in columns
        if np.unique(_labels(holdout, col, "real holdout")).size >= 2
    }


def dimension_wise_prediction(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    seed: int,
    real: dict[str, float | None] | None = None,
) -> dict:
    """For each column k: predict y_k from the other columns, fitted once on R and once on S, scored on T (§4).

    A column whose label has a single value in a training set (or in T) cannot be scored; it is kept
    with "dropped": reason, as the paper drops such features from its plots (§5.1). Returns
    {"columns": {name: {"kind", "model", "score", "real", "synthetic", ["dropped"]}},
    "summary": _summary over all scored columns, "by_score": {score name: _summary}}. `real`:
    ``real_column_scores`` of the same R, T and seed, computed earlier.
    """
    real = real_column_scores(train, holdout, columns, seed) if real is None else real
    entries: dict[str, dict] = {}
    for col in columns:
        model_name, score = TASKS[col.kind]
        entry: dict[str, Any] = {"kind": col.kind, "model": model_name, "score": score, "real": None, "synthetic": None}
        y_test = _labels(holdout, col, "real holdout")
        if np.unique(y_test).size < 2:
            entries[col.name] = {
                **entry,
                "dropped": "the column is constant in the real holdout; the score is undefined",
            }
            continue
        entry["real"] = real[col.name]
        entry["synthetic"] = (
            None if entry["real"] is None else column_score(col, synth, holdout, columns, seed, "synthetic")
        )
        for key, label in (("real", "real training"), ("synthetic", "synthetic")):
            if entry[key] is None:
                entry["dropped"] = f"the column is constant in the {label} rows: no model can be fitted"
                break
        entries[col.name] = entry
    scores = sorted({e["score"] for e in entries.values()})
    return {
        "columns": entries,
        "summary": _summary(list(entries.values())),
        "by_score": {s: _summary([e for e in entries.values() if e["score"] == s]) for s in scores},
    }


def target_accuracy(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    target: str | None,
    seed: int,
    real: Sequence[Any] | None = None,
) -> dict:
    """Accuracy on T of a random forest predicting the schema's target, fitted on R ("real") and on S
    ("synthetic"): the paper's Table 2 (Adult: income > 50K, 86.63 % on real data).

    A training set whose target has a single class gives the constant classifier (its accuracy, with a
    "note"). "majority_baseline" is the share of T's most frequent class: what predicting it always scores.
    `real`: ``real_accuracy`` of the same R, T and seed, computed earlier (the baseline stage).
    """
    if target is None:
        return {"skipped": "schema declares no target"}
    col, x_test, y_test = _target_test_set(holdout, columns, target)
    out: dict[str, Any] = {
        "target": target,
        "model": "random_forest",
        "n_test": len(y_test),
        "majority_baseline": float(np.bincount(y_test).max() / len(y_test)),
    }
    fitted = {
        "real": real or real_accuracy(train, holdout, columns, target, seed),
        "synthetic": _accuracy(synth, "synthetic", col, columns, x_test, y_test, seed),
    }
    for key, (accuracy, note) in fitted.items():
        out[key] = accuracy
    out["gap"] = out["real"] - out["synthetic"]
    notes = [f"{key}: {note}" for key, (_, note) in fitted.items() if note]
    if notes:
        out["note"] = "; ".join(notes)
    return out


def real_accuracy(
    train: pd.DataFrame, holdout: pd.DataFrame, columns: Sequence[Any], target: str, seed: int
) -> tuple[float, str | None]:
    """The real half of ``target_accuracy``: (accuracy on T of the forest fitted on R, note or None)."""
    col, x_test, y_test = _target_test_set(holdout, columns, target)
    return _accuracy(train, "real training", col, columns, x_test, y_test, seed)


def _target_test_set(holdout: pd.DataFrame, columns: Sequence[Any], target: str) -> tuple[Any, np.ndarray, np.ndarray]:
    """(target column, x_test, y_test) of T, the target checked."""
    col = next((c for c in columns if c.name == target), None)
    if col is None or col.kind not in CATEGORICAL_KINDS:
        raise InputError(
            "the target must be a categorical or binary column of the schema.",
            column=target,
            fix="declare a categorical or binary target in the public schema, or none.",
        )
    return col, featurise(holdout, columns, target), category_codes(holdout, col, "real holdout")


def _accuracy(
    frame: pd.DataFrame, label: str, col: Any, columns: Sequence[Any], x_test: np.ndarray, y_test: np.ndarray, seed: int
) -> tuple[float, str | None]:
    """Accuracy on (x_test, y_test) of the forest fitted on `frame`, or of its constant target with a note."""
    y = category_codes(frame, col, label)
    if np.unique(y).size < 2:
        return float(np.mean(y_test == y[0])), (
            f"the {label} target has the single class {col.categories[y[0]]!r}; accuracy of always predicting it"
        )
    with threadpool_limits(limits=1):
        model = fitted(MODELS["random_forest"], seed, featurise(frame, columns, col.name), y)
        return float(accuracy_score(y_test, model.predict(x_test))), None
