"""Operating releases end to end (slow): the ledger on a real PostgreSQL server, scheduled deployments on
a real Prefect server, the Dask task runner, and bit-for-bit `dvc repro` with DVC remote archiving."""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pipelines.config import load_params
from pipelines.io import sha256_file, sha256_tree
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import GaussianEvent
from pipelines.privacy.ledger import Ledger
from support.operations import fits, race
from support.project import STEWARD_KEY, copy_root, env, make_root, run_stages, sh
from support.operations import TINY, api_post, free_port, prefect_server, stop

pytestmark = pytest.mark.slow
DELTA = 1e-5


# -- PostgreSQL ------------------------------------------------------------------------------------


def postgres_binary(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@pytest.fixture(scope="module")
def postgres_url():
    """A throw-away PostgreSQL server on loopback (initdb refuses root: run it as `postgres` or `nobody`)."""
    initdb, pg_ctl = postgres_binary("initdb"), postgres_binary("pg_ctl")
    if not (initdb and pg_ctl):
        if os.environ.get("CI"):
            pytest.fail(
                "PostgreSQL server binaries (initdb, pg_ctl) are missing; .ci/run installs Debian's postgresql package"
            )
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not installed: apt-get install postgresql")
    base = Path(tempfile.mkdtemp(prefix="synthrelease-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = "postgres" if any(p.pw_name == "postgres" for p in pwd.getpwall()) else "nobody"
        shutil.chown(base, user)
        prefix = ["runuser", "-u", user, "--"]
    port, data = free_port(), base / "db"
    run = lambda *cmd: subprocess.run(prefix + list(cmd), check=True, capture_output=True, text=True, timeout=120)
    try:
        run(initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        run(
            pg_ctl,
            "-D",
            str(data),
            "-l",
            str(base / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
            "-o",
            f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={base} -c fsync=off",
        )
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(prefix + [pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_simultaneous_reservations_never_exceed_the_budget_postgres(postgres_url, tmp_path):
    event, budget = GaussianEvent(2.0, 1.0), 6.0
    k = fits(event, budget)
    granted, ledger = race(postgres_url, 8, event, budget)
    assert granted == k and ledger.verify()["rows"] == k
    assert ledger.spent("shared", DELTA) == pytest.approx(epsilon_pld([event] * k, DELTA))
    # the CLI reads the same ledger through the URL in params.yaml
    root = make_root(tmp_path, {"privacy": {"ledger": postgres_url}})
    verified = sh([sys.executable, "-m", "flows.cli", "ledger", "verify"], root, extra_env={"PYTHONPATH": str(root)})
    assert json.loads(verified.stdout)["rows"] == k


# -- a real Prefect server -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory):
    """A real Prefect server without the UI, shared by this module's tests."""
    with prefect_server(tmp_path_factory.mktemp("prefect-home")) as server:
        yield server


def flow_runs(api: str, deployment_id: str) -> list[dict]:
    return api_post(
        api,
        "/flow_runs/filter",
        {"flow_runs": {"deployment_id": {"any_": [deployment_id]}}, "sort": "EXPECTED_START_TIME_ASC", "limit": 50},
    )


def test_scheduled_deployment_runs_twice_then_fails_on_the_budget(prefect_api, tmp_path):
    """An interval deployment served against the server: two runs complete, each with its own release id,
    bundle and artefacts; the third would pass the lifetime budget and fails before training anything. The
    interval is shorter than a run: the deployment's one concurrency slot keeps its runs apart, in start order."""
    root = make_root(tmp_path, TINY)
    run_stages(root, "prepare")
    from tasks.budget import allocation

    parts = allocation(load_params(root / "params.yaml"), root)[0].parts  # prepare's test was paid once, above
    plan = [e for name, part in parts.items() if name != "prepare" for e in part.events]  # each run's (dpwgan's)
    two, three = epsilon_pld(plan * 2, DELTA), epsilon_pld(plan * 3, DELTA)
    params_text = (
        (root / "params.yaml")
        .read_text()
        .replace("lifetime_epsilon: 10.0", f"lifetime_epsilon: {(two + three) / 2:.6f}")
    )
    (root / "params.yaml").write_text(params_text)
    (root / "schedules.yaml").write_text("deployments:\n  - {name: bc-every-10s, params: params.yaml, interval: 10}\n")
    api = prefect_api["url"]
    # the runner asks the server for due runs every 2 s (Prefect's default 10 s is idle time in a test)
    serve_env = {**env(), **prefect_api["env"], "PYTHONPATH": str(root), "PREFECT_RUNNER_POLL_FREQUENCY": "2"}
    log = open(tmp_path / "serve.log", "w")
    serve = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", "serve", "--schedules", "schedules.yaml"],
        cwd=root,
        env=serve_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline, runs = time.monotonic() + 420, []
        while time.monotonic() < deadline:
            deployments = api_post(api, "/deployments/filter", {"deployments": {"name": {"any_": ["bc-every-10s"]}}})
            runs = flow_runs(api, deployments[0]["id"]) if deployments else []
            states = [r["state_type"] for r in runs]
            if states.count("COMPLETED") + states.count("FAILED") + states.count("CRASHED") >= 3:
                break
            assert serve.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            time.sleep(3)
    finally:
        stop(serve)
        log.close()
    finished = sorted(
        (r for r in runs if r["state_type"] in ("COMPLETED", "FAILED", "CRASHED")), key=lambda r: r["start_time"]
    )
    states = [r["state_type"] for r in finished]
    assert states[:2] == ["COMPLETED", "COMPLETED"] and set(states[2:]) == {"FAILED"}, (
        states,
        (tmp_path / "serve.log").read_text()[-3000:],
    )
    done, failed = finished[:2], finished[2]

    release_ids = []
    for run in done:
        artifacts = api_post(api, "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run["id"]]}}})
        by_key = {(a["key"], a["type"]): a for a in artifacts}
        [table] = json.loads(by_key[("breast-cancer-release-table", "table")]["data"])
        assert table["gates"].startswith("ledger:pass") and table["epsilon_remaining"] > 0
        assert ("breast-cancer-release", "markdown") in by_key and ("breast-cancer-budget", "markdown") in by_key
        assert by_key[("breast-cancer-dpwgan-train-progress", "progress")]["data"] == 100.0
        manifest = json.loads((root / "releases/breast_cancer" / table["release_id"] / "manifest.json").read_text())
        assert manifest["privacy"]["run_id"] == f"prefect-{run['id']}"
        release_ids.append(table["release_id"])
        logs = api_post(
            api, "/logs/filter", {"logs": {"flow_run_id": {"any_": [run["id"]]}}, "limit": 200, "sort": "TIMESTAMP_ASC"}
        )
        assert any("train@dpwgan: dpwgan step 1/40" in entry["message"] for entry in logs)
    assert len(set(release_ids)) == 2  # fresh OS-entropy noise: each run its own model and release

    message = failed["state"]["message"]
    assert "privacy budget refused" in message and "spent ε=" in message and "remaining ε=" in message
    ledger = Ledger(str(root / "ledger/privacy.sqlite"))
    rows = ledger.rows("breast_cancer")
    trained = [r for r in rows if r["stage"] != "prepare"]  # prepare's row-loss test: paid once, reused by the runs
    assert sorted({r["run_id"] for r in trained}) == sorted(f"prefect-{r['id']}" for r in done)  # the 3rd: no rows
    per_run = len(plan)  # dpwgan's DP-SGD, its calibration's and its release test's events
    assert [r["status"] for r in trained].count("spent") == 2 * per_run and len(rows) - len(trained) == 2
    assert ledger.verify()["rows"] == 4 * per_run + 2
    assert sorted(p.name for p in (root / "releases/breast_cancer").iterdir()) == sorted(
        release_ids + ["latest.json", "runs"]
    )  # runs/<run-id>/: each release run's public comparison page


# -- Dask ------------------------------------------------------------------------------------------


def test_dask_runner_trains_generators_in_parallel_and_matches_threads(prefect_api, tmp_path):
    """Two generators on a local Dask cluster of 2 workers: their train tasks overlap in time, and with
    the same seeds and steward key the ledger events and released synthetic tables equal the threaded run's."""
    key = tmp_path / "steward.key"  # one steward key for both runs: the same keyed noise
    key.write_text("3a" * 32 + "\n")
    gens = {
        "generators": ["dpwgan", "pearl"],
        # DP-WGAN, submitted first, starts on the worker that ran the stages before it; PEARL's worker runs its
        # first Prefect task and sets up its engine for seconds first: DP-WGAN's training outlasts that setup
        "dpwgan": {"steps": 1000},  # the release ε, shared
        "pearl": {"frequencies": 16, "steps": 300, "batch_size": 64},
        "privacy": {"noise_key_file": str(key)},
    }
    script = (
        "import json\nfrom flows.release import configured_flow\n"
        "print(json.dumps(configured_flow('params.yaml')(params_path='params.yaml')))\n"
    )
    api, out = prefect_api["url"], {}
    for runner in ("dask", "threads"):
        root = make_root(
            tmp_path / runner, {**TINY, **gens, "orchestration": {"task_runner": runner, "dask_workers": 2}}
        )
        (root / "ledger").mkdir()  # one split salt for both roots: the same train/holdout split (tasks/prepare.py)
        (root / "ledger" / "breast_cancer.split-salt").write_text("5a" * 32 + "\n")
        # one torch thread in both runs, as Dask's nanny gives its workers (OMP_NUM_THREADS=1): float sums
        # split over a different number of threads differ in the last bits (docs/operations.md)
        r = sh(
            [sys.executable, "-c", script],
            root,
            extra_env={**prefect_api["env"], "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"},
        )
        index = json.loads(r.stdout.strip().splitlines()[-1])
        bundles = [root / x["path"] for x in index["released"]]
        out[runner] = {
            "rows": Ledger(str(root / "ledger/privacy.sqlite")).rows("breast_cancer"),
            "run_id": json.loads((bundles[0] / "manifest.json").read_text())["privacy"]["run_id"],
            "synthetic": [sha256_file(b / "synthetic.parquet") for b in bundles],
        }
    dask, threads = out["dask"], out["threads"]
    events = lambda rows: sorted((r["stage"], r["status"], r["event_json"]) for r in rows)
    # planned and spent: prepare's row-loss test, dpwgan's DP-SGD + calibration, PEARL's two measurements +
    # calibration, each one's release test
    assert events(dask["rows"]) == events(threads["rows"]) and len(dask["rows"]) == 16
    assert dask["synthetic"] == threads["synthetic"] and len(dask["synthetic"]) == 2
    flow_run_id = dask["run_id"].removeprefix("prefect-")
    tasks = api_post(api, "/task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run_id]}}, "limit": 50})
    spans = {t["name"]: (t["start_time"], t["end_time"]) for t in tasks if t["name"].startswith("train@")}
    assert set(spans) == {"train@dpwgan", "train@pearl"}
    assert max(s for s, _ in spans.values()) < min(e for _, e in spans.values()), spans  # they overlapped


# -- reproducibility and archiving ----------------------------------------------------------------


def test_dvc_repro_at_a_release_commit_is_bit_for_bit_and_archives_restore(released_project, tmp_path, monkeypatch):
    """With a steward key outside the repo, `dvc repro` of the release's commit in a fresh clone retrains
    to the identical synthetic Parquet; bundles go to a DVC remote and come back; a crash while writing a
    bundle leaves none behind and the ledger verifies."""
    root = copy_root(released_project, tmp_path)  # after `dvc repro` (TINY: gates advise)
    synthetic = root / "data/synthetic/breast_cancer/dpwgan.parquet"
    original = sha256_file(synthetic)
    [released] = json.loads((root / "releases/breast_cancer/latest.json").read_text())["released"]
    bundle_dir = root / released["path"]
    assert STEWARD_KEY not in "".join(p.read_text(errors="ignore") for p in bundle_dir.iterdir())  # nor the key
    remote = tmp_path / "dvc-remote"
    sh(["dvc", "remote", "add", "-d", "archive", str(remote)], root)
    sh(["dvc", "push"], root)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "release"], root)

    # archive the bundle, lose it and the cache, restore it
    bundle_hash = sha256_tree(bundle_dir)
    sh(["dvc", "add", str(bundle_dir.relative_to(root))], root)
    sh(["dvc", "push", f"{bundle_dir.relative_to(root)}.dvc"], root)
    shutil.rmtree(bundle_dir)
    shutil.rmtree(root / ".dvc/cache")
    sh(["dvc", "pull", f"{bundle_dir.relative_to(root)}.dvc"], root)
    assert sha256_tree(bundle_dir) == bundle_hash

    # the release's commit in a fresh clone: pull the inputs, retrain and resample from scratch
    clone = tmp_path / "clone"
    sh(["git", "clone", "-q", str(root), str(clone)], tmp_path)
    sh(["dvc", "pull", "code", "params", "prepare", "budget", "baseline"], clone)
    assert not (clone / "models").exists()
    sh(["dvc", "repro", "-f", "--downstream", "train@dpwgan"], clone)  # train, check, evaluate, release
    assert sha256_file(clone / "data/synthetic/breast_cancer/dpwgan.parquet") == original
    model, retrained = root / "models/breast_cancer/dpwgan", clone / "models/breast_cancer/dpwgan"
    for f in model.iterdir():  # identical networks; privacy.json differs only in its run id
        if f.name != "privacy.json":
            assert sha256_file(retrained / f.name) == sha256_file(f), f.name
    events = lambda d: json.loads((d / "privacy.json").read_text())["events"]
    assert events(retrained) == events(model)

    # a crash while writing a bundle: nothing half-written, the chain verifies
    import tasks.release as release_module
    from tasks.common import StageContext

    shutil.rmtree(bundle_dir)
    monkeypatch.setattr(
        release_module, "render_markdown", lambda summary: (_ for _ in ()).throw(OSError("injected fault: disk full"))
    )
    with pytest.raises(OSError, match="disk full"):
        release_module.bundle(StageContext(load_params(root / "params.yaml"), root), "dpwgan")
    assert not bundle_dir.exists()
    assert [p.name for p in bundle_dir.parent.iterdir() if p.name.startswith(".")] == []
    verified = sh(["synthrelease", "ledger", "verify"], root)
    # prepare's row-loss test, DP-SGD + calibration, then the DP release test (check@dpwgan), each planned and spent
    assert json.loads(verified.stdout)["rows"] == 2 * len(events(model)) + 4
