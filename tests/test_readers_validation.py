"""Readers (bundled sets, CSV, Parquet, structural errors) and validation (GX suite, policies, report)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pipelines.data.readers import read_table
from pipelines.data.rules import broken_rows
from pipelines.data.schema import Schema, load_schema
from pipelines.data.validation import build_suite, conforms, row_loss_summary, validate_table
from pipelines.errors import InputError

TOY = """\
name: toy
on_invalid: drop
columns:
  n: {kind: integer, lower: 0, upper: 10, on_invalid: clip}
  v: {kind: continuous, lower: 0, upper: 1}
  c: {kind: categorical, categories: [a, b, "?"]}
  y: {kind: binary, categories: [0, 1]}
"""
# Row by row: kept | v above | n above + c unknown | n non-integer + v null | n null | y unknown | kept | kept
TOY_CSV = """\
n,v,c,y
-5,0.5,a,0
3,1.5,b,1
12,0.2,zzz_secret,0
4.6,,a,1
,0.3,?,0
7,0.4,b,2
2.4,0.0,?,1
100,1.0, b ,0
"""


@pytest.fixture
def toy(tmp_path: Path) -> Schema:
    (tmp_path / "toy.yaml").write_text(TOY)
    return load_schema(tmp_path / "toy.yaml")


def toy_table(tmp_path: Path, text: str = TOY_CSV, name: str = "toy.csv") -> str:
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


def test_bundled_breast_cancer(bc_schema: Schema, bc_raw: pd.DataFrame) -> None:
    assert bc_raw.shape == (569, 31)
    assert list(bc_raw.columns) == bc_schema.names
    assert (bc_raw["target"] == 0).sum() == 212 and (bc_raw["target"] == 1).sum() == 357  # 0 = malignant
    assert bc_raw["mean_radius"].iloc[0] == pytest.approx(17.99)
    assert set(bc_raw.dtypes.astype(str)) == {"float64", "int64"} and str(bc_raw["target"].dtype) == "int64"


def test_bundled_adult(adult_schema: Schema, adult_raw: pd.DataFrame) -> None:
    assert adult_raw.shape == (48_842, 15) and list(adult_raw.columns) == adult_schema.declared_names
    assert {c: int((adult_raw[c] == "?").sum()) for c in ("workclass", "occupation", "native_country")} == {
        "workclass": 2799,
        "occupation": 2809,
        "native_country": 857,
    }
    assert adult_raw["income"].value_counts().to_dict() == {"<=50K": 37_155, ">50K": 11_687}
    assert adult_raw.iloc[0].tolist()[:4] == [39, "State-gov", 77516.0, "Bachelors"]
    assert {c.name: str(adult_raw[c.name].dtype) for c in adult_schema.columns} == {
        c.name: c.dtype for c in adult_schema.columns
    }


def test_csv_and_parquet_read_like_the_bundled_frame(
    tmp_path: Path, adult_schema: Schema, adult_raw: pd.DataFrame
) -> None:
    head = adult_raw.head(300)
    head.to_csv(tmp_path / "a.csv", index=False)
    head.to_parquet(tmp_path / "a.parquet", index=False)
    for name in ("a.csv", "a.parquet"):
        frame, label = read_table(str(tmp_path / name), adult_schema)
        assert label == str(tmp_path / name)
        pd.testing.assert_frame_equal(frame, head)


def test_categories_are_normalised(tmp_path: Path) -> None:
    """Categorical values read as numbers are cast to the categories' type; strings are stripped."""
    (tmp_path / "s.yaml").write_text(
        "name: s\ncolumns:\n  code: {kind: categorical, categories: ['1', '2', '3']}\n"
        "  flag: {kind: binary, categories: [0, 1]}\n"
    )
    schema = load_schema(tmp_path / "s.yaml")
    pd.DataFrame({"code": [1, 3, 2], "flag": ["1", " 0", "1.0"]}).to_parquet(tmp_path / "s.parquet")
    frame, _ = read_table(str(tmp_path / "s.parquet"), schema)
    assert frame["code"].tolist() == ["1", "3", "2"] and str(frame["code"].dtype) == "str"
    assert frame["flag"].tolist() == [1, 0, 1] and str(frame["flag"].dtype) == "int64"
    frame, _ = read_table(toy_table(tmp_path, "code,flag\n 2 ,1\n3,yes\n", "s.csv"), schema)
    assert frame["code"].tolist() == ["2", "3"] and frame["flag"].tolist() == [1, "yes"]  # 'yes': unknown later


@pytest.mark.parametrize(
    "case",
    [
        "missing_file",
        "extension",
        "empty_header_only",
        "empty_file",
        "empty_parquet",
        "missing_columns",
        "extra_columns",
        "not_numbers",
        "bad_parquet",
        "unknown_bundled",
    ],
)
def test_structural_errors_name_file_column_and_fix(tmp_path: Path, toy: Schema, case: str) -> None:
    column, expect = None, []
    if case == "missing_file":
        source, expect = str(tmp_path / "nope.csv"), ["not found"]
    elif case == "extension":
        source, expect = toy_table(tmp_path, name="toy.xlsx"), ["unsupported file type '.xlsx'"]
    elif case == "empty_header_only":
        source, expect = toy_table(tmp_path, "n,v,c,y\n"), ["empty"]
    elif case == "empty_file":
        source, expect = toy_table(tmp_path, ""), ["empty"]
    elif case == "empty_parquet":
        source = str(tmp_path / "toy.parquet")
        pd.DataFrame({"n": [], "v": [], "c": [], "y": []}).to_parquet(source)
        expect = ["empty"]
    elif case == "missing_columns":
        source, column = toy_table(tmp_path, "n,y\n1,0\n"), "v"
        expect = ["missing columns ['v', 'c']", "add the columns"]
    elif case == "extra_columns":
        source, column = toy_table(tmp_path, "n,v,ssn,c,y,zip\n1,0.5,123,a,0,9\n"), "ssn"
        expect = ["extra columns ['ssn', 'zip']", "drop them", "add them to the schema", "'columns: schema'"]
    elif case == "not_numbers":
        source, column = toy_table(tmp_path, "n,v,c,y\n1,0.5,a,0\n2,abc,a,0\n3,,a,0\n4,1;5,a,0\n"), "v"
        expect = ["2 values", "row 2: 'abc'", "row 4: '1;5'"]
    elif case == "bad_parquet":
        source = str(tmp_path / "toy.parquet")
        Path(source).write_bytes(b"not parquet at all")
        expect = ["not a readable Parquet file"]
    else:
        source, expect = "bundled:mnist", ["unknown bundled data set 'mnist'", "bundled:adult"]
    with pytest.raises(InputError) as err:
        read_table(source, toy)
    msg = str(err.value)
    assert f"file {source}" in msg and "Fix:" in msg, msg
    if column:
        assert f"column '{column}'" in msg and err.value.column == column, msg
    for text in expect:
        assert text in msg, msg


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_schema_columns_mode_reads_only_the_schema_columns(
    tmp_path: Path, toy: Schema, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dataset.columns: schema: the extra columns are named (file order), never returned, and the file reader
    is asked for the schema's columns only; a missing schema column is still an error."""
    import pipelines.data.readers as readers

    wide = pd.DataFrame(
        {
            "ssn": ["123-45-6789", "987-65-4321"],
            "n": ["1", "2"],
            "v": ["0.5", "0.25"],
            "c": ["a", "b"],
            "note": ["secret", "text"],
            "y": ["0", "1"],
        }
    )
    source = str(tmp_path / f"wide.{fmt}")
    wide.to_csv(source, index=False) if fmt == "csv" else wide.to_parquet(source)
    asked: list = []
    for fn in ("read_csv", "read_parquet"):
        real = getattr(pd, fn)
        monkeypatch.setattr(
            readers.pd,
            fn,
            lambda path, *a, _real=real, **k: asked.append(k.get("usecols", k.get("columns"))) or _real(path, *a, **k),
        )
    table = readers.read_source(source, toy, "schema")
    assert table.ignored == ("ssn", "note") and table.label == source
    assert asked == [toy.names]
    assert list(table.frame.columns) == toy.names and table.frame["n"].tolist() == [1, 2]
    with pytest.raises(InputError, match=r"extra columns \['ssn', 'note'\].*'columns: schema'"):
        readers.read_source(source, toy)  # strict (the default) refuses, and names the option
    narrow = str(tmp_path / f"narrow.{fmt}")
    wide.drop(columns="v").to_csv(narrow, index=False) if fmt == "csv" else wide.drop(columns="v").to_parquet(narrow)
    with pytest.raises(InputError, match=r"missing columns \['v'\]"):
        readers.read_source(narrow, toy, "schema")


@pytest.mark.integration
def test_policies_clip_drop_and_report(tmp_path: Path, toy: Schema) -> None:
    raw, label = read_table(toy_table(tmp_path), toy)
    clean, report = validate_table(raw, toy, label)
    assert clean.to_dict("list") == {"n": [0, 2, 10], "v": [0.5, 0.0, 1.0], "c": ["a", "?", "b"], "y": [0, 1, 0]}
    assert [str(clean[c].dtype) for c in clean] == ["int64", "float64", "str", "int64"]
    assert (report["rows_in"], report["rows_out"], report["rows_dropped"], report["rows_clipped"]) == (8, 3, 5, 3)
    assert report["source"] == label and report["schema_hash"] == toy.hash()
    cols = report["columns"]
    assert cols["n"] == {
        "policy": "clip",
        "out_of_domain": 5,
        "nulls": 1,
        "below": 1,
        "above": 2,
        "non_integer": 2,
        "action": "clip; drop nulls",
        "observed_min": -5,
        "observed_max": 100,
    }
    assert cols["v"] == {
        "policy": "drop",
        "out_of_domain": 1,
        "nulls": 1,
        "below": 0,
        "above": 1,
        "action": "drop; drop nulls",
        "observed_min": 1.5,
        "observed_max": 1.5,
    }
    assert cols["c"] == {
        "policy": "drop",
        "out_of_domain": 1,
        "nulls": 0,
        "unknown": 1,
        "action": "drop",
        "unknown_values": [{"value": "zzz_secret", "count": 1}],
    }
    assert cols["y"]["unknown"] == 1 and cols["y"]["action"] == "drop"
    gx = report["gx"]
    assert gx["success"] is False and gx["statistics"]["unsuccessful_expectations"] == len(gx["failed"])
    failed = {(f["expectation"], f["column"]): f["unexpected_count"] for f in gx["failed"]}
    assert failed[("expect_column_values_to_be_between", "n")] == 3  # -5, 12, 100 (GX has no integrality check)
    assert failed[("expect_column_values_to_be_in_set", "c")] == 1
    assert failed[("expect_column_values_to_not_be_null", "v")] == 1
    # JSON-able, and no record values leak into the report outside the steward's summary of the offending values
    # (its `source`, the file's path, is left out: pytest's temporary path can hold "100" itself, e.g.
    # /tmp/pytest-of-root/pytest-100/)
    summary = ("unknown_values", "observed_min", "observed_max")
    rest = {k: v for k, v in report.items() if k != "source"}
    rest["columns"] = {c: {k: v for k, v in r.items() if k not in summary} for c, r in report["columns"].items()}
    text = json.dumps(rest)
    assert "zzz_secret" not in text and "100" not in text
    assert conforms(clean, toy) == {"success": True, "failed": []}


@pytest.mark.integration
def test_the_steward_sentence_names_every_count_by_column(tmp_path: Path, toy: Schema) -> None:
    raw, label = read_table(toy_table(tmp_path), toy)
    _, report = validate_table(raw, toy, label)
    msg = row_loss_summary(report)
    assert msg.startswith("validation dropped 5 and clipped 3 of the 8 rows read (100.0%)")
    assert "'n' 1 below the lower bound, 2 above the upper bound, 2 not whole numbers, 1 null (clip; drop nulls)" in msg
    assert "'v' 1 above the upper bound, 1 null (drop; drop nulls)" in msg and "'c' 1 not in the category list" in msg
    assert row_loss_summary({**report, "rows_dropped": 0, "rows_clipped": 0}) is None


@pytest.mark.integration
def test_validate_writes_and_prepare_stops_when_nulls_would_drop_a_group(tmp_path: Path, bc_raw: pd.DataFrame) -> None:
    """A column null exactly for one target class (structural missingness: 212 malignant of 569) would leave a
    table of one class. Validate writes the rows and tells the steward the counts; prepare's DP row-loss test
    (at ε = 1 here: margin 9.2 rows, so q = 212 − 12 stops unless the noise is below −190) stops before anything
    is prepared, and goes on once the steward accepts the loss."""
    from support.project import make_root
    from pipelines.config import load_params, merged, parse_params, read_params
    from tasks.prepare import prepare
    from tasks.validate import validate

    source = tmp_path / "cohort.csv"
    bc_raw.assign(mean_radius=bc_raw["mean_radius"].where(bc_raw["target"] == 1)).to_csv(source, index=False)
    root = make_root(tmp_path, {"dataset": {"source": str(source)}, "privacy": {"row_loss_epsilon": 1.0}})
    params = load_params(root / "params.yaml")
    assert validate(params, root)["rows_out"] == 357
    with pytest.raises(InputError) as err:
        prepare(params, root)
    assert "validation dropped 212 and clipped 0 of the 569 rows read (37.3%)" in str(err.value)
    assert "'mean_radius' 212 null (drop nulls)" in str(err.value) and "validation.json" in str(err.value)
    assert not (root / "data/prepared").exists()
    params = parse_params(merged(read_params(root / "params.yaml"), {"dataset": {"max_dropped_fraction": 0.4}}))
    summary = prepare(params, root)
    assert summary["rows_train"] + summary["rows_holdout"] == 357


@pytest.mark.integration
def test_fatal_policy_raises_with_counts_and_examples(tmp_path: Path) -> None:
    (tmp_path / "f.yaml").write_text(TOY.replace("on_invalid: drop", "on_invalid: fatal"))
    schema = load_schema(tmp_path / "f.yaml")
    raw, label = read_table(
        toy_table(
            tmp_path,
            TOY_CSV.replace("-5,", "5,")
            .replace("100,", "10,")
            .replace("12,", "1,")
            .replace("4.6", "4")
            .replace("2.4", "2"),
        ),
        schema,
    )
    with pytest.raises(InputError) as err:
        validate_table(raw, schema, label)
    msg = str(err.value)
    assert "toy.csv" in msg and "column 'v'" in msg and "Fix:" in msg
    assert "2 values outside the public domain (1 above the upper bound, 1 null;" in msg
    assert "row 2: 1.5" in msg and "row 4: nan" in msg


@pytest.mark.integration
def test_conforms_reports_failures(toy: Schema) -> None:
    frame = pd.DataFrame({"n": [1, 11], "v": [0.5, 0.5], "c": pd.Series(["a", "d"], dtype="str"), "y": [0, 1]})
    result = conforms(frame, toy)
    assert result["success"] is False
    assert {(f["expectation"], f["column"]) for f in result["failed"]} == {
        ("expect_column_values_to_be_between", "n"),
        ("expect_column_values_to_be_in_set", "c"),
    }
    wrong = conforms(frame.drop(columns="y").assign(extra=1), toy)
    assert ("expect_table_columns_to_match_set", None) in {(f["expectation"], f["column"]) for f in wrong["failed"]}


@pytest.mark.integration
def test_suite_is_built_from_the_schema_only(adult_schema: Schema) -> None:
    suite = build_suite(adult_schema)
    types = [e.expectation_type for e in suite.expectations]
    assert types.count("expect_column_values_to_not_be_null") == 14  # the modelled columns (not education_num)
    assert types.count("expect_column_values_to_be_between") == 5
    assert types.count("expect_column_values_to_be_in_set") == 9
    between = {
        e.column: (e.min_value, e.max_value)
        for e in suite.expectations
        if e.expectation_type == "expect_column_values_to_be_between"
    }
    assert between["age"] == (17, 90) and between["fnlwgt"] == (1.0, 1_500_000.0)


@pytest.mark.integration
@pytest.mark.parametrize("name,broken", [("adult", [0, 1, 3]), ("breast_cancer", [])])
def test_bundled_sets_validate_cleanly(request: pytest.FixtureRequest, name: str, broken: list[int]) -> None:
    schema = request.getfixturevalue("adult_schema" if name == "adult" else "bc_schema")
    raw = request.getfixturevalue("adult_raw" if name == "adult" else "bc_raw")
    clean, report = validate_table(raw, schema, f"bundled:{name}")
    # Adult's rules (CPS coding): all 48,842 Husbands and Wives are married, one Husband is female and three Wives
    # male; those four rows are dropped and counted, every value is in its domain
    assert [r["broken"] for r in report.get("rules", {}).values()] == broken
    assert report["gx"]["success"] and report["rows_dropped"] == sum(broken) == len(raw) - report["rows_out"]
    assert all(c["out_of_domain"] == 0 and c["action"] == "none" for c in report["columns"].values())
    keep = ~broken_rows(raw, schema.rules)
    pd.testing.assert_frame_equal(clean, raw.loc[keep, schema.names].reset_index(drop=True))  # derived: not kept
    assert all(report["columns"][c.name]["mismatched"] == 0 for c in schema.derived)
    json.dumps(report)
