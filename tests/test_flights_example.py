"""The bundled example with every kind an institutional table brings: `bundled:flights`
(pipelines/data/bundled/README.md, schemas/flights.yaml, params/flights.yaml) released through the stages with the
default selection: an identifier, two datetimes in a documented order, a 1,462-code destination list and values
that exist only for some rows, none of them dropped."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from pipelines.config import load_params
from pipelines.data.readers import read_source
from pipelines.data.schema import load_schema

from support.project import PROJECT, make_root, run_stages

REAL_ID = re.compile(r"[0-9A-Z]{2}\d{1,4}-2013\d{4}-(EWR|JFK|LGA)")  # flight_id of the bundled rows


def test_the_bundled_table_reads_with_every_kind_and_no_row_lost():
    schema = load_schema(PROJECT / "schemas" / "flights.yaml")
    frame = read_source("bundled:flights", schema).frame
    assert frame.shape == (3000, 9) and "flight_id" not in frame.columns  # an identifier is never read
    assert frame["scheduled"].dtype == frame["arrival"].dtype == "datetime64[s]"
    assert frame[["dep_delay", "air_time"]].isna().sum().tolist() == [75, 81]  # cancelled; also diverted
    assert len(schema.column("dest").categories) == 1462 and set(frame["dest"]) <= set(schema.column("dest").categories)
    gap = (frame["arrival"] - frame["scheduled"]).dt.total_seconds()
    assert gap.between(0, 86400).all()  # the order the schema declares
    assert [c.name for c in schema.columns][:2] == ["scheduled", "arrival"]
    assert (schema.column("arrival").lower, schema.column("arrival").upper) == (0.0, 86400.0)  # the gap, ≤ 1 day
    override = yaml.safe_load((PROJECT / "params" / "flights.yaml").read_text())
    assert override["dataset"] == {"name": "flights", "source": "bundled:flights"}


@pytest.mark.slow
def test_the_bundled_flights_example_releases_every_kind(tmp_path: Path):
    """AIM (the default selection's choice) at the default ε through validate, prepare, budget, train, evaluate,
    check and release: no row dropped, the nulls, the order of the datetimes, the code list (compressed by AIM's
    noisy counts) and surrogate keys in the published table, and no real identifier anywhere in the bundle."""
    from tasks.check import check
    from tasks.evaluate import evaluate
    from tasks.release import release
    from tasks.train import train

    root = make_root(
        tmp_path,
        {
            "dataset": {"name": "flights", "source": "bundled:flights"},
            "generators": ["aim"],
            "weights": {"generators": []},
            "release": {"select": "auto", "non_dp_gates": "advise"},
            "evaluate": {
                "max_rows": 1000,
                "ot_max_rows": 500,
                "kway_subsets": 10,
                "mmd_permutations": 50,
                "detection_max_rows": 500,
                "classifier_max_rows": 1000,
                "range_queries": 200,
                "attacks": {"n_attacks": 100, "max_rows": 500, "bootstrap": 50},
            },
        },
    )
    run_stages(root, "budget")
    report = json.loads((root / "reports/flights/validation.json").read_text())
    assert report["rows_in"] == report["rows_out"] == 3000
    assert report["modelled_nulls"] == {"dep_delay": 75, "air_time": 81}
    params = load_params(root / "params.yaml")
    train(params, "aim", "flights", root)
    model = json.loads((root / "models/flights/aim/aim.json").read_text())
    dest = [b["column"] for b in model["layout"]["blocks"]].index("dest")
    supported = model["state"]["compression"]["supported"][str(dest)]
    assert 0 < len(supported) < 1462  # the model holds the codes its counts show
    evaluate(params, "aim", root)
    check(params, "aim", root)
    [entry] = release(params, root)["released"]
    published = pd.read_parquet(root / entry["path"] / "synthetic.parquet")
    schema = load_schema(root / "schemas" / "flights.yaml")
    assert list(published.columns) == schema.declared_names and len(published) == 2400
    assert published["flight_id"].str.startswith("synthetic-").all() and published["flight_id"].is_unique
    gap = (published["arrival"] - published["scheduled"]).dt.total_seconds()
    assert gap.between(0, 86400).all()
    assert published["scheduled"].between(pd.Timestamp("2013-01-01"), pd.Timestamp("2014-01-02")).all()
    assert set(published["dest"]) <= set(schema.column("dest").categories) and published["dest"].nunique() > 1
    for column, real in (("dep_delay", 75 / 3000), ("air_time", 81 / 3000)):  # missing rates within DP noise
        assert abs(published[column].isna().mean() - real) < 0.03, column
        assert published[column].dropna().between(*{"dep_delay": (-60, 1440), "air_time": (0, 720)}[column]).all()
    assert not published.drop(columns=["dep_delay", "air_time"]).isna().any().any()
    for f in (root / entry["path"]).iterdir():  # no real identifier anywhere
        text = pd.read_parquet(f).to_csv() if f.suffix == ".parquet" else f.read_bytes().decode("latin-1")
        assert not REAL_ID.search(text), f.name
    metrics = json.loads((root / "reports/flights/aim/metrics.json").read_text())
    assert np.isfinite(metrics["wasserstein_score"]["score"])
