"""`synthrelease init`: schema and params from the header alone, placeholders refused until filled, no
overwrite, and a steward's first run on a wider table (validate + prepare) after filling the schema."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from flows.cli import main
from pipelines.config import load_params, merged, parse_params, read_params, section
from pipelines.data.scaffold import COLUMN_CHOICES, scaffold, write
from pipelines.data.schema import PLACEHOLDER, load_schema
from pipelines.errors import InputError, SchemaError

PROJECT = Path(__file__).resolve().parents[1]
TEMPLATE = PROJECT / "params.yaml"
# Data rows no reader survives: invalid UTF-8, an unterminated quote and a ragged row.
POISON = b'\xff\xfe\x00 not utf-8,"unterminated\n1,2,3,4,5,6\n'


def init(root: Path, data: Path, name: str = "clinic", force: bool = False) -> list[Path]:
    return write(scaffold(data, name, root, TEMPLATE), root, force=force)


def test_csv_header_only_no_cell_is_read(tmp_path: Path) -> None:
    for data, opener in ((tmp_path / "t.csv", open), (tmp_path / "t.csv.gz", gzip.open)):
        with opener(data, "wb") as f:
            f.write(b'\xef\xbb\xbfage,"zip, code",diagnosis\r\n' + POISON)
        with pytest.raises(Exception):  # the data rows really are unreadable
            pd.read_csv(data, encoding="utf-8")
        root = tmp_path / data.name.replace(".", "_")
        schema_path, _ = init(root, data)
        raw = yaml.safe_load(schema_path.read_text())
        assert list(raw["columns"]) == ["age", "zip, code", "diagnosis"]  # BOM stripped, quoted comma kept
        assert all(
            spec == {"kind": PLACEHOLDER, "lower": PLACEHOLDER, "upper": PLACEHOLDER, "categories": PLACEHOLDER}
            for spec in raw["columns"].values()
        )


def test_parquet_schema_only_no_data_page_is_read(tmp_path: Path) -> None:
    data = tmp_path / "t.parquet"
    frame = pd.DataFrame({"x": [1.5] * 200, "group": ["a"] * 200}, index=pd.Index(range(5, 205), name="rid"))
    frame.to_parquet(data, compression=None)
    blob = bytearray(data.read_bytes())
    footer = len(blob) - 8 - int.from_bytes(blob[-8:-4], "little")  # [footer metadata][length][PAR1]
    blob[4:footer] = b"\xff" * (footer - 4)  # every data page destroyed, the footer (schema) intact
    data.write_bytes(bytes(blob))
    with pytest.raises(Exception):
        pd.read_parquet(data)
    schema_path, _ = init(tmp_path, data)
    assert list(yaml.safe_load(schema_path.read_text())["columns"]) == ["x", "group"]  # pandas index left out


def test_column_names_yaml_would_misread_round_trip(tmp_path: Path) -> None:
    names = ["yes", "null", "1", "a: b", "#tag", "x y", "Größe", "- item", "'q'"]
    data = tmp_path / "t.csv"
    data.write_text(",".join(f'"{n}"' if "," in n else n for n in names) + "\n")
    schema_path, _ = init(tmp_path, data)
    assert list(yaml.safe_load(schema_path.read_text())["columns"]) == names


@pytest.mark.parametrize(
    "header, name, expect",
    [
        ("a,b,a\n", "t", ["names columns ['a'] more than once", "distinct name"]),
        ("a,,c\n", "t", ["header field 2 is an empty column name"]),
        ("", "t", ["empty (no header row)"]),
        ("a,b\n", "../evil", ["not usable in file names", "--name"]),
    ],
)
def test_bad_header_or_name_is_one_clear_error(tmp_path: Path, header: str, name: str, expect: list[str]) -> None:
    data = tmp_path / "t.csv"
    data.write_text(header)
    with pytest.raises(InputError) as err:
        init(tmp_path / "root", data, name)
    assert "Fix:" in str(err.value) and all(e in str(err.value) for e in expect), str(err.value)
    assert not (tmp_path / "root").exists()


def test_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "t.csv"
    data.write_text("a,b\n")
    root = tmp_path / "root"
    (root / "params").mkdir(parents=True)
    (root / "params" / "clinic.yaml").write_text("mine\n")
    with pytest.raises(InputError, match=r"params/clinic\.yaml: exists already.*Fix: pass --force.*--name"):
        init(root, data)
    assert not (root / "schemas").exists() and (root / "params" / "clinic.yaml").read_text() == "mine\n"
    init(root, data, force=True)
    assert "dataset:" in (root / "params" / "clinic.yaml").read_text()
    assert (root / "schemas" / "clinic.yaml").exists()


def test_cli_init_and_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    monkeypatch.chdir(tmp_path)
    args = ["--params", str(TEMPLATE), "init", "--data", "t.csv", "--name", "clinic"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "wrote schemas/clinic.yaml" in err and "wrote params/clinic.yaml" in err and "FILL_IN" in err
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "schemas/clinic.yaml: exists already" in err and "Fix: pass --force" in err


def test_params_file_keeps_the_template_but_dataset_and_column_choices(tmp_path: Path) -> None:
    data = tmp_path / "table.csv"
    data.write_text("a,b\n")
    _, params_path = init(tmp_path, data)
    params, template = yaml.safe_load(params_path.read_text()), yaml.safe_load(TEMPLATE.read_text())
    limit = {k: template["dataset"][k] for k in ("max_dropped_fraction",) if k in template["dataset"]}
    assert params["dataset"] == {
        "name": "clinic",
        "source": "table.csv",
        "columns": "schema",
        "holdout_fraction": template["dataset"]["holdout_fraction"],
        **limit,
    }
    assert params["generators"] == [g for g in template["generators"] if g not in COLUMN_CHOICES]
    assert {k: v for k, v in params.items() if k not in ("dataset", "generators")} == {
        k: v for k, v in template.items() if k not in ("dataset", "generators", *COLUMN_CHOICES)
    }
    section("dataset", params["dataset"])
    assert load_params(params_path).dataset.columns == "schema"
    text = params_path.read_text()
    assert all(f"# {g} is left out" in text for g in COLUMN_CHOICES if g in template["generators"])


def test_placeholders_refused_one_error_at_a_time(tmp_path: Path) -> None:
    data = tmp_path / "t.csv"
    data.write_text("age,diagnosis\n")
    schema_path, _ = init(tmp_path, data)
    with pytest.raises(SchemaError) as err:
        load_schema(schema_path)
    msg = str(err.value)
    assert f"file {schema_path}" in msg and "column 'source.documentation'" in msg and "8 more placeholders" in msg
    text = schema_path.read_text().replace("documentation: FILL_IN", 'documentation: "the codebook, v2"')
    schema_path.write_text(text)
    with pytest.raises(
        SchemaError,
        match=r"column 'age': 'kind' is still the placeholder FILL_IN.*7 more.*"
        r"Fix: set kind to one of",
    ):
        load_schema(schema_path)
    text = text.replace(
        "age: {kind: FILL_IN, lower: FILL_IN, upper: FILL_IN, categories: FILL_IN}",
        "age: {kind: integer, lower: 0, upper: 120, categories: FILL_IN}",
    )
    schema_path.write_text(text)
    with pytest.raises(
        SchemaError,
        match=r"column 'age': 'categories' is still the placeholder.*4 more.*"
        r"delete the line if the column is continuous or integer",
    ):
        load_schema(schema_path)
    text = text.replace(", categories: FILL_IN}", "}", 1).replace(
        "diagnosis: {kind: FILL_IN, lower: FILL_IN, upper: FILL_IN, categories: FILL_IN}",
        "diagnosis: {kind: binary, categories: [benign, malignant]}",
    )
    schema_path.write_text(text)
    schema = load_schema(schema_path)
    assert [(c.name, c.kind, c.on_invalid) for c in schema.columns] == [
        ("age", "integer", "clip"),
        ("diagnosis", "binary", "drop"),
    ]


# What a steward writes into the generated schema from sklearn.datasets.load_wine().DESCR (":Summary
# Statistics:" min/max rounded outward, ":Attribute Information:" classes, ":Number of Instances: 178").
WINE = {
    "alcohol": (10, 15),
    "malic_acid": (0, 6),
    "ash": (1, 3.5),
    "alcalinity_of_ash": (10, 31),
    "magnesium": (60, 170),
    "total_phenols": (0.5, 4),
    "flavanoids": (0, 5.5),
    "nonflavanoid_phenols": (0.1, 0.7),
    "proanthocyanins": (0, 4),
    "color_intensity": (1, 13.5),
    "hue": (0.4, 1.8),
    "od280_od315": (1, 4.5),
    "proline": (200, 1700),
}
CANARY = "patient Jane Roe 1963-04-01"


def wine_extract(path: Path) -> None:
    """sklearn's wine table as a wider extract: a record id first and a free-text column last."""
    from sklearn.datasets import load_wine

    frame = load_wine(as_frame=True).frame.rename(columns={"od280/od315_of_diluted_wines": "od280_od315"})
    frame["cultivar"] = frame.pop("target").map(lambda t: f"class_{t}")
    frame.insert(0, "sample_id", range(1001, 1001 + len(frame)))
    frame["lab_note"] = CANARY
    frame.to_csv(path, index=False)


def fill_wine(text: str) -> str:
    """The steward's edits: documentation, public row count, target, each column's facts; the record id and
    the free-text column deleted (not to be released)."""
    blank = "{kind: FILL_IN, lower: FILL_IN, upper: FILL_IN, categories: FILL_IN}"
    text = text.replace(
        "documentation: FILL_IN", 'documentation: "sklearn.datasets.load_wine().DESCR (= UCI wine.names)"'
    ).replace(
        "# target: <column>",
        'target: cultivar\nrows: {count: 178, source: "load_wine DESCR: :Number of Instances: 178"}\n# target',
    )
    for name, (lo, hi) in WINE.items():
        # the whole line: "ash: ..." is also the tail of "alcalinity_of_ash: ..." (which would get ash's
        # bounds and clip every wine)
        text = text.replace(f"\n  {name}: {blank}", f"\n  {name}: {{kind: continuous, lower: {lo}, upper: {hi}}}")
    text = text.replace(f"cultivar: {blank}", "cultivar: {kind: categorical, categories: [class_0, class_1, class_2]}")
    return re.sub(rf"  (sample_id|lab_note): {re.escape(blank)}\n", "", text)


@pytest.mark.integration
def test_wine_from_wide_csv_to_prepared(tmp_path: Path) -> None:
    """init on a wider extract, the placeholder error, the steward's fill, then validate and prepare: the extra
    columns are named (never their values) in the validation report, and n̂ comes from the documented count."""
    from tasks.prepare import prepare
    from tasks.validate import validate

    wine_extract(tmp_path / "wine_extract.csv")
    schema_path, params_path = init(tmp_path, tmp_path / "wine_extract.csv", "wine")
    params = load_params(params_path)
    with pytest.raises(SchemaError, match=r"schemas/wine\.yaml, column 'source\.documentation'.*Fix:"):
        validate(params, tmp_path)
    assert not (tmp_path / "data").exists() and not (tmp_path / "reports").exists()

    schema_path.write_text(fill_wine(schema_path.read_text()))
    report = validate(params, tmp_path)
    assert report["ignored_columns"] == ["sample_id", "lab_note"]
    assert (report["rows_in"], report["rows_out"]) == (178, 178)  # every wine lies inside the documented bounds
    on_disk = (tmp_path / "reports" / "wine" / "validation.json").read_text()
    assert json.loads(on_disk)["ignored_columns"] == ["sample_id", "lab_note"]
    assert CANARY not in on_disk and "1001" not in on_disk
    clean = pd.read_parquet(tmp_path / "data" / "raw" / "wine" / "validated.parquet")
    assert list(clean.columns) == [*WINE, "cultivar"]

    summary = prepare(params, tmp_path)
    assert summary["rows_public"] == 142  # round(178 · 0.8): the documented count, checked against a noisy one
    assert len(summary["ledger_row_ids"]) == 1 and "checked against a noisy count" in summary["rows_public_source"]
    assert summary["rows_train"] + summary["rows_holdout"] == 178

    strict = parse_params(merged(read_params(params_path), {"dataset": {"columns": "strict"}}))
    with pytest.raises(InputError, match=r"extra columns \['sample_id', 'lab_note'\].*columns: schema"):
        validate(strict, tmp_path)
