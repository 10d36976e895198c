"""The 10-classifier utility table of PEARL (Table 2, after DP-MERF): train each scikit-learn classifier on
synthetic rows and test on the real holdout (TSTR), against the same classifier trained on real rows (TRTR).

Features and the binarised target come from `pipelines.evaluation.utility` (schema-driven, nothing learnt
from data; positive class = `utility.positive_class`: the schema's `target_positive`, else the target's second
category). Two readings of "ROC" and "PRC":
`roc`, `prc`: roc_auc_score and average_precision_score of the classifier's continuous score
(predict_proba, or decision_function for the linear SVM), the usual definition; `roc_label`,
`prc_label`: the same areas computed from hard predictions, which is how DP-MERF's evaluation code scores
and how the paper's train-on-real row (e.g. LR ROC 0.788 on Adult) is reproduced (docs/pearl.md).

These metrics read real rows, so they are not covered by the DP guarantee.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from sklearn.base import ClassifierMixin
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.ensemble import AdaBoostClassifier, BaggingClassifier, GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, roc_auc_score
from sklearn.naive_bayes import BernoulliNB, GaussianNB
from sklearn.neural_network import MLPClassifier
from sklearn.svm import LinearSVC
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits

from pipelines.errors import InputError
from pipelines.evaluation.fidelity import CATEGORICAL_KINDS
from pipelines.evaluation.utility import _labels, capped, featurise, positive_class, positive_rule

# scikit-learn defaults except: iteration caps that let the linear models converge, and BernoulliNB
# thresholding the [0, 1] features at 0.5 (its default threshold 0 would make every numeric feature 1).
CLASSIFIERS: dict[str, Callable[[int], ClassifierMixin]] = {
    "logistic_regression": lambda seed: LogisticRegression(max_iter=5000),
    "gaussian_nb": lambda seed: GaussianNB(),
    "bernoulli_nb": lambda seed: BernoulliNB(binarize=0.5),
    "linear_svm": lambda seed: LinearSVC(max_iter=10000, random_state=seed),
    "decision_tree": lambda seed: DecisionTreeClassifier(random_state=seed),
    "lda": lambda seed: LinearDiscriminantAnalysis(),
    "adaboost": lambda seed: AdaBoostClassifier(random_state=seed),
    "bagging": lambda seed: BaggingClassifier(random_state=seed),
    "gradient_boosting": lambda seed: GradientBoostingClassifier(random_state=seed),
    "mlp": lambda seed: MLPClassifier(max_iter=500, random_state=seed),
}
METRICS = ("roc", "prc", "roc_label", "prc_label")


def _scores(model: ClassifierMixin, x: np.ndarray) -> np.ndarray:
    return model.predict_proba(x)[:, 1] if hasattr(model, "predict_proba") else model.decision_function(x)


def _evaluate(
    make_model: Callable[[int], ClassifierMixin],
    seed: int,
    x: np.ndarray,
    y: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
) -> dict[str, float] | str:
    """The four areas on the test set of a model fitted on (x, y), or why none could be fitted (a single
    class; a degenerate table, e.g. constant features, that the classifier rejects).
    One BLAS/OpenMP thread (see `utility._test_scores`)."""
    if np.unique(y).size < 2:
        return "the target has a single class"
    with threadpool_limits(limits=1):
        try:
            model = make_model(seed).fit(x, y)
        except (ValueError, IndexError, np.linalg.LinAlgError) as exc:
            return f"fitting failed ({type(exc).__name__}: {exc})"
        score, label = _scores(model, x_test), model.predict(x_test)
    return {
        "roc": float(roc_auc_score(y_test, score)),
        "prc": float(average_precision_score(y_test, score)),
        "roc_label": float(roc_auc_score(y_test, label)),
        "prc_label": float(average_precision_score(y_test, label)),
    }


def _test_set(
    test_real: pd.DataFrame,
    columns: Sequence[Any],
    target: str,
    classifiers: Sequence[str] | None,
    positive: str | int | None,
) -> tuple[Any, list[str], np.ndarray, np.ndarray]:
    """(target column, classifier names, y_test, x_test), every argument checked."""
    col = next((c for c in columns if c.name == target), None)
    if col is None or col.kind not in CATEGORICAL_KINDS:
        raise InputError(
            "the target must be a categorical or binary column of the schema.",
            column=target,
            fix="declare a categorical or binary target in the public schema.",
        )
    names = list(classifiers or CLASSIFIERS)
    unknown = sorted(set(names) - set(CLASSIFIERS))
    if unknown:
        raise ValueError(f"unknown classifiers {unknown}; known: {sorted(CLASSIFIERS)}")
    y_test = _labels(test_real, col, "real test", positive)
    if np.unique(y_test).size < 2:
        raise InputError(
            "the real test table has a single target class, so ROC and PRC are undefined.",
            column=target,
            fix="use a larger holdout.",
        )
    return col, names, y_test, featurise(test_real, columns, target)


def _fitted(
    table: pd.DataFrame,
    label: str,
    test_real: pd.DataFrame,
    columns: Sequence[Any],
    target: str,
    seed: int,
    max_train_rows: int | None,
    classifiers: Sequence[str] | None,
    positive: str | int | None,
) -> dict[str, Any]:
    """{"rows": training rows, "positive_class", "results": {classifier: `_evaluate`'s areas or why none}} of each
    classifier fitted on a seeded subset of at most `max_train_rows` rows of `table`."""
    col, names, y_test, x_test = _test_set(test_real, columns, target, classifiers, positive)
    rows = capped(table, max_train_rows, seed)
    x, y = featurise(rows, columns, target), _labels(rows, col, label, positive)
    return {
        "rows": len(rows),
        "positive_class": positive_class(col, positive),
        "results": {name: _evaluate(CLASSIFIERS[name], seed, x, y, x_test, y_test) for name in names},
    }


def trtr_results(
    train_real: pd.DataFrame,
    test_real: pd.DataFrame,
    columns: Sequence[Any],
    target: str,
    seed: int = 0,
    max_train_rows: int | None = None,
    classifiers: Sequence[str] | None = None,
    positive: str | int | None = None,
) -> dict[str, Any]:
    """The train-on-real half of ``tstr_classifiers`` (JSON): the same for every generator, so the baseline
    stage computes it once per data set and ``tstr_classifiers(trtr=...)`` takes it."""
    return _fitted(train_real, "real training", test_real, columns, target, seed, max_train_rows, classifiers, positive)


def tstr_classifiers(
    train_real: pd.DataFrame,
    synth: pd.DataFrame,
    test_real: pd.DataFrame,
    columns: Sequence[Any],
    target: str,
    seed: int = 0,
    max_train_rows: int | None = None,
    classifiers: Sequence[str] | None = None,
    trtr: dict[str, Any] | None = None,
    positive: str | int | None = None,
) -> dict:
    """Each classifier's `METRICS` on `test_real` when fitted on `synth` (tstr) and on `train_real` (trtr),
    and their averages over the classifiers.

    `max_train_rows`: a seeded random subset of at most that many rows of each training table (cost cap).
    A classifier that cannot be fitted on a training table (single class, degenerate features) scores
    chance (ROC 0.5, PRC the test positive rate) with a "note". `positive`: the schema's `target_positive`
    (`utility.positive_class`). Returns {"target", "positive_class", "positive_class_rule", "models": {name:
    {"tstr": {...}, "trtr": {...}}}, "average": {"tstr": {...}, "trtr": {...}}, "n_train_real", "n_synth",
    "n_test"}. `trtr`: ``trtr_results`` of the same arguments, computed earlier (refused when it read another
    positive class).
    """
    col, names, y_test, _ = _test_set(test_real, columns, target, classifiers, positive)
    chosen = positive_class(col, positive)
    if trtr is not None and trtr.get("positive_class", chosen) != chosen:
        raise InputError(
            f"the cached train-on-real classifiers were fitted for positive class {trtr['positive_class']!r}, not "
            f"{chosen!r}.",
            column=target,
            fix="recompute the baseline stage with the same schema (its target_positive) as this evaluation.",
        )
    fits = {
        "tstr": _fitted(synth, "synthetic", test_real, columns, target, seed, max_train_rows, classifiers, positive),
        "trtr": trtr
        or trtr_results(train_real, test_real, columns, target, seed, max_train_rows, classifiers, positive),
    }
    labels = {"tstr": "synthetic", "trtr": "real training"}
    chance = {"roc": 0.5, "prc": float(y_test.mean()), "roc_label": 0.5, "prc_label": float(y_test.mean())}
    models: dict[str, dict] = {}
    for name in names:
        models[name] = {}
        for key, fitted in fits.items():
            result = fitted["results"][name]
            if isinstance(result, str):
                models[name]["note"] = (
                    models[name].get("note", "") + f"{key} on the {labels[key]} table: {result}; scored as chance. "
                )
                result = dict(chance)
            models[name][key] = result
    average = {
        key: {m: float(np.mean([models[name][key][m] for name in names])) for m in METRICS} for key in ("tstr", "trtr")
    }
    return {
        "target": target,
        "positive_class": chosen,
        "positive_class_rule": positive_rule(positive),
        "models": models,
        "average": average,
        "n_train_real": fits["trtr"]["rows"],
        "n_synth": fits["tstr"]["rows"],
        "n_test": len(test_real),
    }
