"""Great Expectations suite built from the public schema; domain checks and per-column policies.

``validate_table`` checks a raw frame (from ``readers.read_table``) and applies each column's
``on_invalid`` policy; ``conforms`` checks any frame (e.g. decoded synthetic rows) against the same
suite. Reports describe the private table and are not covered by any DP guarantee (privacy rule 6): they are
the steward's (reports/<ds>/validation.json, the steward report), never copied into a release, and the public
report's whitelist (`reporting.report.public_view`) drops them. They carry counts, and, so that a steward can
correct the schema from the documentation without opening the table, a column's offending values in summary:
the most frequent values outside a categorical column's categories (`unknown_values`) and the smallest and
largest value outside a numeric column's domain (`observed_min`, `observed_max`). No row number reaches them.
"""

from __future__ import annotations

import gc
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pipelines.data.declared import derived_values, to_modelled
from pipelines.data.rules import Rule
from pipelines.data.schema import DATE_KINDS, Column, Schema, iso
from pipelines.errors import InputError

if TYPE_CHECKING:
    from great_expectations.core import ExpectationSuite, ExpectationSuiteValidationResult

_EXAMPLES = 5
UNKNOWN_REPORTED = 20  # unknown values a report lists per column, most frequent first
_UNKNOWN_KEPT = 1000  # unknown values a part's counts keep per column (`_offending`, `merge_parts`)
_SHOWN_CHARS = 40  # a value longer than this is cut in a sentence (`unknown_text`), never in the report
_REASONS = {
    "below": "below the lower bound",
    "above": "above the upper bound",
    "non_integer": "not whole numbers",
    "unknown": "not in the category list",
    "nulls": "null",
    "mismatched": "not the documented value of their source's category",
    "off_formula": "further than its tolerance from the documented formula of their row",
}


def _gx() -> ModuleType:
    """great_expectations, imported on first use (the import is slow)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx

    return gx


def build_suite(schema: Schema) -> ExpectationSuite:
    """GX expectation suite derived from the schema alone: exact column set, no nulls, bounds or
    category sets, and dtypes (float64/int64; string columns are covered by their category set)."""
    gx = _gx()
    import great_expectations.expectations as gxe

    expectations = [gxe.ExpectTableColumnsToMatchSet(column_set=schema.names, exact_match=True)]
    for c in schema.columns:
        expectations.append(gxe.ExpectColumnValuesToNotBeNull(column=c.name))
        if c.is_numeric:
            lo, hi = (int(c.lower), int(c.upper)) if c.kind == "integer" else (c.lower, c.upper)
            expectations.append(gxe.ExpectColumnValuesToBeBetween(column=c.name, min_value=lo, max_value=hi))
        else:
            expectations.append(gxe.ExpectColumnValuesToBeInSet(column=c.name, value_set=list(c.categories)))
        if c.dtype != "str":  # GX 1.24 cannot match pandas 3's default string dtype by name
            expectations.append(gxe.ExpectColumnValuesToBeOfType(column=c.name, type_=c.dtype))
    return gx.ExpectationSuite(name=f"{schema.name}-{schema.hash()[:12]}", expectations=expectations)


def _run(df: pd.DataFrame, suite: ExpectationSuite) -> dict[str, Any]:
    """The `_summary` of the suite's result on `df`. GX's ephemeral context keeps the frame and the metrics computed
    on it in reference cycles, which only Python's cyclic collector frees, and it runs on object counts, not bytes:
    collected here, so a table checked a part at a time holds one part (evaluate@gen's synthetic table at 8,000,000
    rows in 2¹⁸-row parts: about 700 MB less)."""
    gx = _gx()
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    ctx = gx.get_context(mode="ephemeral", project_config=config)
    batch_def = ctx.data_sources.add_pandas("p").add_dataframe_asset("t").add_batch_definition_whole_dataframe("b")
    summary = _summary(batch_def.get_batch(batch_parameters={"dataframe": df}).validate(suite))
    del ctx, batch_def
    gc.collect()
    return summary


def _summary(result: ExpectationSuiteValidationResult) -> dict[str, Any]:
    """Success, statistics and failed expectations as counts (GX's value lists are left out)."""
    failed = []
    for r in result.results:
        if r.success:
            continue
        res = r.result or {}
        failed.append(
            {
                "expectation": r.expectation_config.type,
                "column": r.expectation_config.kwargs.get("column"),
                "unexpected_count": res.get("unexpected_count"),
                "observed": res.get("observed_value") if "unexpected_count" not in res else None,
                "error": bool(r.exception_info and r.exception_info.get("raised_exception")),
            }
        )
    stats = {k: (float(v) if isinstance(v, float) else v) for k, v in result.statistics.items()}
    return {"success": bool(result.success), "statistics": stats, "failed": failed}


def conforms(df: pd.DataFrame, schema: Schema) -> dict[str, Any]:
    """Run the schema's suite on ``df``; returns {success, failed: [{expectation, column, ...}]}."""
    s = _run(df, build_suite(schema))
    return {"success": s["success"], "failed": s["failed"]}


def _violations(s: pd.Series, col: Column) -> dict[str, pd.Series]:
    """Boolean masks of out-of-domain values (nulls excluded) by reason."""
    present = s.notna()
    if col.is_numeric:
        v = s.astype("float64")
        masks = {"below": present & (v < col.lower), "above": present & (v > col.upper)}
        if col.kind == "integer":
            masks["non_integer"] = present & ~(v % 1 == 0) & ~masks["below"] & ~masks["above"]
        return masks
    return {"unknown": present & ~s.isin(list(col.categories))}


def _beyond_discovered(masks: dict[str, pd.Series], name: str, schema: Schema) -> pd.Series:
    """The cells of column `name` outside its domain only beyond a bound the discover stage found: clipping them is
    what a DP bound does to the rarest extremes (pipelines/privacy/discovery.py), not a sign that the table is not
    the one described, so the DP row-loss test does not count them (the report does, `rows_clipped_to_discovered`)."""
    side = {"lower": "below", "upper": "above"}
    found = {side[k] for c, k in schema.discovered if c == name and k in side}
    none = pd.Series(False, index=next(iter(masks.values())).index)
    beyond = [m for k, m in masks.items() if k in found]
    rest = [m for k, m in masks.items() if k not in found]
    if not beyond:
        return none
    return pd.concat(beyond, axis=1).any(axis=1) & ~(pd.concat(rest, axis=1).any(axis=1) if rest else none)


def _to_other(df: pd.DataFrame, schema: Schema) -> tuple[pd.DataFrame, dict[str, int]]:
    """`df` with every value outside a column's categories replaced by the column's `other` cell (a discovered
    category list's OTHER, or a documented `other:` category), and how many cells each such column moved: those
    values are data the schema has one cell for, not errors."""
    moved: dict[str, int] = {}
    for col in schema.declared:
        if col.other is None:
            continue
        s = df[col.name]
        out = s.notna() & ~s.isin(list(col.categories))
        moved[col.name] = int(out.sum())
        if moved[col.name]:
            df = df.assign(**{col.name: s.astype(object).where(~out, col.other)})
    return df, moved


def _mismatched(df: pd.DataFrame, col: Column, sources: dict[str, Column]) -> pd.Series:
    """Rows of a derived column `col` (declared columns `df`) whose value is not the documented value of their
    source's category (or is set where the source is null), or is further than the tolerance from its formula (or
    null where the formula is not). A row whose source value is itself out of its domain or a disallowed null is
    left to the source's policy, so it is counted once."""
    s = df[col.name]
    if col.formula is not None:
        value = pd.to_numeric(s, errors="coerce").astype("float64").to_numpy()
        same = pd.Series(col.formula.agrees(value, col.formula.evaluate(df)), index=df.index)
    else:
        expected = derived_values(df, col)
        same = (s.isna() & expected.isna()) | (s.astype(object) == expected.astype(object))
    known = pd.Series(True, index=df.index)
    for name in col.sources:
        source, src = sources[name], df[name]
        inside = (
            (src >= source.lower) & (src <= source.upper) if source.is_numeric else src.isin(list(source.categories))
        )
        known &= inside | (src.isna() & source.missing)
    return known & ~same


def _broken(df: pd.DataFrame, rule: Rule, columns: dict[str, Column]) -> pd.Series:
    """Rows of the declared columns `df` that break `rule`; a row with a value outside a named column's categories
    is left to that column's policy, so it is counted once."""
    known = pd.Series(True, index=df.index)
    for c in rule.columns:
        known &= df[c].isin(list(columns[c].categories))
    return known & rule.broken(df)


def _rule_examples(df: pd.DataFrame, rule: Rule, mask: pd.Series) -> list[str]:
    """Up to _EXAMPLES rows that break `rule`, as "row N: col=value, ..." (N as in `_examples`)."""
    rows = np.flatnonzero(mask.to_numpy())[:_EXAMPLES]
    return [f"row {int(df.index[r]) + 1}: " + ", ".join(f"{c}={df[c].iloc[r]!r}" for c in rule.columns) for r in rows]


def _text(value: Any) -> str:
    """A cell as the text a report lists it by (numpy scalars as their Python value: 2, not np.int64(2))."""
    return str(getattr(value, "item", lambda: value)())


def _ranked(counts: Any, limit: int) -> list[list[Any]]:
    """(value, count) pairs as [value, count] lists, most frequent first, ties by value, at most `limit`."""
    return [[v, int(n)] for v, n in sorted(counts, key=lambda vn: (-vn[1], vn[0]))[:limit]]


def _offending(s: pd.Series, col: Column, bad: pd.Series) -> dict[str, Any]:
    """What a part's counts keep of a modelled column's out-of-domain cells `bad`: for a categorical or binary
    column their values as text with their counts (`unknown_values`, `_ranked`, at most _UNKNOWN_KEPT), for a
    numeric one the smallest and largest (`observed_min`, `observed_max`; None where there is none)."""
    if col.is_numeric:
        v = s[bad].astype("float64")
        return {"observed_min": float(v.min()) if len(v) else None, "observed_max": float(v.max()) if len(v) else None}
    counts: dict[str, int] = {}
    for value, n in s[bad].value_counts(sort=False).items():  # two cells with one text (2 and "2") add up
        counts[_text(value)] = counts.get(_text(value), 0) + int(n)
    return {"unknown_values": _ranked(counts.items(), _UNKNOWN_KEPT)}


def _examples(s: pd.Series, mask: pd.Series) -> list[str]:
    """Up to _EXAMPLES flagged cells as "row N: value", N the frame's index + 1 (data rows count from 1; a part of
    a larger table carries its rows' positions in the whole table as its index)."""
    rows = np.flatnonzero(mask.to_numpy())[:_EXAMPLES]
    return [f"row {int(s.index[r]) + 1}: {getattr(v, 'item', lambda: v)()!r}" for r, v in zip(rows, s.iloc[rows])]


def validate_table(
    df: pd.DataFrame, schema: Schema, label: str, carry: dict[str, np.ndarray] | None = None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Validate a raw frame (the schema's declared columns) against the schema and apply each column's
    on_invalid policy.

    A column with `missing: allowed` keeps its nulls as data: the frame is first mapped to the modelled columns
    (`declared.to_modelled`: a null category, or an indicator column; dates as numbers), and the report counts
    the nulls as `modelled_nulls`.
    clip: numeric values clipped to the bounds (non-integers in integer columns rounded); drop: rows
    with an out-of-domain value dropped; fatal: InputError. Other nulls are dropped (clip/drop) or fatal.
    Returns (clean frame of the modelled columns in schema dtypes with a fresh index, JSON-able report); `carry`
    (columns aligned with `df`'s rows, e.g. the privacy unit's pseudonyms) is appended to the clean frame for the
    rows it keeps.
    A table read in parts (pipelines/data/out_of_core.py) is `validate_part` of each part, `merge_parts` of
    their counts and `finish` once: the same rows and report.
    """
    clean, part = validate_part(df, schema, carry)
    return clean, finish(merge_parts([part], schema), schema, label)


def validate_part(
    df: pd.DataFrame, schema: Schema, carry: dict[str, np.ndarray] | None = None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The rows of `df` (a table, or consecutive rows of one, indexed by their positions in it) that the policies
    keep, clipped and in schema dtypes, and their counts: `finish` turns `merge_parts` of the parts' counts into
    `validate_table`'s report (or its InputError). Per column, up to _EXAMPLES flagged cells (`examples`) for the
    error of a fatal column, which `finish` never lets into the report (they name rows), and the out-of-domain
    values in summary (`_offending`)."""
    if schema.pending:
        raise ValueError("a schema whose discovered parts are placeholders validates no row (load_schema)")
    modelled_nulls = {c: int(df[c].isna().sum()) for c in schema.missing}
    df, to_other = _to_other(df, schema)
    declared, sources = df, {c.name: c for c in schema.declared}
    df = to_modelled(df, schema)
    gx_summary = _run(df, build_suite(schema))
    drop = pd.Series(False, index=df.index)
    clipped = pd.Series(False, index=df.index)  # rows whose value a clip policy changes (counted if kept), but for
    # a value beyond a discovered bound alone: the DP bound's own effect (`_beyond_discovered`), counted apart
    to_bound = pd.Series(False, index=df.index)
    columns: dict[str, Any] = {}
    for col in schema.columns:
        s = df[col.name]
        nulls = s.isna()
        masks = _violations(s, col)
        bad = pd.concat(masks, axis=1).any(axis=1)
        if col.on_invalid == "drop":
            drop |= bad
        elif col.on_invalid == "clip":
            clipped |= bad & ~_beyond_discovered(masks, col.name, schema)
            to_bound |= bad
        drop |= nulls
        columns[col.name] = {
            "out_of_domain": int(bad.sum()),
            "nulls": int(nulls.sum()),
            **{k: int(m.sum()) for k, m in masks.items()},
            **_offending(s, col, bad),
            **({"to_other": to_other[col.name]} if col.name in to_other else {}),
            "examples": _examples(s, bad | nulls) if col.on_invalid == "fatal" else [],
        }
    for col in schema.derived:  # checked on the declared columns: never modelled
        bad = _mismatched(declared, col, sources)
        if col.on_invalid == "drop":
            drop |= bad
        columns[col.name] = {
            "out_of_domain": int(bad.sum()),
            "nulls": 0,
            _violation_keys(col)[0]: int(bad.sum()),
            "examples": _examples(declared[col.name], bad) if col.on_invalid == "fatal" else [],
        }
    rules: dict[str, Any] = {}
    for rule in schema.rules:  # checked on the declared columns, like the derived ones
        bad = _broken(declared, rule, sources)
        if rule.on_invalid == "drop":
            drop |= bad
        rules[rule.describe()] = {
            "broken": int(bad.sum()),
            "examples": _rule_examples(declared, rule, bad) if rule.on_invalid == "fatal" else [],
        }
    clipped &= ~drop
    to_bound &= ~drop & ~clipped
    clean = df[~drop].reset_index(drop=True)
    for col in schema.columns:
        if col.is_numeric and col.on_invalid == "clip":
            v = clean[col.name].astype("float64")
            clean[col.name] = (v.round() if col.kind == "integer" else v).clip(col.lower, col.upper)
        clean[col.name] = clean[col.name].astype(col.dtype)
    for name, values in (carry or {}).items():
        clean[name] = np.asarray(values)[~drop.to_numpy()]
    return clean, {
        "rows_in": len(df),
        "rows_out": len(clean),
        "rows_dropped": int(drop.sum()),
        "rows_clipped": int(clipped.sum()),
        "rows_clipped_to_discovered": int(to_bound.sum()),
        "columns": columns,
        "rules": rules,
        "modelled_nulls": modelled_nulls,
        "gx": gx_summary,
    }


def _merged(key: str, values: list[Any]) -> Any:
    """One column count of the whole table from its parts' (`merge_parts`)."""
    if key == "examples":
        return [e for v in values for e in v][:_EXAMPLES]
    if key == "unknown_values":
        counts: dict[str, int] = {}
        for pairs in values:
            for value, n in pairs:
                counts[value] = counts.get(value, 0) + n
        return _ranked(counts.items(), _UNKNOWN_KEPT)
    if key in ("observed_min", "observed_max"):
        seen = [v for v in values if v is not None]
        return (min if key == "observed_min" else max)(seen) if seen else None
    return sum(values)


def merge_parts(parts: list[dict[str, Any]], schema: Schema) -> dict[str, Any]:
    """The counts of consecutive parts of a table (`validate_part`'s, in row order) as the whole table's: counts
    summed, the first _EXAMPLES examples kept, each unknown value's counts summed over the parts (then the
    _UNKNOWN_KEPT most frequent kept), the smallest and largest offending value of all, and the Great
    Expectations outcome of the whole (an expectation fails when it fails on some part, its unexpected count the
    parts' sum; failures in the suite's order).

    The report is the one-pass report (`validate_table`: one part) whenever no part holds more than
    _UNKNOWN_KEPT distinct unknown values in a column: a part's counts keep only its _UNKNOWN_KEPT most frequent
    (bounded memory), so past that a value's count can leave out the parts where it was rarer. Such a column
    is no list of misspelt categories, and the top of the list still shows what it holds."""
    first = parts[0]
    columns = {
        c: {k: _merged(k, [p["columns"][c][k] for p in parts]) for k in counts}
        for c, counts in first["columns"].items()
    }
    rules = {
        r: {
            "broken": sum(p["rules"][r]["broken"] for p in parts),
            "examples": [e for p in parts for e in p["rules"][r]["examples"]][:_EXAMPLES],
        }
        for r in first["rules"]
    }
    return {
        **{
            k: sum(p[k] for p in parts)
            for k in ("rows_in", "rows_out", "rows_dropped", "rows_clipped", "rows_clipped_to_discovered")
        },
        "columns": columns,
        "rules": rules,
        "modelled_nulls": {c: sum(p["modelled_nulls"][c] for p in parts) for c in first["modelled_nulls"]},
        "gx": parts[0]["gx"] if len(parts) == 1 else _merge_gx([p["gx"] for p in parts], schema),
    }


def _merge_gx(summaries: list[dict[str, Any]], schema: Schema) -> dict[str, Any]:
    """`_summary` of a whole table from its parts' (`merge_parts`), its failures in `build_suite`'s order (the
    table's column set, then per column: not null, bounds or category set, type)."""
    failed: dict[tuple[Any, Any], dict[str, Any]] = {}
    for s in summaries:
        for f in s["failed"]:
            key = (f["expectation"], f["column"])
            if key not in failed:
                failed[key] = dict(f)
                continue
            seen = failed[key]
            if f["unexpected_count"] is not None:
                seen["unexpected_count"] = (seen["unexpected_count"] or 0) + f["unexpected_count"]
            seen["error"] = seen["error"] or f["error"]
            if seen["observed"] is None:
                seen["observed"] = f["observed"]
    stats = dict(summaries[0]["statistics"])
    evaluated = stats.get("evaluated_expectations", 0)
    stats.update(
        successful_expectations=evaluated - len(failed),
        unsuccessful_expectations=len(failed),
        success_percent=(evaluated - len(failed)) / evaluated * 100 if evaluated else None,
    )
    rank = {
        "expect_column_values_to_not_be_null": 0,
        "expect_column_values_to_be_between": 1,
        "expect_column_values_to_be_in_set": 1,
        "expect_column_values_to_be_of_type": 2,
    }
    column = {name: i for i, name in enumerate(schema.names)}
    order = sorted(
        failed.values(),
        key=lambda f: (
            (-1, 0) if f["column"] is None else (column.get(f["column"], len(column)), rank.get(f["expectation"], 3))
        ),
    )
    return {"success": not failed, "statistics": stats, "failed": order}


def _value(x: float, col: Column | None) -> int | float | str:
    """An offending number as the report gives it: a date column's as its ISO date (or time), a whole number as
    an integer, any other as it is."""
    if col is not None and col.kind in DATE_KINDS and col.after is None:
        try:
            return iso(x, col.kind)
        except (OverflowError, ValueError):  # past Python's year 9999: the number since 1970 instead
            pass
    return int(x) if float(x).is_integer() else x


def _summary_of_offending(c: dict[str, Any], declared: Column | None) -> dict[str, Any]:
    """The report's summary of a column's out-of-domain values from its counts (none when it has none):
    `unknown_values` ({value, count}, UNKNOWN_REPORTED at most) or `observed_min` and `observed_max`."""
    if not c["out_of_domain"]:
        return {}
    if "unknown_values" in c:
        return {"unknown_values": [{"value": v, "count": n} for v, n in c["unknown_values"][:UNKNOWN_REPORTED]]}
    if c.get("observed_min") is not None:
        return {
            "observed_min": _value(c["observed_min"], declared),
            "observed_max": _value(c["observed_max"], declared),
        }
    return {}


def finish(counts: dict[str, Any], schema: Schema, label: str) -> dict[str, Any]:
    """`validate_table`'s report from a table's counts (`merge_parts`); InputError for a fatal column with a value
    outside the public domain or a null. A column with out-of-domain values also gets their summary
    (`_summary_of_offending`)."""
    declared = {c.name: c for c in schema.declared}
    columns: dict[str, Any] = {}
    for col in (*schema.columns, *schema.derived):
        c = counts["columns"][col.name]
        n_bad, n_null = c["out_of_domain"], c["nulls"]
        if col.on_invalid == "fatal" and n_bad + n_null:
            detail = ", ".join(f"{c[k]} {_REASONS[k]}" for k in (*_violation_keys(col), "nulls") if c[k])
            raise InputError(
                f"{n_bad + n_null} values outside the public domain ({detail}; e.g. {', '.join(c['examples'])}; "
                "data rows count from 1) and on_invalid is fatal.",
                file=label,
                column=col.name,
                fix="correct those rows in the source table, or set on_invalid: drop "
                + (
                    "for this column in the schema (or correct its derived values)."
                    if col.is_derived
                    else "(or clip for a numeric column) for this column in the schema."
                ),
            )
        action = [col.on_invalid] if n_bad else []
        if n_null:
            action.append("drop nulls")
        columns[col.name] = {
            "policy": col.on_invalid,
            "out_of_domain": n_bad,
            "nulls": n_null,
            **{k: c[k] for k in _violation_keys(col)},
            "action": "; ".join(action) or "none",
            **({"to_other": c["to_other"]} if "to_other" in c else {}),
            **_summary_of_offending(c, declared.get(col.name)),
        }
    rules: dict[str, Any] = {}
    for rule in schema.rules:
        n = counts["rules"][rule.describe()]["broken"]
        if rule.on_invalid == "fatal" and n:
            raise InputError(
                f"{n} rows break the schema's rule '{rule.describe()}' (e.g. "
                f"{', '.join(counts['rules'][rule.describe()]['examples'])}; data rows count from 1) and its "
                "on_invalid is fatal.",
                file=label,
                column=", ".join(rule.columns),
                fix="correct those rows in the source table, or set on_invalid: drop on this rule in the schema.",
            )
        rules[rule.describe()] = {"policy": rule.on_invalid, "broken": n, "action": rule.on_invalid if n else "none"}
    modelled = counts["modelled_nulls"]
    return {
        "schema": schema.name,
        "schema_hash": schema.hash(),
        "source": label,
        "computed_from_private_data": True,
        **{k: counts[k] for k in ("rows_in", "rows_out", "rows_dropped", "rows_clipped", "rows_clipped_to_discovered")},
        "columns": columns,
        **({"rules": rules} if rules else {}),
        **({"modelled_nulls": modelled} if modelled else {}),
        "gx": counts["gx"],
    }


def _violation_keys(col: Column) -> tuple[str, ...]:
    """The reasons `_violations` (`_mismatched` for a derived column) counts for `col`, in its order."""
    if col.is_derived:
        return ("mismatched",) if col.formula is None else ("off_formula",)
    if col.is_numeric:
        return ("below", "above", "non_integer") if col.kind == "integer" else ("below", "above")
    return ("unknown",)


def unknown_text(values: list[dict[str, Any]], total: int, shown: int = _EXAMPLES) -> str:
    """A report's `unknown_values` as short text: the `shown` most frequent as "'value' ×count" (a value longer
    than _SHOWN_CHARS cut with "…"), then the cells of all the others of the column's `total` unknown cells, e.g.
    "'ICU ' ×200, 'Ward_B' ×112, other values ×7"."""
    head = values[:shown]
    rest = total - sum(v["count"] for v in head)
    cut = [v["value"] if len(v["value"]) <= _SHOWN_CHARS else v["value"][:_SHOWN_CHARS] + "…" for v in head]
    return ", ".join([f"{c!r} ×{v['count']}" for c, v in zip(cut, head)] + ([f"other values ×{rest}"] if rest else []))


def _column_sentence(name: str, r: dict[str, Any]) -> str:
    """One column of `row_loss_summary`: its counts by reason and its action, then what the counts point to in
    the schema (the unknown values, the offending numbers' range, the nulls)."""
    counts = ", ".join(
        [f"{r[k]} {_REASONS[k]}" for k in _REASONS if k != "nulls" and r.get(k)]
        + ([f"{r['nulls']} null"] if r["nulls"] else [])
    )
    hints = []
    if r.get("unknown_values"):
        hints.append(
            f"unknown values {unknown_text(r['unknown_values'], r['unknown'])} (documented spellings belong "
            "in the schema's categories; values the documentation does not give go to `categories: discover` or "
            "to a documented `other:` category; errors are corrected in the source table)"
        )
    if r.get("observed_min") is not None:
        lo, hi = r["observed_min"], r["observed_max"]
        fixes = (
            ["documented bounds belong in the schema's lower and upper"] if r.get("below") or r.get("above") else []
        ) + (["documented fractions in kind: continuous"] if r.get("non_integer") else [])
        hints.append(
            (
                f"offending values from {lo} to {hi}"
                if lo != hi
                else f"offending value {lo}"
                if r["out_of_domain"] == 1
                else f"offending values all {lo}"
            )
            + (f" ({', '.join(fixes)})" if fixes else "")
        )
    if r["nulls"]:
        hints.append("the nulls call for `missing: allowed` if the documentation says the column may be empty")
    return f"'{name}' {counts} ({r['action']})" + (": " + ", and ".join(hints) if hints else "")


def row_loss_summary(report: dict[str, Any]) -> str | None:
    """The steward's sentence on the rows validation dropped or clipped, by column and rule (None when it changed
    none): exact counts and, per column, the values behind them (`_column_sentence`), for the console and the
    steward's error messages only. Whether the release goes on is the DP row-loss test's bit
    (pipelines/privacy/row_loss.py, run by prepare), never a function of these counts."""
    rows_in, dropped, clipped = report["rows_in"], report["rows_dropped"], report["rows_clipped"]
    to_bound = report.get("rows_clipped_to_discovered", 0)
    if not dropped + clipped + to_bound:
        return None
    causes = "; ".join(
        [_column_sentence(c, r) for c, r in report["columns"].items() if r["out_of_domain"] or r["nulls"]]
        + [
            f"rule '{rule}' {r['broken']} broken ({r['action']})"
            for rule, r in report.get("rules", {}).items()
            if r["broken"]
        ]
    )
    share = (dropped + clipped) / rows_in if rows_in else 1.0
    bound = (
        f", and clipped {to_bound} more to discovered bounds alone (what a DP bound does to the rarest "
        "extremes; not counted as lost)"
        if to_bound
        else ""
    )
    return (
        f"validation dropped {dropped} and clipped {clipped} of the {rows_in} rows read ({share:.1%}){bound} "
        f"(by column: {causes})"
    )
