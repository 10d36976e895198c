"""Machine-learning utility: train on synthetic, test on real (TSTR) against train on real (TRTR).

Features come from a schema-driven featuriser (numeric scaled by the schema bounds, categorical
one-hot over the schema's categories, or over the buckets of a long code list (pipelines/data/code_lists.py), binary
0/1 by the schema's category order); nothing is learnt from the data. The target is binarised one-vs-rest around its
positive class (`positive_class`): the schema's `target_positive` where it declares one, else the target's second
category.

These metrics read real rows (training and test), so they are not covered by the DP guarantee.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from sklearn.base import ClassifierMixin
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from pipelines.data.code_lists import CodeBuckets, is_long
from pipelines.errors import InputError
from pipelines.evaluation.fidelity import CATEGORICAL_KINDS, NUMERIC_KINDS, scale_by_bounds
from pipelines.progress import Steps

MODELS: dict[str, Callable[[int], ClassifierMixin]] = {
    "logistic_regression": lambda seed: make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)),
    # fits on two threads, predicts on one (`fitted`)
    "random_forest": lambda seed: RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=2),
    "gradient_boosting": lambda seed: HistGradientBoostingClassifier(random_state=seed),
}


def fitted(make_model: Callable[[int], ClassifierMixin], seed: int, x: np.ndarray, y: np.ndarray) -> ClassifierMixin:
    """`make_model(seed)` fitted on (x, y), then set to predict on one thread (`n_jobs=1` where it has one).

    The forest fits on its own `n_jobs` (each tree's seed is drawn before the trees are dispatched, so the forest is
    the same whatever the thread count), but its `predict_proba` on several threads adds the trees' votes in the
    order the threads finish: the scores then differ in their last bits from run to run, and an AUROC on tied
    scores or an argmax on a tie moves. On one thread the votes add in the trees' order, exactly.
    """
    model = make_model(seed).fit(x, y)
    if "n_jobs" in model.get_params(deep=False):
        model.set_params(n_jobs=1)
    return model


def list_buckets(col: Any) -> CodeBuckets | None:
    """The buckets a long code list is featurised by (`code_lists.CodeBuckets`); None for any other column."""
    return CodeBuckets(len(col.categories)) if col.kind in CATEGORICAL_KINDS and is_long(len(col.categories)) else None


def one_hot_width(col: Any) -> int:
    """The width of a categorical column's block in `featurise`: its categories, or its buckets for a long list."""
    buckets = list_buckets(col)
    return len(col.categories) if buckets is None else buckets.count


def featurise(frame: pd.DataFrame, columns: Sequence[Any], target: str | None = None) -> np.ndarray:
    """Feature matrix from every schema column except `target`, using schema bounds/categories only.

    Numeric -> (x - lower) / (upper - lower) clipped to [0, 1]; categorical -> one-hot over the
    schema's categories (values outside the list give an all-zero block), or, for a long code list (more than
    `code_lists.LONG_LIST_ABOVE` categories), one-hot over its buckets of consecutive codes (thousands of one-hot
    columns make a gradient-boosting fit far too slow); binary -> 1 for the second schema category, else 0.
    """
    blocks = []
    for col in columns:
        if col.name == target:
            continue
        if col.name not in frame.columns:
            raise InputError(
                "the table has no such column.", column=col.name, fix="decode the table with the same public schema."
            )
        values = frame[col.name]
        if col.kind in NUMERIC_KINDS:
            x = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
            if np.isnan(x).any():
                raise InputError(
                    "missing or non-numeric values.",
                    column=col.name,
                    fix="validate the table against the public schema before evaluation.",
                )
            blocks.append(scale_by_bounds(x, col.lower, col.upper, col.name)[:, None])
        elif col.kind == "binary":
            blocks.append((values == col.categories[1]).to_numpy(dtype=float)[:, None])
        elif col.kind in CATEGORICAL_KINDS:  # one-hot over the schema's list (or its code list's buckets)
            code = pd.Categorical(values, categories=list(col.categories)).codes  # unknown: -1, an all-zero row
            buckets = list_buckets(col)
            known = np.flatnonzero(code >= 0)
            block = np.zeros((len(frame), len(col.categories) if buckets is None else buckets.count))
            block[known, code[known] if buckets is None else buckets.bucket[code[known]]] = 1.0
            blocks.append(block)
        else:
            raise InputError(
                f"unknown column kind '{col.kind}'.",
                column=col.name,
                fix="use one of continuous, integer, categorical, binary.",
            )
    return np.hstack(blocks) if blocks else np.empty((len(frame), 0))


def feature_names(columns: Sequence[Any], target: str | None = None) -> list[str]:
    """A readable name for each column of `featurise(·, columns, target)`, in its order, for the reports: a
    numeric column's name; "<column> = <category>" for a binary column (its second category) and for each
    category of a categorical one; "<column> in <first>…<last>" for each bucket of a long code list."""
    names: list[str] = []
    for col in columns:
        if col.name == target:
            continue
        if col.kind in NUMERIC_KINDS:
            names.append(str(col.name))
        elif col.kind == "binary":
            names.append(f"{col.name} = {col.categories[1]}")
        elif (buckets := list_buckets(col)) is None:
            names += [f"{col.name} = {c}" for c in col.categories]
        else:
            starts = buckets.starts
            names += [
                f"{col.name} in {col.categories[starts[b]]}…{col.categories[starts[b + 1] - 1]}"
                for b in range(buckets.count)
            ]
    return names


def capped(frame: pd.DataFrame, max_rows: int | None, seed: int) -> pd.DataFrame:
    """A seeded sample of `max_rows` rows of `frame` (pandas' `sample`, `random_state=seed`); `frame` itself when
    it has no more rows or the cap is None. The same seed and length give the same rows, so a cache computed on
    the capped real rows matches a later call."""
    return frame if max_rows is None or len(frame) <= max_rows else frame.sample(max_rows, random_state=seed)


def positive_class(col: Any, positive: str | int | None = None) -> str | int:
    """The target's positive class, which every utility score and association reads as 1 and every other category
    as 0: `positive` (the schema's `target_positive`) when given, else the schema's second category (for a target
    of more than two categories an arbitrary choice, which the reports name: `positive_rule`)."""
    if positive is None:
        return col.categories[1]
    if positive not in col.categories:
        raise InputError(
            f"the positive class {positive!r} is not one of the target's categories {list(col.categories)}.",
            column=col.name,
            fix="set the schema's target_positive to one of the target's categories.",
        )
    return positive


def positive_rule(positive: str | int | None) -> str:
    """How `positive_class` chose (results' "positive_class_rule"): "target_positive" or "second_category"."""
    return "second_category" if positive is None else "target_positive"


def _labels(frame: pd.DataFrame, col: Any, label: str, positive: str | int | None = None) -> np.ndarray:
    """Target as 0/1: 1 for `positive_class(col, positive)`. Values outside the schema's list are an error."""
    values = frame[col.name]
    outside = ~values.isin(list(col.categories))
    if outside.any():
        raise InputError(
            f"the {label} table has {int(outside.sum())} target value(s) outside the schema's "
            f"categories {list(col.categories)}.",
            column=col.name,
            fix="validate the table against the public schema before evaluation.",
        )
    return (values == positive_class(col, positive)).to_numpy(dtype=int)


def _test_scores(
    make_model: Callable[[int], ClassifierMixin], seed: int, x: np.ndarray, y: np.ndarray, x_test: np.ndarray
) -> np.ndarray | None:
    """P(positive) on `x_test` of a model fitted on (x, y); None when y has fewer than two classes.

    One BLAS/OpenMP thread: these fits are small, and generators are evaluated concurrently, where
    OpenMP oversubscription on a busy machine makes a HistGradientBoosting fit many times slower.
    """
    if np.unique(y).size < 2:
        return None
    with threadpool_limits(limits=1):
        return fitted(make_model, seed, x, y).predict_proba(x_test)[:, 1]


SETS = {"tstr": "synthetic", "trtr": "real training", "baseline": "independent-marginals baseline"}  # readable names


def target_scores(
    train_sets: dict[str, pd.DataFrame],
    test_real: pd.DataFrame,
    columns: Sequence[Any],
    target: str | None,
    seed: int,
    real: dict | None = None,
    max_rows: int | None = None,
    positive: str | int | None = None,
) -> dict:
    """Each model of MODELS fitted on each table of `train_sets` ({name: table}), scored on `test_real`; each
    of them first cut to `capped(·, max_rows, seed)` (`evaluate.utility_max_rows`: the cost stops growing with
    the rows; the AUROCs' DeLong errors are those of the capped test set, so the verdict's bounds account for it).
    The target reads 1 for `positive_class(target column, positive)` (`positive`: the schema's `target_positive`).

    Returns {"target", "positive_class", "positive_class_rule" (`positive_rule`), "target_categories" (how many
    the schema lists), "y_test", "scores": {model: {name: P(positive) per test row}}, "notes": {model: [...]},
    "rows": {name: rows, "test": rows}}. A table whose target has a single class cannot fit a classifier: its
    scores are the constant 0.5 (AUROC 0.5, chance) with a note. {"skipped": reason} when there is no target or
    the test set has a single class.

    `real`: ``scores_json`` of an earlier call on other tables and the same test set (the train-on-real and
    baseline tables, computed once per data set by the baseline stage), merged after `train_sets` exactly as
    if they had been listed there (each fit is seeded by `seed` alone, so the order of fits changes nothing).
    Its positive class must be this call's: scores of another binarisation are refused.
    """
    scored = _target_scores(
        {k: capped(t, max_rows, seed) for k, t in train_sets.items()},
        capped(test_real, max_rows, seed),
        columns,
        target,
        seed,
        positive,
    )
    if real is None or "skipped" in scored and "rows" not in scored:
        return scored
    if "positive_class" in scored and real.get("positive_class", scored["positive_class"]) != scored["positive_class"]:
        raise InputError(
            f"the cached real-side scores were computed for positive class {real['positive_class']!r}, not "
            f"{scored['positive_class']!r}.",
            column=target,
            fix="recompute the baseline stage with the same schema (its target_positive) as this evaluation.",
        )
    rows = {**{k: v for k, v in scored["rows"].items() if k != "test"}, **real["rows"]}
    if "skipped" in scored:
        return {**scored, "rows": rows}
    return {
        **scored,
        "rows": rows,
        "scores": {
            m: {**by_set, **{k: np.asarray(v, dtype=float) for k, v in real["scores"][m].items()}}
            for m, by_set in scored["scores"].items()
        },
        "notes": {m: notes + real["notes"][m] for m, notes in scored["notes"].items()},
    }


def scores_json(scored: dict) -> dict:
    """`target_scores`'s result as JSON (arrays as lists of floats, which JSON round-trips exactly), without
    `y_test` (recomputed from the test set): what `target_scores(real=...)` takes."""
    out = {k: v for k, v in scored.items() if k != "y_test"}
    if "scores" in out:
        out["scores"] = {
            m: {k: np.asarray(v, dtype=float).tolist() for k, v in by_set.items()}
            for m, by_set in out["scores"].items()
        }
    return out


def _target_scores(
    train_sets: dict[str, pd.DataFrame],
    test_real: pd.DataFrame,
    columns: Sequence[Any],
    target: str | None,
    seed: int,
    positive: str | int | None,
) -> dict:
    """`target_scores` of `train_sets` alone."""
    if target is None:
        return {"skipped": "schema declares no target"}
    col = next((c for c in columns if c.name == target), None)
    if col is None or col.kind not in CATEGORICAL_KINDS:
        raise InputError(
            "the target must be a categorical or binary column of the schema.",
            column=target,
            fix="declare a categorical or binary target in the public schema, or none.",
        )
    rows = {**{name: len(t) for name, t in train_sets.items()}, "test": len(test_real)}
    y_test = _labels(test_real, col, "real test", positive)
    if np.unique(y_test).size < 2:
        return {"skipped": "the real test set has a single target class; AUROC is undefined", "rows": rows}
    x_test = featurise(test_real, columns, target)
    labels = {name: SETS.get(name.split("_")[0], name) for name in train_sets}
    train = {
        name: (featurise(t, columns, target), _labels(t, col, labels[name], positive)) for name, t in train_sets.items()
    }
    scores: dict[str, dict[str, np.ndarray]] = {}
    notes: dict[str, list[str]] = {}
    fits = Steps("classifiers", len(MODELS) * len(train))
    for model, make_model in MODELS.items():
        scores[model], notes[model] = {}, []
        for name, (x, y) in train.items():
            s = fits.done(_test_scores(make_model, seed, x, y, x_test))
            if s is None:
                notes[model].append(
                    f"{name}: the {labels[name]} target has a single class ({len(y)} rows), so no "
                    f"classifier can be fitted; AUROC set to 0.5 (chance)"
                )
                s = np.full(len(y_test), 0.5)
            scores[model][name] = s
    return {
        "target": target,
        "positive_class": positive_class(col, positive),
        "positive_class_rule": positive_rule(positive),
        "target_categories": len(col.categories),
        "y_test": y_test,
        "scores": scores,
        "notes": notes,
        "rows": rows,
    }


def auroc_table(scored: dict) -> dict:
    """`tstr_auroc`'s result from `target_scores` of {"tstr": synthetic, "trtr": real training} tables."""
    if "skipped" in scored:
        rows = scored.get("rows")
        return {
            "skipped": scored["skipped"],
            **({} if rows is None else {"n_train_real": rows["trtr"], "n_synth": rows["tstr"], "n_test": rows["test"]}),
        }
    models = {}
    for model, by_set in scored["scores"].items():
        auc = {key: float(roc_auc_score(scored["y_test"], by_set[key])) for key in ("tstr", "trtr")}
        models[model] = {**auc, "gap": auc["trtr"] - auc["tstr"]}
        if scored["notes"][model]:
            models[model]["note"] = "; ".join(scored["notes"][model])
    rows = scored["rows"]
    return {
        "target": scored["target"],
        **{k: scored[k] for k in ("positive_class", "positive_class_rule", "target_categories")},
        "models": models,
        "n_train_real": rows["trtr"],
        "n_synth": rows["tstr"],
        "n_test": rows["test"],
    }


def tstr_auroc(
    train_real: pd.DataFrame,
    synth: pd.DataFrame,
    test_real: pd.DataFrame,
    columns: Sequence[Any],
    target: str | None,
    seed: int,
    positive: str | int | None = None,
) -> dict:
    """AUROC on `test_real` of each model fitted on `synth` (tstr) and on `train_real` (trtr), the target read as
    1 for `positive_class(target column, positive)` (`positive`: the schema's `target_positive`).

    Returns {"target", "positive_class", "positive_class_rule", "target_categories", "models": {name: {"tstr",
    "trtr", "gap" (= trtr - tstr), ["note"]}}, "n_train_real", "n_synth", "n_test"}. A training set whose target
    has a single class scores 0.5 (chance) with a "note"; {"skipped": reason} when there is no target or the test
    set has a single class.
    """
    return auroc_table(
        target_scores({"tstr": synth, "trtr": train_real}, test_real, columns, target, seed, positive=positive)
    )
