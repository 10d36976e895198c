"""Public schema: the only source of column kinds, bounds and category lists (privacy rule 1).

A schema is a YAML file ``schemas/<name>.yaml``; ``load_schema`` parses and checks it and raises
``SchemaError`` (naming the file, the column and the fix) for anything malformed, first for any
``PLACEHOLDER`` value that ``synthrelease init`` wrote and the steward has not yet filled.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pipelines.data.formula import Formula, FormulaError, parse_formula
from pipelines.data.rounding import Rounding, multiples, parse_rounding, round_as_table, rounding_value
from pipelines.data.rules import Rule, parse_rules
from pipelines.errors import SchemaError

NUMERIC_KINDS = ("continuous", "integer")
ATOM_TOLERANCE = 1e-6  # of (upper − lower): a value this close to an atom is the atom (float32 encoding rounds
# a value by less than 1e-7 of the range)
CATEGORICAL_KINDS = ("categorical", "binary")
ID_KIND = "id"  # a record identifier: never read, released as fresh surrogate keys (pipelines/data/declared.py)
DATE_KINDS = ("date", "datetime")  # modelled as days (date) or seconds (datetime) since 1970-01-01 UTC
KINDS = NUMERIC_KINDS + CATEGORICAL_KINDS + DATE_KINDS + (ID_KIND,)
EPOCH = datetime.datetime(1970, 1, 1)
DAY_SECONDS = 86_400
CALENDAR_BINS = 32  # the finest calendar unit (month, quarter, year) giving at most this many bins
POLICIES = ("clip", "drop", "fatal")
# The value `synthrelease init` (pipelines/data/scaffold.py) writes where the steward must write a fact taken
# from the table's public documentation; load_schema refuses a schema that still has one.
PLACEHOLDER = "FILL_IN"
# `categories: discover`, `lower: discover`, `upper: discover`: a part of the domain the documentation does not
# give, found by a DP mechanism charged to the ledger (the discover stage, pipelines/data/discovery.py)
DISCOVER = "discover"
DISCOVERABLE = {
    "categories": ("categorical",),
    **{key: NUMERIC_KINDS for key in ("lower", "upper", "atoms", "step", "rounding")},
}
OTHER = "(other)"  # a discovered column's one cell for every value the discovery did not release
PENDING_BOUND = 1e300  # a bound still to be discovered, while the discover stage reads the schema
PENDING_CATEGORY = "(to be discovered)"  # and a category list's stand-in then
_PLACEHOLDER_FIX = {
    "kind": f"set kind to one of {list(KINDS)} as the table's public documentation describes the column "
    "(id: a record identifier, never read, released as fresh surrogate keys).",
    "lower": "write the smallest possible value from the public documentation (never the minimum of the rows), "
    "or delete the line if the column is categorical or binary.",
    "upper": "write the largest possible value from the public documentation (never the maximum of the rows), "
    "or delete the line if the column is categorical or binary.",
    "categories": "list every possible value from the public documentation (never the values seen in the rows), "
    "or delete the line if the column is continuous or integer.",
    "documentation": "cite where the bounds and categories come from (a URL or document), e.g. "
    'documentation: "UCI adult.names, https://archive.ics.uci.edu/dataset/2/adult".',
}
_SCHEMA_KEYS = {
    "name",
    "description",
    "source",
    "target",
    "target_positive",
    "protected",
    "on_invalid",
    "columns",
    "rows",
    "related",
    "rules",
    "privacy_unit",
    "population",
}
_UNIT_KEYS = {"column", "max_rows"}
MAX_UNIT_ROWS = 1000  # the largest contribution bound a unit may declare
_ROWS_KEYS = {"count", "source"}
_COLUMN_KEYS = {
    "kind",
    "lower",
    "upper",
    "categories",
    "categories_file",
    "on_invalid",
    "bins",
    "atoms",
    "missing",
    "after",
    "max_gap_days",
    "derived",
    "other",
    "step",
    "rounding",
}
_DERIVED_EXAMPLE = "derived: {from: education, values: {Preschool: 1, 1st-4th: 2, ...}}"
_FORMULA_EXAMPLE = 'derived: {formula: "weight / (height / 100) ** 2", tolerance: 0.05}'
_FORMULA_KEYS = {"kind", "derived", "on_invalid", "step"}  # the keys a formula column takes


@dataclass(frozen=True)
class Column:
    """One public column. Numeric kinds carry bounds, categorical kinds carry their category list.

    ``on_invalid`` is the resolved policy for out-of-domain values and nulls: clip (numeric only),
    drop (drop the row) or fatal (raise). A column without its own takes the schema's, except that a
    schema-level clip leaves categorical and binary columns at drop.
    """

    name: str
    kind: str
    lower: float | None = None
    upper: float | None = None
    categories: tuple[str, ...] | tuple[int, ...] | None = None
    on_invalid: str = "drop"
    bins: tuple[float, ...] | None = None  # optional public bin edges (numeric only; MST/AIM discretisation)
    atoms: tuple[float, ...] | None = None  # optional documented values that occur exactly (numeric only: a
    # zero cost, no coinsurance): each its own bin, decoded exactly
    missing: bool = False  # `missing: allowed`: nulls are data, modelled (pipelines/data/declared.py)
    after: str | None = None  # a date column's public ordering: never before this date column (modelled as the gap)
    max_gap_days: float | None = None  # with `after`: the documented longest gap (a flight lands within a day)
    derived_from: str | None = None  # `derived`: a documented function of this categorical column (never modelled)
    derived: tuple[tuple[Any, Any], ...] | None = None  # its values: (source category, this column's value) pairs
    other: str | None = None  # a discovered category list's cell (OTHER) for every value not in it
    step: tuple[tuple[float, float], ...] | None = None  # numeric: the granularity, as (from magnitude, step) pieces
    # (a loan amount in multiples of 25: ((0, 25),); ages in tenths below 1 year, whole years above: ((0, 0.1),
    # (1, 1))): values are published as multiples of their magnitude's step (`on_grid`)
    formula: Formula | None = None  # `derived: {formula: ...}`: a documented formula of other columns (never
    # modelled; pipelines/data/formula.py)
    rounding: Rounding | None = None  # numeric, with a step: how the values share out among coarser grids by
    # magnitude (pipelines/data/rounding.py)

    def on_grid(self, values: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """`values` (float64) on their grid: each the nearest multiple of the step of its magnitude's piece, within
        the bounds (a multiple of that step) when the column has them; with `rng` and a `rounding`, then rounded as
        the table rounds (`round_as_table`)."""
        on_step = self._on_step(values)
        if self.rounding is None or rng is None:
            return on_step
        return round_as_table(on_step, self.rounding, self.lower, self.upper, rng)

    def _on_step(self, values: np.ndarray) -> np.ndarray:
        starts, steps = (np.array(p, dtype=np.float64) for p in zip(*self.step))
        s = steps[np.maximum(np.searchsorted(starts, np.abs(values), side="right") - 1, 0)]
        k = np.rint(values / s)
        if self.lower is not None and self.upper is not None:
            k = np.clip(k, np.ceil(self.lower / s - 1e-9), np.floor(self.upper / s + 1e-9))
        return multiples(k, s)

    @property
    def is_derived(self) -> bool:
        """A documented function of other columns (`derived`: a category's mapping or a formula): never modelled."""
        return self.derived_from is not None or self.formula is not None

    @property
    def sources(self) -> tuple[str, ...]:
        """The columns a derived column is a function of (none for any other column)."""
        return (self.derived_from,) if self.derived_from is not None else self.formula.names if self.formula else ()

    @property
    def is_numeric(self) -> bool:
        return self.kind in NUMERIC_KINDS

    @property
    def dtype(self) -> str:
        """The pandas dtype of this column in a clean frame (read, validated or decoded)."""
        if self.kind == "continuous":
            return "float64"
        if self.kind == ID_KIND:
            return "str"
        if self.kind in DATE_KINDS:
            return "datetime64[s]"
        if self.kind == "integer" or isinstance(self.categories[0], int):
            return "int64"
        return "str"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "on_invalid": self.on_invalid}
        if self.kind == ID_KIND:
            return d
        if self.kind in DATE_KINDS:
            d.update(lower=iso(self.lower, self.kind), upper=iso(self.upper, self.kind))
            if self.after is not None:
                d["after"] = self.after
            if self.max_gap_days is not None:
                d["max_gap_days"] = self.max_gap_days
        elif self.formula is not None:
            d["derived"] = self.formula.to_dict()
            if self.step is not None:
                d["step"] = step_value(self.step)
            return d
        elif self.is_numeric:
            d.update(lower=self.lower, upper=self.upper)
            if self.bins is not None:
                d["bins"] = list(self.bins)
            if self.atoms is not None:
                d["atoms"] = list(self.atoms)
            if self.step is not None:
                d["step"] = step_value(self.step)
            if self.rounding is not None:
                d["rounding"] = rounding_value(self.rounding)
        else:
            d["categories"] = list(self.categories)
        if self.other is not None:
            d["other"] = self.other
        if self.missing:  # only when set: a schema without it keeps its hash
            d["missing"] = "allowed"
        if self.derived_from is not None:
            d["derived"] = {"from": self.derived_from, "values": [list(p) for p in self.derived]}
        return d


@dataclass(frozen=True)
class PublicRows:
    """A public row count of the whole table (train + holdout) and where it is documented (schema key
    ``rows``). With it the training row count used by every plan and divisor is
    round(count·(1 − holdout_fraction)), a function of public facts only, and no budget is spent on it."""

    count: int
    source: str

    def train_count(self, holdout_fraction: float) -> int:
        """n̂ = max(1, round(count·(1 − holdout_fraction))): the public training row count."""
        return max(1, round(self.count * (1.0 - float(holdout_fraction))))


# -- dates: public bounds in ISO form, modelled as a number since EPOCH on public calendar bins ------------------
def epoch_value(value: Any, kind: str) -> float:
    """A date's days (kind date) or a datetime's seconds (datetime) since 1970-01-01 UTC; ValueError if it is no
    date (YAML gives datetime.date / datetime.datetime for unquoted ISO values, else a string)."""
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value.strip())
    if isinstance(value, datetime.datetime):
        moment = (
            value.replace(tzinfo=None)
            if value.tzinfo is None
            else value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        )
    elif isinstance(value, datetime.date):
        moment = datetime.datetime(value.year, value.month, value.day)
    else:
        raise ValueError(f"{value!r} is not a date")
    seconds = (moment - EPOCH).total_seconds()
    if kind == "date" and seconds % DAY_SECONDS:
        raise ValueError(f"{value!r} is not a whole day")
    return seconds / (DAY_SECONDS / day_units(kind))  # days, or seconds / 1.0


def day_units(kind: str) -> float:
    """One day in a date column's epoch units (`epoch_value`): 1 (date: days) or 86,400 (datetime: seconds)."""
    return 1.0 if kind == "date" else float(DAY_SECONDS)


def iso(value: float, kind: str) -> str:
    """The ISO form of an `epoch_value`."""
    moment = EPOCH + (datetime.timedelta(days=value) if kind == "date" else datetime.timedelta(seconds=value))
    return moment.date().isoformat() if kind == "date" else moment.isoformat()


def calendar_edges(kind: str, lower: float, upper: float) -> tuple[float, ...]:
    """Public bin edges of a date column on calendar boundaries: the starts of months, else quarters, else years
    inside (lower, upper), the finest giving at most CALENDAR_BINS bins (in the column's epoch units)."""
    unit = day_units(kind)
    first, last = EPOCH + datetime.timedelta(days=lower / unit), EPOCH + datetime.timedelta(days=upper / unit)

    def starts(months: int) -> tuple[float, ...]:
        edges, year, month = [], first.year, 1
        while datetime.datetime(year, month, 1) <= last:
            start = datetime.datetime(year, month, 1)
            if first < start < last:
                edges.append((start - EPOCH).total_seconds() / DAY_SECONDS * unit)
            month += months
            year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
        return tuple(edges)

    return next((e for e in map(starts, (1, 3)) if len(e) + 1 <= CALENDAR_BINS), None) or starts(12)


def date_number_kind(col: Column) -> str:
    """The numeric kind a date column is modelled as: whole days (integer) or seconds (continuous)."""
    return "integer" if col.kind == "date" else "continuous"


def gap_column(col: Column, start: Column) -> Column:
    """The modelled column of a date `col` declared `after: start`: its gap to the start (days or seconds), from 0 to
    col.upper − start.lower, or to the documented `max_gap_days` when that is shorter (so the public bins cover the
    gaps that occur, not the whole calendar); a row whose `col` precedes its start, or follows it by more than the
    longest gap, is out of domain (clip, drop or fatal, as for any bound)."""
    upper = col.upper - start.lower
    if col.max_gap_days is not None:
        upper = min(upper, col.max_gap_days * day_units(col.kind))
    return replace(col, kind=date_number_kind(col), lower=0.0, upper=upper, after=None, max_gap_days=None)


# -- missing values as data (`missing: allowed`; the frames' transforms: pipelines/data/declared.py) ---------------
NULL_TEXT = "(missing)"  # the null category of a column with string categories
INDICATOR_SUFFIX = "__missing"  # a numeric column's missingness indicator: <name>__missing
INDICATOR_CATEGORIES = ("present", "missing")


def null_category(col: Column) -> str | int:
    """The category standing for a null: "(missing)" for string categories, min(categories) − 1 for integer
    codes (a value no documented code takes)."""
    return NULL_TEXT if isinstance(col.categories[0], str) else min(col.categories) - 1


def indicator(name: str) -> str:
    return name + INDICATOR_SUFFIX


def expand(declared: tuple[Column, ...], file: str) -> tuple[Column, ...]:
    """The modelled columns of the declared ones (pipelines/data/declared.py), in declared order: a null category
    for a categorical or binary column with `missing: allowed`, an indicator column after a numeric one (whose
    lower bound becomes an atom: its null rows' value); SchemaError when a name or category it adds is taken."""
    names, by_name = {c.name for c in declared}, {c.name: c for c in declared}
    out: list[Column] = []
    for col in declared:
        if col.kind == ID_KIND or col.is_derived:  # never modelled
            continue
        if col.kind in DATE_KINDS:  # a number since EPOCH on calendar bins, or the gap to its start (`after`)
            col = (
                gap_column(col, by_name[col.after])
                if col.after
                else replace(col, kind=date_number_kind(col), bins=calendar_edges(col.kind, col.lower, col.upper))
            )
        if not col.missing:
            out.append(col)
        elif col.is_numeric:
            name = indicator(col.name)
            if name in names:
                raise SchemaError(
                    f"its missingness indicator '{name}' is the name of another column.",
                    file=file,
                    column=col.name,
                    fix=f"rename the column '{name}'.",
                )
            atoms = tuple(sorted({col.lower, *(col.atoms or ())}))
            out += [
                replace(col, atoms=atoms, missing=False),
                Column(name, "binary", categories=INDICATOR_CATEGORIES, on_invalid="drop"),
            ]
        else:
            token = null_category(col)
            if token in col.categories:
                raise SchemaError(
                    f"the category {token!r} stands for a null, and is also a documented category.",
                    file=file,
                    column=col.name,
                    fix=f"rename the category {token!r}.",
                )
            out.append(replace(col, kind="categorical", categories=(*col.categories, token), missing=False))
    return tuple(out)


@dataclass(frozen=True)
class PrivacyUnit:
    """The declared privacy unit: the `kind: id` column whose value names a person (or customer, ...), and the
    public bound `max_rows` on the rows of one unit that enter any mechanism (pipelines/data/units.py)."""

    column: str
    max_rows: int

    def describe(self) -> str:
        """The unit as the ledger records it, e.g. "subject_id<=5"."""
        return f"{self.column}<={self.max_rows}"

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "max_rows": self.max_rows}


ROW_UNIT_NAME = "row"  # the ledger's and the manifest's name of the default unit: one row


@dataclass(frozen=True)
class Schema:
    """A parsed public schema. ``declared``: the columns as the file writes them, in file order (the columns of
    the source table and of a published synthetic table); ``columns``: the modelled columns (`expand`: no
    identifiers, dates as numbers, a null category or an indicator column for a column that allows nulls;
    pipelines/data/declared.py), in the order of every frame and layout between reading and publishing."""

    name: str
    description: str
    columns: tuple[Column, ...]
    target: str | None = None
    target_positive: str | int | None = None  # the target's positive class in the utility scores (None: its second)
    protected: tuple[str, ...] = ()
    on_invalid: str = "drop"
    source: dict[str, Any] = field(default_factory=dict)
    rows: PublicRows | None = None
    related: tuple[tuple[str, str], ...] = ()  # column pairs the documentation ties together (`_parse_related`)
    declared: tuple[Column, ...] = ()  # empty: the modelled columns (a schema without missing values)
    rules: tuple[Rule, ...] = ()  # public rules between categorical columns (pipelines/data/rules.py)
    unit: PrivacyUnit | None = None  # the declared privacy unit; None: one row
    population: str | None = None  # the population whose lifetime budget the table shares
    discovered: tuple[tuple[str, str], ...] = ()  # (column, key) pairs the schema leaves to discovery
    pending: bool = False  # discovered parts not yet filled in (what the discover stage reads; never validated)

    def __post_init__(self) -> None:
        if not self.declared:
            object.__setattr__(self, "declared", self.columns)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def declared_names(self) -> list[str]:
        return [c.name for c in self.declared]

    @property
    def read(self) -> tuple[Column, ...]:
        """The declared columns whose values are read: all but the identifiers (`kind: id`)."""
        return tuple(c for c in self.declared if c.kind != ID_KIND)

    @property
    def ids(self) -> list[str]:
        """The declared identifier columns (`kind: id`): checked in the header, never read, released as fresh
        surrogate keys."""
        return [c.name for c in self.declared if c.kind == ID_KIND]

    @property
    def derived(self) -> tuple[Column, ...]:
        """The declared columns that are a documented function of others (`derived`): read to check the rows
        against it, never modelled, and published as the function of the sources' synthetic values."""
        return tuple(c for c in self.declared if c.is_derived)

    @property
    def missing(self) -> list[str]:
        """The declared columns whose nulls are data (`missing: allowed`)."""
        return [c.name for c in self.declared if c.missing]

    @property
    def max_rows(self) -> int:
        """k: the most rows one privacy unit contributes (1 without a declared unit)."""
        return 1 if self.unit is None else self.unit.max_rows

    @property
    def unit_name(self) -> str:
        """The unit as the ledger records it: "row", or "<column><=<max_rows>"."""
        return ROW_UNIT_NAME if self.unit is None else self.unit.describe()

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"schema '{self.name}' has no column '{name}'")

    def to_dict(self) -> dict[str, Any]:
        d = {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "target": self.target,
            "protected": list(self.protected),
            "on_invalid": self.on_invalid,
            "columns": {c.name: c.to_dict() for c in self.declared},
        }
        if self.rows is not None:
            d["rows"] = {"count": self.rows.count, "source": self.rows.source}
        if self.related:
            d["related"] = [list(p) for p in self.related]
        if self.rules:
            d["rules"] = [r.to_dict() for r in self.rules]
        if self.unit is not None:
            d["privacy_unit"] = self.unit.to_dict()
        if self.population is not None:
            d["population"] = self.population
        if self.discovered:
            d["discovered"] = [list(p) for p in self.discovered]
        if self.target_positive is not None:  # only when set: a schema without it keeps its hash
            d["target_positive"] = self.target_positive
        return d

    def hash(self) -> str:
        """sha256 of the canonical JSON of the parsed schema (comments and formatting do not count)."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (PyYAML silently keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise SchemaError(
                    f"duplicate key '{key}' (line {key_node.start_mark.line + 1}).",
                    file=self.name,
                    column=str(key),
                    fix="keep one entry per key; YAML would silently drop the others.",
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _placeholders(raw: dict) -> list[tuple[str, str]]:
    """(where, key) of every PLACEHOLDER value left in a parsed schema: where is the column name for a
    column's key, the key path otherwise (e.g. source.documentation)."""
    found: list[tuple[str, str]] = []
    for key, value in raw.items():
        if value == PLACEHOLDER:
            found.append((key, key))
        elif key == "columns" and isinstance(value, dict):
            found += [
                (str(name), k)
                for name, spec in value.items()
                if isinstance(spec, dict)
                for k, v in spec.items()
                if v == PLACEHOLDER
            ]
        elif isinstance(value, dict):
            found += [(f"{key}.{k}", k) for k, v in value.items() if v == PLACEHOLDER]
    return found


def _refuse_placeholders(raw: dict, file: str) -> None:
    """One SchemaError for the first placeholder left (and how many others remain)."""
    left = _placeholders(raw)
    if not left:
        return
    where, key = left[0]
    others = len(left) - 1
    rest = f" {others} more placeholder{'s' * (others != 1)} remain in this schema." if others else ""
    raise SchemaError(
        f"'{key}' is still the placeholder {PLACEHOLDER} written by `synthrelease init`.{rest}",
        file=file,
        column=where,
        fix=_PLACEHOLDER_FIX.get(key, f"replace {PLACEHOLDER} with the documented value.")
        + f" Then look for every remaining {PLACEHOLDER} in the file.",
    )


def _number(value: Any, what: str, file: str, column: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SchemaError(
            f"{what} is {value!r}, not a finite number.",
            file=file,
            column=column,
            fix=f"write {what} as a plain number, e.g. {what}: 1500000 (not 1.5e6, not quoted).",
        )
    return float(value)


def _parse_column(name: Any, spec: Any, default_policy: str, file: str) -> Column:
    if not isinstance(name, str) or not name:
        raise SchemaError(
            f"column name {name!r} is not a non-empty string.",
            file=file,
            column=str(name),
            fix="quote the column name.",
        )
    if not isinstance(spec, dict):
        raise SchemaError(
            f"column spec is {spec!r}, not a mapping.",
            file=file,
            column=name,
            fix="write it as {kind: ..., lower: ..., upper: ...} or {kind: ..., categories: [...]}.",
        )
    unknown = sorted(set(spec) - _COLUMN_KEYS)
    if unknown:
        raise SchemaError(f"unknown keys {unknown}.", file=file, column=name, fix=f"use only {sorted(_COLUMN_KEYS)}.")
    kind = spec.get("kind")
    if kind not in KINDS:
        raise SchemaError(f"unknown kind {kind!r}.", file=file, column=name, fix=f"set kind to one of {list(KINDS)}.")
    if kind == ID_KIND:
        if set(spec) != {"kind"}:
            raise SchemaError(
                f"an id column takes no other key ({sorted(set(spec) - {'kind'})}).",
                file=file,
                column=name,
                fix="write it as {kind: id}: its values are never read.",
            )
        return Column(name, ID_KIND, on_invalid="drop")
    policy = spec.get("on_invalid", default_policy)
    if (kind in CATEGORICAL_KINDS or "derived" in spec) and "on_invalid" not in spec and default_policy == "clip":
        policy = "drop"  # the schema-level clip applies to the numeric columns; a category (or a derived value, its
        # source's mapping) has no bound to clip to
    if policy not in POLICIES:
        raise SchemaError(
            f"unknown on_invalid policy {policy!r}.",
            file=file,
            column=name,
            fix=f"set on_invalid to one of {list(POLICIES)}.",
        )
    if "after" in spec and kind not in DATE_KINDS:
        raise SchemaError(
            f"a {kind} column cannot have after (a date column's order).",
            file=file,
            column=name,
            fix="remove 'after', or make the column a date or datetime.",
        )
    missing = spec.get("missing")
    if missing not in (None, "allowed"):
        raise SchemaError(
            f"missing is {missing!r}.",
            file=file,
            column=name,
            fix="write 'missing: allowed' when the documentation says the column may be empty (its "
            "nulls are then modelled and released as nulls), or remove the key.",
        )
    derived = spec.get("derived")
    if isinstance(derived, dict) and "formula" in derived:
        return _formula_column(name, kind, spec, policy, file)
    spec = {k: v for k, v in spec.items() if k != "derived"}
    parse = _parse_date if kind in DATE_KINDS else _parse_numeric if kind in NUMERIC_KINDS else _parse_categorical
    col = parse(name, kind, spec, policy, file)
    col = replace(col, missing=True) if missing else col
    return col if derived is None else _derived_column(col, derived, file)


def _derived_column(col: Column, raw: Any, file: str) -> Column:
    """A column declared `derived: {from: <categorical column>, values: {<category>: <value>, ...}}`: its value in
    every row is the documented function of its source's category (a code and its label, a level and its number),
    so no generator models it and no budget is spent on it; `_check_derived` checks the pairs against the
    source's categories and this column's domain once every column is parsed."""
    if not (
        isinstance(raw, dict)
        and set(raw) == {"from", "values"}
        and isinstance(raw["from"], str)
        and isinstance(raw["values"], dict)
        and raw["values"]
    ):
        raise SchemaError(
            f"derived is {raw!r}, not a source column and its value per category.",
            file=file,
            column=col.name,
            fix=f"write {_DERIVED_EXAMPLE}, one entry per category of the source.",
        )
    if col.kind in DATE_KINDS or col.missing or col.on_invalid == "clip":
        what = (
            "a date column" if col.kind in DATE_KINDS else "'missing: allowed'" if col.missing else "on_invalid: clip"
        )
        raise SchemaError(
            f"a derived column cannot have {what}: its value, and its null, are its source's mapping.",
            file=file,
            column=col.name,
            fix="remove it (a derived column is null where its source is, and on_invalid: drop or "
            "fatal says what happens to a row that breaks the mapping).",
        )
    return replace(col, derived_from=raw["from"], derived=tuple(raw["values"].items()))


def step_value(pieces: tuple[tuple[float, float], ...]) -> float | list[list[float]]:
    """A column's `step` as the schema writes it: one number for one grid, else its [from, step] pieces."""
    return pieces[0][1] if len(pieces) == 1 else [list(p) for p in pieces]


def step_at(pieces: tuple[tuple[float, float], ...], magnitude: float) -> float:
    """The step of `pieces` at `magnitude` |v|."""
    return [s for f, s in pieces if f <= magnitude][-1]


def _parse_step(
    raw: Any, kind: str, lower: float | None, upper: float | None, file: str, name: str
) -> tuple[tuple[float, float], ...]:
    """`step`: a positive number (whole for an integer column), or [[from, step], ...] pieces by magnitude |v| from
    0 up (`from` strictly increasing, the first 0), each step with a multiple in the bounds when the column has
    them; as (from, step) pieces."""
    pieces = (
        [[0, raw]]
        if not isinstance(raw, list)
        else raw
        if all(isinstance(p, list) and len(p) == 2 for p in raw) and raw
        else None
    )
    fix = (
        "write the documented granularity of the values (e.g. step: 25 for amounts in multiples of $25, or "
        "step: [[0, 0.1], [1, 1]] for tenths below 1 and whole numbers from 1), or remove 'step'."
    )
    if pieces is None:
        raise SchemaError(f"step is {raw!r}, not a number or [from, step] pieces.", file=file, column=name, fix=fix)
    out = [(_number(f, "step", file, name), _number(v, "step", file, name)) for f, v in pieces]
    starts = [f for f, _ in out]
    if starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:])):
        raise SchemaError(
            f"step pieces start at {starts}: the first must start at 0 and each later one above the last.",
            file=file,
            column=name,
            fix=fix,
        )
    for _, step in out:
        ok = step > 0 and (kind != "integer" or step.is_integer())
        if lower is not None and upper is not None:
            ok = ok and step < upper - lower and math.floor(upper / step) * step >= lower
        if not ok:
            raise SchemaError(
                f"step {step:g} is not a positive {'whole number' if kind == 'integer' else 'number'}"
                + (f" with a multiple in the range {lower:g}..{upper:g}." if lower is not None else "."),
                file=file,
                column=name,
                fix=fix,
            )
    return tuple(out)


def _formula_column(name: str, kind: str, spec: dict, policy: str, file: str) -> Column:
    """A column declared `derived: {formula: "<expression of other columns>", tolerance: <t>}` (pipelines/data/
    formula.py): an integer or continuous column whose every value is the formula of its row's sources, so no
    generator models it and no budget is spent on it. Its range follows from its sources', so it takes no bounds;
    `step` rounds the published values (an amount in cents: 0.01). `_check_derived` checks the sources once every
    column is parsed."""
    raw = spec["derived"]
    extra, derived_extra = sorted(set(spec) - _FORMULA_KEYS), sorted(set(raw) - {"formula", "tolerance"})
    what = next(
        (
            text
            for text, bad in (
                (f"a {kind} kind", kind not in NUMERIC_KINDS),
                (f"the keys {extra}", bool(extra)),
                (f"the derived keys {derived_extra}", bool(derived_extra)),
                ("on_invalid: clip", policy == "clip"),
            )
            if bad
        ),
        None,
    )
    if what is not None:
        raise SchemaError(
            f"a formula column cannot have {what}: it is an integer or continuous column whose value, null and range "
            "are its formula's.",
            file=file,
            column=name,
            fix=f"write {{kind: continuous, {_FORMULA_EXAMPLE}}} (optionally step: the published rounding, and "
            "on_invalid: drop or fatal for a row that breaks it).",
        )
    tolerance = raw.get("tolerance", 0)
    if (
        not isinstance(raw["formula"], str)
        or isinstance(tolerance, bool)
        or not isinstance(tolerance, (int, float))
        or not (0 <= tolerance < math.inf)
    ):
        raise SchemaError(
            f"derived is {raw!r}, not a formula text and a tolerance ≥ 0.",
            file=file,
            column=name,
            fix=f"write {_FORMULA_EXAMPLE}: the documented formula and how far a real value may be from it.",
        )
    try:
        formula = parse_formula(raw["formula"], float(tolerance))
    except FormulaError as e:
        raise SchemaError(
            f"formula {raw['formula']!r}: {e}.",
            file=file,
            column=name,
            fix="write the documented formula with column names, numbers, + - * / ** and parentheses "
            f"({_FORMULA_EXAMPLE}).",
        ) from None
    step = None if "step" not in spec else _parse_step(spec["step"], kind, None, None, file, name)
    return Column(name, kind, on_invalid=policy, step=step, formula=formula)


def _holds_numbers(c: Column) -> bool:
    """A modelled column a formula may read: integer or continuous, or categorical with number categories."""
    return not c.is_derived and (c.is_numeric or (c.kind in CATEGORICAL_KINDS and isinstance(c.categories[0], int)))


def _check_formula(c: Column, by_name: dict[str, Column], file: str) -> None:
    """A formula reads only other columns that are read and modelled and hold numbers (`_holds_numbers`: not an
    id, a date or another derived column)."""
    for n in c.formula.names if c.formula else ():
        source = by_name.get(n)
        if source is None or source is c or not _holds_numbers(source):
            usable = [s.name for s in by_name.values() if s is not c and _holds_numbers(s)]
            raise SchemaError(
                f"formula reads {n!r}, which is not another modelled column holding numbers.",
                file=file,
                column=c.name,
                fix=f"name only these columns in the formula: {usable}.",
            )


def _check_derived(declared: tuple[Column, ...], file: str) -> None:
    """`derived` names another column that is categorical or binary, read and modelled (not an id, not derived
    itself), and gives one value per source category, each in this column's own domain; a formula reads only
    columns holding numbers (`_check_formula`)."""
    by_name = {c.name: c for c in declared}
    for c in declared:
        _check_formula(c, by_name, file)
        if c.derived_from is None:
            continue
        source = by_name.get(c.derived_from)
        if source is None or source is c or source.kind not in CATEGORICAL_KINDS or source.is_derived:
            raise SchemaError(
                f"derived from {c.derived_from!r}, which is not another categorical or binary column "
                "of the schema that is itself modelled.",
                file=file,
                column=c.name,
                fix="name the categorical column this one is a documented function of (derive every "
                "column of a chain from its first column).",
            )
        keys = [k for k, _ in c.derived]
        if set(keys) != set(source.categories):  # each key once: the schema's YAML refuses duplicate keys
            missing = [k for k in source.categories if k not in keys]
            extra = [k for k in keys if k not in source.categories]
            raise SchemaError(
                f"derived values do not list each category of '{source.name}' once (missing "
                f"{missing}, not its categories {extra}).",
                file=file,
                column=c.name,
                fix=f"give one value per category of '{source.name}': {list(source.categories)}.",
            )
        for k, v in c.derived:
            if c.is_numeric:
                ok = (
                    isinstance(v, (int, float))
                    and not isinstance(v, bool)
                    and c.lower <= v <= c.upper
                    and (c.kind != "integer" or float(v).is_integer())
                )
            else:
                ok = v in c.categories
            if not ok:
                domain = f"[{c.lower:g}, {c.upper:g}]" if c.is_numeric else list(c.categories)
                raise SchemaError(
                    f"derived value {v!r} (of {k!r}) is outside the column's domain {domain}.",
                    file=file,
                    column=c.name,
                    fix="give each category a value of this column's documented domain.",
                )


def _parse_numeric(name: str, kind: str, spec: dict, policy: str, file: str) -> Column:
    if "categories" in spec:
        raise SchemaError(
            f"a {kind} column cannot have categories.",
            file=file,
            column=name,
            fix="remove categories, or make the column categorical.",
        )
    missing = [k for k in ("lower", "upper") if k not in spec]
    if missing:
        raise SchemaError(
            f"{kind} column is missing its {' and '.join(missing)} bound.",
            file=file,
            column=name,
            fix="add lower and upper bounds taken from public documentation (never from the data).",
        )
    lower = _number(spec["lower"], "lower", file, name)
    upper = _number(spec["upper"], "upper", file, name)
    if lower >= upper:
        raise SchemaError(
            f"lower bound {lower:g} is not below upper bound {upper:g}.",
            file=file,
            column=name,
            fix="set lower < upper.",
        )
    if kind == "integer" and not (lower.is_integer() and upper.is_integer()):
        raise SchemaError(
            f"integer column has non-integer bounds {lower:g}..{upper:g}.",
            file=file,
            column=name,
            fix="use whole-number bounds, or make the column continuous.",
        )
    bins, atoms = (_values(spec, key, kind, lower, upper, file, name) for key in ("bins", "atoms"))
    step = None if "step" not in spec else _parse_step(spec["step"], kind, lower, upper, file, name)
    rounding = None
    if "rounding" in spec:
        rounding = parse_rounding(spec["rounding"], lambda m: None if step is None else step_at(step, m), file, name)
    return Column(
        name, kind, lower=lower, upper=upper, on_invalid=policy, bins=bins, atoms=atoms, step=step, rounding=rounding
    )


def _parse_date(name: str, kind: str, spec: dict, policy: str, file: str) -> Column:
    """A `date` / `datetime` column: ISO bounds (YAML dates, or quoted ISO text), an optional `after: <column>`,
    `missing: allowed` (set by the caller)."""
    extra = sorted(set(spec) - {"kind", "lower", "upper", "on_invalid", "missing", "after", "max_gap_days"})
    if extra:
        raise SchemaError(
            f"a {kind} column cannot have {extra}.",
            file=file,
            column=name,
            fix=f"remove them: a {kind} column's public bins are calendar months, quarters or years.",
        )
    bounds = []
    for key in ("lower", "upper"):
        try:
            bounds.append(epoch_value(spec[key], kind))
        except (KeyError, ValueError, TypeError):
            example = "2003-12-31" if kind == "date" else "2003-12-31T23:59:59"
            raise SchemaError(
                f"{key} is {spec.get(key)!r}, not an ISO {kind}.",
                file=file,
                column=name,
                fix=f"write {key}: {example} from the documentation (the study's period).",
            ) from None
    if bounds[0] >= bounds[1]:
        raise SchemaError(
            f"lower bound {spec['lower']} is not before upper bound {spec['upper']}.",
            file=file,
            column=name,
            fix="set lower < upper.",
        )
    after = spec.get("after")
    if after is not None and not isinstance(after, str):
        raise SchemaError(
            f"after is {after!r}, not a column name.",
            file=file,
            column=name,
            fix="write after: <the date column this one never precedes>.",
        )
    gap = spec.get("max_gap_days")
    if gap is not None and (after is None or isinstance(gap, bool) or not isinstance(gap, (int, float)) or not gap > 0):
        raise SchemaError(
            f"max_gap_days is {gap!r}{'' if after else ' without after'}.",
            file=file,
            column=name,
            fix="give a positive number of days together with 'after: <column>' (the documented "
            "longest time between the two dates), or remove it.",
        )
    return Column(
        name,
        kind,
        lower=bounds[0],
        upper=bounds[1],
        on_invalid=policy,
        after=after,
        max_gap_days=None if gap is None else float(gap),
    )


def _check_after(declared: tuple[Column, ...], file: str) -> None:
    """`after:` names an earlier date column of the same kind, neither allowing nulls."""
    kinds = {c.name: c for c in declared}
    for c in declared:
        if c.after is None:
            continue
        start = kinds.get(c.after)
        if start is None or start.kind != c.kind or declared.index(start) > declared.index(c):
            raise SchemaError(
                f"after: {c.after!r} is not an earlier {c.kind} column.",
                file=file,
                column=c.name,
                fix=f"name a {c.kind} column declared before '{c.name}'.",
            )
        if c.missing or start.missing:
            raise SchemaError(
                "a column in an 'after' pair allows nulls, so the order has no value to hold on.",
                file=file,
                column=c.name,
                fix="remove 'missing: allowed' from both, or 'after'.",
            )


_VALUES_FIX = {
    "bins": "public edges in the column's units (docs/aim-mst.md)",
    "atoms": "documented values the column takes exactly, e.g. atoms: [0] for 'no cost' (docs/aim-mst.md)",
}


def _values(spec: dict, key: str, kind: str, lower: float, upper: float, file: str, name: str) -> tuple | None:
    """A numeric column's optional `bins` (public edges) or `atoms` (documented exact values): strictly increasing
    numbers within the bounds (atoms of an integer column: whole numbers)."""
    raw = spec.get(key)
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        raise SchemaError(
            f"{key} is {raw!r}, not a list of numbers.",
            file=file,
            column=name,
            fix=f"write {key}: [v1, v2, ...], {_VALUES_FIX[key]}.",
        )
    values = tuple(_number(e, key, file, name) for e in raw)
    if list(values) != sorted(set(values)) or not all(lower <= e <= upper for e in values):
        raise SchemaError(
            f"{key} {list(values)} are not strictly increasing within [{lower:g}, {upper:g}].",
            file=file,
            column=name,
            fix=f"list increasing {key} between the bounds.",
        )
    if key == "atoms" and kind == "integer" and not all(e.is_integer() for e in values):
        raise SchemaError(
            f"atoms {list(values)} of an integer column are not whole numbers.",
            file=file,
            column=name,
            fix="list whole numbers, or make the column continuous.",
        )
    return values


def _categories_file(spec: dict, file: str, name: str) -> list[str]:
    """A long documented code list (`categories_file: codes/icd9.txt`): one string category per non-blank line
    (stripped; codes keep their leading zeros), UTF-8, in a file inside the schema's folder (a path relative to
    it), so that the stage reading the schema folder (dvc.yaml's validate) re-runs when the list changes."""
    if "categories" in spec:
        raise SchemaError(
            "both categories and categories_file.",
            file=file,
            column=name,
            fix="keep one: the list in the schema, or the file holding it.",
        )
    given, folder = spec["categories_file"], Path(file).parent.resolve()
    path = (folder / given).resolve() if isinstance(given, str) and given else None
    if path is None or not path.is_relative_to(folder):
        raise SchemaError(
            f"categories_file {given!r} is not a path inside the schema's folder {folder}.",
            file=file,
            column=name,
            fix="put the code list next to the schema (e.g. schemas/codes/icd9.txt) and "
            "give its path relative to the schema (codes/icd9.txt).",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SchemaError(
            f"categories_file {given!r} cannot be read as UTF-8 text ({e}).",
            file=file,
            column=name,
            fix=f"create {path} with one documented category per line.",
        ) from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def _parse_categorical(name: str, kind: str, spec: dict, policy: str, file: str) -> Column:
    numeric_only = [k for k in ("lower", "upper", "bins", "atoms", "step", "rounding") if k in spec]
    if "other" in spec and kind != "categorical":
        raise SchemaError(
            f"a {kind} column cannot have other (a categorical column's cell for undocumented values).",
            file=file,
            column=name,
            fix="remove 'other', or make the column categorical.",
        )
    if numeric_only:
        keys = "/".join(numeric_only)
        raise SchemaError(
            f"a {kind} column cannot have {keys} (numeric columns' keys).",
            file=file,
            column=name,
            fix=f"remove {keys}, or make the column continuous or integer.",
        )
    if policy == "clip":
        raise SchemaError(
            f"on_invalid: clip is undefined for a {kind} column.",
            file=file,
            column=name,
            fix="set on_invalid: drop or fatal on this column.",
        )
    cats = _categories_file(spec, file, name) if "categories_file" in spec else spec.get("categories")
    if not isinstance(cats, list) or not cats:
        raise SchemaError(
            f"{kind} column has no category list.",
            file=file,
            column=name,
            fix="add categories: [...] listing every public category.",
        )
    all_str = all(isinstance(c, str) for c in cats)
    all_int = all(isinstance(c, int) and not isinstance(c, bool) for c in cats)
    if not (all_str or all_int):
        raise SchemaError(
            f"categories {cats!r} mix types or contain booleans/floats.",
            file=file,
            column=name,
            fix='make every category a string (quote them, e.g. "yes", "?") or every one an integer.',
        )
    dupes = sorted(str(c) for c, n in Counter(cats).items() if n > 1)
    if dupes:
        raise SchemaError(f"duplicate categories {dupes}.", file=file, column=name, fix="list each category once.")
    if all_str and any(c != c.strip() or not c for c in cats):
        raise SchemaError(
            "a category is empty or has leading/trailing whitespace.",
            file=file,
            column=name,
            fix="strip the categories (values are compared after stripping whitespace).",
        )
    if kind == "binary" and len(cats) != 2:
        raise SchemaError(
            f"binary column has {len(cats)} categories, not 2.",
            file=file,
            column=name,
            fix="list exactly two categories, or make the column categorical.",
        )
    if kind == "categorical" and len(cats) < 2:
        raise SchemaError(
            "categorical column has fewer than 2 categories.",
            file=file,
            column=name,
            fix="list at least two categories, or drop the constant column.",
        )
    other = spec.get("other")
    if other is not None and other not in cats:
        raise SchemaError(
            f"other is {other!r}, not one of the column's categories.",
            file=file,
            column=name,
            fix="name the documented category that holds every undocumented value (e.g. other: Other, with "
            "Other in categories), or remove 'other'.",
        )
    return Column(name, kind, categories=tuple(cats), on_invalid=policy, other=other)


def _parse_rows(raw: Any, file: str) -> PublicRows | None:
    """The optional ``rows: {count: N, source: "..."}``: a public row count with its documented source."""
    if raw is None:
        return None
    example = 'rows: {count: 569, source: "scikit-learn load_breast_cancer documentation: 569 instances"}'
    if not isinstance(raw, dict):
        raise SchemaError(
            f"rows is {raw!r}, not a mapping.",
            file=file,
            column="rows",
            fix=f"write {example}, or remove 'rows' (the count is then released with noise).",
        )
    unknown = sorted(set(raw) - _ROWS_KEYS)
    if unknown:
        raise SchemaError(
            f"unknown keys {unknown} under rows.",
            file=file,
            column="rows",
            fix=f"use only {sorted(_ROWS_KEYS)}, e.g. {example}.",
        )
    count = raw.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 2:
        raise SchemaError(
            f"rows.count is {count!r}, not a whole number of rows >= 2.",
            file=file,
            column="rows.count",
            fix="write the documented number of rows of the whole table as a "
            "plain integer, e.g. count: 48842 (not quoted, not 4.8e4).",
        )
    source = raw.get("source")
    if not isinstance(source, str) or not source.strip():
        raise SchemaError(
            "rows.source is missing or empty: a public row count needs its documented source.",
            file=file,
            column="rows.source",
            fix='cite where the count is published, e.g. source: "UCI adult.names: 48842 '
            "instances\"; a count read from the rows themselves is not public (remove 'rows').",
        )
    return PublicRows(count=count, source=source.strip())


def _parse_related(raw: Any, names: list[str], derived: list[str], file: str) -> tuple[tuple[str, str], ...]:
    """`related: [[a, b], ...]`: column pairs the public documentation says are structurally tied (one constrains the
    other, e.g. Adult's relationship and marital status: a Husband is married; a column one determines exactly is
    declared `derived` instead). A public fact like the bounds: the DP marginal calibration measures these pairs
    besides the target's (docs/calibration.md)."""
    if raw is None:
        return ()
    example = "related: [[relationship, marital_status]]"
    if not isinstance(raw, list):
        raise SchemaError(
            f"related is {raw!r}, not a list of column pairs.",
            file=file,
            column="related",
            fix=f"write {example}, or remove 'related'.",
        )
    pairs: list[tuple[str, str]] = []
    for pair in raw:
        if not (isinstance(pair, list) and len(pair) == 2 and pair[0] != pair[1]):
            raise SchemaError(
                f"related entry {pair!r} is not a pair of two distinct columns.",
                file=file,
                column="related",
                fix=f"write each entry as [a, b], e.g. {example}.",
            )
        for c in pair:
            if c in derived:
                raise SchemaError(
                    f"related column {c!r} is derived: its every value is its source's mapping, so "
                    "there is no pair to measure.",
                    file=file,
                    column=str(c),
                    fix="remove the pair (the release reproduces a derived column exactly).",
                )
            if c not in names:
                raise SchemaError(
                    f"related column {c!r} is not a column of the schema.",
                    file=file,
                    column=str(c),
                    fix=f"name only columns of the schema: {names}.",
                )
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def _parse_unit(spec: Any, declared: tuple[Column, ...], file: str) -> PrivacyUnit | None:
    """`privacy_unit: {column: <a kind: id column>, max_rows: <1..MAX_UNIT_ROWS>}`, or None (one row)."""
    if spec is None:
        return None
    example = "privacy_unit: {column: subject_id, max_rows: 5}"
    if not isinstance(spec, dict) or set(spec) != _UNIT_KEYS:
        raise SchemaError(
            f"privacy_unit is {spec!r}; it needs exactly the keys {sorted(_UNIT_KEYS)}.",
            file=file,
            fix=f"write {example} (a kind: id column naming the person, and the most rows of one "
            "person the release may use, from the documentation or your policy).",
        )
    ids = [c.name for c in declared if c.kind == ID_KIND]
    column, max_rows = spec["column"], spec["max_rows"]
    if column not in ids:
        raise SchemaError(
            f"privacy_unit.column {column!r} is not a kind: id column of the schema.",
            file=file,
            column=str(column),
            fix=f"name one of the id columns {ids}, or declare the column as {{kind: id}}.",
        )
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or not 1 <= max_rows <= MAX_UNIT_ROWS:
        raise SchemaError(
            f"privacy_unit.max_rows is {max_rows!r}; it must be an integer in [1, {MAX_UNIT_ROWS}].",
            file=file,
            column=str(column),
            fix="write the most rows of one unit the release may use, a public number (e.g. the "
            "99th percentile the documentation gives, or your policy): rows beyond it are set "
            "aside by a keyed rule and every mechanism's noise grows with it.",
        )
    return PrivacyUnit(str(column), int(max_rows))


def _parse_population(spec: Any, file: str) -> str | None:
    """`population: <name>`: tables about the same people share one lifetime budget under this name."""
    if spec is None:
        return None
    if not isinstance(spec, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", spec):
        raise SchemaError(
            f"population is {spec!r}, not a name of letters, digits, '.', '_' or '-'.",
            file=file,
            fix="write e.g. population: clinic-patients, the same in every table about these people.",
        )
    return spec


def discovery_requests(cols: Any, file: str) -> tuple[tuple[str, str], ...]:
    """The (column, key) pairs a schema's `columns` leave to discovery (`<key>: discover`): `categories` of a
    categorical column, `lower`/`upper` of an integer or continuous one; SchemaError for any other use."""
    found: list[tuple[str, str]] = []
    for name, spec in (cols or {}).items() if isinstance(cols, dict) else ():
        if not isinstance(spec, dict):
            continue
        for key, value in spec.items():
            if value != DISCOVER:
                continue
            kinds = DISCOVERABLE.get(key)
            if kinds is None or spec.get("kind") not in kinds or "derived" in spec:
                raise SchemaError(
                    f"'{key}: discover' on a {spec.get('kind')} column"
                    + (" with derived values" if "derived" in spec else "")
                    + ".",
                    file=file,
                    column=str(name),
                    fix="discover only the categories of a categorical column or the lower/upper bound of an "
                    "integer or continuous one; write the documented value otherwise.",
                )
            if key == "rounding" and "step" not in spec:
                raise SchemaError(
                    "'rounding: discover' without a step.",
                    file=file,
                    column=str(name),
                    fix="give the column its documented step (e.g. step: 25) or step: discover: rounding is "
                    "measured against the step.",
                )
            found.append((str(name), key))
    return tuple(found)


def _filled(cols: dict, requests: tuple[tuple[str, str], ...], domain: Any, file: str) -> dict:
    """The `columns` mapping with every discovered key filled: from `domain` ({column: {key: value}}, the discover
    stage's output), or, with `domain` None, by placeholders that parse (PENDING_CATEGORY, bounds ±PENDING_BOUND).
    A discovered category list gets the OTHER cell; a discovered bound widens to take in the column's documented
    atoms and bin edges (documented values the column takes), and the column clips the rows beyond it unless it sets
    its own on_invalid (the rarest extremes no DP bound follows are data, not errors). Discovered atoms are the
    released values within the bounds (none: the column has no atoms); a discovered step, the granularity released
    (none, or one not below the range: no step)."""
    out = {n: dict(spec) if isinstance(spec, dict) else spec for n, spec in cols.items()}
    last = {"atoms": 1, "step": 1, "rounding": 2}  # after the bounds they need, and rounding after its step
    for name, key in sorted(requests, key=lambda r: last.get(r[1], 0)):
        spec = out[name]
        if key == "rounding":
            found_rounding = None if domain is None else (domain.get(name) or {}).get("rounding")
            if "step" in spec and found_rounding and any(shares for _, shares in found_rounding):
                spec["rounding"] = found_rounding
            else:
                del spec["rounding"]
            continue
        if key == "step":
            found_step = None if domain is None else (domain.get(name) or {}).get("step")
            pieces = [[0, found_step]] if isinstance(found_step, (int, float)) else found_step
            if pieces and all(v < float(spec["upper"]) - float(spec["lower"]) for _, v in pieces):
                spec["step"] = found_step
            else:
                del spec["step"]
            continue
        if key == "atoms":
            found = [] if domain is None else (domain.get(name) or {}).get("atoms", [])
            kept = [float(v) for v in found if float(spec["lower"]) <= float(v) <= float(spec["upper"])]
            if kept:
                spec["atoms"] = kept
            else:
                del spec["atoms"]
            continue
        if domain is None:
            value: Any = (
                [PENDING_CATEGORY] if key == "categories" else (-PENDING_BOUND if key == "lower" else PENDING_BOUND)
            )
        else:
            value = (domain.get(name) or {}).get(key)
            if value is None:
                raise SchemaError(
                    f"'{key}: discover' has no discovered value.",
                    file=file,
                    column=name,
                    fix="run the discover stage (`synthrelease stage discover`; `dvc repro` runs it) before the "
                    "stages that read the schema.",
                )
        if key == "categories":
            spec["categories"] = [*value, OTHER]
            spec["other"] = OTHER
            continue
        spec.setdefault("on_invalid", "clip")  # a value beyond a DP bound is data to clip, not an error to drop
        documented = [
            float(v)
            for k in ("atoms", "bins")
            if isinstance(spec.get(k), list)
            for v in spec[k]
            if isinstance(v, (int, float))
        ]
        spec[key] = min([value, *documented]) if key == "lower" else max([value, *documented])
    return out


def _parse_target_positive(
    value: Any, target: str | None, declared: tuple[Column, ...], file: str, pending: bool
) -> str | int | None:
    """`target_positive: <category>`: the target's class the utility scores read as positive, one against the rest
    (without it, the target's second category). `pending`: the target's categories are still to be discovered,
    so the value is checked against them only once they are."""
    if value is None:
        return None
    if target is None:
        raise SchemaError(
            f"target_positive is {value!r}, but the schema declares no target.",
            file=file,
            fix="declare target: <a categorical or binary column>, or remove target_positive.",
        )
    categories = list(next(c.categories for c in declared if c.name == target) or ())
    if not categories:
        raise SchemaError(
            f"target_positive is {value!r}, but the target has no categories to choose from.",
            file=file,
            column=target,
            fix="make the target a categorical or binary column, or remove target_positive.",
        )
    if isinstance(value, bool) or not pending and value not in categories:
        raise SchemaError(
            f"target_positive is {value!r}, not one of the target's categories.",
            file=file,
            column=target,
            fix=f"set target_positive to one of {categories}, or remove it (the second category, "
            f"{categories[1]!r}, is then the positive class).",
        )
    return value


def load_schema(path: str | Path, discovered: Any = None, pending: bool = False) -> Schema:
    """Parse and check ``schemas/<name>.yaml``; raise SchemaError naming file, column and fix.

    A schema that leaves parts of its domain to discovery (`<key>: discover`, `discovery_requests`) is filled from
    `discovered` ({column: {key: value}}: the discover stage's output); `pending`: filled by placeholders instead,
    for the discover stage alone (the result has `pending` set and is never used to validate a row)."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SchemaError(
            f"cannot read the schema ({e.strerror}).",
            file=file,
            fix="pass the path of an existing schemas/<name>.yaml.",
        ) from e
    try:
        loader = _UniqueKeyLoader(text)
        loader.name = file
        try:
            raw = loader.get_single_data()
        finally:
            loader.dispose()
    except (yaml.YAMLError, ValueError) as e:  # ValueError: an unquoted value YAML reads as an impossible date
        raise SchemaError(
            f"invalid YAML: {e}", file=file, fix='fix the YAML syntax (quote values such as "?" or "yes").'
        ) from e
    if not isinstance(raw, dict):
        raise SchemaError("the schema is not a YAML mapping.", file=file, fix="start from schemas/adult.yaml.")
    _refuse_placeholders(raw, file)
    unknown = sorted(set(raw) - _SCHEMA_KEYS)
    if unknown:
        raise SchemaError(f"unknown top-level keys {unknown}.", file=file, fix=f"use only {sorted(_SCHEMA_KEYS)}.")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise SchemaError("missing 'name'.", file=file, fix="add name: <data set name>.")
    default_policy = raw.get("on_invalid", "drop")
    if default_policy not in POLICIES:
        raise SchemaError(
            f"unknown default on_invalid policy {default_policy!r}.",
            file=file,
            fix=f"set on_invalid to one of {list(POLICIES)}.",
        )
    cols = raw.get("columns")
    if not isinstance(cols, dict) or not cols:
        raise SchemaError(
            "missing or empty 'columns' mapping.", file=file, fix="add columns: {<name>: {kind: ..., ...}, ...}."
        )
    requests = discovery_requests(cols, file)
    if requests:
        cols = _filled(cols, requests, None if pending else (discovered or {}), file)
    declared = tuple(_parse_column(n, spec, default_policy, file) for n, spec in cols.items())
    _check_after(declared, file)
    _check_derived(declared, file)
    names = [c.name for c in declared]
    target = raw.get("target")
    if target is not None and target not in names:
        raise SchemaError(
            f"target {target!r} is not a column of the schema.",
            file=file,
            column=str(target),
            fix=f"set target to one of {names} or remove it.",
        )
    target_positive = _parse_target_positive(
        raw.get("target_positive"), target, declared, file, pending and (str(target), "categories") in requests
    )
    protected = raw.get("protected") or []
    if not isinstance(protected, list):
        raise SchemaError(f"protected is {protected!r}, not a list.", file=file, fix="write protected: [col, ...].")
    for p in protected:
        if p not in names:
            raise SchemaError(
                f"protected column {p!r} is not a column of the schema.",
                file=file,
                column=str(p),
                fix=f"name only columns of the schema: {names}.",
            )
    if len(set(protected)) != len(protected):
        raise SchemaError(f"protected {protected} lists a column twice.", file=file, fix="list each column once.")
    for c in declared:
        if c.kind == ID_KIND and c.name in (target, *protected):
            raise SchemaError(
                "an id column is never read, so it cannot be the target or a protected column.",
                file=file,
                column=c.name,
                fix="choose another column, or give this one a kind whose values the release may model.",
            )
        if c.is_derived and c.name in (target, *protected):
            raise SchemaError(
                "a derived column is never modelled, so it cannot be the target or a protected column.",
                file=file,
                column=c.name,
                fix=f"name one of its sources {list(c.sources)} there instead.",
            )
        if c.missing and c.name in (target, *protected):
            role = "the target" if c.name == target else "a protected column"
            raise SchemaError(
                f"'missing: allowed' on {role}: the utility classifiers (target) and PPEM's fairness "
                "groups (protected) need a value in every row.",
                file=file,
                column=c.name,
                fix="remove 'missing: allowed' (rows with a null are then dropped by on_invalid, "
                "within dataset.max_dropped_fraction), or choose another target/protected column.",
            )
    source = raw.get("source") or {}
    if not isinstance(source, dict):
        raise SchemaError(
            f"source is {source!r}, not a mapping.",
            file=file,
            fix='write source: {bundled: <name>, documentation: "..."}.',
        )
    return Schema(
        name=name,
        description=str(raw.get("description") or ""),
        columns=expand(declared, file),
        unit=_parse_unit(raw.get("privacy_unit"), declared, file),
        population=_parse_population(raw.get("population"), file),
        discovered=requests,
        pending=bool(requests) and pending,
        declared=declared,
        target=target,
        target_positive=target_positive,
        protected=tuple(protected),
        on_invalid=default_policy,
        source=source,
        rows=_parse_rows(raw.get("rows"), file),
        related=_parse_related(
            raw.get("related"),
            [c.name for c in declared if c.kind != ID_KIND],
            [c.name for c in declared if c.is_derived],
            file,
        ),
        rules=parse_rules(
            raw.get("rules"),
            {
                c.name: c.categories
                for c in declared
                if c.kind in CATEGORICAL_KINDS and not c.missing and c.derived_from is None
            },
            default_policy,
            file,
        ),
    )
