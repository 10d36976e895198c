"""Missing values as data: `missing: allowed` in the schema, the modelled columns, validation that
keeps the null rows, the generators' synthetic nulls and the published table; identifiers (`kind: id`) never
read and released as surrogate keys (pipelines/data/declared.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from pipelines.data.declared import surrogate_keys, to_modelled, to_published
from pipelines.data.readers import read_source
from pipelines.data.schema import NULL_TEXT, load_schema
from pipelines.data.transform import Encoder
from pipelines.data.validation import row_loss_summary, validate_table
from pipelines.errors import InputError, SchemaError

COHORT = """
name: cohort
description: a cohort whose cause of death is null for the living and whose creatinine was not always assayed
source: {documentation: "test fixture"}
target: alive
on_invalid: drop
columns:
  alive: {kind: binary, categories: ["no", "yes"]}
  cause: {kind: categorical, categories: [cancer, cardiac, other], missing: allowed}
  stage: {kind: categorical, categories: [1, 2, 3], missing: allowed}
  age: {kind: integer, lower: 18, upper: 100}
  visits: {kind: integer, lower: 0, upper: 20, missing: allowed}
  creatinine: {kind: continuous, lower: 0.1, upper: 15.0, missing: allowed}
  smoker: {kind: binary, categories: ["no", "yes"], missing: allowed}
"""


def cohort(n: int, seed: int = 0) -> pd.DataFrame:
    """Structural nulls: cause null iff alive; stage null for 30 %, visits 10 %, creatinine 20 %, smoker 15 %."""
    rng = np.random.default_rng(seed)
    alive = rng.random(n) < 0.7
    cause = np.where(alive, None, rng.choice(["cancer", "cardiac", "other"], n, p=[0.5, 0.3, 0.2]))
    stage = pd.array(np.where(rng.random(n) < 0.3, pd.NA, rng.integers(1, 4, n)), dtype="Int64")
    visits = np.where(rng.random(n) < 0.1, np.nan, rng.integers(0, 21, n).astype(float))
    creat = np.where(rng.random(n) < 0.2, np.nan, np.round(np.clip(rng.lognormal(0.0, 0.5, n), 0.1, 15.0), 2))
    smoker = np.where(rng.random(n) < 0.15, None, rng.choice(["no", "yes"], n))
    return pd.DataFrame(
        {
            "alive": np.where(alive, "yes", "no"),
            "cause": pd.Series(cause, dtype="str"),
            "stage": stage,
            "age": rng.integers(18, 101, n),
            "visits": visits,
            "creatinine": creat,
            "smoker": pd.Series(smoker, dtype="str"),
        }
    )


@pytest.fixture()
def schema(tmp_path: Path):
    (tmp_path / "cohort.yaml").write_text(COHORT)
    return load_schema(tmp_path / "cohort.yaml")


def test_the_modelled_columns(schema) -> None:
    assert schema.declared_names == ["alive", "cause", "stage", "age", "visits", "creatinine", "smoker"]
    assert schema.missing == ["cause", "stage", "visits", "creatinine", "smoker"]
    assert schema.names == [
        "alive",
        "cause",
        "stage",
        "age",
        "visits",
        "visits__missing",
        "creatinine",
        "creatinine__missing",
        "smoker",
    ]
    assert schema.column("cause").categories == ("cancer", "cardiac", "other", NULL_TEXT)
    assert schema.column("stage").categories == (1, 2, 3, 0)  # min(codes) − 1: no documented code
    assert schema.column("smoker").kind == "categorical" and schema.column("smoker").categories == (
        "no",
        "yes",
        NULL_TEXT,
    )
    assert schema.column("visits").atoms == (0.0,) and schema.column("creatinine").atoms == (0.1,)  # the lower bound
    assert schema.column("creatinine__missing").categories == ("present", "missing")
    assert Encoder(schema).layout.width == 1 + 4 + 4 + 1 + 1 + 1 + 1 + 1 + 3
    assert (
        schema.to_dict()["columns"]["cause"]["missing"] == "allowed"
        and "visits__missing" not in schema.to_dict()["columns"]
    )


def test_missing_takes_one_value(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(COHORT.replace("other], missing: allowed", "other], missing: yes"))
    with pytest.raises(SchemaError, match=r"c\.yaml, column 'cause': missing is True.*Fix: write 'missing: allowed'"):
        load_schema(tmp_path / "c.yaml")


@pytest.mark.parametrize(
    "text, column, problem",
    [
        (
            COHORT.replace(
                'alive: {kind: binary, categories: ["no", "yes"]}',
                'alive: {kind: binary, categories: ["no", "yes"], missing: allowed}',
            ),
            "alive",
            "on the target",
        ),
        (
            COHORT.replace("on_invalid: drop", "protected: [smoker]\non_invalid: drop"),
            "smoker",
            "on a protected column",
        ),
        (
            COHORT.replace("categories: [cancer, cardiac, other]", 'categories: [cancer, cardiac, "(missing)"]'),
            "cause",
            "the category '\\(missing\\)' stands for a null",
        ),
        (
            COHORT.replace("  smoker:", "  visits__missing: {kind: integer, lower: 0, upper: 1}\n  smoker:"),
            "visits",
            "indicator 'visits__missing' is the name of another column",
        ),
    ],
)
def test_schema_errors_name_the_column_and_the_fix(tmp_path: Path, text, column, problem) -> None:
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(SchemaError, match=rf"c\.yaml, column '{column}': .*{problem}.*Fix: "):
        load_schema(tmp_path / "c.yaml")


@pytest.mark.integration
def test_validation_keeps_the_null_rows_and_counts_them(schema) -> None:
    raw = cohort(400)
    raw.loc[3, "age"] = None  # a null where none is allowed: dropped as before
    clean, report = validate_table(raw, schema, "cohort.csv")
    assert report["rows_in"] == 400 and report["rows_out"] == 399 and report["rows_dropped"] == 1
    assert report["modelled_nulls"] == {c: int(raw[c].isna().sum()) for c in schema.missing}
    assert report["modelled_nulls"]["cause"] == int((raw["alive"] == "yes").sum())
    assert list(clean.columns) == schema.names and not clean.isna().any().any()
    kept = raw.drop(index=3).reset_index(drop=True)
    assert ((clean["cause"] == NULL_TEXT) == kept["cause"].isna()).all()
    assert ((clean["creatinine__missing"] == "missing") == kept["creatinine"].isna()).all()
    assert (clean.loc[kept["creatinine"].isna(), "creatinine"] == 0.1).all()
    assert (clean["stage"] == 0).sum() == kept["stage"].isna().sum() and clean["stage"].dtype == "int64"


@pytest.mark.integration
def test_published_rows_have_real_nulls_and_round_trip(schema) -> None:
    raw = cohort(300)
    clean, _ = validate_table(raw, schema, "cohort.csv")
    published = to_published(clean.assign(weight=1.0), schema)
    assert list(published.columns) == [*schema.declared_names, "weight"]
    for c in schema.declared_names:
        assert (published[c].isna() == raw[c].isna()).all(), c
    pd.testing.assert_series_equal(published["visits"], raw["visits"].astype("Int64"), check_names=False)
    pd.testing.assert_series_equal(published["creatinine"], raw["creatinine"], check_names=False)
    assert published["stage"].dtype == "Int64" and str(published["cause"].dtype) == "str"
    again = to_modelled(published[schema.declared_names], schema)  # e.g. a benchmark scoring a published table
    pd.testing.assert_frame_equal(again.astype(clean.dtypes.to_dict()), clean)


@pytest.mark.integration
def test_an_id_column_is_checked_never_read_and_released_as_surrogate_keys(tmp_path: Path) -> None:
    text = COHORT.replace("columns:\n", "columns:\n  patient_id: {kind: id}\n")
    (tmp_path / "c.yaml").write_text(text)
    schema = load_schema(tmp_path / "c.yaml")
    assert schema.ids == ["patient_id"] and schema.declared_names[0] == "patient_id"
    assert "patient_id" not in schema.names and "patient_id" not in [c.name for c in schema.read]
    raw = cohort(50).assign(patient_id=[f"MRN{9000 + i}" for i in range(50)])
    raw.to_csv(tmp_path / "t.csv", index=False)
    read = read_source(str(tmp_path / "t.csv"), schema).frame
    assert "patient_id" not in read.columns and len(read) == 50  # its cells are never read
    raw.drop(columns="patient_id").to_csv(tmp_path / "u.csv", index=False)
    with pytest.raises(Exception, match=r"u\.csv.*missing columns \['patient_id'\]"):
        read_source(str(tmp_path / "u.csv"), schema)  # but the header must have it
    clean, _ = validate_table(read, schema, "t.csv")
    published = to_published(clean, schema)
    assert published.columns[0] == "patient_id" and list(published["patient_id"][:3]) == [
        "synthetic-1",
        "synthetic-2",
        "synthetic-3",
    ]
    assert surrogate_keys(2) == ["synthetic-1", "synthetic-2"]
    assert list(to_modelled(published, schema).columns) == schema.names  # a benchmark scoring it drops them
    for edited, problem in [
        (text.replace("{kind: id}", "{kind: id, categories: [a, b]}"), "an id column takes no other key"),
        (text.replace("target: alive", "target: patient_id"), "cannot be the target"),
    ]:
        (tmp_path / "d.yaml").write_text(edited)
        with pytest.raises(SchemaError, match=rf"column 'patient_id': .*{problem}.*Fix: "):
            load_schema(tmp_path / "d.yaml")


@pytest.mark.integration
def test_marginal_models_see_a_numeric_null_as_one_more_cell_of_its_column(schema) -> None:
    """MST's and AIM's discretiser folds each `<name>__missing` indicator into its numeric column (one more cell
    after the bins): the model's columns are the declared ones; a null row codes to that cell and decodes to the
    lower bound with the indicator set; a present 0 visits (the lower bound) keeps its own bin; rows -> codes ->
    rows -> codes is the identity; the saved form keeps the fold; without the fold nothing changes."""
    from pipelines.data.bins import Discretizer
    from pipelines.generators.registry import make_generator

    raw = cohort(400)
    clean, _ = validate_table(raw, schema, "cohort.csv")
    encoder = Encoder(schema)
    X = encoder.encode(clean)
    plain, folded = Discretizer(encoder.layout, 8), Discretizer(encoder.layout, 8, fold_missing=True)
    assert plain.names == schema.names and "fold_missing" not in plain.to_dict()
    assert folded.names == schema.declared_names == make_generator("aim", encoder.layout, {}, "cpu").names
    assert make_generator("mst", encoder.layout, {}, "cpu").names == schema.declared_names
    for c in ("visits", "creatinine"):
        assert folded.size(c) == plain.size(c) + 1
    codes, j = folded.codes(X), folded.names.index("visits")
    null, zero = raw["visits"].isna().to_numpy(), (raw["visits"] == 0).to_numpy()
    assert null.sum() > 20 and zero.sum() > 5
    assert (codes[null, j] == plain.size("visits")).all() and (codes[zero, j] == 0).all()
    assert (codes[~null, j] == plain.codes(X)[~null, plain.names.index("visits")]).all()
    rows = folded.decode(codes, np.random.default_rng(0))
    assert (folded.codes(rows) == codes).all()
    back = to_published(encoder.decode(rows), schema)
    for c in ("visits", "creatinine"):
        assert (back[c].isna() == raw[c].isna()).all(), c
    assert (back.loc[zero, "visits"] == 0).all()
    again = Discretizer.from_dict(encoder.layout, folded.to_dict())
    assert again.names == folded.names and (again.codes(X) == codes).all()


@pytest.mark.slow
def test_aim_reproduces_missing_rates_and_the_structural_rule(schema) -> None:
    """AIM at ε = 2 on 2,000 rows (n̂·ε below 5,000: its 16 bins and 16 rounds): every column's missing rate within
    0.03 of the real one, and 'cause is null iff alive' in at least 95 % of the synthetic rows."""
    from pipelines.generators.base import Budget
    from pipelines.generators.registry import make_generator
    from support.ledger import FakeSession

    raw = cohort(2000)
    clean, _ = validate_table(raw, schema, "cohort.csv")
    encoder = Encoder(schema)
    model = make_generator("aim", encoder.layout, {"epsilon": 2.0, "noise_seed": 0}, "cpu")
    model.fit(encoder.encode(clean), FakeSession(), Budget(2.0, 1e-5))
    synth = to_published(encoder.decode(model.sample(2000, 0)), schema)
    for c in schema.missing:
        assert abs(synth[c].isna().mean() - raw[c].isna().mean()) < 0.03, c
    rule = (synth["cause"].isna() == (synth["alive"] == "yes")).mean()
    assert rule >= 0.95
    present = synth["creatinine"].dropna()
    assert present.between(0.1, 15.0).all() and abs(present.median() - raw["creatinine"].median()) < 0.25


@pytest.mark.slow
def test_a_release_keeps_and_publishes_the_nulls(tmp_path: Path, bc_raw: pd.DataFrame) -> None:
    """Through the stages: the bundled table with a quarter of mean_radius blanked and the schema saying
    `missing: allowed` there, and a patient identifier (`kind: id`); nothing is dropped, the bundle holds the
    declared columns with real nulls and surrogate keys, and the public report shows the synthetic missing rate."""
    import json

    from pipelines.config import load_params
    from tasks.check import check
    from tasks.evaluate import evaluate
    from tasks.release import release
    from tasks.train import train
    from support.project import make_root, run_stages

    root = make_root(
        tmp_path,
        {
            "dataset": {"source": "raw.csv"},
            "generators": ["dpwgan"],
            "dpwgan": {"steps": 20},
            "weights": {"generators": []},
            "release": {"select": "all", "non_dp_gates": "advise"},
            "evaluate": {"kway_subsets": 10, "attacks": {"n_attacks": 100}},
        },
    )
    schema = root / "schemas" / "breast_cancer.yaml"
    text = schema.read_text().replace(
        "mean_radius: {kind: continuous, lower: 5, upper: 30}",
        "mean_radius: {kind: continuous, lower: 5, upper: 30, missing: allowed}",
    )
    schema.write_text(text.replace("columns:\n", "columns:\n  mrn: {kind: id}\n"))
    raw = bc_raw.copy()
    raw.loc[raw.index % 4 == 0, "mean_radius"] = np.nan  # 143 of 569 rows
    raw.insert(0, "mrn", [f"MRN-{700000 + i}" for i in range(len(raw))])
    raw.to_csv(root / "raw.csv", index=False)
    run_stages(root, "budget")
    report = json.loads((root / "reports/breast_cancer/validation.json").read_text())
    assert report["rows_out"] == 569 and report["modelled_nulls"] == {"mean_radius": 143}
    params = load_params(root / "params.yaml")
    train(params, "dpwgan", "missing", root)
    evaluate(params, "dpwgan", root)
    check(params, "dpwgan", root)
    [entry] = release(params, root)["released"]
    published = pd.read_parquet(root / entry["path"] / "synthetic.parquet")
    assert list(published.columns) == ["mrn", *bc_raw.columns] and published["mean_radius"].dtype == "float64"
    assert published["mrn"].str.startswith("synthetic-").all() and published["mrn"].is_unique
    assert "mrn" not in pd.read_parquet(root / "data/raw/breast_cancer/validated.parquet").columns
    assert 0 < published["mean_radius"].isna().sum() < len(published)  # real nulls, some rows present
    assert published["mean_radius"].dropna().between(5, 30).all()
    assert not published.drop(columns="mean_radius").isna().any().any()
    for f in (root / entry["path"]).iterdir():  # no real identifier anywhere
        assert "MRN-7" not in (
            pd.read_parquet(f).to_csv() if f.suffix == ".parquet" else f.read_bytes().decode("latin-1")
        ), f.name
    assert "| mean_radius__missing | present " in (root / entry["path"] / "report.md").read_text()


STAYS = """
name: stays
description: hospital stays
source: {documentation: "test fixture"}
target: readmitted
on_invalid: drop
columns:
  admitted: {kind: date, lower: 2015-01-01, upper: 2019-12-31}
  discharged: {kind: date, lower: 2015-01-01, upper: 2020-03-31, after: admitted}
  followup: {kind: datetime, lower: "2015-01-01T00:00:00", upper: "2021-01-01T00:00:00", missing: allowed}
  readmitted: {kind: binary, categories: ["no", "yes"]}
"""


def stays(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    admitted = pd.Timestamp("2015-01-01") + pd.to_timedelta(rng.integers(0, 1826, n), unit="D")
    discharged = admitted + pd.to_timedelta(rng.geometric(0.2, n) - 1, unit="D")  # a stay of 0 or more days
    followup = (
        (discharged + pd.to_timedelta(rng.integers(0, 86400 * 90, n), unit="s"))
        .to_series()
        .reset_index(drop=True)
        .mask(pd.Series(rng.random(n) < 0.25))
    )
    return pd.DataFrame(
        {
            "admitted": admitted.strftime("%Y-%m-%d"),
            "discharged": discharged.strftime("%Y-%m-%d"),
            "followup": followup.dt.strftime("%Y-%m-%dT%H:%M:%S"),
            "readmitted": rng.choice(["no", "yes"], n),
        }
    )


@pytest.mark.integration
def test_dates_are_modelled_as_numbers_on_calendar_bins_and_published_as_dates(tmp_path: Path) -> None:
    (tmp_path / "stays.yaml").write_text(STAYS)
    schema = load_schema(tmp_path / "stays.yaml")
    admitted, discharged = schema.column("admitted"), schema.column("discharged")
    assert (admitted.kind, admitted.lower, admitted.upper) == ("integer", 16436.0, 18261.0)  # days since 1970
    assert len(admitted.bins) == 19 and admitted.bins[0] == 16526.0  # quarter starts: 2015-04-01 is day 16526
    assert (discharged.kind, discharged.lower, discharged.upper) == ("integer", 0.0, 18352.0 - 16436.0)  # the gap
    assert schema.names == ["admitted", "discharged", "followup", "followup__missing", "readmitted"]
    assert schema.column("followup").kind == "continuous" and len(schema.column("followup").bins) == 23  # quarters
    assert schema.to_dict()["columns"]["discharged"] == {
        "kind": "date",
        "on_invalid": "drop",
        "lower": "2015-01-01",
        "upper": "2020-03-31",
        "after": "admitted",
    }
    raw = stays(200)
    (tmp_path / "s.csv").write_text(raw.to_csv(index=False))
    read = read_source(str(tmp_path / "s.csv"), schema).frame
    clean, report = validate_table(read, schema, "s.csv")
    assert report["rows_out"] == 200 and report["modelled_nulls"] == {"followup": int(raw["followup"].isna().sum())}
    stay = (pd.to_datetime(raw["discharged"]) - pd.to_datetime(raw["admitted"])).dt.days
    assert (clean["discharged"] == stay).all() and clean["admitted"].dtype == "int64"  # the gap, in days
    published = to_published(clean, schema)
    assert str(published["admitted"].dtype) == "datetime64[s]"
    assert list(published["admitted"].dt.strftime("%Y-%m-%d")) == list(raw["admitted"])
    assert list(published["discharged"].dt.strftime("%Y-%m-%d")) == list(raw["discharged"])
    pd.testing.assert_series_equal(
        published["followup"].dt.strftime("%Y-%m-%dT%H:%M:%S"), raw["followup"], check_names=False, check_dtype=False
    )
    # a synthetic gap anywhere in its domain still gives a discharge on or after the admission
    gaps = clean.assign(discharged=np.linspace(0, discharged.upper, 200).round())
    out = to_published(gaps, schema)
    assert (out["discharged"] >= out["admitted"]).all() and (out["discharged"] <= pd.Timestamp("2020-03-31")).all()


@pytest.mark.integration
def test_a_discharge_before_its_admission_meets_the_policy(tmp_path: Path) -> None:
    (tmp_path / "stays.yaml").write_text(STAYS)
    schema = load_schema(tmp_path / "stays.yaml")
    raw = stays(50)
    raw.loc[7, "discharged"] = "2014-12-01"  # before its admission: out of domain
    read = read_source_frame(tmp_path, raw, schema)
    clean, report = validate_table(read, schema, "s.csv")
    assert report["rows_dropped"] == 1 and report["columns"]["discharged"]["below"] == 1
    raw.loc[7, "discharged"] = "17/05/2016"
    with pytest.raises(
        Exception,
        match=r"column 'discharged': 1 values of this date column are not ISO dates "
        r"\(row 8: '17/05/2016'.*Fix: write them as 2001-05-17",
    ):
        read_source_frame(tmp_path, raw, schema)
    for edit, problem in [
        ("after: admitted", "after: readmitted"),
        ("upper: 2019-12-31", 'upper: "2019-13-31"'),
        ("readmitted: {kind: binary", "readmitted: {after: admitted, kind: binary"),
    ]:
        (tmp_path / "bad.yaml").write_text(STAYS.replace(*((edit, problem))))
        with pytest.raises(SchemaError, match=r"bad\.yaml, column '(discharged|admitted|readmitted)': .*Fix: "):
            load_schema(tmp_path / "bad.yaml")


@pytest.mark.integration
def test_a_documented_longest_gap_bounds_the_modelled_gap(tmp_path: Path) -> None:
    """`max_gap_days`: the gap's public range (and so its bins) is the documented longest stay, not the calendar; a
    stay longer than that meets the column's policy; the key needs `after` and a positive number."""
    (tmp_path / "stays.yaml").write_text(STAYS.replace("after: admitted}", "after: admitted, max_gap_days: 30}"))
    schema = load_schema(tmp_path / "stays.yaml")
    assert (schema.column("discharged").lower, schema.column("discharged").upper) == (0.0, 30.0)
    assert schema.to_dict()["columns"]["discharged"]["max_gap_days"] == 30.0
    raw = stays(50)
    raw.loc[3, "discharged"] = (pd.Timestamp(raw.loc[3, "admitted"]) + pd.Timedelta(days=31)).strftime("%Y-%m-%d")
    clean, report = validate_table(read_source_frame(tmp_path, raw, schema), schema, "s.csv")
    assert report["rows_dropped"] == 1 and report["columns"]["discharged"]["above"] == 1
    gaps = clean.assign(discharged=np.linspace(0, 30, len(clean)).round())
    out = to_published(gaps, schema)
    assert ((out["discharged"] - out["admitted"]).dt.days.between(0, 30)).all()
    for problem in ("after: admitted, max_gap_days: 0}", "max_gap_days: 30}"):
        (tmp_path / "bad.yaml").write_text(STAYS.replace("after: admitted}", problem))
        with pytest.raises(SchemaError, match=r"bad\.yaml, column 'discharged': max_gap_days is .*Fix: give a "):
            load_schema(tmp_path / "bad.yaml")


def read_source_frame(tmp_path: Path, raw: pd.DataFrame, schema) -> pd.DataFrame:
    (tmp_path / "s.csv").write_text(raw.to_csv(index=False))
    return read_source(str(tmp_path / "s.csv"), schema).frame


@pytest.mark.slow
def test_mst_publishes_ordered_dates(tmp_path: Path) -> None:
    """MST at ε = 3 on 2,000 stays: every synthetic discharge is on or after its admission, dates fall inside their
    bounds, the follow-up's missing rate is within 0.03 of the real one and the admission years within 0.05."""
    from pipelines.generators.base import Budget
    from pipelines.generators.registry import make_generator
    from support.ledger import FakeSession

    (tmp_path / "stays.yaml").write_text(STAYS)
    schema = load_schema(tmp_path / "stays.yaml")
    raw = stays(2000)
    clean, _ = validate_table(read_source_frame(tmp_path, raw, schema), schema, "s.csv")
    encoder = Encoder(schema)
    model = make_generator("mst", encoder.layout, {"epsilon": 3.0, "noise_seed": 0}, "cpu")
    model.fit(encoder.encode(clean), FakeSession(), Budget(3.0, 1e-5))
    synth = to_published(encoder.decode(model.sample(2000, 0)), schema)
    assert (synth["discharged"] >= synth["admitted"]).all()
    assert synth["admitted"].between(pd.Timestamp("2015-01-01"), pd.Timestamp("2019-12-31")).all()
    assert (synth["admitted"].dt.normalize() == synth["admitted"]).all()  # whole days
    assert abs(synth["followup"].isna().mean() - raw["followup"].isna().mean()) < 0.03
    years = pd.to_datetime(raw["admitted"]).dt.year.value_counts(normalize=True)
    assert (synth["admitted"].dt.year.value_counts(normalize=True) - years).abs().max() < 0.05


def test_ppem_refuses_a_protected_column_with_nulls(schema) -> None:
    from pipelines.generators.ppem import split_columns

    layout = Encoder(schema).layout
    with pytest.raises(ValueError, match=r"ppem\.protected columns \['creatinine'\] allow nulls \(missing: allowed"):
        split_columns(layout, ["creatinine"])
    assert split_columns(layout, ["age"])[0] == [layout.block("age").start]


@pytest.mark.integration
def test_the_release_converts_and_summarises_its_table_a_part_at_a_time(tmp_path: Path, monkeypatch) -> None:
    """The release stage writes the published table a row group at a time (surrogate keys numbered on across the
    parts, the weight column joined on row position) and summarises the synthetic table a column at a time: the
    same bytes and the same summary as the whole table converted and summarised at once."""
    import pipelines.io as io
    from pipelines.reporting.plots import marginal_histograms
    from pipelines.reporting.synthetic_summary import summarise_synthetic
    from pipelines.weights.release import release_weights
    from tasks.release import published_table

    (tmp_path / "c.yaml").write_text(COHORT.replace("columns:\n", "columns:\n  patient_id: {kind: id}\n"))
    schema = load_schema(tmp_path / "c.yaml")
    clean, _ = validate_table(cohort(2500), schema, "t.csv")
    weights = np.random.default_rng(2).random(len(clean))
    io.write_parquet(tmp_path / "w.parquet", pd.DataFrame({"weight": weights}))
    io.write_parquet(tmp_path / "whole.parquet", to_published(clean.assign(weight=weights), schema))
    monkeypatch.setattr(io, "ROW_GROUP_ROWS", 1000)
    io.write_parquet(tmp_path / "s.parquet", clean)  # three row groups
    assert pq.ParquetFile(tmp_path / "s.parquet").num_row_groups == 3
    column = release_weights(tmp_path / "w.parquet", tmp_path / "s.parquet")
    published_table(tmp_path / "parts.parquet", tmp_path / "s.parquet", schema, column)
    monkeypatch.undo()
    parts = pd.read_parquet(tmp_path / "parts.parquet")
    assert parts["patient_id"].tolist() == surrogate_keys(len(clean)) and parts["weight"].tolist() == list(weights)
    pd.testing.assert_frame_equal(parts, pd.read_parquet(tmp_path / "whole.parquet"))
    columns = io.ParquetColumns(tmp_path / "s.parquet")
    assert str(columns["cause"].dtype) == "category" and len(columns) == len(clean)
    assert summarise_synthetic(columns, schema.columns) == summarise_synthetic(clean, schema.columns)
    assert marginal_histograms(None, columns, schema.columns) == marginal_histograms(None, clean, schema.columns)
    io.write_parquet(tmp_path / "short.parquet", pd.DataFrame({"weight": weights[:-1]}))
    with pytest.raises(InputError, match=f"the weights file has {len(clean) - 1} rows for {len(clean)} synthetic"):
        release_weights(tmp_path / "short.parquet", tmp_path / "s.parquet")
    io.write_parquet(tmp_path / "clash.parquet", clean.assign(weight=1.0))
    with pytest.raises(InputError, match="already has a 'weight' column"):
        release_weights(tmp_path / "w.parquet", tmp_path / "clash.parquet")


DERIVED = """
  grade: {kind: integer, lower: 0, upper: 3, derived: {from: cause, values: {cancer: 1, cardiac: 2, other: 3}}}
  stage_label: {kind: categorical, categories: [I, II, III], derived: {from: stage, values: {1: I, 2: II, 3: III}}}
"""
GRADE = {"cancer": 1, "cardiac": 2, "other": 3}


def derived_schema(tmp_path: Path, text: str = COHORT + DERIVED):
    (tmp_path / "d.yaml").write_text(text)
    return load_schema(tmp_path / "d.yaml")


def derived_rows(n: int) -> pd.DataFrame:
    """`cohort` rows with both derived columns as documented (null where their source is)."""
    raw = cohort(n)
    return raw.assign(
        grade=raw["cause"].map(GRADE).astype("Int64"),
        stage_label=raw["stage"].map({1: "I", 2: "II", 3: "III"}).astype("str"),
    )


@pytest.mark.integration
def test_a_derived_column_is_checked_never_modelled_and_published_as_its_mapping(tmp_path: Path) -> None:
    """A `derived` column is read, each row checked against the documented mapping (a row that breaks it follows
    the column's on_invalid: dropped and counted, or refused naming the column and rows), never modelled, and
    published as the mapping of its source's value: exact in every row, null where the source is null."""
    schema = derived_schema(tmp_path)
    assert schema.declared_names[-2:] == ["grade", "stage_label"] and [c.name for c in schema.derived] == [
        "grade",
        "stage_label",
    ]
    assert "grade" not in schema.names and "stage_label" not in schema.names
    assert schema.to_dict()["columns"]["grade"]["derived"] == {
        "from": "cause",
        "values": [["cancer", 1], ["cardiac", 2], ["other", 3]],
    }
    raw = derived_rows(300)
    assert raw["cause"].isna().sum() > 50  # the living: null cause, so null grade
    broken = raw.copy()
    died = np.flatnonzero(raw["cause"].notna().to_numpy())
    broken.loc[died[:3], "grade"] = (broken.loc[died[:3], "grade"] % 3) + 1  # three wrong codes
    living = np.flatnonzero(raw["cause"].isna().to_numpy())[0]
    broken.loc[living, "grade"] = 2  # a grade with no cause
    broken.loc[died[3], "cause"] = "unknown"  # an unknown source: the source's policy, counted once
    clean, report = validate_table(broken, schema, "cohort.csv")
    assert report["columns"]["grade"] == {
        "policy": "drop",
        "out_of_domain": 4,
        "nulls": 0,
        "mismatched": 4,
        "action": "drop",
    }
    assert report["columns"]["stage_label"]["mismatched"] == 0 and report["columns"]["cause"]["unknown"] == 1
    assert report["rows_dropped"] == 5 and len(clean) == 295 and list(clean.columns) == schema.names
    assert "'grade' 4 not the documented value of their source's category (drop)" in row_loss_summary(report)
    published = to_published(clean, schema)
    assert list(published.columns) == schema.declared_names
    assert published["grade"].dtype == "Int64" and published["stage_label"].dtype == "str"
    expected = published["cause"].map(GRADE)
    assert (published["grade"].isna() == published["cause"].isna()).all()
    assert (published["grade"].dropna().to_numpy() == expected.dropna().to_numpy()).all()
    labels = published["stage"].map({1: "I", 2: "II", 3: "III"})
    assert (published["stage_label"].isna() == published["stage"].isna()).all()
    assert (published["stage_label"].dropna() == labels.dropna()).all()
    assert to_published(clean, schema)["grade"].notna().sum() == clean["cause"].ne(NULL_TEXT).sum()
    fatal = derived_schema(
        tmp_path, COHORT + DERIVED.replace("derived: {from: cause", "on_invalid: fatal, derived: {from: cause")
    )
    with pytest.raises(
        InputError,
        match=r"cohort\.csv.*column 'grade': 4 values outside the public domain \(4 not "
        r"the documented value of their source's category; e\.g\. row \d+: ",
    ):
        validate_table(broken, fatal, "cohort.csv")


@pytest.mark.parametrize(
    "edit, column, problem",
    [
        (("from: cause", "from: cuase"), "grade", "derived from 'cuase', which is not another categorical"),
        (("from: cause", "from: age"), "grade", "derived from 'age', which is not another categorical"),
        (("from: cause", "from: grade"), "grade", "derived from 'grade', which is not another categorical"),
        ((", other: 3}", "}"), "grade", r"do not list each category of 'cause' once \(missing \['other'\]"),
        (("other: 3}", "other: 3, unknown: 1}"), "grade", r"not its categories \['unknown'\]"),
        (
            ("other: 3}", "other: 4}"),
            "grade",
            r"derived value 4 \(of 'other'\) is outside the column's domain \[0, 3\]",
        ),
        (("3: III}", "3: IV}"), "stage_label", r"derived value 'IV' \(of 3\) is outside the column's domain"),
        (("upper: 3, derived", "upper: 3, missing: allowed, derived"), "grade", "cannot have 'missing: allowed'"),
        (("upper: 3, derived", "upper: 3, on_invalid: clip, derived"), "grade", "cannot have on_invalid: clip"),
        (
            ("derived: {from: cause, values: {cancer: 1, cardiac: 2, other: 3}}", "derived: cause"),
            "grade",
            "derived is 'cause', not a source column",
        ),
        (("target: alive", "target: grade"), "grade", "cannot be the target or a protected column"),
        (
            ("on_invalid: drop\n", "on_invalid: drop\nrelated: [[cause, grade]]\n"),
            "grade",
            "related column 'grade' is derived",
        ),
    ],
)
def test_a_derived_column_the_schema_gets_wrong_is_refused_by_name(tmp_path: Path, edit, column, problem) -> None:
    text = (COHORT + DERIVED).replace(*edit)
    assert text != COHORT + DERIVED
    with pytest.raises(SchemaError, match=rf"d\.yaml, column '{column}': .*{problem}.*Fix: "):
        derived_schema(tmp_path, text)


def test_a_schema_level_clip_leaves_a_derived_column_at_drop(tmp_path: Path) -> None:
    schema = derived_schema(tmp_path, (COHORT + DERIVED).replace("on_invalid: drop\n", "on_invalid: clip\n", 1))
    assert {c.name: c.on_invalid for c in schema.derived} == {"grade": "drop", "stage_label": "drop"}
    assert schema.column("age").on_invalid == "clip"


@pytest.mark.integration
def test_a_decoded_value_on_a_row_marked_missing_is_the_lower_bound(schema) -> None:
    """A generator may decode any value beside an indicator that says missing; the decoded row holds the lower
    bound there, which is what the published null reads back as, so every metric measures what is published."""
    encoder = Encoder(schema)
    X = encoder.encode(validate_table(cohort(50), schema, "cohort.csv")[0])
    names = encoder.column_names()
    flag = names.index("creatinine__missing")
    value = next(i for i, n in enumerate(names) if n.startswith("creatinine") and i != flag)
    X[:, value], X[:, flag] = 0.7, np.arange(50) % 2  # odd rows marked missing, every value 0.7 of the range
    decoded = encoder.decode(X)
    expected = np.where(np.arange(50) % 2 == 1, 0.1, 0.1 + 0.7 * (15.0 - 0.1))
    np.testing.assert_allclose(decoded["creatinine"].to_numpy(), expected)
    published = to_published(decoded, schema)
    assert published["creatinine"].isna().tolist() == [bool(i % 2) for i in range(50)]
    pd.testing.assert_series_equal(to_modelled(published, schema)["creatinine"], decoded["creatinine"])
