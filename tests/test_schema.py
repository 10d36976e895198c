"""Public schema: parsing, the two shipped schemas, hashing, and every malformed-schema error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipelines.data.schema import Schema, load_schema
from pipelines.errors import SchemaError

GOOD = """\
name: toy
on_invalid: drop
target: y
protected: [c]
columns:
  x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}
  c: {kind: categorical, categories: [a, b, "?"]}
  y: {kind: binary, categories: [0, 1]}
"""


def write(tmp_path: Path, text: str, name: str = "toy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_toy_schema_parses(tmp_path: Path) -> None:
    s = load_schema(write(tmp_path, GOOD))
    assert s.names == ["x", "c", "y"]
    assert (s.target, s.protected, s.on_invalid) == ("y", ("c",), "drop")
    x, c, y = s.columns
    assert (x.kind, x.lower, x.upper, x.on_invalid, x.dtype) == ("integer", 0.0, 10.0, "clip", "int64")
    assert (c.categories, c.on_invalid, c.dtype) == (("a", "b", "?"), "drop", "str")
    assert (y.categories, y.dtype) == ((0, 1), "int64")
    assert s.column("c") is c
    with pytest.raises(KeyError):
        s.column("nope")


def test_adult_schema(adult_schema: Schema) -> None:
    s = adult_schema
    assert s.declared_names == [
        "age",
        "workclass",
        "fnlwgt",
        "education",
        "education_num",
        "marital_status",
        "occupation",
        "relationship",
        "race",
        "sex",
        "capital_gain",
        "capital_loss",
        "hours_per_week",
        "native_country",
        "income",
    ]
    assert s.names == [n for n in s.declared_names if n != "education_num"]  # derived: never modelled
    edu = s.derived[0]
    assert (edu.name, edu.kind, edu.lower, edu.upper, edu.derived_from) == (
        "education_num",
        "integer",
        1,
        16,
        "education",
    )
    levels = [
        "Preschool",
        "1st-4th",
        "5th-6th",
        "7th-8th",
        "9th",
        "10th",
        "11th",
        "12th",
        "HS-grad",
        "Some-college",
        "Assoc-voc",
        "Assoc-acdm",
        "Bachelors",
        "Masters",
        "Prof-school",
        "Doctorate",
    ]
    assert dict(edu.derived) == {level: code for code, level in enumerate(levels, 1)}  # the CPS codes less 30
    assert (s.target, s.protected) == ("income", ("sex", "race"))
    bounds = {c.name: (c.kind, c.lower, c.upper) for c in s.columns if c.is_numeric}
    assert bounds == {
        "age": ("integer", 17, 90),
        "fnlwgt": ("continuous", 1, 1_500_000),
        "capital_gain": ("integer", 0, 99_999),
        "capital_loss": ("integer", 0, 99_999),
        "hours_per_week": ("integer", 1, 99),
    }
    n_cats = {c.name: len(c.categories) for c in s.columns if not c.is_numeric}
    assert n_cats == {
        "workclass": 9,
        "education": 16,
        "marital_status": 7,
        "occupation": 15,
        "relationship": 6,
        "race": 5,
        "sex": 2,
        "native_country": 42,
        "income": 2,
    }
    for name in ("workclass", "occupation", "native_country"):
        assert s.column(name).categories[-1] == "?"
    assert s.column("sex").categories == ("Female", "Male") and s.column("sex").kind == "binary"
    assert s.column("income").categories == ("<=50K", ">50K")
    assert "Outlying-US(Guam-USVI-etc)" in s.column("native_country").categories
    assert {c.on_invalid for c in s.columns if c.is_numeric} == {"clip"}
    assert {c.on_invalid for c in s.columns if not c.is_numeric} == {"drop"}
    assert s.related == (("relationship", "marital_status"), ("relationship", "sex"))


def test_breast_cancer_bounds_enclose_the_published_table(bc_schema: Schema) -> None:
    """Bounds come from the documentation's min/max table: each published range lies inside them."""
    from sklearn.datasets import load_breast_cancer

    table = re.findall(
        r"^([a-z ]+) \((mean|standard error|worst)\):\s+([0-9.]+)\s+([0-9.]+)", load_breast_cancer().DESCR, re.M
    )
    assert len(table) == 30
    fmt = {"mean": "mean_{}", "standard error": "{}_error", "worst": "worst_{}"}
    for feature, stat, lo, hi in table:
        col = bc_schema.column(fmt[stat].format(feature.replace(" ", "_")))
        assert col.kind == "continuous" and col.lower >= 0
        # strictly outside unless the published min is 0 (non-negative features)
        assert col.lower < float(lo) or col.lower == float(lo) == 0.0, col.name
        assert col.upper > float(hi), col.name
    target = bc_schema.column("target")
    assert (bc_schema.target, target.kind, target.categories) == ("target", "binary", (0, 1))
    assert len(bc_schema.columns) == 31 and bc_schema.on_invalid == "clip"


def test_hash_is_canonical(tmp_path: Path) -> None:
    a = load_schema(write(tmp_path, GOOD, "a.yaml"))
    reformatted = "# a comment\n" + GOOD.replace(
        "{kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "\n    kind: integer\n    upper: 10.0\n    lower: 0\n    on_invalid: clip",
    )
    b = load_schema(write(tmp_path, reformatted, "b.yaml"))
    changed = load_schema(write(tmp_path, GOOD.replace("upper: 10", "upper: 11"), "c.yaml"))
    assert a.hash() == b.hash() == load_schema(tmp_path / "a.yaml").hash()
    assert len(a.hash()) == 64 and changed.hash() != a.hash()


def test_public_row_count(tmp_path: Path, adult_schema: Schema, bc_schema: Schema) -> None:
    s = load_schema(write(tmp_path, GOOD + 'rows: {count: 1001, source: "toy docs: 1001 rows"}\n'))
    assert (s.rows.count, s.rows.source) == (1001, "toy docs: 1001 rows")
    assert s.rows.train_count(0.2) == 801 and s.rows.train_count(0.9995) == 1  # round(1001·0.8); floor 1
    assert s.hash() != load_schema(write(tmp_path, GOOD, "plain.yaml")).hash()  # the count is part of the schema
    assert load_schema(write(tmp_path, GOOD, "plain.yaml")).rows is None
    assert (adult_schema.rows.count, bc_schema.rows.count) == (48842, 569)
    assert "UCI" in adult_schema.rows.source and "load_breast_cancer" in bc_schema.rows.source
    assert (adult_schema.rows.train_count(0.2), bc_schema.rows.train_count(0.2)) == (39074, 455)


def test_schema_level_policy_applies_where_the_kind_allows_it(tmp_path: Path) -> None:
    """A schema-level clip clips the numeric columns and leaves categorical/binary ones at drop; drop and fatal
    reach every column; a column's own policy wins; a column-level clip on a category is still refused."""
    text = GOOD.replace("on_invalid: drop", "on_invalid: clip").replace(", on_invalid: clip}", "}")
    text = text.replace("columns:\n", "columns:\n  v: {kind: continuous, lower: 0, upper: 1, on_invalid: fatal}\n")
    s = load_schema(write(tmp_path, text))
    assert s.on_invalid == "clip"
    assert {c.name: c.on_invalid for c in s.columns} == {"v": "fatal", "x": "clip", "c": "drop", "y": "drop"}
    for default in ("drop", "fatal"):
        s = load_schema(write(tmp_path, text.replace("on_invalid: clip", f"on_invalid: {default}"), f"{default}.yaml"))
        assert {c.name: c.on_invalid for c in s.columns} == {"v": "fatal", "x": default, "c": default, "y": default}
    with pytest.raises(SchemaError, match=r"column 'c'.*clip is undefined for a categorical column"):
        load_schema(
            write(
                tmp_path, text.replace('categories: [a, b, "?"]}', "categories: [a, b], on_invalid: clip}"), "bad.yaml"
            )
        )


BAD = [
    (
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "x: {kind: real, lower: 0, upper: 1}",
        "x",
        "unknown kind",
    ),
    (
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "x: {kind: continuous, lower: 0}",
        "x",
        "missing its upper bound",
    ),
    (
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "x: {kind: integer, lower: 5, upper: 5}",
        "x",
        "not below upper",
    ),
    (
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "x: {kind: integer, lower: 0, upper: 9.5}",
        "x",
        "non-integer bounds",
    ),
    (
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "x: {kind: continuous, lower: 0, upper: 1.5e6}",
        "x",
        "not a finite number",
    ),
    (
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "x: {kind: integer, lower: 0, upper: 10, categories: [a, b]}",
        "x",
        "cannot have categories",
    ),
    (
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: ignore}",
        "x",
        "unknown on_invalid",
    ),
    (
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "x: {kind: integer, lower: 0, upper: 10, bounds: 3}",
        "x",
        "unknown keys",
    ),
    (
        'c: {kind: categorical, categories: [a, b, "?"]}',
        "c: {kind: categorical, categories: [a, b, a]}",
        "c",
        "duplicate categories",
    ),
    ('c: {kind: categorical, categories: [a, b, "?"]}', "c: {kind: categorical, categories: [a]}", "c", "fewer than 2"),
    (
        'c: {kind: categorical, categories: [a, b, "?"]}',
        "c: {kind: categorical, categories: [yes, no]}",
        "c",
        "booleans",
    ),
    ('c: {kind: categorical, categories: [a, b, "?"]}', "c: {kind: categorical, categories: [a, 1]}", "c", "mix types"),
    ('c: {kind: categorical, categories: [a, b, "?"]}', "c: {kind: categorical}", "c", "no category list"),
    (
        'c: {kind: categorical, categories: [a, b, "?"]}',
        "c: {kind: categorical, categories: [a, b], on_invalid: clip}",
        "c",
        "clip is undefined",
    ),
    (
        'c: {kind: categorical, categories: [a, b, "?"]}',
        "c: {kind: categorical, categories: [a, b], upper: 3}",
        "c",
        "cannot have upper",
    ),
    (
        'c: {kind: categorical, categories: [a, b, "?"]}',
        "c: {kind: categorical, categories: [a, b], atoms: [0]}",
        "c",
        "cannot have atoms",
    ),
    (
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "x: {kind: integer, lower: 0, upper: 10, atoms: [0.5]}",
        "x",
        "not whole numbers",
    ),
    (
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "x: {kind: integer, lower: 0, upper: 10, atoms: [3, 0]}",
        "x",
        "atoms [3.0, 0.0] are not strictly increasing within [0, 10]",
    ),
    (
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "x: {kind: integer, lower: 0, upper: 10, atoms: [11]}",
        "x",
        "atoms [11.0] are not strictly increasing within [0, 10]",
    ),
    (
        "x: {kind: integer, lower: 0, upper: 10, on_invalid: clip}",
        "x: {kind: integer, lower: 0, upper: 10, atoms: 0}",
        "x",
        "atoms is 0, not a list of numbers",
    ),
    ("y: {kind: binary, categories: [0, 1]}", "y: {kind: binary, categories: [0, 1, 2]}", "y", "not 2"),
    ("target: y", "target: z", "z", "target 'z' is not a column"),
    ("protected: [c]", "protected: [c, race]", "race", "protected column 'race' is not a column"),
    ("  y: {kind: binary", "  c: {kind: binary, categories: [0, 1]}\n  y: {kind: binary", "c", "duplicate key"),
    ("protected: [c]", "protected: [c]\nrows: {count: 0, source: docs}", "rows.count", "not a whole number"),
    ("protected: [c]", "protected: [c]\nrows: {count: 5.7e4, source: docs}", "rows.count", "not a whole number"),
    ("protected: [c]", 'protected: [c]\nrows: {count: "569", source: docs}', "rows.count", "not a whole number"),
    ("protected: [c]", "protected: [c]\nrows: {count: 569}", "rows.source", "needs its documented source"),
    ("protected: [c]", "protected: [c]\nrows: {count: 569, source: '  '}", "rows.source", "missing or empty"),
    ("protected: [c]", "protected: [c]\nrows: {count: 569, source: x, year: 1}", "rows", "unknown keys"),
    ("protected: [c]", "protected: [c]\nrows: 569", "rows", "not a mapping"),
    ("protected: [c]", "protected: [c]\nrelated: [[x, z]]", "z", "related column 'z' is not a column"),
    ("protected: [c]", "protected: [c]\nrelated: [[x, x]]", "related", "not a pair of two distinct columns"),
    ("protected: [c]", "protected: [c]\nrelated: [x, c]", "related", "not a pair of two distinct columns"),
    ("protected: [c]", "protected: [c]\nrelated: x", "related", "not a list of column pairs"),
]


@pytest.mark.parametrize("old,new,column,problem", BAD, ids=[b[3] for b in BAD])
def test_malformed_schema_names_file_column_and_fix(
    tmp_path: Path, old: str, new: str, column: str, problem: str
) -> None:
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new), "broken_schema.yaml")
    with pytest.raises(SchemaError) as err:
        load_schema(path)
    msg = str(err.value)
    assert "broken_schema.yaml" in msg and f"column '{column}'" in msg and "Fix:" in msg, msg
    assert problem in msg, msg


@pytest.mark.parametrize(
    "text,problem",
    [
        ("columns: {x: {kind: integer, lower: 0, upper: 1}}", "missing 'name'"),
        ("name: toy\ncolumns: {}", "empty 'columns'"),
        ("name: toy\nowner: me\ncolumns: {x: {kind: integer, lower: 0, upper: 1}}", "unknown top-level keys"),
        ("name: toy\ncolumns: [x, y]", "columns"),
        ("- a\n- b", "not a YAML mapping"),
        ("name: toy\ncolumns: {x: [", "invalid YAML"),
    ],
)
def test_malformed_schema_file_level(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(SchemaError, match="Fix:") as err:
        load_schema(write(tmp_path, text, "broken_schema.yaml"))
    assert "broken_schema.yaml" in str(err.value) and problem in str(err.value)


def test_missing_schema_file(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="nope.yaml.*Fix:"):
        load_schema(tmp_path / "nope.yaml")


def test_a_long_code_list_is_read_from_a_file_next_to_the_schema(tmp_path: Path) -> None:
    (tmp_path / "codes").mkdir()
    codes = [f"{i:04d}" for i in range(5000)]  # leading zeros kept: codes are strings
    (tmp_path / "codes" / "dx.txt").write_text("\n".join(codes[:10]) + "\n\n  " + "\n".join(codes[10:]) + "\n")
    text = GOOD.replace(
        'c: {kind: categorical, categories: [a, b, "?"]}', "c: {kind: categorical, categories_file: codes/dx.txt}"
    )
    s = load_schema(write(tmp_path, text))
    assert s.column("c").categories == tuple(codes) and s.column("c").dtype == "str"
    inline = load_schema(
        write(
            tmp_path,
            text.replace("categories_file: codes/dx.txt", "categories: [" + ", ".join(f'"{c}"' for c in codes) + "]"),
            "inline.yaml",
        )
    )
    assert inline.hash() == s.hash()  # the parsed schema: where the list lives is moot
    (tmp_path / "codes" / "dx.txt").write_text("\n".join(codes[1:]))
    assert load_schema(tmp_path / "toy.yaml").hash() != s.hash()  # an edited list is another schema


@pytest.mark.parametrize(
    "spec, problem, fix",
    [
        ("categories_file: codes/none.txt", r"categories_file 'codes/none.txt' cannot be read", r"create .*none\.txt"),
        (
            "categories_file: ../dx.txt",
            r"not a path inside the schema's folder",
            r"put the code list next to the schema",
        ),
        ("categories_file: 3", r"categories_file 3 is not a path", r"put the code list next to the schema"),
        ("categories_file: codes/dx.txt, categories: [a, b]", r"both categories and categories_file", r"keep one"),
        ("categories_file: codes/dup.txt", r"duplicate categories \['a'\]", r"list each category once"),
    ],
)
def test_a_bad_code_list_names_the_column_and_the_fix(tmp_path: Path, spec: str, problem: str, fix: str) -> None:
    schema = tmp_path / "schemas"
    (schema / "codes").mkdir(parents=True)
    (schema / "codes" / "dx.txt").write_text("a\nb\n")
    (schema / "codes" / "dup.txt").write_text("a\nb\na\n")
    (tmp_path / "dx.txt").write_text("a\nb\n")  # outside the schema's folder
    text = GOOD.replace('c: {kind: categorical, categories: [a, b, "?"]}', f"c: {{kind: categorical, {spec}}}")
    with pytest.raises(SchemaError, match=rf"toy\.yaml.*'c'.*{problem}.*Fix: {fix}"):
        load_schema(write(schema, text))
