"""The allowed range of every numeric configuration key, declared once beside the key's default, and the one check
derived from that declaration.

Each field of a section of params.yaml (pipelines/config.py) and of a generator's parameters
(pipelines/generators/params/<name>.py) carries its Range in its annotation (`Annotated[int, STEPS]`: a Range is
pydantic metadata whose check runs after the type's), so `load_params` refuses a value out of range before any
stage runs, with one InputError naming the file, the key, the range, the value and the fix, and a generator built
directly refuses it with a ParamError naming the key (pipelines/parameters.py `parsed`).

Upper bounds: a count whose every unit costs work (steps, iterations, epochs, resamples, queries) and a width or a
bin count (memory grows with it, often as a power) have a finite upper bound far above any useful value, so that a
slip such as 10**12 is refused instead of running for ever or exhausting memory. A cap on rows (the stage reads
min(cap, rows)) has none: a cap above the table's size is the same as no cap, which the configuration allows (null).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any

from pydantic_core import core_schema


# upper bounds shared by the tables (module docstring): far above the values the bundled configurations use
MAX_STEPS = 10**7  # optimiser steps or iterations of one run: days of compute at milliseconds per step
MAX_EPOCHS = 10**4  # passes over the data (T = ceil(epochs / q) steps, without a step cap)
MAX_DRAWS = 10**5  # resamples, permutations, queries, attack targets: each one a pass over the rows it scores
MAX_WIDTH = 8192  # a layer width or a latent / code dimension: a 8192 x 8192 layer is 67M parameters
MAX_BINS = 1000  # bins per numeric column: a 2-way marginal of two such columns has a million cells
MAX_BATCH = 10**6  # rows in one batch (a batch above the table's rows is the whole table: q = 1)
MAX_SEED = 2**32 - 1  # scikit-learn and NumPy's legacy seeding take 32-bit seeds


class OutOfRange(ValueError):
    """A value outside its key's Range; `allowed` is the Range (pipelines/config.py names the key)."""

    def __init__(self, allowed: "Range") -> None:
        self.allowed = allowed
        super().__init__(allowed.requirement())


@dataclass(frozen=True)
class Range:
    """The values a numeric key allows: a number between `low` and `high` (each bound excluded where `*_open`), an
    integer where `integer`; finite unless `infinite` (ε may be inf); null too where `nullable`; with `each`, a
    list of such numbers (layer widths, bandwidths). `why` says, where it is not obvious, what the range protects."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    nullable: bool = False
    each: bool = False
    infinite: bool = False
    why: str = ""

    def admits(self, value: Any) -> bool:
        """Whether `value` (a number, a list with `each`, or None) lies in the range."""
        if value is None:
            return self.nullable
        if self.each:
            return isinstance(value, (list, tuple)) and all(self._number_in(v) for v in value)
        return self._number_in(value)

    def _number_in(self, v: Any) -> bool:
        if isinstance(v, bool) or not isinstance(v, int if self.integer else (int, float)) or math.isnan(v):
            return False
        if not self.infinite and math.isinf(v):
            return False
        above = v > self.low if self.low_open else v >= self.low
        below = v < self.high if self.high_open else v <= self.high
        return above and below

    def checked(self, value: Any) -> Any:
        """`value` if it lies in the range (a real as a float), else OutOfRange."""
        if not self.admits(value):
            raise OutOfRange(self)
        if value is None:
            return None
        as_read = int if self.integer else float
        return [as_read(v) for v in value] if self.each else as_read(value)

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        """As pydantic metadata (`Annotated[StrictInt, Range(...)]`): `checked` after the type's own validation."""
        return core_schema.no_info_after_validator_function(self.checked, handler(source))

    def describe(self) -> str:
        """The range in words: 'an integer in [1, 10000000]', 'a number in (0, 1)', 'a positive finite number or
        null', 'a list of integers in [1, 8192]'."""
        text = self._one()
        if self.each:
            text = "a list of " + plural(text)
        return text + (" or null" if self.nullable else "")

    def _one(self) -> str:
        noun = "an integer" if self.integer else "a number"
        if self.high < math.inf:
            return (
                f"{noun} in {'(' if self.low_open else '['}{number(self.low)}, {number(self.high)}"
                f"{')' if self.high_open else ']'}"
            )
        bound = f"{'>' if self.low_open else '>='} {number(self.low)}"
        if self.integer:
            return "a positive integer" if (self.low, self.low_open) == (1, False) else f"an integer {bound}"
        if (self.low, self.low_open) == (0, True):
            return "a positive number or inf" if self.infinite else "a positive finite number"
        return f"a number {bound} or inf" if self.infinite else f"a finite number {bound}"

    def requirement(self) -> str:
        """What a value out of range is told: 'must be <describe> (<why>)'."""
        return f"must be {self.describe()}" + (f" ({self.why})" if self.why else "")

    def fix(self, key: str, *default: Any) -> str:
        """The fix for key path `key`, naming its default where it has one."""
        known = f" (its default: {json.dumps(default[0])})" if default else ""
        return f"correct '{key}' to {self.describe()}{known}."


def plural(text: str) -> str:
    """'an integer in [1, 8]' -> 'integers in [1, 8]', 'a positive finite number' -> 'positive finite numbers'."""
    return text.split(" ", 1)[1].replace("integer", "integers", 1).replace("number", "numbers", 1)


def number(v: float) -> str:
    """A bound as params.yaml would write it (10000000, 0.5, 1e-06)."""
    return str(int(v)) if isinstance(v, int) or float(v).is_integer() else f"{v:g}"


def ints(low: int, high: float = math.inf, *, nullable: bool = False, why: str = "") -> Range:
    """Integers in [low, high]: a count (>= 1), or >= 0 where none is meaningful."""
    return Range(low, high, integer=True, nullable=nullable, why=why)


def reals(
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    nullable: bool = False,
    infinite: bool = False,
    why: str = "",
) -> Range:
    """Finite real numbers (also inf where `infinite`) above `gt` (or at least `ge`) and below `lt` (or at most
    `le`)."""
    low, high = (
        gt if gt is not None else ge if ge is not None else -math.inf,
        lt if lt is not None else le if le is not None else math.inf,
    )
    return Range(
        low, high, low_open=gt is not None, high_open=lt is not None, nullable=nullable, infinite=infinite, why=why
    )


def each(allowed: Range) -> Range:
    """A list whose every element lies in `allowed`."""
    return replace(allowed, each=True)


def nullable(allowed: Range) -> Range:
    """`allowed` or null."""
    return replace(allowed, nullable=True)


POSITIVE = reals(gt=0)  # a learning rate, a clip norm, a scale, a penalty weight that must act
NON_NEGATIVE = reals(ge=0)  # a penalty weight where 0 turns the penalty off
OPEN_FRACTION = reals(gt=0, lt=1)  # a share or a level strictly inside (0, 1)
UNIT = reals(ge=0, le=1)  # a fraction or a threshold on a probability scale
SEED = ints(0, MAX_SEED)  # a public seed
NOISE_SEED = nullable(SEED)  # a fixed noise seed: internal releases only (pipelines/config.py)
STEPS = ints(1, MAX_STEPS)
EPOCHS = ints(1, MAX_EPOCHS)
DRAWS = ints(1, MAX_DRAWS)
WIDTH = ints(1, MAX_WIDTH)
WIDTHS = each(WIDTH)
BATCH = ints(1, MAX_BATCH)
ROWS_CAP = ints(1)  # a cap on rows read: no upper bound (module docstring)
BIN_COUNT = ints(2, MAX_BINS)  # bins per numeric column: one bin would say nothing of the value
