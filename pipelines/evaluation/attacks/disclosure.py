"""Presence and attribute disclosure as in Diesendruck's thesis, §4.3 (after Choi et al. 2017), and the
exact-match and near-duplicate rates.

Three real sets of equal size (the thesis: 5 % of the training data): P ⊂ training rows, T′ ⊂ holdout
(non-members) and B ⊂ holdout (the baseline), T′ ∩ B = ∅. Distances are Gower distances (``distance``).

- Presence: a candidate from P ∪ T′ is declared a training member when S has an ε-close neighbour. Sweeping
  ε, precision = |declared ∩ P| / |declared| and sensitivity = |declared ∩ P| / |P|; the thesis reports the
  sensitivity at the largest ε whose precision exceeds 55 %. The baseline runs the same attack with B in
  place of S: a fresh real sample "released" instead of synthetic rows.
- Attribute: half of the columns are known (a seeded, data-independent choice); each unknown column of a
  candidate is imputed from its 5 nearest synthetic rows on the known columns (numeric: mean; categorical and
  binary: most frequent) and is correct within 5 % (numeric: of the schema range; otherwise exact).
  Sensitivity = correct / unknown values of the candidates; precision = correct / claimed values, where every
  numeric or categorical imputation is a claim and a binary one only when it is the positive (second schema)
  category, the medGAN reading of precision for binary features; a binary value counts towards sensitivity
  only when it is truly positive. Reported for P and T′ against S, and for P against B (baseline).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from pipelines.evaluation.attacks.anonymeter import correct_guesses
from pipelines.evaluation.attacks.distance import gower_features, nearest
from pipelines.evaluation.fidelity import NUMERIC_KINDS
from pipelines.evaluation.marginals import numeric_values, row_sample

PRECISION_FLOOR = 0.55


def presence_at_precision(
    member_distances: np.ndarray, non_member_distances: np.ndarray, floor: float = PRECISION_FLOOR
) -> dict:
    """Sensitivity and precision of "member iff distance ≤ ε" at the largest ε (among the candidates' own
    distances, where the classification changes) whose precision exceeds `floor`."""
    d = np.concatenate([member_distances, non_member_distances])
    member = np.repeat([True, False], [len(member_distances), len(non_member_distances)])
    best = {"epsilon": None, "sensitivity": 0.0, "precision": None}
    for eps in np.unique(d):
        declared = d <= eps
        precision = float(member[declared].mean())
        if precision > floor:
            best = {
                "epsilon": float(eps),
                "sensitivity": float(member[declared].sum() / len(member_distances)),
                "precision": precision,
            }
    return best


def impute(
    candidates: pd.DataFrame, released: pd.DataFrame, known: Sequence[Any], unknown: Sequence[Any], k: int
) -> dict[str, np.ndarray]:
    """Each unknown column of each candidate from its k nearest `released` rows on the known columns (Gower):
    the mean for numeric columns, the most frequent value (first in schema order on ties) otherwise."""
    _, idx = nearest(gower_features(candidates, known), gower_features(released, known), k)
    out = {}
    for col in unknown:
        if col.kind in NUMERIC_KINDS:
            out[col.name] = numeric_values(released, col)[idx].mean(axis=1)
        else:
            codes = pd.Categorical(released[col.name], categories=list(col.categories)).codes
            neigh = codes[idx]
            counts = np.stack([(neigh == c).sum(axis=1) for c in range(len(col.categories))], axis=1)
            out[col.name] = np.asarray(col.categories, dtype=object)[counts.argmax(axis=1)]
    return out


def attribute_disclosure_scores(
    candidates: pd.DataFrame,
    released: pd.DataFrame,
    known: Sequence[Any],
    unknown: Sequence[Any],
    k: int,
    tolerance: float,
) -> dict:
    """Sensitivity and precision of the k-NN imputation of the unknown columns (module docstring)."""
    guesses = impute(candidates, released, known, unknown, k)
    correct = claimed = correct_claims = relevant = correct_relevant = 0
    for col in unknown:
        truth = numeric_values(candidates, col) if col.kind in NUMERIC_KINDS else candidates[col.name].to_numpy()
        ok = correct_guesses(guesses[col.name], truth, col, tolerance)
        correct += int(ok.sum())
        if col.kind == "binary":
            claim, positive = guesses[col.name] == col.categories[1], truth == col.categories[1]
        else:
            claim = positive = np.ones(len(truth), dtype=bool)
        claimed, correct_claims = claimed + int(claim.sum()), correct_claims + int((ok & claim).sum())
        relevant, correct_relevant = relevant + int(positive.sum()), correct_relevant + int((ok & positive).sum())
    return {
        "sensitivity": correct_relevant / relevant if relevant else None,
        "precision": correct_claims / claimed if claimed else None,
        "accuracy": correct / (len(candidates) * len(unknown)),
    }


def disclosure(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    fraction: float,
    max_rows: int | None,
    k: int,
    tolerance: float,
    rng: np.random.Generator,
) -> dict:
    """Presence and attribute disclosure (thesis §4.3) on three equal real sets of ⌈fraction·|train|⌉ rows
    (at most half the holdout each, and at most `max_rows`: the sets' cost is their size times S's)."""
    columns = list(columns)
    size = min(int(np.ceil(fraction * len(train))), len(holdout) // 2, max_rows or len(train))
    order = rng.permutation(len(holdout))
    p = train.iloc[np.sort(rng.choice(len(train), size, replace=False))]
    t, b = holdout.iloc[np.sort(order[:size])], holdout.iloc[np.sort(order[size : 2 * size])]
    g = {name: gower_features(f, columns) for name, f in (("p", p), ("t", t), ("s", synth), ("b", b))}
    dist = {(c, r): nearest(g[c], g[r])[0][:, 0] for c in ("p", "t") for r in ("s", "b")}
    half = sorted(rng.choice(len(columns), len(columns) // 2, replace=False))
    known = [columns[i] for i in half]
    unknown = [c for i, c in enumerate(columns) if i not in set(half)]
    return {
        "set_size": size,
        "precision_floor": PRECISION_FLOOR,
        "presence": presence_at_precision(dist["p", "s"], dist["t", "s"]),
        "presence_baseline": presence_at_precision(dist["p", "b"], dist["t", "b"]),
        "attribute": {
            "known_columns": [c.name for c in known],
            "neighbours": k,
            "tolerance": tolerance,
            "members": attribute_disclosure_scores(p, synth, known, unknown, k, tolerance),
            "non_members": attribute_disclosure_scores(t, synth, known, unknown, k, tolerance),
            "baseline_members": attribute_disclosure_scores(p, b, known, unknown, k, tolerance),
        },
    }


def _row_keys(frame: pd.DataFrame, columns: Sequence[Any]) -> np.ndarray:
    """One hash per row over the schema columns (numeric values as floats), for exact-match lookups."""
    canon = pd.DataFrame(
        {c.name: numeric_values(frame, c) if c.kind in NUMERIC_KINDS else frame[c.name].astype(str) for c in columns}
    )
    return pd.util.hash_pandas_object(canon, index=False).to_numpy()


def copies(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    near_distance: float,
    max_rows: int | None,
    pool_max_rows: int | None,
    rng: np.random.Generator,
) -> dict:
    """Exact-match rate (synthetic rows equal to a training row in every column) and near-duplicate rate
    (Gower distance to the closest training record, DCR, ≤ `near_distance`), with the same rates for the real
    holdout as the baseline a fresh sample of the population gets, and both as counts [matches, rows] (the
    copy gate's interval); DCR quantiles of both (on at most `max_rows` seeded rows each, to a seeded sample of at
    most `pool_max_rows` training rows, drawn after them). DCR is reported, never gated on alone."""
    keys = set(_row_keys(train, columns).tolist())
    counts = {
        name: [int(sum(k in keys for k in _row_keys(f, columns))), len(f)]
        for name, f in (("synthetic", synth), ("holdout", holdout))
    }
    exact = {name: k / n if n else 0.0 for name, (k, n) in counts.items()}
    targets = {
        name: f.iloc[row_sample(len(f), max_rows, rng)] for name, f in (("synthetic", synth), ("holdout", holdout))
    }
    pool = gower_features(train.iloc[row_sample(len(train), pool_max_rows, rng)], columns)
    dcr = {name: nearest(gower_features(f, columns), pool)[0][:, 0] for name, f in targets.items()}
    return {
        "exact_match_rate": exact["synthetic"],
        "holdout_exact_match_rate": exact["holdout"],
        "exact_match_counts": counts,
        "near_duplicate_distance": near_distance,
        "near_duplicate_rate": float((dcr["synthetic"] <= near_distance).mean()),
        "holdout_near_duplicate_rate": float((dcr["holdout"] <= near_distance).mean()),
        "dcr_quantiles": {
            name: {f"q{q:02d}": float(np.percentile(d, q)) for q in (1, 5, 50)} for name, d in dcr.items()
        },
    }
