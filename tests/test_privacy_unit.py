"""The declared privacy unit (pipelines/data/units.py): the schema's `privacy_unit`, contribution bounding by a
keyed rule that depends on each unit's own rows, and the split of whole units."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from pipelines.data import units
from pipelines.data.readers import read_source
from pipelines.data.schema import PrivacyUnit, load_schema
from pipelines.errors import SchemaError

from support.privacy_unit import KEY, VISITS, visits


def schema_file(tmp_path: Path, text: str = VISITS) -> Path:
    (tmp_path / "visits.yaml").write_text(text)
    return tmp_path / "visits.yaml"


def test_the_schema_declares_a_unit_and_a_population(tmp_path):
    sch = load_schema(schema_file(tmp_path))
    assert sch.unit == PrivacyUnit("patient_id", 3) and sch.max_rows == 3 and sch.unit_name == "patient_id<=3"
    assert sch.population == "clinic-patients" and "patient_id" not in sch.names
    assert sch.to_dict()["privacy_unit"] == {"column": "patient_id", "max_rows": 3}
    plain = load_schema(
        schema_file(
            tmp_path,
            VISITS.replace("privacy_unit: {column: patient_id, max_rows: 3}\n", "").replace(
                "population: clinic-patients\n", ""
            ),
        )
    )
    assert plain.unit is None and plain.max_rows == 1 and plain.unit_name == "row" and plain.population is None
    assert plain.hash() != sch.hash()
    for edited, problem in [
        (VISITS.replace("column: patient_id", "column: age"), r"column 'age'.*not a kind: id column"),
        (VISITS.replace("max_rows: 3", "max_rows: 0"), r"max_rows is 0.*integer in \[1, 1000\]"),
        (VISITS.replace("max_rows: 3", "max_rows: 2.5"), r"max_rows is 2.5"),
        (VISITS.replace("max_rows: 3", "max_rows: true"), r"max_rows is True"),
        (VISITS.replace("{column: patient_id, max_rows: 3}", "patient_id"), r"needs exactly the keys"),
        (VISITS.replace("population: clinic-patients", "population: 'a b'"), r"population is 'a b'"),
    ]:
        with pytest.raises(SchemaError, match=rf"visits\.yaml.*{problem}.*Fix: "):
            load_schema(schema_file(tmp_path, edited))


def test_bounding_keeps_at_most_max_rows_per_unit_by_a_keyed_rule(tmp_path):
    frame = visits(40)  # 1..7 rows per patient: 155 rows
    unit = PrivacyUnit("patient_id", 3)
    kept, names, counts = units.bound(frame, unit, ["age", "ward", "readmitted"], KEY)
    per_unit = frame.groupby("patient_id").size()
    assert counts == {"rows_read": 155, "units": 40, "rows_set_aside": int((per_unit - 3).clip(lower=0).sum())}
    assert counts["rows_set_aside"] == 155 - int(per_unit.clip(upper=3).sum()) == 53
    assert list(kept.columns) == ["age", "ward", "readmitted"] and len(kept) == len(names) == 102
    kept_units = pd.Series(names).value_counts()
    assert kept_units.max() == 3 and len(kept_units) == 40
    assert list(kept.index) == sorted(kept.index)  # table order kept
    again = units.bound(frame, unit, ["age", "ward", "readmitted"], KEY)
    assert again[0].equals(kept) and list(again[1]) == list(names)  # deterministic under one key
    other = units.bound(frame, unit, ["age", "ward", "readmitted"], bytes(32))[0]
    assert not other.index.equals(kept.index)  # another key sets other rows aside


def test_a_neighbouring_unit_changes_at_most_max_rows_kept_rows(tmp_path):
    """Add/remove one unit with 7 rows: the bounded tables differ by exactly that unit's 3 kept rows, whatever
    the unit's rows and wherever they sit in the table; every other unit keeps the same rows."""
    frame, unit = visits(30, seed=1), PrivacyUnit("patient_id", 3)
    extra = visits(1, rows_of=lambda i: 7, seed=2).assign(patient_id="NEW")
    for at in (0, 50, len(frame)):
        neighbour = pd.concat([frame.iloc[:at], extra, frame.iloc[at:]], ignore_index=True)
        a, na, _ = units.bound(frame, unit, ["age", "ward", "readmitted"], KEY)
        b, nb, _ = units.bound(neighbour, unit, ["age", "ward", "readmitted"], KEY)
        rows = lambda df, n: sorted(map(tuple, df.assign(u=n).itertuples(index=False)))  # noqa: E731
        mine, theirs = rows(a, na), rows(b, nb)
        added = [r for r in theirs if r not in mine]
        assert len(theirs) == len(mine) + 3 and len(added) == 3 and all(r in theirs for r in mine)


def test_rows_without_a_unit_value_are_each_their_own_unit():
    frame = pd.DataFrame(
        {
            "patient_id": pd.array(["P1", None, None, "", "P1", "P1"], dtype="string"),
            "age": [30, 40, 40, 50, 31, 32],
            "ward": list("abbcab"),
        }
    )
    kept, names, counts = units.bound(frame, PrivacyUnit("patient_id", 1), ["age", "ward"], KEY)
    assert counts == {"rows_read": 6, "units": 4, "rows_set_aside": 2}  # P1 keeps 1 of 3; 3 lone rows kept
    assert len(kept) == 4 and len(set(names)) == 4  # identical lone rows stay apart


def test_the_split_puts_whole_units_on_one_side():
    frame = visits(400, seed=3)
    kept, names, _ = units.bound(frame, PrivacyUnit("patient_id", 3), ["age", "ward", "readmitted"], KEY)
    holdout = units.unit_holdout(names, 0.2, KEY)
    sides = pd.DataFrame({"u": names, "h": holdout}).groupby("u")["h"].nunique()
    assert (sides == 1).all()
    share = pd.DataFrame({"u": names, "h": holdout}).groupby("u")["h"].first().mean()
    assert abs(share - 0.2) < 4 * np.sqrt(0.2 * 0.8 / 400)  # units held out at the fraction
    assert not np.array_equal(holdout, units.unit_holdout(names, 0.2, bytes(32)))


def test_the_reader_reads_the_unit_column_only_when_declared(tmp_path):
    sch = load_schema(schema_file(tmp_path))
    visits(5).to_csv(tmp_path / "t.csv", index=False)
    frame = read_source(str(tmp_path / "t.csv"), sch).frame
    assert list(frame.columns) == ["age", "ward", "readmitted", "patient_id"] and frame["patient_id"].iloc[0] == "P0000"
    plain = load_schema(schema_file(tmp_path, VISITS.replace("privacy_unit: {column: patient_id, max_rows: 3}\n", "")))
    assert "patient_id" not in read_source(str(tmp_path / "t.csv"), plain).frame.columns


def unit_root(
    tmp_path: Path, name: str = "visits", schema: str = VISITS, n_patients: int = 300, overrides: dict | None = None
) -> Path:
    """A project copy releasing a visits table (1..7 rows per patient) with MST only."""
    from support.project import make_root

    source = tmp_path / f"{name}.csv"
    visits(n_patients, seed=7).to_csv(source, index=False)
    root = make_root(
        tmp_path / name,
        {
            "dataset": {"name": name, "source": str(source)},
            "privacy": {"row_count_epsilon": 0.05},
            "generators": ["mst"],
            "weights": {"generators": []},
            **(overrides or {}),
        },
    )
    (root / "schemas" / f"{name}.yaml").write_text(schema.replace("name: visits", f"name: {name}"))
    return root


@pytest.mark.slow
def test_a_release_with_a_unit_spends_every_event_at_the_unit(tmp_path):
    """validate bounds each patient to 3 rows; prepare's row-loss test and noisy count have sensitivity 3; MST's
    ledger events are at the unit (its discrete Gaussians as zCDP k²ρ) and compose to its allocated ε; the same
    release at row level plans less noise."""
    from support.project import run_stages
    from pipelines.config import load_params
    from pipelines.privacy.accountant import epsilon_pld
    from pipelines.privacy.events import DiscreteLaplaceEvent, ZCDPEvent, event_from_dict
    from pipelines.io import read_json
    from tasks import common
    from tasks.train import train

    root = unit_root(tmp_path)
    run_stages(root, "budget")
    config = load_params(root / "params.yaml")
    paths = common.paths(config, root)
    report = read_json(paths.validation_report)
    per_patient = visits(300, seed=7).groupby("patient_id").size()
    assert report["privacy_unit"] == {
        "column": "patient_id",
        "max_rows": 3,
        "rows_read": int(per_patient.sum()),
        "units": 300,
        "rows_set_aside": int((per_patient - 3).clip(lower=0).sum()),
    }
    assert report["rows_in"] == int(per_patient.clip(upper=3).sum())
    led = common.ledger(config, root)
    prepare = [event_from_dict(json.loads(r["event_json"])) for r in led.rows("visits") if r["status"] == "spent"]
    assert [type(e) for e in prepare] == [DiscreteLaplaceEvent, DiscreteLaplaceEvent]
    assert [(e.sensitivity, round(e.epsilon, 12)) for e in prepare] == [(3, 0.05), (3, 0.05)]
    privacy = train(config, "mst", "unit-test", root)
    events = [event_from_dict(e) for e in privacy["events"]]
    assert privacy["unit"] == "patient_id<=3" and any(isinstance(e, ZCDPEvent) for e in events)
    allocated = common.allocated_epsilon(config, "mst", root)
    assert allocated * 0.97 < epsilon_pld(events, config.privacy.delta) <= allocated * (1 + 1e-9)
    assert read_json(paths.prepared / "layout.json")["split"]["rule"].startswith(
        "holdout iff HMAC-SHA256(key, patient_id pseudonym)"
    )


@pytest.mark.slow
def test_a_unit_release_publishes_its_unit_population_and_ungrouped_surrogate_keys(tmp_path):
    """The whole chain on the visits table: the manifest states the unit and the population, the release test is
    charged at Δ = 3·max(a, b), both reports print the unit's sentence, and the published table carries one fresh
    surrogate key per synthetic row (no real id, no grouping)."""
    from support.project import run_stages
    from pipelines.config import load_params
    from pipelines.privacy.events import event_from_dict
    from tasks import common
    from tasks.check import check
    from tasks.evaluate import evaluate
    from tasks.release import release
    from tasks.train import train

    root = unit_root(
        tmp_path,
        overrides={
            "release": {"select": "all", "test_epsilon": 0.1, "non_dp_gates": "advise", "test_confidence": 0.999999}
        },
    )
    run_stages(root, "budget")
    config = load_params(root / "params.yaml")
    train(config, "mst", "unit", root)
    evaluate(config, "mst", root)
    check(config, "mst", root)
    [entry] = release(config, root)["released"]
    bundle = root / entry["path"]
    manifest = json.loads((bundle / "manifest.json").read_text())
    privacy = manifest["privacy"]
    assert privacy["unit"] == {"column": "patient_id", "max_rows": 3}
    assert privacy["population"] == "clinic-patients" and privacy["population_tables"] == ["visits"]
    assert "one patient_id" in privacy["unit_statement"] and "at most 3 rows" in privacy["unit_statement"]
    led = common.ledger(config, root)
    tested = [
        event_from_dict(json.loads(r["event_json"]))
        for r in led.rows("visits")
        if r["stage"] == "check@mst" and r["status"] == "spent"
    ]
    assert [(e.sensitivity, round(e.epsilon, 12)) for e in tested] == [(3 * 4, 0.1)]  # f = 0.2: a, b = 1, 4
    assert 0.99 < privacy["epsilon_dataset_total"] <= privacy["release_epsilon"] == 1.0
    for page in ("report.md", "report.html"):
        assert "one patient_id: ε bounds how much adding or removing every row" in (bundle / page).read_text()
    table = pd.read_parquet(bundle / "synthetic.parquet")
    assert table.columns[0] == "patient_id" and table["patient_id"].is_unique
    assert table["patient_id"].str.startswith("synthetic-").all()


@pytest.mark.integration
def test_two_tables_of_one_population_exhaust_one_budget(tmp_path):
    """visits and labs declare one population: the ledger composes both tables' spends against one lifetime budget,
    so labs' first spend is refused once visits has used it, while each alone would fit."""
    from support.project import run_stages
    from pipelines.errors import BudgetExceededError

    tight = {"privacy": {"row_count_epsilon": 0.05, "lifetime_epsilon": 0.12}}
    visits_root = unit_root(tmp_path, "visits", overrides=tight)
    run_stages(visits_root, "prepare")  # row-loss test + noisy count: 0.1 of 0.12
    labs_root = unit_root(tmp_path, "labs", overrides=tight)
    shared = visits_root / "ledger" / "privacy.sqlite"
    params = yaml.safe_load((labs_root / "params.yaml").read_text())
    params["privacy"]["ledger"] = str(shared)
    (labs_root / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(BudgetExceededError):
        run_stages(labs_root, "prepare")
    alone = unit_root(
        tmp_path, "labs2", schema=VISITS.replace("population: clinic-patients", "population: other"), overrides=tight
    )
    params = yaml.safe_load((alone / "params.yaml").read_text())
    params["privacy"]["ledger"] = str(shared)
    (alone / "params.yaml").write_text(yaml.safe_dump(params))
    run_stages(alone, "prepare")  # another population: its own budget


@pytest.mark.slow
def test_a_private_selection_with_dp_sgd_candidates_is_refused_at_a_unit_before_any_spend(tmp_path):
    """A selection of a secret random number of trials composes its candidates by their Rényi curves, which DP-SGD
    at a unit of several rows does not have here: validate refuses it, naming the key and the fix, and the ledger
    stays empty. `trials: each` (the default) composes its candidates' events, DP-SGD included, and is accepted."""
    from support.project import ledger_rows, run_stages
    from pipelines.errors import InputError

    root = unit_root(
        tmp_path,
        overrides={
            "generators": ["mst", "dpwgan", "private_selection"],
            "private_selection": {"trials": "random"},
            "release": {"select": "private"},
        },
    )
    with pytest.raises(
        InputError,
        match=r"'private_selection' cannot run at the schema's privacy unit "
        r"\(patient_id<=3\).*DP-SGD.*Fix: name only candidates without DP-SGD",
    ):
        run_stages(root, "prepare")
    assert ledger_rows(root) == []


@pytest.mark.parametrize(
    "estimator", ["beta_noised", "output_lapl", pytest.param("priv_mlp", marks=pytest.mark.slow)]
)  # DP-SGD: a minute
def test_the_weights_plan_at_the_unit(estimator):
    """The weight stage's plan at a unit of 3 rows: row-level events whose unit-level ε is the part's ε (within the
    search's tolerance), more noise than the row-level plan; the discriminator's weights spend nothing."""
    from pipelines.data.layout import Block, Layout
    from pipelines.privacy.unit import unit_epsilon
    from pipelines.weights import estimators

    layout = Layout((Block("a", "continuous", 0, 1), Block("b", "binary", 1, 2)))
    settings = {"estimator": estimator, "epochs": 1}
    row = estimators.unit_plan(estimator, settings, layout, 2000, 2000, 1.0, 1e-5)
    unit = estimators.unit_plan(estimator, settings, layout, 2000, 2000, 1.0, 1e-5, 3)
    assert row.max_rows == 1 and unit.max_rows == 3 and unit.unit_events != unit.events
    assert 0.99 < unit_epsilon(unit.events, 1e-5, 3) <= 1.0 + 1e-9
    assert unit_epsilon(row.events, 1e-5, 3) > 1.3  # the row-level plan would overspend the unit
    free = estimators.unit_plan("discriminator", {"estimator": "discriminator"}, layout, 2000, 2000, 1.0, 1e-5, 3)
    assert free.events == [] and free.unit_events == []
