"""A numeric column that is a documented formula of other columns: `derived: {formula: "...", tolerance: t}`.

A loan's monthly installment is fixed by its amount, rate and term (the annuity formula, installment =
P·r / (1 − (1 + r)^−n) with r the monthly rate); a body-mass index by weight and height. Such a column is never
modelled: no generator measures it, and the release publishes the formula of each synthetic row's own sources, so
the relation holds in every published row as the documentation states it. The formula is public (the schema), so
computing it on the synthetic rows is post-processing: it costs no privacy budget.

Validation reads the real column only to check it: a row whose value is further than `tolerance` from the formula
of its sources (or null where the formula is not) breaks the documentation and follows the column's on_invalid
(dropped and counted, or refused naming the rows), like a derived category's mismatch.

Grammar: numbers, the names of the schema's numeric columns (or of categorical columns whose categories are
numbers: a term of 36 or 60 months), + − * / ** and unary −, parentheses, and the functions of FUNCTIONS. It is
parsed with Python's `ast` into this small grammar and evaluated on numpy arrays (never with `eval`). The value is
null where a source is null or where the formula has no finite value (a division by zero).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
import pandas as pd

FUNCTIONS: dict[str, Callable[..., np.ndarray]] = {
    "abs": np.abs,
    "sqrt": np.sqrt,
    "exp": np.exp,
    "log": np.log,
    "log10": np.log10,
    "min": np.minimum,
    "max": np.maximum,
}
_BINARY: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.divide,
    ast.Pow: np.power,
}
_ARITY = {"min": 2, "max": 2}  # the others take one argument
# Float arithmetic in a different order (the source system's, this module's) moves a value by a few ulps: a real
# value within this share of the formula's magnitude (on top of the documented tolerance) agrees with it.
RELATIVE_SLACK = 1e-9


class FormulaError(ValueError):
    """A formula outside the grammar; the message says what and where (the schema names file and column)."""


@dataclass(frozen=True)
class Formula:
    """A parsed formula: its text, the columns it reads (in order of first use) and its tolerance."""

    text: str
    names: tuple[str, ...]
    tolerance: float

    def evaluate(self, frame: pd.DataFrame) -> np.ndarray:
        """The formula on the rows of `frame` (which holds every column of `names`), as float64; NaN where a
        source is null or the result is not finite."""
        values = {n: pd.to_numeric(frame[n], errors="coerce").astype("float64").to_numpy() for n in self.names}
        with np.errstate(all="ignore"):
            out = np.asarray(_evaluate(_parse(self.text), values), dtype=np.float64)
        out = np.broadcast_to(out, (len(frame),)).copy()
        out[~np.isfinite(out)] = np.nan
        return out

    def agrees(self, value: np.ndarray, expected: np.ndarray) -> np.ndarray:
        """Whether each real `value` is within the tolerance of its row's `expected` formula value (both null
        agrees; one null does not)."""
        both = np.isfinite(value) & np.isfinite(expected)
        with np.errstate(invalid="ignore"):
            close = np.abs(value - expected) <= self.tolerance + RELATIVE_SLACK * np.maximum(1.0, np.abs(expected))
        return (both & close) | (np.isnan(value) & np.isnan(expected))

    def to_dict(self) -> dict[str, float | str]:
        return {"formula": self.text, "tolerance": self.tolerance}


def parse_formula(text: str, tolerance: float = 0.0) -> Formula:
    """`text` checked against the grammar (module docstring); FormulaError naming what is not in it."""
    tree = _parse(text)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in names and not _is_function(node, tree):
            names.append(node.id)
    _check(tree.body)
    if not names:
        raise FormulaError("it reads no column (a constant is not a derived column)")
    return Formula(text, tuple(names), float(tolerance))


def _parse(text: str) -> ast.Expression:
    try:
        return ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise FormulaError(f"it is not an arithmetic expression ({e.msg} at character {e.offset})") from None


def _is_function(node: ast.Name, tree: ast.Expression) -> bool:
    return any(isinstance(n, ast.Call) and n.func is node for n in ast.walk(tree))


def _check(node: ast.AST) -> None:
    """Every node of `node` in the grammar: FormulaError for the first that is not."""
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check(node.left)
        _check(node.right)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _check(node.operand)
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return
    elif isinstance(node, ast.Name):
        return
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
        if node.keywords or len(node.args) != _ARITY.get(node.func.id, 1):
            raise FormulaError(f"{node.func.id}() takes {_ARITY.get(node.func.id, 1)} argument(s), by position")
        for a in node.args:
            _check(a)
    else:
        raise FormulaError(
            f"'{ast.unparse(node)}' is not in the formula grammar (numbers, column names, + - * / **, "
            f"parentheses and the functions {sorted(FUNCTIONS)})"
        )


def _evaluate(node: ast.AST, values: Mapping[str, np.ndarray]) -> np.ndarray | float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, values)
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_evaluate(node.left, values), _evaluate(node.right, values))
    if isinstance(node, ast.UnaryOp):
        operand = _evaluate(node.operand, values)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Name):
        return values[node.id]
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    return FUNCTIONS[node.func.id](*(_evaluate(a, values) for a in node.args))
