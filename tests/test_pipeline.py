"""End to end: stage tasks on a temporary root, `dvc repro` in a fresh git repo, the Prefect flow."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest

from pipelines.config import load_params
from pipelines.errors import BudgetExceededError, InputError

from support.project import ledger_rows, make_root, run_stages, sh

# As support.project's RELEASE_TEST_SURE, for the privacy-risk gates in the three-generator end to end: PPEM protects
# two columns only, so its table carries real inference risk on the others (on one draw a point estimate of 0.47, its
# family-wise 95 % lower bound 0.103 against the 0.1 threshold: the draw, not the code, decides). At family-wise 1 −
# 10⁻⁶ a gate refuses only overwhelming evidence. The end to end checks that the gates run and are recorded; their
# decisions are tests/test_privacy_risk.py's.
RISK_GATES_SURE = {"confidence": 0.999999}
# The DVC end to end runs three of the eight generators (every generator's fit, sample, plan and persistence: the
# contract tests, tests/test_generator_contract.py; the stages are the same code for each): DP-WGAN (the weights),
# PPEM (its non-DP gate bit) and AIM (a marginal method's many ledger events; MST's: tests/test_aim_mst.py). All
# eight would add much of the suite's time; these three are the stages' every kind of event and gate.
GENERATORS = ["dpwgan", "ppem", "aim"]
# breast cancer: d = 31 columns (30 numeric + target). AIM plans and records d 1-way events and one ZCDPEvent, the
# zCDP filter's budget for its adaptive rounds (pipelines/marginal/aim.py).
D = 31
TRAIN_ROWS = sorted(  # PPEM: two events, DP-WGAN one, and each one more: its calibration (docs/calibration.md);
    # weight@dpwgan: the DP importance weights
    [("train@dpwgan", "planned")] * 2
    + [("train@dpwgan", "spent")] * 2
    + [("train@ppem", "planned")] * 3
    + [("train@ppem", "spent")] * 3
    + [("train@aim", "planned")] * (D + 1)
    + [("train@aim", "spent")] * (D + 1)
    + [("weight@dpwgan", "planned"), ("weight@dpwgan", "spent")]
    + [(f"check@{g}", status) for g in GENERATORS for status in ("planned", "spent")]  # the DP release tests
    + [("prepare", "planned"), ("prepare", "spent")]
)  # prepare's DP row-loss test (a public rows count: no count)


@pytest.mark.slow
def test_budget_refused_before_any_data_is_read(tmp_path, monkeypatch):
    from pipelines.data.encoded import EncodedTable
    from tasks.train import train

    root = make_root(tmp_path, {"privacy": {"lifetime_epsilon": 0.5}, "dpwgan": {"epsilon": 3.0}})  # pinned: no
    run_stages(root, "prepare")  # allocation read

    def forbidden(*a, **k):
        raise AssertionError("private rows were read before the budget check")

    monkeypatch.setattr(EncodedTable, "__array__", forbidden)
    with pytest.raises(BudgetExceededError, match=r"spent ε=0.04998.*plans ε=3.*remaining ε=0.45"):
        train(load_params(root / "params.yaml"), "dpwgan", "test", root)  # spent: prepare's row-loss test
    assert [stage for _, stage, _ in ledger_rows(root)] == ["prepare", "prepare"]
    assert not (root / "models").exists()


@pytest.mark.slow
def test_bad_source_is_a_clear_error_and_writes_nothing(tmp_path):
    root = make_root(tmp_path, {"dataset": {"source": "missing/table.csv"}})
    with pytest.raises(InputError, match=r"missing/table\.csv.*Fix:"):
        run_stages(root, "validate")
    assert not (root / "data").exists() and not (root / "reports").exists()
    r = sh(
        [sys.executable, "-m", "flows.cli", "stage", "validate"], root, check=False, extra_env={"PYTHONPATH": str(root)}
    )
    assert r.returncode == 2 and "missing/table.csv" in r.stderr and "Fix:" in r.stderr


def test_extra_column_names_file_column_and_fix(tmp_path):
    root = make_root(tmp_path, {"dataset": {"source": "raw.csv"}})
    from pipelines.data.readers import read_table
    from pipelines.data.schema import load_schema

    raw = read_table("bundled:breast_cancer", load_schema(root / "schemas" / "breast_cancer.yaml"))[0]
    raw.assign(patient_name="x").to_csv(root / "raw.csv", index=False)
    with pytest.raises(InputError, match=r"raw\.csv.*patient_name.*Fix:"):
        run_stages(root, "validate")


@pytest.mark.slow
def test_dvc_repro_end_to_end(tmp_path):
    root = make_root(tmp_path, {"generators": GENERATORS, "risk_gates": RISK_GATES_SURE}, git=True)
    sh(["dvc", "repro"], root)

    report = json.loads((root / "reports/breast_cancer/validation.json").read_text())
    assert report["rows_in"] == 569 and report["rows_out"] == 569 and report["gx"]["success"]
    prepared = root / "data/prepared/breast_cancer"
    train, holdout = pd.read_parquet(prepared / "train.parquet"), pd.read_parquet(prepared / "holdout.parquet")
    # keyed split: the holdout is Binomial(569, 0.2) (sd 9.5; ±4 sd); n̂ = round(569·0.8) from the schema's rows
    assert len(train) + len(holdout) == 569 and abs(len(holdout) - 0.2 * 569) <= 38
    assert pd.read_parquet(prepared / "train_encoded.parquet").shape == (len(train), 31)
    layout = json.loads((prepared / "layout.json").read_text())
    assert layout["rows_public"] == 455 and "569" in layout["rows_public_source"]

    privacy = json.loads((root / "models/breast_cancer/dpwgan/privacy.json").read_text())
    allocation = json.loads((root / "data/allocation/breast_cancer/release.json").read_text())
    allocated = allocation["parts"]["dpwgan"]["epsilon"]  # one share of the release ε, calibrated (scale > 1)
    assert 0.99 * allocated <= privacy["epsilon_pld"] <= allocated and privacy["epsilon_rdp"] >= privacy["epsilon_pld"]
    assert 1 / 4 < allocated < 1.0 and 0.999 <= allocation["epsilon_composed"] <= 1.0  # 3 generators + weights
    assert privacy["rows_public"] == privacy["n_rows"] == 455 and "schema rows.count" in privacy["rows_public_source"]
    assert sorted(r[1:] for r in ledger_rows(root)) == TRAIN_ROWS

    checks = json.loads((root / "reports/breast_cancer/dpwgan/checks.json").read_text())
    total = checks["gates"][0]["evidence"]["epsilon_total_pld"]  # all generators' spend, composed (PLD)
    assert checks["passed"] and privacy["epsilon_pld"] < total <= 1.0  # the default release ε: the whole run's spend
    metrics = json.loads((root / "reports/breast_cancer/dpwgan/metrics.json").read_text())
    assert metrics["schema_conformance"] and set(metrics["utility"]["models"]) == {
        "logistic_regression",
        "random_forest",
        "gradient_boosting",
    }
    for entry in metrics["fidelity"].values():
        assert 0.0 <= entry["value"] <= 1.0
    for key in ("dimension_wise", "kway_marginal", "pca_marginal", "wasserstein_score", "target_accuracy"):
        assert key in metrics
    assert metrics["dimension_wise"]["prediction"]["summary"]["n_scored"] >= 1
    assert 0.0 <= metrics["kway_marginal"]["mean_tv"] <= 1.0 and metrics["wasserstein_score"]["score"] <= 1.0
    # evaluate runs before check: the privacy-risk attacks in metrics.json became gates in checks.json
    assert metrics["privacy_risk"]["membership"]["n_members"] == len(holdout) // 2
    assert "classifiers" in metrics["scorecard"]
    assert [g["name"] for g in checks["gates"]][-6:] == [
        "membership_inference",
        "exact_copies",
        "singling_out_risk",
        "linkability_risk",
        "inference_risk",
        "utility",
    ]
    for png in metrics["plots"]:  # declared as DVC plots of the evaluate stage
        assert (root / "reports/breast_cancer/dpwgan" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert metrics["hashes"]["schema"] == report["hashes"]["schema"]

    ppem = json.loads((root / "reports/breast_cancer/ppem/checks.json").read_text())
    lmdp = {g["name"]: g for g in ppem["gates"]}["alpha_lmdp"]
    assert ppem["passed"] and lmdp["evidence"]["ksd"]["p_value"] <= 0.05 and "p_value" in lmdp["evidence"]["mmd"]

    index = json.loads((root / "releases/breast_cancer/latest.json").read_text())
    assert [r["generator"] for r in index["released"]] == list(load_params(root / "params.yaml").generators)
    assert sorted(r["generator"] for r in index["released"]) == sorted(GENERATORS)  # release.select: all
    assert index["refused"] == [] and {r["utility_verdict"] for r in index["released"]} <= {"fit", "weak", "inverted"}
    by = {r["generator"]: r for r in index["released"]}
    ppem_manifest = json.loads((root / by["ppem"]["path"] / "manifest.json").read_text())
    assert any("'alpha_lmdp' gate" in line for line in ppem_manifest["computed_from_real_data_outside_dp_guarantee"])
    assert {"name": "alpha_lmdp", "passed": True, "data_dependent": True} in ppem_manifest["gates"]  # the bit only
    bundle = root / by["dpwgan"]["path"]
    manifest = json.loads((bundle / "manifest.json").read_text())
    tested = {g["name"]: g for g in checks["gates"]}["release_test"]["evidence"]  # the DP release test's rows
    assert manifest["privacy"]["ledger_rows"] == privacy["ledger_row_ids"] + tested["ledger_row_ids"]
    assert manifest["privacy"]["rows_public"] == 455 and "569" in manifest["privacy"]["rows_public_source"]
    assert manifest["privacy"]["delta"] == 1e-5 and "torch" in manifest["libraries"]
    spent = manifest["privacy"]["epsilon_lifetime_spent"]  # at release: the weights' events too, after check@dpwgan
    assert (
        manifest["privacy"]["release_epsilon"] == 1.0
        and manifest["privacy"]["epsilon_allocated"]["dpwgan"] == allocated
        and total <= spent <= 1.0
        and manifest["privacy"]["epsilon_lifetime_remaining"] == pytest.approx(10.0 - spent, abs=1e-9)
    )
    released = pd.read_parquet(bundle / "synthetic.parquet")  # the 31 columns and the DP importance weights
    assert released.shape == (455, 32) and released.columns[-1] == "weight"  # n_samples: null -> n̂
    assert {f.name for f in bundle.iterdir()} == {
        "synthetic.parquet",
        "manifest.json",
        "report.html",
        "report.md",
        "synthetic_marginals.png",
    }
    public = (bundle / "report.html").read_text()
    assert "pass/fail bit" in public and "INTERNAL" not in public and "Privacy risk" not in public
    steward = root / index["steward_reports"]["dpwgan"]
    assert (
        steward.parent.parent == root / "reports/breast_cancer"
        and "INTERNAL" in (steward / "steward_report.html").read_text()
    )

    again = sh(["dvc", "repro"], root)
    rows = len(TRAIN_ROWS)
    assert "up to date" in again.stdout and len(ledger_rows(root)) == rows  # nothing re-run, nothing spent

    # (a params change that leaves the allocation as it was retrains nothing: tests/test_dvc_params.py)
    # a larger release ε (not in DVC's run cache) would train again: the pre-flight refuses it over the lifetime
    refused = sh(
        ["dvc", "exp", "run", "-S", "++privacy.release_epsilon=2.5", "-S", "privacy.lifetime_epsilon=2.0"],
        root,
        check=False,
    )
    assert refused.returncode != 0 and "remaining" in refused.stdout + refused.stderr
    assert len(ledger_rows(root)) == rows
    verified = sh(["synthrelease", "ledger", "verify"], root)
    assert json.loads(verified.stdout)["rows"] == rows


@pytest.mark.slow
def test_prefect_flow_publishes_release_and_artifacts(tmp_path):
    """The flow under the default `release.select: auto`: of the eight candidates it trains, weights and publishes
    AIM alone, as `dvc repro` does (the budget task's selection; every generator in one flow run: the Dask test)."""
    root = make_root(tmp_path, {"release": {"select": "auto"}, "weights": {"generators": "selected"}})
    script = (
        "import json\n"
        "from flows.release import release_flow\n"
        "from prefect.client.orchestration import get_client\n"
        "index = release_flow(params_path='params.yaml')\n"
        "async def keys():\n"
        "    async with get_client() as c:\n"
        "        r = await c._client.post('/artifacts/filter', json={'limit': 200, 'offset': 0, 'sort': 'KEY_ASC',\n"
        "            'artifacts': {}, 'flow_runs': {}, 'task_runs': {}})\n"
        "        return sorted({a['key'] for a in r.json() if a['key']})\n"
        "import asyncio\n"
        "keys = asyncio.run(keys())\n"
        "print(json.dumps({'index': index, 'keys': keys}))\n"
    )
    r = sh(
        [sys.executable, "-c", script],
        root,
        extra_env={"PYTHONPATH": str(root), "PREFECT_HOME": str(tmp_path / "prefect")},
    )
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert [x["generator"] for x in out["index"]["released"]] == ["aim"] and out["index"]["refused"] == []
    for key in (
        "breast-cancer-validation",
        "breast-cancer-budget",
        "breast-cancer-aim-train",
        "breast-cancer-aim-checks",
        "breast-cancer-aim-metrics",
        "breast-cancer-aim-weights",
        "breast-cancer-release",
    ):
        assert key in out["keys"]
    assert not [k for k in out["keys"] if "dpwgan" in k or "ppem" in k]  # no task ran for the other candidates
    assert {stage for _, stage, _ in ledger_rows(root)} == {"prepare", "train@aim", "check@aim", "weight@aim"}
