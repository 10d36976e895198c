"""`synthrelease score`: a published synthetic table (declared columns: real nulls, surrogate identifiers, a weight
column) scored against the steward's real rows gets the fidelity and utility figures evaluate@gen's metrics.json
holds for that table (pipelines/evaluation/score.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flows.cli import main
from pipelines.config import load_params
from pipelines.data.declared import to_published
from pipelines.data.schema import NULL_TEXT, load_schema
from pipelines.errors import InputError
from pipelines.evaluation import score
from pipelines.reporting.report_words import fmt
from pipelines.io import write_parquet
from support.project import make_root, run_stages

FIGURES = ("fidelity", "fidelity_summary", "utility", "utility_verdict")  # metrics.json's keys the score holds
CLINIC = "  clinic: {kind: categorical, categories: [north, south, east], missing: allowed}\n"


def cohort_schema(text: str) -> str:
    """The breast cancer schema with a record identifier and a categorical column whose nulls are data."""
    return text.replace("columns:\n", "columns:\n  mrn: {kind: id}\n" + CLINIC)


def with_clinic(raw: pd.DataFrame) -> pd.DataFrame:
    """`raw` with an identifier and a clinic, null on every fifth row."""
    rng = np.random.default_rng(5)
    clinic = pd.Series(rng.choice(["north", "south", "east"], len(raw)), dtype="str").mask(np.arange(len(raw)) % 5 == 0)
    out = raw.copy()
    out.insert(0, "mrn", [f"MRN-{700000 + i}" for i in range(len(raw))])
    out.insert(1, "clinic", clinic.to_numpy())
    return out


def test_the_published_columns_are_checked_and_mapped_back(tmp_path: Path, bc_raw: pd.DataFrame) -> None:
    (tmp_path / "c.yaml").write_text(
        cohort_schema((Path(__file__).parents[1] / "schemas/breast_cancer.yaml").read_text())
    )
    sch = load_schema(tmp_path / "c.yaml")
    modelled = with_clinic(bc_raw).drop(columns="mrn").fillna({"clinic": NULL_TEXT})
    published = to_published(modelled.assign(weight=0.5), sch)
    assert published["mrn"].str.startswith("synthetic-").all() and published["clinic"].isna().sum() == 114
    back = score.modelled_table(published, sch, "s.parquet")
    pd.testing.assert_frame_equal(back, modelled[sch.names], check_dtype=False)  # no id, no weight, the null category
    with pytest.raises(
        InputError,
        match=r"file s\.parquet, column 'clinic': the published table has no such "
        r"column.*Fix: score the release's synthetic\.parquet unmodified",
    ):
        score.modelled_table(published.drop(columns="clinic"), sch, "s.parquet")
    with pytest.raises(InputError, match=r"column 'ward': .*does not declare.*Fix: drop the column"):
        score.modelled_table(published.assign(ward=1), sch, "s.parquet")
    assert list(score.modelled_table(published.drop(columns=["mrn", "weight"]), sch, "s.parquet")) == sch.names


def test_a_bundle_of_another_data_set_or_schema_is_refused(tmp_path: Path, bc_raw: pd.DataFrame, bc_schema) -> None:
    bundle = tmp_path / "releases/breast_cancer/mst-0123"
    bundle.mkdir(parents=True)
    write_parquet(bundle / "synthetic.parquet", bc_raw)
    manifest = {"dataset": "breast_cancer", "hashes": {"schema": bc_schema.hash()}}
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    assert score.published_file(bundle, bc_schema, "breast_cancer") == bundle / "synthetic.parquet"
    with pytest.raises(
        InputError,
        match=r"released for data set 'breast_cancer', not 'adult'.*Fix: pass the params "
        r"file of data set 'breast_cancer'",
    ):
        score.published_file(bundle, bc_schema, "adult")
    (bundle / "manifest.json").write_text(json.dumps({**manifest, "hashes": {"schema": "sha256:other"}}))
    with pytest.raises(InputError, match=r"released under another schema \(sha256:other"):
        score.published_file(bundle / "synthetic.parquet", bc_schema, "breast_cancer")
    (tmp_path / "table.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match=r"file .*table\.csv: not a readable Parquet table"):
        score.published_file(tmp_path / "table.csv", bc_schema, "breast_cancer")
    with pytest.raises(InputError, match=r"no such synthetic table.*Fix: pass a published synthetic\.parquet"):
        score.published_file(tmp_path / "nothing", bc_schema, "breast_cancer")


@pytest.mark.slow
def test_scoring_a_release_bundle_gives_evaluates_figures(
    tmp_path: Path, bc_raw: pd.DataFrame, monkeypatch, capsys
) -> None:
    from tasks.baseline import baseline
    from tasks.check import check
    from tasks.evaluate import evaluate
    from tasks.release import published_table, release
    from tasks.train import train

    root = make_root(
        tmp_path,
        {
            "dataset": {"source": "raw.csv"},
            "generators": ["mst"],
            "weights": {"generators": []},
            "release": {"select": "all", "non_dp_gates": "advise"},
            "evaluate": {"kway_subsets": 10, "attacks": {"n_attacks": 100}},
        },
    )
    schema_file = root / "schemas" / "breast_cancer.yaml"
    schema_file.write_text(cohort_schema(schema_file.read_text()))
    with_clinic(bc_raw).to_csv(root / "raw.csv", index=False)
    run_stages(root, "budget")
    params = load_params(root / "params.yaml")
    baseline(params, root)
    train(params, "mst", "score", root)
    evaluate(params, "mst", root)
    check(params, "mst", root)
    [entry] = release(params, root)["released"]
    bundle = root / entry["path"]
    published = pd.read_parquet(bundle / "synthetic.parquet")
    assert published["mrn"].str.startswith("synthetic-").all() and 0 < published["clinic"].isna().sum()
    monkeypatch.chdir(root)

    assert main(["score", "--synthetic", str(bundle), "--json", "score.json"]) == 0  # the bundle's directory
    out, err = capsys.readouterr()
    scored = json.loads((root / "score.json").read_text())
    recorded = json.loads((root / "reports/breast_cancer/mst/metrics.json").read_text())
    for key in FIGURES:  # the known answer: what evaluate measured on the table before it was published
        assert scored[key] == recorded[key], key
    assert scored["n_synthetic"] == scored["n_measured"] == len(published) == recorded["n_synthetic"]
    assert scored["fidelity"]["clinic"]["metric"] == "tv" and "mrn" not in scored["fidelity"]
    header, *rows = out.splitlines()
    shown = dict(re.split(r"\s{2,}", row, maxsplit=1) for row in rows)  # figure, two spaces or more, value
    assert header.split() == ["figure", "value"] and shown["utility verdict"] == recorded["utility_verdict"]["verdict"]
    assert shown["fidelity: max W1, numeric columns (schema-scaled)"] == fmt(recorded["fidelity_summary"]["max_w1"])
    assert shown["utility: random_forest TSTR AUROC"] == fmt(recorded["utility"]["models"]["random_forest"]["tstr"])
    assert "steward-only" in err and "DP guarantee" in err

    # the same rows with a weight column, outside any bundle, and nothing written without --json
    weighted = tmp_path / "weighted.parquet"
    published_table(
        weighted,
        root / "data/synthetic/breast_cancer/mst.parquet",
        load_schema(schema_file),
        np.linspace(0.5, 1.5, len(published)),
    )
    before = sorted(p for p in root.rglob("*") if p.is_file())
    assert main(["score", "--synthetic", str(weighted)]) == 0
    assert sorted(p for p in root.rglob("*") if p.is_file()) == before
    assert capsys.readouterr().out == out

    # half the rows: another synthetic row count than the baseline stage's cache, whose real side is then computed
    half = tmp_path / "half.parquet"
    write_parquet(half, published.iloc[: len(published) // 2])
    assert main(["score", "--synthetic", str(half), "--json", str(tmp_path / "half.json")]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "half.json").read_text())["n_measured"] == len(published) // 2

    write_parquet(tmp_path / "short.parquet", published.drop(columns="clinic"))
    assert main(["score", "--synthetic", str(tmp_path / "short.parquet")]) == 2
    err = capsys.readouterr().err
    assert "short.parquet, column 'clinic': the published table has no such column" in err and "Fix:" in err
