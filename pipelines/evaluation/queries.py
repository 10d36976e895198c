"""PEARL's additional tabular tasks (Liew et al., appendix I.1): the error of 1,000 random range queries over
three attributes, and the 2-way marginal error.

A range query picks k distinct columns; for a numeric column an interval [a, b] with a, b uniform on the
schema bounds, for a categorical/binary column a non-empty random subset of the schema's categories (each
kept with probability ½). Its answer on a table is the share of rows inside every range; the error is
|answer(R) − answer(S)|. The queries come from the schema alone. These read real rows: not covered by DP.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from pipelines.evaluation.fidelity import NUMERIC_KINDS
from pipelines.evaluation.marginals import numeric_values

Query = list[tuple[Any, tuple]]  # [(schema column, (lower, upper) or allowed categories), ...]


def random_range_queries(columns: Sequence[Any], n_queries: int, k: int, rng: np.random.Generator) -> list[Query]:
    """`n_queries` random range queries over `k` distinct columns each (see the module docstring)."""
    columns = list(columns)
    if len(columns) < k:
        raise ValueError(f"range queries over {k} attributes need at least {k} columns, got {len(columns)}")
    queries = []
    for _ in range(n_queries):
        query: Query = []
        for i in rng.choice(len(columns), size=k, replace=False):
            col = columns[i]
            if col.kind in NUMERIC_KINDS:
                query.append((col, tuple(np.sort(rng.uniform(col.lower, col.upper, 2)))))
            else:
                keep = np.zeros(len(col.categories), dtype=bool)
                while not keep.any():
                    keep = rng.random(len(col.categories)) < 0.5
                query.append((col, tuple(c for c, kept in zip(col.categories, keep) if kept)))
        queries.append(query)
    return queries


def range_query_answer(table: dict[str, np.ndarray], query: Query) -> float:
    """Share of the rows of `table` (``query_arrays``) inside every range of `query`."""
    inside = np.ones(len(next(iter(table.values()))), dtype=bool)
    for col, allowed in query:
        x = table[col.name]
        if col.kind in NUMERIC_KINDS:
            inside &= (x >= allowed[0]) & (x <= allowed[1])
        else:  # by category code; the extra last entry is the code −1 of a value outside the schema's list
            kept = set(allowed)
            inside &= np.array([c in kept for c in col.categories] + [False])[x]
    return float(inside.mean()) if len(inside) else 0.0


def column_arrays(frame: pd.DataFrame, columns: Sequence[Any]) -> dict[str, np.ndarray]:
    """Each schema column of `frame` as one array (numeric as floats), read once for many queries."""
    return {
        c.name: numeric_values(frame, c) if c.kind in NUMERIC_KINDS else frame[c.name].to_numpy(dtype=object)
        for c in columns
    }


def query_arrays(frame: pd.DataFrame, columns: Sequence[Any]) -> dict[str, np.ndarray]:
    """``column_arrays`` for range queries: a categorical column as its category's index in the schema's list (−1
    outside it), so a query compares integers, not objects (far faster on large tables)."""
    return {
        c.name: numeric_values(frame, c)
        if c.kind in NUMERIC_KINDS
        else pd.Categorical(frame[c.name], categories=list(c.categories)).codes.astype(np.int64)
        for c in columns
    }


def real_answers(
    train: pd.DataFrame, holdout: pd.DataFrame, columns: Sequence[Any], n_queries: int, k: int, seed: int
) -> dict | None:
    """The real side of ``range_query_error`` (JSON): the queries' answers on R, and the mean |answer(R) −
    answer(T)|; None with fewer than k columns."""
    if len(list(columns)) < k:
        return None
    queries = random_range_queries(columns, n_queries, k, np.random.default_rng(seed))
    r, t = (query_arrays(f, columns) for f in (train, holdout))
    real = np.array([range_query_answer(r, q) for q in queries])
    return {
        "answers": real.tolist(),
        "holdout_reference": float(np.abs(real - [range_query_answer(t, q) for q in queries]).mean()),
    }


def range_query_error(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    n_queries: int,
    k: int,
    seed: int,
    real: dict | None = None,
) -> dict:
    """Mean and max |answer(R) − answer(S)| over `n_queries` random k-attribute range queries (PEARL I.1: 1,000
    queries, k = 3); the same mean for the real holdout T is the sampling-noise floor. `real`: ``real_answers``
    of the same R, T and arguments, computed earlier."""
    if len(list(columns)) < k:
        return {"skipped": f"the schema has fewer than k = {k} columns"}
    cached = real_answers(train, holdout, columns, n_queries, k, seed) if real is None else real
    queries = random_range_queries(columns, n_queries, k, np.random.default_rng(seed))
    s = query_arrays(synth, columns)
    errors = np.abs(np.asarray(cached["answers"], dtype=float) - [range_query_answer(s, q) for q in queries])
    return {
        "n_queries": n_queries,
        "k": k,
        "mean_error": float(errors.mean()),
        "max_error": float(errors.max()),
        "holdout_reference_mean_error": cached["holdout_reference"],
    }
