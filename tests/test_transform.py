"""Schema-only encoder: layout, exact round trip, clipping, no dependence on data, keyed split."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from pipelines.data.schema import Schema
from pipelines.data.transform import Encoder, train_holdout_split
from pipelines.data.validation import conforms


def adult_probe() -> pd.DataFrame:
    """Three hand-written adult rows (bounds, midpoints and first/last categories)."""
    return pd.DataFrame(
        {
            "age": [17, 90, 53],
            "workclass": ["Private", "?", "State-gov"],
            "fnlwgt": [1.0, 1_500_000.0, 750_000.5],
            "education": ["Bachelors", "Preschool", "HS-grad"],
            "education_num": [1, 16, 9],
            "marital_status": ["Divorced", "Widowed", "Married-AF-spouse"],
            "occupation": ["?", "Sales", "Tech-support"],
            "relationship": ["Wife", "Husband", "Unmarried"],
            "race": ["White", "Black", "Other"],
            "sex": ["Female", "Male", "Male"],
            "capital_gain": [0, 99_999, 50_000],
            "capital_loss": [0, 0, 99_999],
            "hours_per_week": [1, 99, 50],
            "native_country": ["United-States", "?", "Holand-Netherlands"],
            "income": ["<=50K", ">50K", ">50K"],
        }
    ).astype(
        {
            c: "str"
            for c in (
                "workclass",
                "education",
                "marital_status",
                "occupation",
                "relationship",
                "race",
                "sex",
                "native_country",
                "income",
            )
        }
    )


def test_adult_layout(adult_schema: Schema) -> None:
    layout = Encoder(adult_schema).layout
    widths = {b.column: b.width for b in layout.blocks}
    expected = sum(len(c.categories) for c in adult_schema.columns if c.kind == "categorical") + sum(
        1 for c in adult_schema.columns if c.kind != "categorical"
    )
    assert layout.width == expected == 107  # education_num is derived: not modelled
    assert [b.column for b in layout.blocks] == adult_schema.names
    assert widths["native_country"] == 42 and widths["workclass"] == 9 and widths["sex"] == widths["age"] == 1
    assert [b.column for b in layout.blocks if b.protected] == ["race", "sex"]
    assert [b.column for b in layout.blocks if b.is_target] == ["income"]
    assert layout.block("occupation").start == layout.block("marital_status").stop
    assert Encoder(adult_schema).layout == layout


def test_probe_encoding_is_the_schema_formula(adult_schema: Schema) -> None:
    enc = Encoder(adult_schema)
    X = enc.encode(adult_probe())
    assert X.dtype == np.float32 and X.shape == (3, 107)
    col = {b.column: b for b in enc.layout.blocks}
    assert X[:, col["age"].start].tolist() == [0.0, 1.0, pytest.approx(36 / 73)]
    assert X[:, col["sex"].start].tolist() == [0.0, 1.0, 1.0]
    assert X[:, col["income"].start].tolist() == [0.0, 1.0, 1.0]
    wc = X[:, col["workclass"].start : col["workclass"].stop]
    assert wc.sum(axis=1).tolist() == [1, 1, 1] and wc.argmax(axis=1).tolist() == [0, 8, 5]


def test_round_trip_adult(adult_schema: Schema, adult_raw: pd.DataFrame) -> None:
    enc = Encoder(adult_schema)
    rows = adult_raw[adult_schema.names]  # the modelled columns (education_num is derived)
    back = enc.decode(enc.encode(rows))
    assert list(back.dtypes) == list(rows.dtypes)
    pd.testing.assert_frame_equal(back.drop(columns="fnlwgt"), rows.drop(columns="fnlwgt"))
    np.testing.assert_allclose(back["fnlwgt"], rows["fnlwgt"], rtol=1e-6, atol=0)


def test_round_trip_breast_cancer(bc_schema: Schema, bc_raw: pd.DataFrame) -> None:
    enc = Encoder(bc_schema)
    X = enc.encode(bc_raw)
    assert X.shape == (569, 31) and enc.layout.block("target").is_target
    back = enc.decode(X)
    assert list(back.dtypes) == list(bc_raw.dtypes)
    assert back["target"].equals(bc_raw["target"])
    np.testing.assert_allclose(back.drop(columns="target"), bc_raw.drop(columns="target"), rtol=1e-6, atol=0)


def test_same_schema_same_transform_whatever_the_data(adult_schema: Schema, adult_raw: pd.DataFrame) -> None:
    """THE privacy property: the map depends on the schema only. No fit, no state, no other rows."""
    probe = adult_probe()
    table_a = adult_raw.iloc[:1000]  # young/old, small/large weights ...
    table_b = adult_raw[adult_raw["age"] > 60].iloc[:1000]  # ... and a very different table
    enc = Encoder(adult_schema)
    state = pickle.dumps(enc)
    before = enc.encode(probe)
    enc.encode(table_a)
    enc.encode(table_b)
    assert pickle.dumps(enc) == state  # encoding changed nothing inside it
    assert np.array_equal(enc.encode(probe), before)
    built_next_to_a = Encoder(adult_schema)
    built_next_to_a.encode(table_a)
    built_next_to_b = Encoder(adult_schema)
    built_next_to_b.encode(table_b)
    for other in (built_next_to_a, built_next_to_b):
        assert other.layout == enc.layout
        assert np.array_equal(other.encode(probe), before)
    # each row's encoding is independent of the other rows in the frame
    for table in (table_a, table_b):
        stacked = enc.encode(pd.concat([probe, table], ignore_index=True))
        assert np.array_equal(stacked[:3], before)
        assert np.array_equal(stacked[3:], enc.encode(table))
    assert not hasattr(enc, "fit")


def test_encoding_clips_to_schema_bounds(bc_schema: Schema, bc_raw: pd.DataFrame) -> None:
    enc = Encoder(bc_schema)
    frame = bc_raw.head(2).copy()
    frame.loc[0, "mean_radius"], frame.loc[1, "mean_radius"] = -100.0, 1e9
    X = enc.encode(frame)
    assert X[:, enc.layout.block("mean_radius").start].tolist() == [0.0, 1.0]
    assert X.min() >= 0.0 and X.max() <= 1.0


def test_encode_rejects_unvalidated_frames(adult_schema: Schema) -> None:
    enc = Encoder(adult_schema)
    with pytest.raises(ValueError, match="'race'.*'Martian'"):
        enc.encode(adult_probe().assign(race=["White", "Martian", "Other"]))
    with pytest.raises(ValueError, match="'age'.*nulls"):
        enc.encode(adult_probe().assign(age=[17.0, np.nan, 20.0]))
    with pytest.raises(ValueError, match=r"\['income'\]"):
        enc.encode(adult_probe().drop(columns="income"))


@pytest.mark.integration
@pytest.mark.parametrize("name", ["adult", "bc"])
def test_decode_any_matrix_gives_conforming_rows(request: pytest.FixtureRequest, name: str) -> None:
    schema = request.getfixturevalue(f"{name}_schema")
    enc = Encoder(schema)
    X = np.random.default_rng(0).normal(0.5, 0.8, size=(500, enc.layout.width))  # also outside [0, 1]
    frame = enc.decode(X)
    assert frame.shape == (500, len(schema.columns))
    assert conforms(frame, schema) == {"success": True, "failed": []}


def test_decode_checks_its_input(adult_schema: Schema) -> None:
    enc = Encoder(adult_schema)
    X = np.random.default_rng(0).uniform(size=(5, enc.layout.width))
    with pytest.raises(ValueError, match="107 columns"):
        enc.decode(X[:, :-1])
    with pytest.raises(ValueError, match="107 columns"):
        enc.decode(X[0])
    X[3, 7] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        enc.decode(X)


def test_decode_rounds_thresholds_and_argmaxes(adult_schema: Schema) -> None:
    enc = Encoder(adult_schema)
    X = enc.encode(adult_probe()).astype(np.float64)
    age, sex, wc = (enc.layout.block(c) for c in ("age", "sex", "workclass"))
    X[0, age.start] = 0.5 / 73 - 1e-9  # 17.4999 -> 17
    X[1, age.start] = 0.5 / 73 + 1e-9  # 17.5001 -> 18
    X[0, sex.start], X[1, sex.start] = 0.49, 0.5
    X[2, wc.start : wc.stop] = np.linspace(0.1, 0.2, wc.width)  # argmax = last = '?'
    back = enc.decode(X)
    assert back["age"].tolist()[:2] == [17, 18]
    assert back["sex"].tolist()[:2] == ["Female", "Male"]
    assert back["workclass"].iloc[2] == "?"


def test_split_is_keyed_disjoint_and_complete() -> None:
    df = pd.DataFrame({"id": np.arange(1000), "x": np.arange(1000) * 2.0})
    key = bytes(range(32))
    train, holdout = train_holdout_split(df, 0.2, key)
    train2, holdout2 = train_holdout_split(df, 0.2, key)
    # Binomial(1000, 0.2): sd 12.6, so ±4 sd is [150, 250]; the exact count is fixed by the key.
    assert 150 <= len(holdout) <= 250 and len(train) + len(holdout) == 1000
    pd.testing.assert_frame_equal(train, train2)
    pd.testing.assert_frame_equal(holdout, holdout2)
    assert set(train["id"]).isdisjoint(holdout["id"]) and set(train["id"]) | set(holdout["id"]) == set(range(1000))
    assert list(train.index) == list(range(len(train))) and train["id"].is_monotonic_increasing
    assert not train_holdout_split(df, 0.2, bytes(range(1, 33)))[1]["id"].equals(holdout["id"])
    # an integer is a public seed (tests, benchmarks): deterministic, and not the same split as the key's
    assert train_holdout_split(df, 0.2, 7)[1]["id"].equals(train_holdout_split(df, 0.2, 7)[1]["id"])
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError):
            train_holdout_split(df, bad, key)
    # a side left empty is no stop (whether a release happens is decided under DP): the rows all go to the other
    empty = train_holdout_split(df, 1e-6, key)
    assert (len(empty[0]), len(empty[1])) == (1000, 0)
    with pytest.raises(ValueError, match="128 bits"):
        train_holdout_split(df, 0.2, b"short")
