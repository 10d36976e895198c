"""Public rules between categorical columns (schema key `rules`): "a row whose relationship is Husband has sex Male".

A rule is a documented fact of the table's coding, like a bound or a category list, never read from rows:

    rules:
      - {if: {relationship: [Husband, Wife]}, then: {marital_status: [Married-civ-spouse, Married-AF-spouse]}}

A row *applies* when each `if` column holds one of its listed values, and then *keeps* the rule when each `then`
column holds one of its listed values. Rules name categorical or binary columns that are modelled (not derived, not
`missing: allowed`), so every value they compare is a category.

- Validation (pipelines/data/validation.py) checks every real row: a row that breaks a rule meets the rule's
  `on_invalid` (the schema's, where the rule gives none; a schema-level clip is drop): drop, counted, within
  `dataset.max_dropped_fraction`, or fatal. Whether a row is dropped depends on that row alone, so add/remove-one
  neighbours stay neighbours.
- Publishing (tasks/evaluate.py) keeps every synthetic row inside the rules: a drawn row that breaks one is replaced
  by further draws of the same generator that keep them (rejection), i.e. the rows are a sample of the generator's
  distribution conditioned on the rules. Post-processing of the trained model, so no budget is spent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from pipelines.errors import SchemaError

EXAMPLE = "rules: [{if: {relationship: [Husband]}, then: {sex: [Male]}}]"
MIN_KEPT = 0.01  # `draw_within` stops when fewer than this share of the drawn rows keep the rules ...
MIN_JUDGED = 1000  # ... once at least this many rows (and n) are drawn
MIN_DRAW = 64  # the fewest rows a further draw asks for
_KEYS = {"if", "then", "on_invalid"}

Condition = tuple[tuple[str, tuple[Any, ...]], ...]  # (column, its allowed values), in the file's order


@dataclass(frozen=True)
class Rule:
    """One public rule: rows whose `when` columns hold their listed values have `then` columns in theirs."""

    when: Condition
    then: Condition
    on_invalid: str = "drop"

    @property
    def columns(self) -> list[str]:
        return [c for c, _ in (*self.when, *self.then)]

    def describe(self) -> str:
        """The rule as one line of text, e.g. "relationship in ['Husband'] => sex in ['Male']"."""
        return f"{_text(self.when)} => {_text(self.then)}"

    def broken(self, df: pd.DataFrame) -> pd.Series:
        """Rows of `df` (its categorical columns) that apply and do not keep the rule."""
        applies = _holds(df, self.when)
        return applies & ~_holds(df, self.then)

    def to_dict(self) -> dict[str, Any]:
        return {
            "if": {c: list(v) for c, v in self.when},
            "then": {c: list(v) for c, v in self.then},
            "on_invalid": self.on_invalid,
        }


def _text(cond: Condition) -> str:
    return " and ".join(f"{c} in {list(v)}" for c, v in cond)


def _holds(df: pd.DataFrame, cond: Condition) -> pd.Series:
    mask = pd.Series(True, index=df.index)
    for column, values in cond:
        mask &= df[column].isin(list(values))
    return mask


def broken_rows(df: pd.DataFrame, rules: Sequence[Rule]) -> pd.Series:
    """Rows of `df` that break at least one of `rules`."""
    mask = pd.Series(False, index=df.index)
    for rule in rules:
        mask |= rule.broken(df)
    return mask


def indexed(rule: Rule, categories: Mapping[str, Sequence[Any]]) -> Rule:
    """`rule` on category positions (the encoded table's codes: a one-hot block's index, a binary's 0/1), as the
    layout carries it (`Layout.rules`) for the generators' own use (the calibration's targets and draws)."""

    def index(cond: Condition) -> Condition:
        return tuple((c, tuple(list(categories[c]).index(v) for v in values)) for c, values in cond)

    return Rule(index(rule.when), index(rule.then), rule.on_invalid)


def draw_within(draw: Callable[[int], pd.DataFrame], n: int, rules: Sequence[Rule]) -> tuple[pd.DataFrame, int]:
    """n rows that keep every rule, and how many of the first n drawn broke one (each replaced by a later draw).
    `draw(m)`: m decoded rows of a generator. Rows are drawn until n keep the rules and the first n of those are
    returned, so each is a draw of the generator's distribution conditioned on the rules (rejection sampling). A
    further draw asks for the missing rows over the share kept so far, between MIN_DRAW and 4n rows. RuntimeError
    once at least max(n, MIN_JUDGED) rows are drawn and under MIN_KEPT of them keep the rules: such a generator
    describes another table."""
    rows = draw(n)
    if not rules:
        return rows, 0
    kept, drawn = [rows[~broken_rows(rows, rules)]], len(rows)
    have = len(kept[0])
    while have < n:
        if drawn >= max(n, MIN_JUDGED) and have < MIN_KEPT * drawn:
            raise RuntimeError(
                f"only {have} of {drawn} drawn rows keep the schema's rules "
                f"({'; '.join(r.describe() for r in rules)}): the generator does not describe "
                "this table. Check the rules against the documentation; nothing was written."
            )
        ask = math.ceil(1.25 * (n - have) * drawn / max(have, 1))
        more = draw(min(max(MIN_DRAW, ask), 4 * n + MIN_DRAW))
        kept.append(more[~broken_rows(more, rules)])
        drawn, have = drawn + len(more), have + len(kept[-1])
    return pd.concat(kept, ignore_index=True).iloc[:n].reset_index(drop=True), n - len(kept[0])


def parse_rules(raw: Any, categories: Mapping[str, Sequence[Any]], default_policy: str, file: str) -> tuple[Rule, ...]:
    """The schema's `rules` list; `categories`: the category list of each column a rule may name (modelled
    categorical and binary columns). SchemaError naming the file, the rule and the fix for anything malformed."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise SchemaError(
            f"rules is {raw!r}, not a non-empty list of rules.",
            file=file,
            column="rules",
            fix=f"write {EXAMPLE}, or remove 'rules'.",
        )
    rules = tuple(_parse_rule(i, entry, categories, default_policy, file) for i, entry in enumerate(raw, 1))
    seen = [(r.when, r.then) for r in rules]  # the report counts each rule under `describe()`
    dupes = [i for i, r in enumerate(seen, 1) if r in seen[: i - 1]]
    if dupes:
        raise SchemaError(
            f"rule {dupes[0]} repeats an earlier rule.",
            file=file,
            column=f"rules[{dupes[0]}]",
            fix="list each rule once.",
        )
    return rules


def _parse_rule(i: int, entry: Any, categories: Mapping[str, Sequence[Any]], default_policy: str, file: str) -> Rule:
    where = f"rules[{i}]"
    if not isinstance(entry, dict) or not {"if", "then"} <= set(entry) or set(entry) - _KEYS:
        raise SchemaError(
            f"rule {i} is {entry!r}, not a mapping with 'if' and 'then' (and optionally 'on_invalid').",
            file=file,
            column=where,
            fix=f"write each rule as in {EXAMPLE}.",
        )
    policy = entry.get("on_invalid", "drop" if default_policy == "clip" else default_policy)
    if policy not in ("drop", "fatal"):
        raise SchemaError(
            f"rule {i} has on_invalid {policy!r}: a broken rule has no value to clip to.",
            file=file,
            column=where,
            fix="set on_invalid to drop or fatal for this rule.",
        )
    when, then = (_condition(i, key, entry[key], categories, file) for key in ("if", "then"))
    shared = sorted({c for c, _ in when} & {c for c, _ in then})
    if shared:
        raise SchemaError(
            f"rule {i} names {shared} in both 'if' and 'then'.",
            file=file,
            column=where,
            fix="name each column on one side of the rule only.",
        )
    for column, values in then:
        if set(values) == set(categories[column]):
            raise SchemaError(
                f"rule {i}'s 'then' lists every category of '{column}', so it rules nothing out.",
                file=file,
                column=where,
                fix="list only the values the documentation allows there.",
            )
    return Rule(when, then, policy)


def _condition(i: int, key: str, raw: Any, categories: Mapping[str, Sequence[Any]], file: str) -> Condition:
    where = f"rules[{i}].{key}"
    if not isinstance(raw, dict) or not raw:
        raise SchemaError(
            f"rule {i}'s '{key}' is {raw!r}, not a mapping of columns to their values.",
            file=file,
            column=where,
            fix=f"write it as in {EXAMPLE}.",
        )
    out = []
    for column, values in raw.items():
        if column not in categories:
            raise SchemaError(
                f"rule {i} names {column!r}, which is not a modelled categorical or binary column "
                "(rules compare categories: not a numeric, date, id, derived or 'missing: allowed' "
                "column).",
                file=file,
                column=where,
                fix=f"name only these columns: {list(categories)}.",
            )
        values = values if isinstance(values, list) else [values]
        unknown = [v for v in values if v not in categories[column]]
        if not values or unknown or len(set(values)) != len(values):
            raise SchemaError(
                f"rule {i} lists {values!r} for '{column}': "
                + (f"{unknown} are not its categories." if unknown else "empty or repeated values."),
                file=file,
                column=where,
                fix=f"list distinct categories of '{column}': {list(categories[column])} (quote values "
                'YAML reads as booleans or numbers, e.g. "no").',
            )
        out.append((column, tuple(values)))
    return tuple(out)
