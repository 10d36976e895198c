"""benchmarks/product.py: the harness that scores what a release publishes through the product path."""

from __future__ import annotations

import pytest

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from benchmarks import product


def test_overrides_merge_deeply_and_parse_yaml_values():
    base = {"privacy": {"delta": 1e-5, "release_epsilon": 1.0}, "generators": ["aim", "mst"]}
    out = product.merged(base, product.assignment("privacy.release_epsilon=1.2"))
    out = product.merged(out, product.assignment("generators=[aim]"))
    out = product.merged(out, product.assignment("aim.max_rounds=40"))
    assert out == {"privacy": {"delta": 1e-5, "release_epsilon": 1.2}, "generators": ["aim"], "aim": {"max_rounds": 40}}
    assert base["privacy"]["release_epsilon"] == 1.0  # the base is not modified
    assert product.assignment("weights.generators=[]") == {"weights": {"generators": []}}


def test_each_seed_is_its_own_steward_key():
    keys = [product.noise_key(s) for s in (0, 1, 2)]
    assert len(set(keys)) == 3 and all(len(k) == 64 for k in keys)
    assert product.noise_key(0) == "fbfc8982605c5451573c774311906488eb097a963ec38be54ecb5065bddba194"


@pytest.mark.integration
def test_project_is_a_committed_repo_with_the_table_schema_and_key(tmp_path):
    table = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "x"]})
    root = product.project(tmp_path, "toy", "columns: {}\n", table, {"dataset": {"holdout_fraction": 0.2}}, 5, tmp_path)
    params = yaml.safe_load((root / "params.yaml").read_text())
    assert params["dataset"] == {"holdout_fraction": 0.2, "name": "toy", "source": "source/toy.parquet"}
    key = Path(params["privacy"]["noise_key_file"])
    assert key.read_text().strip() == product.noise_key(5) and not key.is_relative_to(root)
    pd.testing.assert_frame_equal(pd.read_parquet(root / "source" / "toy.parquet"), table)
    assert (root / "schemas" / "toy.yaml").read_text() == "columns: {}\n"
    assert (root / ".dvc").is_dir() and (root / "dvc.yaml").exists() and (root / "pipelines").is_dir()


@pytest.mark.integration
def test_a_code_list_the_schema_reads_is_copied_next_to_it(tmp_path):
    (tmp_path / "lists" / "codes").mkdir(parents=True)
    (tmp_path / "lists" / "codes" / "dx.txt").write_text("a\nb\n")
    text = "columns: {dx: {kind: categorical, categories_file: codes/dx.txt}}\n"
    root = product.project(tmp_path / "p", "toy", text, pd.DataFrame({"dx": ["a"]}), {}, 0, tmp_path / "lists")
    assert (root / "schemas" / "codes" / "dx.txt").read_text() == "a\nb\n"


def test_published_tables_are_read_from_the_release_index(tmp_path):
    rel, sel = tmp_path / "releases" / "toy" / "aim-1", tmp_path / "releases" / "toy" / "private_selection-1"
    for d, drawn in ((rel, "aim"), (sel, "pearl")):  # the manifest's drawn_by: the generator, or the winner
        d.mkdir(parents=True)
        (d / "manifest.json").write_text(json.dumps({"drawn_by": drawn}))
    for gen, word, assoc in (
        ("aim", "fit", {"features_worse_than_baseline": 0}),
        ("private_selection", "weak", {"skipped": "no categorical target"}),
    ):
        (tmp_path / "reports" / "toy" / gen).mkdir(parents=True)  # the steward report's verdict of the table
        (tmp_path / "reports" / "toy" / gen / "metrics.json").write_text(
            json.dumps({"utility_verdict": {"verdict": word, "associations": assoc}})
        )
    (tmp_path / "releases" / "toy" / "latest.json").write_text(
        json.dumps(
            {
                "released": [
                    {"generator": "aim", "path": "releases/toy/aim-1", "epsilon_generator": 0.899631},
                    {
                        "generator": "private_selection",
                        "path": "releases/toy/private_selection-1",
                        "epsilon_generator": 0.8,
                    },
                ]
            }
        )
    )
    assert product.published(tmp_path, "toy") == [
        {
            "generator": "aim",
            "path": rel / "synthetic.parquet",
            "drawn_by": None,
            "epsilon_generator": 0.8996,
            "verdict": "fit",
            "distorted": 0,
        },
        {
            "generator": "private_selection",
            "path": sel / "synthetic.parquet",
            "drawn_by": "pearl",
            "epsilon_generator": 0.8,
            "verdict": "weak",
            "distorted": None,
        },
    ]


def test_summary_gives_mean_and_spread_over_seeds():
    def row(seed, two, gbm):
        return {
            "seed": seed,
            "generator": "aim",
            "drawn_by": None,
            "1-way": 990.0,
            "2-way": two,
            "3-way": 920.0,
            "tstr_auroc": {"logistic_regression": 0.8, "random_forest": 0.8, "gradient_boosting": gbm},
            "trtr_auroc": {"logistic_regression": 0.9, "random_forest": 0.9, "gradient_boosting": 0.92},
            "detection_auc": 0.8,
            "detection_auc_declared": 0.7,
            "repro_s": 300.0,
        }

    text = product.summary([row(0, 958.0, 0.86), row(1, 962.0, 0.88), {"seed": 2, "error": "dvc repro exited 1"}])
    lines = text.splitlines()
    assert lines[2] == (
        "| aim | 0, 1 | 990.0 ± 0.0 | 960.0 ± 2.8 | 920.0 ± 0.0 | 0.800 / 0.800 / 0.870 | 0.800 / 0.700 | 300 |"
    )
    assert lines[3].startswith("| train on real (reference) | | 1000 | 1000 | 1000 | 0.900 / 0.900 / 0.920")
    assert lines[4] == "| seed 2 | failed: dvc repro exited 1 | | | | | | |"


def test_the_independent_detector_reads_the_declared_form_and_names_the_column_that_gives_rows_away():
    rng = np.random.default_rng(0)
    n = 2000
    real = pd.DataFrame(
        {
            "x": rng.normal(0, 1, n),
            "c": rng.choice(["a", "b", None], n),
            "d": pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D"),
        }
    )
    same = real.sample(frac=1.0, random_state=1).reset_index(drop=True)
    shifted = same.assign(x=same["x"].round(1))  # published on a grid the real values are not on
    out = product.declared_detection(real, same, ["x", "c", "d"], ["d"], 0)
    assert out["auc"] < 0.55  # the same rows: no better than chance
    away = product.declared_detection(real, shifted, ["x", "c", "d"], ["d"], 0)
    assert away["auc"] > 0.9 and next(iter(away["columns"])) == "x"


def test_a_derived_column_is_scored_in_its_declared_place(adult_schema, adult_raw):
    """Adult's education_num is derived (never modelled): the harness scores it where the schema declares it, from
    the modelled rows (`frontier.measure` does it for the harness), so the published table is scored on the same 15
    columns as before it was derived."""
    from benchmarks.frontier import scored, scoring_schema

    scoring = scoring_schema(adult_schema)
    assert scoring.names == adult_schema.declared_names and not scoring.derived
    assert scoring.column("education_num").kind == "integer" and scoring_schema(scoring) is scoring
    rows = scored(adult_raw[adult_schema.names].head(500), adult_schema)
    pd.testing.assert_frame_equal(rows, adult_raw.head(500))  # the real rows hold the documented mapping
