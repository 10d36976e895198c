"""Private domain discovery: the mechanisms' thresholds and outputs against known answers, the schema's `discover`
keys, validation's "(other)" cell, and the discover stage end to end (ledger, steward-side reuse, manifest).
The mechanisms' audits on their real code path are tests/audit_cases_release.py's discover cases."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from support.project import ledger_rows, make_root

from pipelines.config import Config, load_params
from pipelines.data.discovery import DELTA_SHARE, Step, steps
from pipelines.data.schema import OTHER, PENDING_CATEGORY, load_schema
from pipelines.data.validation import validate_table
from pipelines.errors import InputError, SchemaError
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.discovery import (
    approximate_bounds,
    bounds_threshold,
    grid_edges,
    partition_event,
    partition_threshold,
    select_partitions,
)
from pipelines.privacy.events import ApproxDPEvent
from pipelines.privacy.unit import unit_event


def test_partition_threshold_is_the_smallest_meeting_delta():
    # t = k/ε = 20, p = e^(−0.05): τ − 1 = ⌈20·ln(1/(10⁻⁶·1.9512))⌉ = ⌈262.94⌉
    assert partition_threshold(0.05, 1e-6) == 264
    assert partition_threshold(0.05, 1e-6, 2) == 555
    for eps, delta, k in ((0.05, 1e-6, 1), (1.0, 1e-7, 3), (0.3, 1e-5, 2)):
        tau, p = partition_threshold(eps, delta, k), math.exp(-eps / k)
        assert k * p ** (tau - 1) / (1 + p) <= delta < k * p ** (tau - 2) / (1 + p)
    with pytest.raises(ValueError, match="δ ≤ 1 − e"):
        partition_threshold(0.01, 0.5)


def test_bounds_threshold_and_grid():
    edges = grid_edges()
    assert len(edges) == 2 * 81 + 1 and edges[80] == -(2.0**-20) and edges[81] == 0.0 and edges[-1] == 2.0**60
    assert bounds_threshold(0.05) == 227  # ⌈20·ln(162/(10⁻³·1.9512))⌉
    assert bounds_threshold(1.0) == 12


def test_partition_selection_releases_the_frequent_values_only():
    counts = {"ICU": 5000, "Ward A": 900, "Ward B": 300, "rare": 4}
    found, event = select_partitions(counts, 0.05, 1e-6, 1, np.random.default_rng(3))
    assert found == ["ICU", "Ward A", "Ward B"]  # τ = 264
    assert event == ApproxDPEvent(0.05, 1e-6, "laplace_partition_selection")


def test_approximate_bounds_are_the_outer_edges_of_the_bins_above_threshold():
    rng = np.random.default_rng(0)
    ages = rng.integers(17, 91, 10_000).astype(float)
    bounds, event = approximate_bounds(ages, 0.05, 1, rng)
    assert (bounds.lower, bounds.upper, bounds.threshold) == (16.0, 128.0, 227)
    assert event.epsilon == pytest.approx(0.05) and event.dims == 162
    income = np.concatenate([rng.lognormal(10, 1, 10_000), [5e9]])  # one outlier: never the bound
    bounds, _ = approximate_bounds(income, 0.05, 1, rng)
    assert (bounds.lower, bounds.upper) == (2048.0, 262144.0)
    assert approximate_bounds(np.array([3.0] * 10), 0.05, 1, rng)[0].upper is None  # too few rows for ε


def test_accounting_of_partition_selection():
    event = partition_event(0.2, 1e-7)
    assert epsilon_pld([event], 1e-5) == pytest.approx(0.2, rel=1e-3)
    assert math.isinf(epsilon_pld([event], 1e-8))  # δ below the step's own
    # group privacy of (ε, δ): (kε, k·e^((k−1)ε)·δ)
    assert unit_event(event, 3) == ApproxDPEvent(0.6000000000000001, 3 * math.exp(0.4) * 1e-7, event.mechanism)


SCHEMA = {
    "name": "clinic",
    "description": "a clinic's visits",
    "source": {"documentation": "test"},
    "target": "admitted",
    "on_invalid": "drop",
    "columns": {
        "ward": {"kind": "categorical", "categories": "discover"},
        "cost": {"kind": "continuous", "lower": 0, "upper": "discover", "atoms": [0]},
        "age": {"kind": "integer", "lower": "discover", "upper": "discover"},
        "admitted": {"kind": "binary", "categories": ["no", "yes"]},
    },
}


def _schema_file(tmp_path: Path, schema: dict = SCHEMA) -> Path:
    path = tmp_path / "clinic.yaml"
    path.write_text(yaml.safe_dump(schema, sort_keys=False))
    return path


def test_schema_discover_keys_pending_and_filled(tmp_path):
    path = _schema_file(tmp_path)
    pending = load_schema(path, pending=True)
    assert pending.pending and pending.discovered == (
        ("ward", "categories"),
        ("cost", "upper"),
        ("age", "lower"),
        ("age", "upper"),
    )
    assert pending.column("ward").categories == (PENDING_CATEGORY, OTHER)
    filled = load_schema(
        path,
        {"ward": {"categories": ["ICU", "Ward A"]}, "cost": {"upper": 4096.0}, "age": {"lower": 16.0, "upper": 128.0}},
    )
    assert not filled.pending
    ward, cost, age = (filled.column(c) for c in ("ward", "cost", "age"))
    assert ward.categories == ("ICU", "Ward A", OTHER) and ward.other == OTHER
    assert (cost.lower, cost.upper, cost.on_invalid) == (0.0, 4096.0, "clip")  # a discovered bound clips
    assert (age.lower, age.upper) == (16.0, 128.0)
    assert filled.to_dict()["discovered"][0] == ["ward", "categories"]
    with pytest.raises(SchemaError, match="run the discover stage"):
        load_schema(path, {})
    bad = {**SCHEMA, "columns": {**SCHEMA["columns"], "admitted": {"kind": "binary", "categories": "discover"}}}
    with pytest.raises(SchemaError, match="discover only the categories of a categorical column"):
        load_schema(_schema_file(tmp_path, bad), pending=True)


def test_discovered_bound_takes_in_documented_atoms(tmp_path):
    spec = {
        **SCHEMA,
        "columns": {
            **SCHEMA["columns"],
            "cost": {"kind": "continuous", "lower": "discover", "upper": 10, "atoms": [0]},
        },
    }
    filled = load_schema(
        _schema_file(tmp_path, spec),
        {"ward": {"categories": ["a"]}, "cost": {"lower": 2.0}, "age": {"lower": 0.0, "upper": 99.0}},
    )
    assert filled.column("cost").lower == 0.0  # the documented atom 0 lies inside the domain


def test_steps_divide_the_discovery_budget(tmp_path):
    plan = steps(load_schema(_schema_file(tmp_path), pending=True), 0.75, 1e-5)
    assert plan == [
        Step("ward", ("categories",), 0.25, DELTA_SHARE * 1e-5),
        Step("cost", ("upper",), 0.25, 0.0),
        Step("age", ("lower", "upper"), 0.25, 0.0),
    ]


def test_validation_puts_undiscovered_values_in_other(tmp_path):
    sch = load_schema(
        _schema_file(tmp_path),
        {"ward": {"categories": ["ICU"]}, "cost": {"upper": 100.0}, "age": {"lower": 0.0, "upper": 99.0}},
    )
    frame = pd.DataFrame(
        {
            "ward": ["ICU", "rare", "ICU", "odd"],
            "cost": [1.0, 2.0, 500.0, 0.0],
            "age": [30, 40, 50, 60],
            "admitted": ["no", "yes", "no", "no"],
        }
    )
    clean, report = validate_table(frame, sch, "t.csv")
    assert clean["ward"].tolist() == ["ICU", OTHER, "ICU", OTHER]
    assert report["columns"]["ward"]["to_other"] == 2 and report["rows_dropped"] == 0
    assert clean["cost"].tolist() == [1.0, 2.0, 100.0, 0.0]
    assert (report["rows_clipped"], report["rows_clipped_to_discovered"]) == (0, 1)  # beyond a discovered bound
    with pytest.raises(ValueError, match="placeholders"):
        validate_table(frame, load_schema(_schema_file(tmp_path), pending=True), "t.csv")


def _clinic_table(n: int = 6000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ward = rng.choice(["ICU", "Ward A", "Ward B"], n, p=[0.5, 0.3, 0.2]).astype(object)
    ward[:3] = "Ward Z"  # a rare ward: never released by name
    return pd.DataFrame(
        {
            "ward": ward,
            "cost": np.round(rng.lognormal(6, 0.8, n), 2),
            "age": rng.integers(18, 95, n),
            "admitted": rng.choice(["no", "yes"], n),
        }
    )


def _clinic_project(tmp_path: Path, epsilon: float, table: pd.DataFrame) -> tuple[Path, Config]:
    """A project releasing the clinic table with AIM, its schema SCHEMA, discovery at `epsilon`."""
    root = make_root(
        tmp_path,
        {
            "generators": ["aim"],
            "weights": {"epochs": 1, "generators": []},
            "privacy": {"discovery_epsilon": epsilon, "row_count_epsilon": 0.05},
        },
    )
    table.to_csv(root / "clinic.csv", index=False)
    (root / "schemas" / "clinic.yaml").write_text(yaml.safe_dump(SCHEMA, sort_keys=False))
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["dataset"] = {"name": "clinic", "source": "clinic.csv", "holdout_fraction": 0.2}
    params = {k: v for k, v in params.items() if k not in ("ppem", "iw_mmd_gan")}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return root, load_params(root / "params.yaml")


@pytest.mark.integration
def test_discover_stage_charges_once_and_later_releases_reuse_it(tmp_path):
    from tasks.discover import discover_stage
    from tasks.validate import validate

    root, config = _clinic_project(tmp_path, 0.3, _clinic_table())
    domain = discover_stage(config, root)
    assert domain["columns"]["ward"] == {"categories": ["ICU", "Ward A", "Ward B"]}
    assert domain["columns"]["age"] == {"lower": 16.0, "upper": 128.0}
    assert domain["columns"]["cost"]["upper"] in (2048.0, 4096.0)
    rows = ledger_rows(root)
    assert [r[1] for r in rows].count("discover") >= 1
    spent = len(rows)
    # a refreshed table: the receipt is reused, nothing spent, the same domain
    _clinic_table(seed=1).to_csv(root / "clinic.csv", index=False)
    assert discover_stage(config, root)["columns"] == domain["columns"]
    assert len(ledger_rows(root)) == spent
    report = validate(config, root)
    assert report["columns"]["ward"]["to_other"] == 3 - 3 + int((_clinic_table(seed=1)["ward"] == "Ward Z").sum())
    validated = pd.read_parquet(root / "data" / "raw" / "clinic" / "validated.parquet")
    assert set(validated["ward"]) <= {"ICU", "Ward A", "Ward B", OTHER}


@pytest.mark.integration
def test_discovery_that_finds_nothing_says_what_to_do(tmp_path):
    from tasks.discover import discover_stage

    root, config = _clinic_project(tmp_path, 0.01, _clinic_table(n=300))
    with pytest.raises(InputError, match="raise privacy.discovery_epsilon") as e:
        discover_stage(config, root)
    assert "ward" in str(e.value)
    spent = len(ledger_rows(root))
    with pytest.raises(InputError):  # the same result, not a second spend
        discover_stage(config, root)
    assert len(ledger_rows(root)) == spent


def test_init_discover_writes_discover_for_the_domain():
    from pipelines.data.scaffold import schema_text

    text = schema_text("clinic", ["ward", "cost"], "clinic.csv", discover=True)
    assert "ward: {kind: FILL_IN, lower: discover, upper: discover, categories: discover}" in text
    assert "categories: FILL_IN" in schema_text("clinic", ["ward"], "clinic.csv")


def test_atoms_discover_finds_the_frequent_exact_values(tmp_path):
    from pipelines.data.discovery import discover
    from pipelines.privacy.noise import NoiseSource

    spec = {
        **SCHEMA,
        "columns": {**SCHEMA["columns"], "cost": {"kind": "continuous", "lower": 0, "upper": 100, "atoms": "discover"}},
    }
    path = _schema_file(tmp_path, spec)
    pending = load_schema(path, pending=True)
    assert pending.column("cost").atoms is None
    plan = [s for s in steps(pending, 0.4, 1e-5) if s.column == "cost"]
    assert [(s.keys, s.delta) for s in plan] == [(("atoms",), DELTA_SHARE * 1e-5 / 2)]
    assert plan[0].epsilon == pytest.approx(0.4 / 3)
    rng = np.random.default_rng(0)
    cost = np.concatenate([np.full(2000, 45.0), np.full(800, 12.5), rng.uniform(0, 100, 3000), [7.0] * 5])
    domain, _ = discover(pd.DataFrame({"cost": cost}), None, pending, plan, NoiseSource(None, 1).streams(True, 0).numpy)
    assert domain["columns"]["cost"] == {"atoms": [12.5, 45.0]}
    filled = load_schema(
        path,
        {"ward": {"categories": ["a"]}, "cost": {"atoms": [12.5, 45.0, 250.0]}, "age": {"lower": 0.0, "upper": 99.0}},
    )
    assert filled.column("cost").atoms == (12.5, 45.0)  # an atom outside the bounds is left out


def test_manifest_states_the_discovered_parts():
    from pipelines.release.manifest import discovery_statement

    domain = {
        "steps": [
            {"column": "ward", "keys": ["categories"], "epsilon": 0.05, "delta": 1e-6},
            {"column": "age", "keys": ["lower", "upper"], "epsilon": 0.05, "delta": 0.0},
        ],
        "ledger_row_ids": [3, 4],
    }
    stated = discovery_statement(domain)
    assert stated["parts"] == ["ward.categories", "age.lower", "age.upper"]
    assert (stated["epsilon"], stated["delta"], stated["ledger_rows"]) == (0.1, 1e-6, [3, 4])
    assert stated["statement"].startswith("ward.categories, age.lower, age.upper were not in the table's documentation")
    assert "ε = 0.1, δ = 1e-06 in all" in stated["statement"]


def test_grid_step_is_the_coarsest_grid_nearly_every_row_lies_on_at_each_magnitude():
    from pipelines.privacy.discovery import band_starts, grid_step, magnitude_bands, step_bins, step_event

    assert step_bins(np.array([0.3, 50.0, 75.0, 1.25, 0.12345, 3.0])).tolist() == [3, 7, 7, 2, 13, 5]
    assert magnitude_bands(np.array([0.0, 1e-7, 0.3, 1.0, 9.99, 10.0, -5.0, 1e30])).tolist() == [
        0,
        0,
        6,
        7,
        7,
        8,
        7,
        24,
    ]
    assert band_starts()[[0, 1, 7]].tolist() == [0.0, 1e-6, 1.0]
    rng = np.random.default_rng(0)
    amounts = 25.0 * rng.integers(40, 1600, 5000)
    found, event = grid_step(amounts, 0.05, 1, rng)
    assert found.step == [[0.0, 25.0]] and event == step_event(0.05, 1) and event.dims == 14 * 25
    hours = np.round(rng.lognormal(1, 0.5, 5000), 1)
    assert grid_step(hours, 0.05, 1, rng)[0].step == [[0.0, 0.1]]
    assert grid_step(rng.uniform(0, 1, 5000), 0.05, 1, rng)[0].step is None  # no grid: no step
    assert grid_step(np.arange(5000.0), 0.05, 1, rng, integer=True)[0].step == [[0.0, 1.0]]
    # children's ages: tenths of a year below 1, whole years from 1 (the band above 100 has no row: its neighbour's)
    ages = np.concatenate([np.round(rng.uniform(0, 1, 2000), 1), rng.integers(1, 90, 12000).astype(float)])
    assert grid_step(ages, 1 / 13, 3, rng)[0].step == [[0.0, 0.1], [1.0, 1.0]]
    from tasks.discover import found_text  # the console's words for it (and for a step of a domain file of one grid)

    assert found_text({"step": [[0.0, 0.1], [1.0, 1.0]], "upper": 64.0}) == "upper 64, step 0.1 below 1, 1 from 1"
    assert found_text({"step": 25.0}) == "step 25" and found_text({"step": None}) == "no step"
    # a band too thin for its own step takes its neighbour's: 300 rows in [0.1, 1) at ε = 0.05 are below the limit
    thin = np.concatenate([np.round(rng.uniform(0.1, 1, 300), 3), rng.integers(1, 90, 5000).astype(float)])
    assert grid_step(thin, 0.05, 1, rng)[0].step == [[0.0, 1.0]]
