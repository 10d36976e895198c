"""Operating releases: steward-keyed DP noise, privacy accounting under faults and concurrency
(SQLite here; PostgreSQL and the scheduled flow in test_scheduling.py), task-runner and schedule config."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from pathlib import Path

import pytest
import yaml

from pipelines.config import merged, parse_params, read_params
from pipelines.errors import BudgetExceededError, InputError
from pipelines.privacy import noise
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import GaussianEvent, event_from_dict
from pipelines.privacy.ledger import Ledger
from sections import configured
from support.project import make_root, run_stages
from support.operations import fits, race

KEY = "ab" * 32
DELTA = 1e-5
# no steward key (OS-entropy noise, plain ledger chain): these tests open the ledger without one
FAST = {
    "generators": ["dpwgan"],
    "dpwgan": {"epsilon": 3.0, "steps": 40, "batch_size": 64},
    "weights": {"generators": []},
    "privacy": {"noise_key_file": None},
}


# -- steward-keyed noise ---------------------------------------------------------------------------


def _material(
    key: bytes | None, data: str = "d" * 64, stage: str = "bc/train@g", params: str = "p" * 64, context: str = "g:noise"
) -> bytes:
    return noise.NoiseSource.keyed(key, lambda: data, stage, params).material(context)


def test_keyed_noise_key_is_the_hmac_of_data_stage_params_and_context():
    key = bytes.fromhex(KEY)
    message = noise.canonical_json(
        {"stage": "bc/train@g", "inputs": {"data": "d" * 64}, "facts": {"params": "p" * 64}, "context": "g:noise"}
    )
    expected = hmac.new(key, noise.DOMAIN + b"\x1f" + message.encode(), hashlib.sha256).digest()
    assert _material(key) == _material(key) == expected
    others = {
        _material(bytes.fromhex("cd" * 32)),
        _material(key, data="e" * 64),
        _material(key, stage="bc/train@h"),
        _material(key, params="q" * 64),
        _material(key, context="g:poisson"),
    }
    assert expected not in others and len(others) == 5  # every input changes the noise
    assert _material(None) != _material(None)  # no key: fresh OS entropy each time
    assert noise.NoiseSource().material("g:noise") != noise.NoiseSource().material("g:noise")


def test_noise_key_sources_and_refusals(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.delenv(noise.KEY_ENV, raising=False)
    assert noise.load_noise_key(None, repo) is None
    outside = tmp_path / "steward.key"
    outside.write_text(KEY + "\n")
    assert noise.load_noise_key(str(outside), repo) == bytes.fromhex(KEY)
    inside = repo / "noise.key"
    inside.write_text(KEY)
    with pytest.raises(InputError, match=r"inside the repository.*Fix: move the key outside"):
        noise.load_noise_key(str(inside), repo)
    with pytest.raises(InputError, match="does not exist"):
        noise.load_noise_key(str(tmp_path / "missing.key"), repo)
    monkeypatch.setenv(noise.KEY_ENV, "abcd")
    with pytest.raises(InputError, match=r"at least 64 hex digits.*token_hex"):
        noise.load_noise_key(None, repo)
    monkeypatch.setenv(noise.KEY_ENV, "cd" * 32)  # the environment wins over the file
    assert noise.load_noise_key(str(outside), repo) == bytes.fromhex("cd" * 32)


# -- faults ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    root = make_root(tmp_path_factory.mktemp("ops"), FAST)
    run_stages(root, "prepare")
    return root


def _fresh(prepared: Path, tmp_path: Path, overrides: dict | None = None) -> tuple[Path, dict]:
    """The prepared module root with its own ledger (and params overrides)."""
    ledger = {"privacy": {"ledger": str(tmp_path / "ledger.sqlite")}}
    return prepared, parse_params(merged(merged(read_params(prepared / "params.yaml"), ledger), overrides or {}))


@pytest.mark.slow
def test_crash_after_reading_data_keeps_the_plan_charged(prepared, tmp_path, monkeypatch):
    """A fault injected at training step 5 (the data has been read): the reservation stays, no spent rows,
    the data set is charged the plan, no model is written and the chain verifies."""
    import pipelines.progress as progress
    from pipelines.data.encoded import EncodedTable
    from tasks.train import train

    root, params = _fresh(prepared, tmp_path)
    reads = []
    real_array = EncodedTable.__array__
    monkeypatch.setattr(EncodedTable, "__array__", lambda self, *a, **k: reads.append(1) or real_array(self, *a, **k))

    def crash(phase: str, step: int, total: int) -> None:
        if step == 5:
            raise RuntimeError(f"injected fault in {phase} at step {step}")

    monkeypatch.setattr(progress, "report", crash)
    model_dir = root / "models" / "breast_cancer" / "dpwgan"
    before = model_dir.exists() and sorted(model_dir.iterdir())
    with pytest.raises(RuntimeError, match="injected fault in dpwgan at step 5"):
        train(params, "dpwgan", "crashing-run", root)
    assert reads == [1]
    led = Ledger(params.privacy.ledger)
    rows = led.rows("breast_cancer")
    assert [(r["stage"], r["status"]) for r in rows] == [("train@dpwgan", "planned")] * 2  # DP-SGD + calibration
    planned = [event_from_dict(json.loads(r["event_json"])) for r in rows]
    assert (
        led.spent("breast_cancer", DELTA) == pytest.approx(epsilon_pld(planned, DELTA))
        and 2.9 <= led.spent("breast_cancer", DELTA) <= 3.0
    )
    assert led.verify()["rows"] == 2
    assert (model_dir.exists() and sorted(model_dir.iterdir())) == before  # no partial model


@pytest.mark.slow
def test_refused_run_plans_nothing_reads_nothing(prepared, tmp_path, monkeypatch):
    """Pre-flight: a run whose plan does not fit fails before training with spent / planned / remaining."""
    from tasks.budget import budget
    from pipelines.data.encoded import EncodedTable

    root, params = _fresh(
        prepared,
        tmp_path,
        {"privacy": {"lifetime_epsilon": 3.2, "release_epsilon": 4.0}, "weights": {"generators": ["dpwgan"]}},
    )  # dpwgan pinned at 3
    led = Ledger(params.privacy.ledger)
    led.reserve("breast_cancer", "earlier", "train@x", [GaussianEvent(2.0, 1.0)], DELTA, 3.2)
    monkeypatch.setattr(EncodedTable, "__array__", lambda *a, **k: pytest.fail("private rows were read"))
    spent = led.spent("breast_cancer", DELTA)
    with pytest.raises(
        BudgetExceededError,
        match=rf"spent ε={spent:.4g}, this stage plans ε=[234].*remaining ε="
        rf"{3.2 - spent:.4g}",
    ):
        budget(params, root)
    assert len(led.rows()) == 1 and led.verify()["rows"] == 1
    params = dataclasses.replace(params, privacy=params.privacy.model_copy(update={"lifetime_epsilon": 10.0}))
    summary = budget(params, root)  # the weights share what the pinned DP-WGAN leaves of the release ε
    assert summary["epsilon_spent"] == pytest.approx(spent) and 4.0 < summary["epsilon_after"] < spent + 4.0
    assert summary["release_epsilon"] == 4.0 and 0.999 * 4.0 <= summary["epsilon_release"] <= 4.0
    assert [(r["part"], r["stages"], r["pinned"]) for r in summary["parts"]] == [
        ("prepare", "prepare", True),  # the row-loss test (and row count), pinned at their own ε
        ("dpwgan", "train@dpwgan", True),
        ("weights", "weight@dpwgan", False),
        ("release_test", "check@dpwgan", True),
    ]  # pinned at release.test_epsilon
    assert len(led.rows()) == 1  # wrote nothing


# -- concurrency -----------------------------------------------------------------------------------


@pytest.mark.integration
def test_simultaneous_reservations_never_exceed_the_budget_sqlite(tmp_path):
    event, budget = GaussianEvent(2.0, 1.0), 6.0
    k = fits(event, budget)
    assert 1 < k < 8
    granted, ledger = race(f"sqlite:///{tmp_path / 'race.sqlite'}", 8, event, budget)
    assert granted == k and ledger.verify()["rows"] == k
    assert ledger.spent("shared", DELTA) == pytest.approx(epsilon_pld([event] * k, DELTA))
    assert ledger.spent("shared", DELTA) <= budget


# -- configuration ---------------------------------------------------------------------------------


def test_task_runner_from_params():
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect_dask import DaskTaskRunner

    from flows.runners import task_runner

    assert isinstance(task_runner(configured({})), ThreadPoolTaskRunner)
    local = task_runner(configured({"orchestration": {"task_runner": "dask", "dask_workers": 3}, "device": "cuda"}))
    assert isinstance(local, DaskTaskRunner) and local.cluster_kwargs["n_workers"] == 3
    assert local.cluster_kwargs["resources"] == {"GPU": 1}
    remote = {
        "orchestration": {"task_runner": "dask", "dask_address": "tcp://10.0.0.5:8786"},
        "privacy": {"ledger": "postgresql+psycopg://steward@db/ledger"},
    }
    assert task_runner(configured(remote)).address == "tcp://10.0.0.5:8786"
    with pytest.raises(InputError, match=r"cannot share the SQLite ledger 'ledger/privacy.sqlite'.*PostgreSQL URL"):
        task_runner(configured({**remote, "privacy": {"ledger": "ledger/privacy.sqlite"}}))
    with pytest.raises(
        InputError,
        match=r"'orchestration\.task_runner': input should be 'threads' or 'dask', "
        r"got 'spark'.*Fix:",
    ):
        configured({"orchestration": {"task_runner": "spark"}})
    with pytest.raises(InputError, match=r"'orchestration\.worker': unknown orchestration keys \['worker'\].*Fix:"):
        configured({"orchestration": {"worker": 2}})


def test_schedules_one_deployment_per_dataset(tmp_path):
    from flows.deploy import deployments

    root = make_root(tmp_path, FAST)
    path = root / "schedules.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "deployments": [
                    {"name": "nightly", "params": "params.yaml", "cron": "0 2 * * *", "timezone": "Europe/Zurich"}
                ]
            }
        )
    )
    [d] = deployments(path, root)
    assert d.name == "nightly" and d.concurrency_limit == 1 and d.parameters["root"] == str(root.resolve())
    assert d.schedules[0].schedule.cron == "0 2 * * *" and d.schedules[0].schedule.timezone == "Europe/Zurich"
    path.write_text(
        yaml.safe_dump(
            {
                "deployments": [
                    {"name": "a", "params": "params.yaml", "interval": 60},
                    {"name": "b", "params": "params.yaml", "cron": "0 * * * *"},
                ]
            }
        )
    )
    with pytest.raises(InputError, match=r"data set 'breast_cancer' of deployment 'a'.*one deployment per data set"):
        deployments(path, root)
    path.write_text(yaml.safe_dump({"deployments": [{"name": "a", "params": "params.yaml"}]}))
    with pytest.raises(InputError, match="exactly one of 'cron' and 'interval'"):
        deployments(path, root)


def test_work_pool_entrypoint_picks_the_task_runner_from_params(tmp_path, monkeypatch):
    """prefect.yaml's entrypoint loads as a worker would load it, on the runner SYNTHRELEASE_PARAMS asks for."""
    from prefect.flows import load_flow_from_entrypoint
    from prefect_dask import DaskTaskRunner

    project = Path(__file__).resolve().parents[1]
    [deployment] = yaml.safe_load((project / "prefect.yaml").read_text())["deployments"]
    root = make_root(tmp_path, {**FAST, "orchestration": {"task_runner": "dask"}})
    monkeypatch.setenv("SYNTHRELEASE_PARAMS", "params.yaml")
    monkeypatch.setenv("SYNTHRELEASE_ROOT", str(root))
    monkeypatch.chdir(project)
    flow = load_flow_from_entrypoint(deployment["entrypoint"])
    assert flow.name == "private-synthetic-release" and isinstance(flow.task_runner, DaskTaskRunner)
