"""Values rounded as the table rounds them: a numeric column's `rounding`.

A table's values are rarely all on one grid. Incomes are whole dollars, yet most are whole thousands and many whole
ten-thousands; a loan amount is a multiple of $25, and most are multiples of $1,000. Published at the step alone,
a synthetic income is a whole number of dollars with no more chance of being round than any other: a classifier
tells such rows from the table's at once. `rounding` says, by magnitude, how the values are shared out among
coarser grids:

    rounding: [[0, []], [10000, [[1, 0.10], [1000, 0.40], [5000, 0.20], [10000, 0.30]]]]

reads "from 10,000 up, 10 % of the values are on the step's grid (1) and on no coarser one listed, 40 % are whole
thousands but not multiples of 5,000, 20 % multiples of 5,000 but not of 10,000, 30 % multiples of 10,000". Each
piece is [from magnitude |v|, [[grid, share], ...]]: the first piece starts at 0, each later one above the last;
its grids increase, each a whole multiple of the one before, the first a multiple of the column's step at that
magnitude; the shares sum to 1. An empty list is the step alone. `rounding: discover` measures it with the step's
granularity histogram (pipelines/privacy/discovery.py; post-processing of the same DP release).

Publishing (`round_as_table`). A synthetic value v (already on its step's grid) is rounded to the nearest multiple
of one grid g_L drawn with probability p_L. Rounding a value spread evenly at the finer scale to g_L lands it on
g_M (and on no coarser grid of the list) with probability T[L, M] = g_L/g_M − g_L/g_{M+1} for M ≥ L (g_L/g_M for
the coarsest), so the published shares are q = Tᵀp. p is the non-negative least-squares solution of Tᵀp = q for the
documented or discovered shares q (`probabilities`): exact where the triangular system's solution is non-negative,
else the nearest shares rounding can give (a coarser grid's share below what rounding to the finer grids already
lands on it cannot be met). A value whose rounding would leave the bounds keeps its step's grid.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import numpy as np
from scipy.optimize import nnls

from pipelines.errors import SchemaError

Rounding = tuple[tuple[float, tuple[tuple[float, float], ...]], ...]
SHARE_SLACK = 1e-3  # how far a piece's shares may sum from 1 (shares written to four decimals)


def multiples(k: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """k·s for whole numbers `k` and their `steps` s, each the double nearest the decimal it stands for (1054 × 0.01 is
    10.54, not the 10.540000000000001 of the product)."""
    out = np.asarray(k, dtype=np.float64) * steps
    for s in np.unique(steps):
        at = steps == s
        out[at] = np.round(out[at], max(0, -int(Decimal(repr(float(s))).normalize().as_tuple().exponent)))
    return out


def probabilities(grids: tuple[float, ...], shares: tuple[float, ...]) -> np.ndarray:
    """p with Tᵀp = q for the grids g and shares q of one piece (module docstring), non-negative, summing to 1."""
    g = np.asarray(grids, dtype=np.float64)
    upper = np.append(g[1:], np.inf)
    t = np.triu(g[:, None] / g[None, :] - g[:, None] / upper[None, :])  # T[L, M], zero below the diagonal
    p, _ = nnls(t.T, np.asarray(shares, dtype=np.float64))
    return p / p.sum() if p.sum() > 0 else np.eye(len(g))[0]


def round_as_table(
    values: np.ndarray, rounding: Rounding, lower: float | None, upper: float | None, rng: np.random.Generator
) -> np.ndarray:
    """`values` (float64, on their step's grid) each rounded to a grid drawn by its magnitude's piece of `rounding`
    (module docstring), within [`lower`, `upper`] where the column has bounds."""
    out = np.array(values, dtype=np.float64)
    starts = np.asarray([f for f, _ in rounding])
    piece = np.maximum(np.searchsorted(starts, np.abs(out), side="right") - 1, 0)
    for i, (_, grid_shares) in enumerate(rounding):
        rows = np.flatnonzero(piece == i)
        if not grid_shares or not rows.size:
            continue
        grids = np.asarray([g for g, _ in grid_shares])
        g = grids[rng.choice(len(grids), size=rows.size, p=probabilities(*zip(*grid_shares)))]
        rounded = multiples(np.rint(out[rows] / g), g)
        inside = np.ones(rows.size, dtype=bool)
        if lower is not None and upper is not None:
            inside = (rounded >= lower) & (rounded <= upper)
        out[rows[inside]] = rounded[inside]
    return out


def rounding_value(rounding: Rounding) -> list[list[Any]]:
    """A column's `rounding` as the schema writes it."""
    return [[f, [list(gs) for gs in shares]] for f, shares in rounding]


def parse_rounding(raw: Any, step_at: Any, file: str, name: str) -> Rounding:
    """`rounding` (module docstring) as pieces; `step_at(magnitude)`: the column's step there (None without a
    step). SchemaError naming the column and the piece otherwise."""
    fix = (
        "write rounding as [[from, [[grid, share], ...]], ...] (e.g. [[0, [[1, 0.6], [1000, 0.4]]]] for 40 % of "
        "the values in whole thousands), grids multiples of the column's step, shares summing to 1; or "
        "rounding: discover, or remove it."
    )

    def refuse(problem: str) -> SchemaError:
        return SchemaError(problem, file=file, column=name, fix=fix)

    if not isinstance(raw, list) or not raw or not all(isinstance(p, list) and len(p) == 2 for p in raw):
        raise refuse(f"rounding is {raw!r}, not [from, [[grid, share], ...]] pieces.")
    out = []
    for start, pairs in raw:
        if isinstance(start, bool) or not isinstance(start, (int, float)) or not math.isfinite(start) or start < 0:
            raise refuse(f"rounding piece starts at {start!r}, not a magnitude ≥ 0.")
        if not isinstance(pairs, list) or not all(
            isinstance(q, list)
            and len(q) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in q)
            for q in pairs
        ):
            raise refuse(f"rounding piece from {start:g} is {pairs!r}, not a list of [grid, share] pairs.")
        grids, shares = [float(g) for g, _ in pairs], [float(q) for _, q in pairs]
        step = step_at(float(start))
        if pairs and step is None:
            raise refuse("rounding needs the column's step (the finest grid its values are on).")
        chained = all(g > 0 for g in grids) and all(
            b > a and abs(b / a - round(b / a)) < 1e-9 for a, b in zip(grids, grids[1:])
        )
        if pairs and not (chained and abs(grids[0] / step - round(grids[0] / step)) < 1e-9 and grids[0] >= step):
            raise refuse(
                f"rounding grids {grids} from {start:g} are not increasing multiples of each other and of the "
                f"step {step:g} there."
            )
        if pairs and (min(shares) < 0 or abs(sum(shares) - 1) > SHARE_SLACK):
            raise refuse(f"rounding shares {shares} from {start:g} are not non-negative numbers summing to 1.")
        out.append((float(start), tuple(zip(grids, shares))))
    starts = [f for f, _ in out]
    if starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:])):
        raise refuse(f"rounding pieces start at {starts}: the first must start at 0 and each later one above the last.")
    return tuple(out)
