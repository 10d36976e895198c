"""End to end: stage tasks on a temporary root, `dvc repro` in a fresh git repo, the Prefect flow."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pipelines.config import load_params, merged
from pipelines.errors import BudgetExceededError, InputError

PROJECT = Path(__file__).resolve().parents[1]
# No generator pins its ε: every part shares privacy.release_epsilon (1.0 by default; tasks/budget.py). No
# noise_seed (refused in a public release): make_root gives the steward key STEWARD_KEY, so the noise is keyed.
# Every generator a candidate (params/compare.yaml's list; params.yaml lists AIM alone, what select: auto picks)
SMALL = {"generators": list(load_params(PROJECT / "params" / "compare.yaml").generators),
         "dpwgan": {"steps": 40, "batch_size": 64},
         "ppem": {"steps": 10, "hidden": 16, "latent_dim": 8, "gate_bootstrap": 200, "gate_permutations": 200},
         "dp_auto_gan": {"autoencoder_steps": 40, "steps": 40, "batch_size": 64},
         "pearl": {"frequencies": 16, "steps": 20, "batch_size": 64},
         "support_points": {"n_points": 10, "burn_in": 500, "steps": 2000},
         "iw_mmd_gan": {"steps": 50},
         "mst": {"n_bins": 8, "iters": 200},
         "aim": {"n_bins": 8, "max_rounds": 1, "iters": 50, "final_iters": 200},
         # every listed generator trained and published, weights for DP-WGAN's table: what these tests measure
         # (release.select: auto, the default, is tested in tests/test_selection.py)
         # release tests at a small ε each (one per table), and the row-reading gates deciding too (their bits listed
         # in the manifest: the non-default path; the default, advise, is tested in tests/test_public_bundle.py)
         "release": {"select": "all", "test_epsilon": 0.01, "non_dp_gates": "refuse"},
         "weights": {"epochs": 1, "generators": ["dpwgan"]},
         # a cheaper evaluation of the same metrics (the suite's cost is its evaluate stages)
         "evaluate": {"kway_subsets": 20, "mmd_permutations": 50, "attacks": {"bootstrap": 50, "n_attacks": 100}},
         # these tiny models are weak, and MST's was inverted in one run (TSTR AUROC 0.04-0.25): label, do not
         # refuse, so the pipeline's mechanics are tested on every generator (the gate: tests/test_utility_verdict.py)
         "utility_gate": {"inverted": "label", "bootstrap": 50, "baseline_draws": 2}}
# the documented count trusted unchecked, so the ledger holds only the stages these tests count (prepare's check
# of it, a ledger event by default: tests/test_neighbouring.py, tests/test_init.py, tests/test_config.py)
UNCHECKED_COUNT = {"row_count_epsilon": None}
# The DP release test refuses a table with no row near it 1 − test_confidence of the time (the default 0.99 is a
# steward's choice). Keyed noise makes each draw a function of the inputs, and the inputs change with the code: at
# 0.99 an unrelated code edit refuses one table in a hundred (e.g. AIM's in this file's end to end: statistic 0,
# noisy 2,093 > τ 1,590). At 1 − 10⁻⁶ a test's table is refused ~once in 10⁶ draws. These tests lose no power by
# it: at SMALL's ε 0.01 on 455 rows even a copied table (Z ≤ a·n̂ = 455) passed at 0.99; the refusal of one that
# copies is tests/test_release_test.py's. A test may set its own.
RELEASE_TEST_SURE = {"test_confidence": 0.999999}
# The same for the privacy-risk gates in the four-generator end to end: PPEM protects two columns only, so its table
# carries real inference risk on the others (on one draw a point estimate of 0.47, its family-wise 95 % lower bound
# 0.103 against the 0.1 threshold: the draw, not the code, decides). At family-wise 1 − 10⁻⁶ a
# gate refuses only overwhelming evidence. The end to end checks that the gates run and are recorded; their
# decisions are tests/test_privacy_risk.py's.
RISK_GATES_SURE = {"confidence": 0.999999}
# The DVC end to end runs four of the eight generators (every generator's fit, sample, plan and persistence: the
# contract tests, tests/test_generator_contract.py; the stages are the same code for each): DP-WGAN (the weights),
# PPEM (its non-DP gate bit) and the two marginal methods (their many ledger events). All eight would add
# much of the suite's time; these four are the stages' every kind of event and gate.
GENERATORS = ["dpwgan", "ppem", "mst", "aim"]
# breast cancer: d = 31 columns (30 numeric + target). MST plans and records d 1-way, d - 1 selections and d - 1
# 2-way events; AIM plans and records d 1-way events and one ZCDPEvent, the zCDP filter's budget for its adaptive
# rounds (pipelines/marginal/aim.py).
D = 31
TRAIN_ROWS = sorted(  # PPEM: two events, DP-WGAN one, and each one more: its calibration (docs/calibration.md);
    # weight@dpwgan: the DP importance weights
    [("train@dpwgan", "planned")] * 2 + [("train@dpwgan", "spent")] * 2
    + [("train@ppem", "planned")] * 3 + [("train@ppem", "spent")] * 3
    + [("train@mst", "planned")] * (3 * D - 2) + [("train@mst", "spent")] * (3 * D - 2)
    + [("train@aim", "planned")] * (D + 1) + [("train@aim", "spent")] * (D + 1)
    + [("weight@dpwgan", "planned"), ("weight@dpwgan", "spent")]
    + [(f"check@{g}", status) for g in GENERATORS for status in ("planned", "spent")]  # the DP release tests
    + [("prepare", "planned"), ("prepare", "spent")])  # prepare's DP row-loss test (a public rows count: no count)


STEWARD_KEY = "ab" * 32  # the tests' steward key (a file outside the repo): keyed noise, as a steward's release


def make_root(tmp: Path, overrides: dict, git: bool = False) -> Path:
    """A project copy with a small configuration (and, with git=True, a committed DVC repo). Its DP noise is
    keyed by STEWARD_KEY in `tmp/test-steward.key` (privacy.noise_key_file; override it with null for OS
    entropy), the production way to reproducible noise: a public release refuses a noise_seed."""
    root = tmp / "repo"
    for d in ("pipelines", "tasks", "flows", "schemas"):
        shutil.copytree(PROJECT / d, root / d, ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("dvc.yaml", "requirements.lock"):
        shutil.copy(PROJECT / f, root / f)
    key = tmp / "test-steward.key"
    key.write_text(STEWARD_KEY + "\n")
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    params = merged(merged(params, {"privacy": {"noise_key_file": str(key), **UNCHECKED_COUNT},
                                    "release": RELEASE_TEST_SURE}), {**SMALL, **overrides})
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    if git:
        for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"], ["git", "add", "-A"],
                    ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
            sh(cmd, root)
    return root


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{e.get('PATH', '')}"
    e.update(DVC_NO_ANALYTICS="1", GX_ANALYTICS_ENABLED="false", PREFECT_SERVER_ANALYTICS_ENABLED="false",
             DO_NOT_TRACK="1", PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
             GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return e


def sh(cmd: list[str], cwd: Path, check: bool = True, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env={**env(), **(extra_env or {})}, capture_output=True, text=True,
                       timeout=1800)  # a hang guard: the 4-generator repro takes ~5 min on 2 busy cores
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def ledger_rows(root: Path) -> list[tuple]:
    path = root / "ledger" / "privacy.sqlite"
    if not path.exists():
        return []
    with sqlite3.connect(path) as con:
        return con.execute("SELECT seq, stage, status FROM privacy_events ORDER BY seq").fetchall()


def run_stages(root: Path, upto: str) -> None:
    """validate, then prepare (upto "prepare" or "budget"), then the budget stage: the release ε's allocation that
    train@gen / weight@gen of a generator without a pinned ε read (upto "budget")."""
    from tasks.budget import budget
    from tasks.prepare import prepare
    from tasks.validate import validate
    params = load_params(root / "params.yaml")
    validate(params, root)
    if upto in ("prepare", "budget"):
        prepare(params, root)
    if upto == "budget":
        budget(params, root)


def test_budget_refused_before_any_data_is_read(tmp_path, monkeypatch):
    from pipelines.data.encoded import EncodedTable
    from tasks.train import train
    root = make_root(tmp_path, {"privacy": {"lifetime_epsilon": 0.5}, "dpwgan": {"epsilon": 3.0}})  # pinned: no
    run_stages(root, "prepare")                                                                      # allocation read

    def forbidden(*a, **k):
        raise AssertionError("private rows were read before the budget check")
    monkeypatch.setattr(EncodedTable, "__array__", forbidden)
    with pytest.raises(BudgetExceededError, match=r"spent ε=0.04998.*plans ε=3.*remaining ε=0.45"):
        train(load_params(root / "params.yaml"), "dpwgan", "test", root)     # spent: prepare's row-loss test
    assert [stage for _, stage, _ in ledger_rows(root)] == ["prepare", "prepare"]
    assert not (root / "models").exists()


@pytest.mark.slow
def test_bad_source_is_a_clear_error_and_writes_nothing(tmp_path):
    root = make_root(tmp_path, {"dataset": {"source": "missing/table.csv"}})
    with pytest.raises(InputError, match=r"missing/table\.csv.*Fix:"):
        run_stages(root, "validate")
    assert not (root / "data").exists() and not (root / "reports").exists()
    r = sh([sys.executable, "-m", "flows.cli", "stage", "validate"], root, check=False,
           extra_env={"PYTHONPATH": str(root)})
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
    assert 1 / 5 < allocated < 1.0 and 0.999 <= allocation["epsilon_composed"] <= 1.0  # 4 generators + weights
    assert privacy["rows_public"] == privacy["n_rows"] == 455 and "schema rows.count" in privacy["rows_public_source"]
    assert sorted(r[1:] for r in ledger_rows(root)) == TRAIN_ROWS

    checks = json.loads((root / "reports/breast_cancer/dpwgan/checks.json").read_text())
    total = checks["gates"][0]["evidence"]["epsilon_total_pld"]  # all generators' spend, composed (PLD)
    assert checks["passed"] and privacy["epsilon_pld"] < total <= 1.0  # the default release ε: the whole run's spend
    metrics = json.loads((root / "reports/breast_cancer/dpwgan/metrics.json").read_text())
    assert metrics["schema_conformance"] and set(metrics["utility"]["models"]) == {
        "logistic_regression", "random_forest", "gradient_boosting"}
    for entry in metrics["fidelity"].values():
        assert 0.0 <= entry["value"] <= 1.0
    for key in ("dimension_wise", "kway_marginal", "pca_marginal", "wasserstein_score", "target_accuracy"):
        assert key in metrics
    assert metrics["dimension_wise"]["prediction"]["summary"]["n_scored"] >= 1
    assert 0.0 <= metrics["kway_marginal"]["mean_tv"] <= 1.0 and metrics["wasserstein_score"]["score"] <= 1.0
    # evaluate runs before check: the privacy-risk attacks in metrics.json became gates in checks.json
    assert metrics["privacy_risk"]["membership"]["n_members"] == len(holdout) // 2
    assert "classifiers" in metrics["scorecard"]
    assert [g["name"] for g in checks["gates"]][-6:] == ["membership_inference", "exact_copies", "singling_out_risk",
                                                         "linkability_risk", "inference_risk", "utility"]
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
    assert manifest["privacy"]["release_epsilon"] == 1.0 and manifest["privacy"]["epsilon_allocated"]["dpwgan"] == \
        allocated and total <= spent <= 1.0 and manifest["privacy"]["epsilon_lifetime_remaining"] == pytest.approx(
            10.0 - spent, abs=1e-9)
    released = pd.read_parquet(bundle / "synthetic.parquet")  # the 31 columns and the DP importance weights
    assert released.shape == (455, 32) and released.columns[-1] == "weight"  # n_samples: null -> n̂
    assert {f.name for f in bundle.iterdir()} == {"synthetic.parquet", "manifest.json", "report.html", "report.md"}
    public = (bundle / "report.html").read_text()
    assert "pass/fail bit" in public and "INTERNAL" not in public and "Privacy risk" not in public
    steward = root / index["steward_reports"]["dpwgan"]
    assert steward.parent.parent == root / "reports/breast_cancer" and "INTERNAL" in (
        steward / "steward_report.html").read_text()

    again = sh(["dvc", "repro"], root)
    rows = len(TRAIN_ROWS)
    assert "up to date" in again.stdout and len(ledger_rows(root)) == rows  # nothing re-run, nothing spent

    # (a params change that leaves the allocation as it was retrains nothing: tests/test_dvc_params.py)
    # a larger release ε (not in DVC's run cache) would train again: the pre-flight refuses it over the lifetime
    refused = sh(["dvc", "exp", "run", "-S", "privacy.release_epsilon=2.5", "-S", "privacy.lifetime_epsilon=2.0"],
                 root, check=False)
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
        "print(json.dumps({'index': index, 'keys': keys}))\n")
    r = sh([sys.executable, "-c", script], root,
           extra_env={"PYTHONPATH": str(root), "PREFECT_HOME": str(tmp_path / "prefect")})
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert [x["generator"] for x in out["index"]["released"]] == ["aim"] and out["index"]["refused"] == []
    for key in ("breast-cancer-validation", "breast-cancer-budget", "breast-cancer-aim-train",
                "breast-cancer-aim-checks", "breast-cancer-aim-metrics", "breast-cancer-aim-weights",
                "breast-cancer-release"):
        assert key in out["keys"]
    assert not [k for k in out["keys"] if "dpwgan" in k or "ppem" in k]  # no task ran for the other candidates
    assert {stage for _, stage, _ in ledger_rows(root)} == {"prepare", "train@aim", "check@aim", "weight@aim"}
