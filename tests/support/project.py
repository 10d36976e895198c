"""The project builder of the end-to-end tests: a small copy of the project on a temporary root (its params merged
over a cheap configuration, its noise keyed by the tests' steward key), the stages run in-process or as
subprocesses, and the ledger rows they leave."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Callable

import yaml
from filelock import FileLock  # torch's dependency, pinned in requirements.lock

from pipelines.config import load_params, merged

PROJECT = Path(__file__).resolve().parents[2]
# No generator pins its ε: every part shares privacy.release_epsilon (1.0 by default; tasks/budget.py). No
# noise_seed (refused in a public release): make_root gives the steward key STEWARD_KEY, so the noise is keyed.
# Every generator a candidate (params/compare.yaml's list; params.yaml lists AIM alone, what select: auto picks)
SMALL = {
    "generators": list(load_params(PROJECT / "params" / "compare.yaml").generators),
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
    "utility_gate": {"inverted": "label", "bootstrap": 50, "baseline_draws": 2},
}
# the documented count trusted unchecked, so the ledger holds only the stages these tests count (prepare's check
# of it, a ledger event by default: tests/test_neighbouring.py, tests/test_init.py, tests/test_config.py)
UNCHECKED_COUNT = {"row_count_epsilon": None}
# The DP release test refuses a table with no row near it 1 − test_confidence of the time (the default 0.99 is a
# steward's choice). Keyed noise makes each draw a function of the inputs, and the inputs change with the code: at 0.99
# an unrelated code edit refuses one table in a hundred (e.g. AIM's in tests/test_pipeline.py's end to end: statistic 0,
# noisy 2,093 > τ 1,590). At 1 − 10⁻⁶ a test's table is refused ~once in 10⁶ draws. These tests lose no power by it: at
# SMALL's ε 0.01 on 455 rows even a copied table (Z ≤ a·n̂ = 455) passed at 0.99; the refusal of one that copies is
# tests/test_release_test.py's. A test may set its own.
RELEASE_TEST_SURE = {"test_confidence": 0.999999}


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
    params = merged(
        merged(params, {"privacy": {"noise_key_file": str(key), **UNCHECKED_COUNT}, "release": RELEASE_TEST_SURE}),
        {**SMALL, **overrides},
    )
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    if git:
        for cmd in (
            ["git", "init", "-q"],
            ["dvc", "init", "-q"],
            ["git", "add", "-A"],
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
        ):
            sh(cmd, root)
    return root


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{e.get('PATH', '')}"
    e.update(
        DVC_NO_ANALYTICS="1",
        GX_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@t",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@t",
    )
    return e


def sh(cmd: list[str], cwd: Path, check: bool = True, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run(
        cmd, cwd=cwd, env={**env(), **(extra_env or {})}, capture_output=True, text=True, timeout=1800
    )  # a hang guard: the 4-generator repro takes ~5 min on 2 busy cores
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
    """discover and validate, then prepare (upto "prepare" or "budget"), then the budget stage: the release ε's
    allocation that train@gen / weight@gen of a generator without a pinned ε read (upto "budget")."""
    from tasks.budget import budget
    from tasks.discover import discover_stage
    from tasks.prepare import prepare
    from tasks.validate import validate

    params = load_params(root / "params.yaml")
    discover_stage(params, root)
    validate(params, root)
    if upto in ("prepare", "budget"):
        prepare(params, root)
    if upto == "budget":
        budget(params, root)


def built_once(base: Path, name: str, build: Callable[[Path], None]) -> Path:
    """`base/name`, made by `build(base/name)` the first time any test process asks for it: pytest-xdist's workers
    share `base`, so the first one builds under a file lock while the others wait, and every later ask reuses it."""
    target = base / name
    with FileLock(str(base / f"{name}.lock")):
        if not (base / f"{name}.done").exists():
            shutil.rmtree(target, ignore_errors=True)
            build(target)
            (base / f"{name}.done").touch()
    return target


def copy_root(template: Path, tmp: Path) -> Path:
    """A copy under `tmp` of the project `make_root(template, ...)` built (and of its steward key), for a test that
    changes it; DVC's per-checkout state (.dvc/tmp) is left out, so DVC hashes the copy's files afresh."""
    skip = lambda d, names: ["tmp"] if Path(d).name == ".dvc" else []
    shutil.copytree(template, tmp, symlinks=True, ignore=skip, dirs_exist_ok=True)
    return tmp / "repo"
