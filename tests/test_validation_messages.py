"""Validation messages a steward can act on from the documentation alone: the report's unknown values and offending
numbers per column (steward-only), the console sentence that names them, their merge over the parts of a table read
out of core, and that no public artefact shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pipelines.data.readers import read_table
from pipelines.data.schema import Schema, load_schema
from pipelines.data.validation import (
    UNKNOWN_REPORTED,
    finish,
    merge_parts,
    row_loss_summary,
    unknown_text,
    validate_part,
    validate_table,
)
from support.report import steward, summary  # noqa: F401  (the release summary fixture)

WARDS = """\
name: wards
on_invalid: drop
columns:
  ward: {kind: categorical, categories: [ICU, Ward_A, Ward_B]}
  age: {kind: integer, lower: 0, upper: 110, on_invalid: clip}
  los: {kind: continuous, lower: 0, upper: 365}
  admitted: {kind: date, lower: 2020-01-01, upper: 2020-12-31}
"""
NULL_HINT = "the nulls call for `missing: allowed` if the documentation says the column may be empty"
BOUNDS_HINT = "documented bounds belong in the schema's lower and upper"


def wards_csv() -> str:
    """20 rows. ward: ICU ×6, Ward_A ×2 (rows 1-8), then the misspellings I.C.U. ×4, 'Ward B' ×3, wardb ×3 and two
    nulls. On rows 1-8 only: age -1, 130, 140, 40.5 and a null (rows 1-5); los 400.25 (row 3) and -0.5 (row 6);
    admitted 2021-03-05 (row 7) and 2019-12-30 (row 8). Dropped: rows 9-20 (ward), 3, 6 (los), 5 (age null),
    7, 8 (admitted) = 17; clipped: rows 1, 2, 4 (age; row 3 is dropped) = 3."""
    ward = ["ICU"] * 6 + ["Ward_A"] * 2 + ["I.C.U."] * 4 + ["Ward B"] * 3 + ["wardb"] * 3 + [""] * 2
    age, los, admitted = ["50"] * 20, ["3.0"] * 20, ["2020-06-01"] * 20
    age[:5] = ["-1", "130", "140", "40.5", ""]
    los[2], los[5] = "400.25", "-0.5"
    admitted[6], admitted[7] = "2021-03-05", "2019-12-30"
    return "ward,age,los,admitted\n" + "".join(f"{w},{a},{n},{d}\n" for w, a, n, d in zip(ward, age, los, admitted))


@pytest.fixture
def wards(tmp_path: Path) -> tuple[pd.DataFrame, Schema, str]:
    (tmp_path / "wards.yaml").write_text(WARDS)
    (tmp_path / "wards.csv").write_text(wards_csv())
    schema = load_schema(tmp_path / "wards.yaml")
    raw, label = read_table(str(tmp_path / "wards.csv"), schema)
    return raw, schema, label


@pytest.mark.integration
def test_the_report_lists_the_unknown_values_and_the_offending_range_per_column(wards) -> None:
    raw, schema, label = wards
    clean, report = validate_table(raw, schema, label)
    assert (report["rows_in"], report["rows_dropped"], report["rows_clipped"], len(clean)) == (20, 17, 3, 3)
    cols = report["columns"]
    # most frequent first, the tie of three broken by value ('W' < 'w'); values as text
    assert cols["ward"] == {
        "policy": "drop",
        "out_of_domain": 10,
        "nulls": 2,
        "unknown": 10,
        "action": "drop; drop nulls",
        "unknown_values": [
            {"value": "I.C.U.", "count": 4},
            {"value": "Ward B", "count": 3},
            {"value": "wardb", "count": 3},
        ],
    }
    # the offending values only: -1 and 140 are the extremes of {-1, 130, 140, 40.5}, not the column's 50s
    assert cols["age"] == {
        "policy": "clip",
        "out_of_domain": 4,
        "nulls": 1,
        "below": 1,
        "above": 2,
        "non_integer": 1,
        "action": "clip; drop nulls",
        "observed_min": -1,
        "observed_max": 140,
    }
    assert (cols["los"]["observed_min"], cols["los"]["observed_max"]) == (-0.5, 400.25)
    assert (cols["admitted"]["observed_min"], cols["admitted"]["observed_max"]) == ("2019-12-30", "2021-03-05")
    text = json.dumps(report)
    assert json.loads(text)["columns"] == cols and "row " not in text  # JSON-able, and no row numbers
    _, tidy = validate_table(
        raw.iloc[:8].assign(age=50.0, los=3.0, admitted=raw["admitted"].iloc[0]), schema, label
    )  # the first 8 rows with their numbers and dates corrected
    assert tidy["rows_dropped"] == 0 and not any(
        k in c for c in tidy["columns"].values() for k in ("unknown_values", "observed_min", "observed_max")
    )


@pytest.mark.integration
def test_the_console_sentence_names_the_values_and_the_fix(wards) -> None:
    raw, schema, label = wards
    msg = row_loss_summary(validate_table(raw, schema, label)[1])
    assert msg == (
        "validation dropped 17 and clipped 3 of the 20 rows read (100.0%) (by column: "
        "'ward' 10 not in the category list, 2 null (drop; drop nulls): unknown values 'I.C.U.' ×4, 'Ward B' ×3, "
        "'wardb' ×3 (documented spellings belong in the schema's categories; values the documentation does not give "
        "go to `categories: discover` or to a documented `other:` category; errors are corrected in the source "
        f"table), and {NULL_HINT}; "
        "'age' 1 below the lower bound, 2 above the upper bound, 1 not whole numbers, 1 null (clip; drop nulls): "
        f"offending values from -1 to 140 ({BOUNDS_HINT}, documented fractions in kind: continuous), and "
        f"{NULL_HINT}; "
        f"'los' 1 below the lower bound, 1 above the upper bound (drop): offending values from -0.5 to 400.25 "
        f"({BOUNDS_HINT}); "
        "'admitted' 1 below the lower bound, 1 above the upper bound (drop): offending values from 2019-12-30 to "
        f"2021-03-05 ({BOUNDS_HINT}))"
    )


def test_a_long_list_shows_five_values_then_the_rest_as_one_count() -> None:
    values = [{"value": "x" * 50, "count": 9}, *({"value": f"v{i}", "count": 2} for i in range(6))]
    assert unknown_text(values, 30) == (
        f"{'x' * 40 + '…'!r} ×9, 'v0' ×2, 'v1' ×2, 'v2' ×2, 'v3' ×2, other values ×13"
    )  # 30 − 9 − 4·2
    assert unknown_text(values[:2], 11) == f"{'x' * 40 + '…'!r} ×9, 'v0' ×2"
    one = {
        "policy": "clip",
        "out_of_domain": 3,
        "nulls": 0,
        "below": 0,
        "above": 3,
        "action": "clip",
        "observed_min": 12,
        "observed_max": 12,
    }
    report = {"rows_in": 10, "rows_dropped": 0, "rows_clipped": 3, "columns": {"n": one}}
    assert row_loss_summary(report).endswith(
        f"'n' 3 above the upper bound (clip): offending values all 12 ({BOUNDS_HINT}))"
    )
    report["columns"]["n"] = {**one, "out_of_domain": 1, "above": 1}
    assert f"(clip): offending value 12 ({BOUNDS_HINT}))" in row_loss_summary({**report, "rows_clipped": 1})


def parted(tmp_path: Path) -> tuple[pd.DataFrame, Schema, list[int]]:
    """Three parts (rows 0-45, 46-88, 89-91). c: 'a00'..'a20' twice each and one 'z' in the first, 'b00'..'b20'
    twice each and one 'z' in the second, one 'z' in the third (87 unknown cells): the whole table's top 20 is
    'z' ×3 then 'a00'..'a18' ×2, although 'z' is 22nd in each part it appears in. v: 1.5 in the first part,
    nothing out of [0, 1] in the second, -2 and 3 in the third."""
    (tmp_path / "p.yaml").write_text(
        "name: p\non_invalid: drop\ncolumns:\n"
        "  c: {kind: categorical, categories: [ok, fine]}\n"
        "  v: {kind: continuous, lower: 0, upper: 1}\n"
    )
    first = [f"a{i:02d}" for i in range(21)] * 2 + ["z"] + ["ok"] * 3
    second = [f"b{i:02d}" for i in range(21)] * 2 + ["z"]
    third = ["z", "ok", "ok"]
    v = [1.5] + [0.5] * 45 + [0.5] * 43 + [-2.0, 3.0, 0.5]
    frame = pd.DataFrame({"c": pd.Series(first + second + third, dtype="str"), "v": v})
    return frame, load_schema(tmp_path / "p.yaml"), [0, 46, 89, 92]


@pytest.mark.slow
def test_parts_merged_give_the_one_pass_report(tmp_path: Path) -> None:
    frame, schema, bounds = parted(tmp_path)
    _, one_pass = validate_table(frame, schema, "p.csv")
    parts = [validate_part(frame.iloc[lo:hi], schema)[1] for lo, hi in zip(bounds, bounds[1:])]
    assert finish(merge_parts(parts, schema), schema, "p.csv") == one_pass
    c, v = one_pass["columns"]["c"], one_pass["columns"]["v"]
    assert c["unknown"] == 87 and len(c["unknown_values"]) == UNKNOWN_REPORTED == 20
    assert c["unknown_values"] == [{"value": "z", "count": 3}] + [{"value": f"a{i:02d}", "count": 2} for i in range(19)]
    assert (v["observed_min"], v["observed_max"]) == (-2, 3)  # the third part's, the first's 1.5 inside them
    assert "unknown values 'z' ×3, 'a00' ×2, 'a01' ×2, 'a02' ×2, 'a03' ×2, other values ×76 (" in row_loss_summary(
        one_pass
    )  # 87 − 3 − 4·2


@pytest.mark.slow
def test_the_steward_report_shows_them_as_text_and_the_public_report_never(wards, summary) -> None:  # noqa: F811
    from pipelines.reporting.report import public_html, public_markdown, public_view, render_markdown
    from pipelines.reporting.report_sections import validation_section

    raw, schema, label = wards
    _, report = validate_table(raw, schema, label)
    [section] = validation_section(report)
    columns = section["parts"][1]["table"]
    by_column = {row[0]: dict(zip(columns["headers"], row)) for row in columns["rows"]}
    assert by_column["ward"]["Most frequent unknown values (×rows)"] == "'I.C.U.' ×4, 'Ward B' ×3, 'wardb' ×3"
    assert (by_column["los"]["Smallest value out of domain"], by_column["los"]["Largest value out of domain"]) == (
        "-0.5",
        "400.25",
    )  # as the report gives them, not rounded to four digits
    assert by_column["admitted"]["Largest value out of domain"] == "2021-03-05"
    assert all(isinstance(cell, str) and not cell.startswith(("[", "{")) for row in columns["rows"] for cell in row)
    md = render_markdown({**steward(summary), "validation": report})
    assert "'I.C.U.' ×4, 'Ward B' ×3, 'wardb' ×3" in md and "400.25" in md
    with_validation = {**summary, "validation": report}
    assert "validation" not in public_view(with_validation)
    assert public_markdown(with_validation) == public_markdown(summary)
    assert public_html(with_validation) == public_html(summary)
