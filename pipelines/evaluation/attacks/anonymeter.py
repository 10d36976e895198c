"""Singling-out, linkability and inference risks of Giomi et al. (2023, "A Unified Framework for Quantifying
Privacy Risk in Synthetic Data", PoPETs; the `anonymeter` library), implemented from the paper's definitions
because the anonymeter package pins numpy < 2 (docs/privacy-risk.md).

Each attack is run three times: the main attack on training records (targets), the same attack on control
records (real rows the generator never saw) and a naive baseline that ignores S. With success rates estimated
by the Wilson score interval (eq. 1),

    r̂ = (k + z²/2) / (n + z²),   δr = z / (n + z²) · √(k (n − k) / n + z²/4),

the privacy risk is the main attack's excess success over the control attack (eq. 2),

    R = (r_train − r_control) / (1 − r_control),

with its error propagated from δr_train and δr_control. R ≈ 0: S tells the attacker nothing about the
training records beyond what it tells about any record of the population. The attack is informative only if
r_train exceeds the baseline's rate (reported as `baseline_rate`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy.stats import hypergeom

from pipelines.evaluation.attacks.distance import gower_features, nearest
from pipelines.evaluation.fidelity import NUMERIC_KINDS
from pipelines.evaluation.marginals import numeric_values
from pipelines.evaluation.queries import column_arrays, query_arrays

Z = 1.96  # 95 % intervals
Predicate = tuple[Any, str, Any]  # (schema column, "==" | "<=" | ">=", value)


def wilson(k: int, n: int, z: float = Z) -> tuple[float, float]:
    """Wilson score estimate of a success rate from k successes in n trials, and its half-width (eq. 1)."""
    if n == 0:
        return 0.0, 1.0
    return (k + z * z / 2) / (n + z * z), z / (n + z * z) * np.sqrt(k * (n - k) / n + z * z / 4)


def risk_interval(main: tuple[float, float], control: tuple[float, float], z: float = Z) -> tuple[float, float]:
    """R = (r_train − r_control)/(1 − r_control) (eq. 2) and its error z·σ_R, propagated from the Wilson
    errors of both rates (eq. 1) at the normal quantile z."""
    (r_m, e_m), (r_c, e_c) = wilson(*main, z), wilson(*control, z)
    return float((r_m - r_c) / (1 - r_c)), float(np.hypot(e_m / (1 - r_c), e_c * (1 - r_m) / (1 - r_c) ** 2))


def privacy_risk(main: tuple[int, int], control: tuple[int, int], baseline: tuple[int, int]) -> dict:
    """R (``risk_interval``) with its 95 % interval, the three Wilson rates and the raw counts (check@gen's
    risk gates recompute the bound at their family-wise level from them)."""
    risk, error = risk_interval(main, control)
    r_m, r_c, r_b = (wilson(*x)[0] for x in (main, control, baseline))
    return {
        "risk": risk,
        "risk_ci95": [float(np.clip(risk - error, 0, 1)), float(np.clip(risk + error, 0, 1))],
        "train_rate": float(r_m),
        "control_rate": float(r_c),
        "baseline_rate": float(r_b),
        "n_attacks": main[1],
        "counts": {"main": list(main), "control": list(control)},
        "informative": bool(r_m > r_b),
    }


# --- singling out ---------------------------------------------------------------------------------


def category_code(col: Any, value: Any) -> int:
    """`value`'s index in the schema's category list, −1 outside it (``query_arrays``'s code of such a value)."""
    return next((i for i, c in enumerate(col.categories) if c == value), -1)


def _matches(table: dict[str, np.ndarray], query: Sequence[Predicate]) -> np.ndarray:
    """Boolean mask of the rows of `table` (``query_arrays``: a categorical column as category codes, compared as
    integers, not objects; singling out on 800,000 training rows) satisfying every predicate of `query`."""
    mask = np.ones(len(next(iter(table.values()))), dtype=bool)
    for col, op, value in query:
        x = table[col.name]
        if col.kind not in NUMERIC_KINDS:
            value = category_code(col, value)
        mask &= (x == value) if op == "==" else (x <= value) if op == "<=" else (x >= value)
    return mask


def univariate_queries(synth: pd.DataFrame, columns: Sequence[Any]) -> list[list[Predicate]]:
    """Every single-attribute predicate that singles out one synthetic row: a value that occurs once in S,
    and for numeric columns `<= min` and `>= max` when the extreme is unique."""
    queries = []
    for col in columns:
        x = numeric_values(synth, col) if col.kind in NUMERIC_KINDS else synth[col.name].to_numpy()
        values, counts = np.unique(x, return_counts=True)
        queries += [[(col, "==", v)] for v in values[counts == 1]]
        if col.kind in NUMERIC_KINDS and len(values):
            queries += [
                [(col, op, v)] for op, v, c in (("<=", values[0], counts[0]), (">=", values[-1], counts[-1])) if c == 1
            ]
    return queries


def multivariate_queries(
    synth: pd.DataFrame,
    columns: Sequence[Any],
    n_cols: int,
    n_queries: int,
    rng: np.random.Generator,
    max_tries_factor: int = 20,
) -> list[list[Predicate]]:
    """Up to `n_queries` distinct conjunctions over `n_cols` random columns built from a random synthetic row
    (categorical: `== value`; numeric: `<= value` or `>= value` at random), kept when they single out exactly
    one synthetic row."""
    columns, queries, seen = list(columns), [], set()
    table, codes = column_arrays(synth, columns), query_arrays(synth, columns)
    for _ in range(max_tries_factor * n_queries):
        if len(queries) == n_queries:
            break
        row = int(rng.integers(len(synth)))
        query = [
            (
                columns[i],
                "==" if columns[i].kind not in NUMERIC_KINDS else ("<=", ">=")[rng.integers(2)],
                table[columns[i].name][row],
            )
            for i in sorted(rng.choice(len(columns), n_cols, replace=False))
        ]
        key = tuple((c.name, op, str(v)) for c, op, v in query)
        if key not in seen and _matches(codes, query).sum() == 1:
            seen.add(key)
            queries.append(query)
    return queries


def random_queries(
    columns: Sequence[Any], n_cols: int, n_queries: int, rng: np.random.Generator
) -> list[list[Predicate]]:
    """The baseline attacker's guesses: conjunctions over `n_cols` random columns with values drawn from the
    schema alone (numeric: uniform on the bounds with a random `<=`/`>=`; categorical: `==` a random category)."""
    columns, out = list(columns), []
    for _ in range(n_queries):
        query = []
        for i in rng.choice(len(columns), n_cols, replace=False):
            col = columns[i]
            if col.kind in NUMERIC_KINDS:
                query.append((col, ("<=", ">=")[rng.integers(2)], float(rng.uniform(col.lower, col.upper))))
            else:
                query.append((col, "==", col.categories[rng.integers(len(col.categories))]))
        out.append(query)
    return out


def exchangeable_successes(
    train_matches: np.ndarray, control_matches: np.ndarray, n_train: int, n_control: int
) -> float:
    """Expected number of queries singling out one training row if membership were irrelevant: given that
    query q matches t_q = a_q + b_q rows of the n training and m control rows, exchangeability puts a
    hypergeometric number of them in the training set, so Σ_q P(a_q = 1 | t_q) with
    P(a = 1 | t) = n · C(m, t − 1) / C(n + m, t) (0 when t = 0).

    This is the control attack's success at the training set's size. anonymeter instead fits a model of the
    singling-out probability against the control set's size and extrapolates; measured on real data
    (docs/privacy-risk.md), that extrapolation is biased when the control set is much smaller."""
    t = np.asarray(train_matches) + np.asarray(control_matches)
    return float(hypergeom.pmf(1, n_train + n_control, n_train, t).sum())


def singling_out(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    control: pd.DataFrame,
    columns: Sequence[Any],
    n_attacks: int,
    n_cols: int,
    rng: np.random.Generator,
) -> dict:
    """Singling-out risk (Giomi et al. §4.1): queries built from S that single out one synthetic row; success =
    the query matches exactly one training row (main); control = the expected main success were training and
    control rows exchangeable (``exchangeable_successes``); baseline = schema-random queries on the training
    rows. `n_cols` = 1 is the univariate attack."""
    queries = (
        univariate_queries(synth, columns)
        if n_cols == 1
        else multivariate_queries(synth, columns, n_cols, n_attacks, rng)
    )
    if len(queries) > n_attacks:
        queries = [queries[i] for i in rng.choice(len(queries), n_attacks, replace=False)]
    if not queries:
        return {"skipped": "no query singles out a synthetic row", "n_cols": n_cols}
    n, real, held_out = len(queries), query_arrays(train, columns), query_arrays(control, columns)
    a = np.array([_matches(real, q).sum() for q in queries])
    main = int((a == 1).sum())
    ctrl = int(
        round(exchangeable_successes(a, [_matches(held_out, q).sum() for q in queries], len(train), len(control)))
    )
    base = int(sum(_matches(real, q).sum() == 1 for q in random_queries(columns, n_cols, n, rng)))
    return {**privacy_risk((main, n), (ctrl, n), (base, n)), "n_cols": n_cols}


# --- linkability and inference ---------------------------------------------------------------------


def linkability(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    control: pd.DataFrame,
    columns: Sequence[Any],
    aux: tuple[Sequence[str], Sequence[str]],
    n_attacks: int,
    n_neighbors: int,
    rng: np.random.Generator,
) -> dict:
    """Linkability risk (§4.2): the attacker holds two records of one person, with the disjoint column sets
    `aux` = (A, B); he links them if the `n_neighbors` synthetic rows nearest on A and those nearest on B
    (Gower distance) share a row. Baseline: two random sets of synthetic rows."""
    by_name = {c.name: c for c in columns}
    cols_a, cols_b = ([by_name[c] for c in side] for side in aux)
    n = min(n_attacks, len(train), len(control))

    def successes(targets: pd.DataFrame) -> int:
        _, ia = nearest(gower_features(targets, cols_a), gower_features(synth, cols_a), n_neighbors)
        _, ib = nearest(gower_features(targets, cols_b), gower_features(synth, cols_b), n_neighbors)
        return int(sum(bool(set(a) & set(b)) for a, b in zip(ia, ib)))

    main = successes(train.iloc[rng.choice(len(train), n, replace=False)])
    ctrl = successes(control.iloc[rng.choice(len(control), n, replace=False)])
    base = int(
        sum(
            bool(
                set(rng.choice(len(synth), n_neighbors, replace=False))
                & set(rng.choice(len(synth), n_neighbors, replace=False))
            )
            for _ in range(n)
        )
    )
    return {
        **privacy_risk((main, n), (ctrl, n), (base, n)),
        "aux_columns": [list(aux[0]), list(aux[1])],
        "n_neighbors": n_neighbors,
    }


def correct_guesses(guesses: np.ndarray, truth: np.ndarray, col: Any, tolerance: float) -> np.ndarray:
    """Exact match for a categorical/binary secret; |guess − truth| ≤ tolerance · (upper − lower) for a numeric one."""
    if col.kind in NUMERIC_KINDS:
        return np.abs(guesses.astype(float) - truth.astype(float)) <= tolerance * (col.upper - col.lower)
    return guesses == truth


def inference(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    control: pd.DataFrame,
    columns: Sequence[Any],
    secret: str,
    aux: Sequence[str],
    n_attacks: int,
    tolerance: float,
    rng: np.random.Generator,
) -> dict:
    """Inference risk (§4.3): the attacker knows the `aux` columns of a target and guesses its `secret` as that
    of the nearest synthetic row on `aux` (Gower); ``correct_guesses`` scores it. Baseline: the secret of a
    random synthetic row."""
    by_name = {c.name: c for c in columns}
    cols, col = [by_name[c] for c in aux], by_name[secret]
    n = min(n_attacks, len(train), len(control))
    pool = gower_features(synth, cols)
    secrets = synth[secret].to_numpy()

    def successes(targets: pd.DataFrame) -> int:
        _, idx = nearest(gower_features(targets, cols), pool)
        return int(correct_guesses(secrets[idx[:, 0]], targets[secret].to_numpy(), col, tolerance).sum())

    main = successes(train.iloc[rng.choice(len(train), n, replace=False)])
    ctrl = successes(control.iloc[rng.choice(len(control), n, replace=False)])
    truth = train[secret].to_numpy()[rng.choice(len(train), n, replace=False)]
    base = int(correct_guesses(secrets[rng.choice(len(synth), n)], truth, col, tolerance).sum())
    return {**privacy_risk((main, n), (ctrl, n), (base, n)), "secret": secret, "aux_columns": list(aux)}
