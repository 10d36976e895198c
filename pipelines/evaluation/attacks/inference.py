"""Attribute inference: an attacker who knows a configured set of columns of a real record predicts its
secret column with a model fitted on the synthetic table S.

Success on a target is ``anonymeter.correct_guesses`` (exact class, or within `tolerance` of the schema
range for a numeric secret). Reported: accuracy on training records (members) and on holdout records
(non-members), against the baseline of the same model fitted on real holdout rows (the reference sample the
generator never saw) and scored on the same members: what population data alone lets the attacker infer.
`advantage` = accuracy(members | S) − accuracy(members | holdout model); > 0 means S reveals more about its
training records than the population does.
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from threadpoolctl import threadpool_limits

from pipelines.evaluation.attacks.anonymeter import correct_guesses
from pipelines.evaluation.attacks.membership import TargetSplit
from pipelines.evaluation.fidelity import NUMERIC_KINDS
from pipelines.evaluation.utility import featurise


def _fit(frame: pd.DataFrame, known: Sequence[Any], secret: Any, seed: int):
    x = featurise(frame, known)
    if secret.kind in NUMERIC_KINDS:
        return RandomForestRegressor(n_estimators=100, random_state=seed, n_jobs=1).fit(
            x, frame[secret.name].to_numpy(dtype=float)
        )
    y = frame[secret.name].astype(str).to_numpy()
    return RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=1).fit(x, y)


def _accuracy(model, targets: pd.DataFrame, known: Sequence[Any], secret: Any, tolerance: float) -> float:
    guesses = model.predict(featurise(targets, known))
    truth = (
        targets[secret.name].to_numpy(dtype=float)
        if secret.kind in NUMERIC_KINDS
        else targets[secret.name].astype(str).to_numpy()
    )
    return float(correct_guesses(guesses, truth, secret, tolerance).mean())


def baseline_accuracy(
    split: TargetSplit, columns: Sequence[Any], secret: str, known: Sequence[str], tolerance: float, seed: int
) -> float:
    """The baseline of ``attribute_inference``, from real rows alone: accuracy on the members of the forest
    fitted on the holdout reference rows. The baseline stage computes it once per data set."""
    by_name = {c.name: c for c in columns}
    cols, col = [by_name[c] for c in known], by_name[secret]
    with threadpool_limits(limits=1):
        return _accuracy(_fit(split.reference, cols, col, seed), split.members, cols, col, tolerance)


def attribute_inference(
    split: TargetSplit,
    synth: pd.DataFrame,
    columns: Sequence[Any],
    secret: str,
    known: Sequence[str],
    tolerance: float,
    seed: int,
    baseline: float | None = None,
) -> dict:
    """Accuracy of a random forest (100 trees) fitted on S[known] → S[secret] on members and non-members, and
    of the same model fitted on the holdout reference rows (baseline) on members (`baseline`: its
    ``baseline_accuracy``, computed earlier)."""
    by_name = {c.name: c for c in columns}
    cols, col = [by_name[c] for c in known], by_name[secret]
    if baseline is None:
        baseline = baseline_accuracy(split, columns, secret, known, tolerance, seed)
    with threadpool_limits(limits=1):
        attacker = _fit(synth, cols, col, seed)
        members = _accuracy(attacker, split.members, cols, col, tolerance)
        out = {
            "secret": secret,
            "known_columns": list(known),
            "accuracy_members": members,
            "accuracy_non_members": _accuracy(attacker, split.non_members, cols, col, tolerance),
            "baseline_accuracy_members": baseline,
        }
    return {
        **out,
        "advantage": members - out["baseline_accuracy_members"],
        "baseline": f"random forest fitted on {len(split.reference)} real holdout rows",
    }
