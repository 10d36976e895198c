"""The operations tests' shared parts: concurrent reservations on one ledger and how many copies of an event a
budget holds; a one-generator project configuration, a real Prefect server on a loopback port, its REST API."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

from pipelines.errors import BudgetExceededError
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import GaussianEvent
from pipelines.privacy.ledger import Ledger

from support.project import PROJECT, SMALL, env, make_root, sh

DELTA = 1e-5  # the δ of the raced reservations


def race(url: str, writers: int, event: GaussianEvent, budget: float) -> tuple[int, Ledger]:
    """`writers` threads, each with its own connection, reserve `event` at the same moment."""
    Ledger(url)  # the table exists before the race
    barrier, granted, refused = threading.Barrier(writers), [], []

    def one(i: int) -> None:
        ledger = Ledger(url)
        barrier.wait()
        try:
            ledger.reserve("shared", f"run-{i}", "train@g", [event], DELTA, budget)
            granted.append(i)
        except BudgetExceededError:
            refused.append(i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(granted) + len(refused) == writers
    return len(granted), Ledger(url)


def fits(event: GaussianEvent, budget: float) -> int:
    """How many copies of `event` compose (PLD) to at most `budget`."""
    k = 0
    while epsilon_pld([event] * (k + 1), DELTA) <= budget:
        k += 1
    return k


# One fast generator, a cheap evaluation, no weight stage: a flow run takes well under a minute on 1 core.
# No steward key: fresh OS-entropy noise in every run (a test that needs the same noise twice gives a key).
TINY = {
    "generators": ["dpwgan"],
    "device": "cpu",
    "weights": {"generators": []},
    "privacy": {"noise_key_file": None},
    "dpwgan": {"epsilon": 0.9, "steps": 40, "batch_size": 64},  # pinned: the release test's ε fits beside it
    "utility_gate": {"inverted": "label"},  # fresh noise: a 40-step DP-WGAN may invert; label it, never refuse
    # the row-reading gates as findings (release.non_dp_gates: advise, the default), not refusals: these tests
    # need published tables, and fresh or re-keyed noise (every code change) draws other tables (at 100 attacks
    # the inference-risk bound of a 40-step DP-WGAN can pass 0.1 on a single keyed or fresh draw; the refusals
    # themselves: tests/test_privacy_risk.py, test_utility_verdict.py)
    "release": {**SMALL["release"], "non_dp_gates": "advise"},  # (a section replaces SMALL's whole)
    "evaluate": {
        "max_rows": 300,
        "ot_max_rows": 200,
        "kway_subsets": 10,
        "attacks": {"max_rows": 200, "n_attacks": 100},
    },
}


# TINY with make_root's steward key (no OS-entropy noise): the same published table in every run
TINY_KEYED = {k: v for k, v in TINY.items() if k != "privacy"}


def build_released(tmp: Path) -> None:
    """A released project in `tmp` (`make_root`'s layout): TINY_KEYED committed to git and DVC with the project's
    .gitignore beside it, after one `dvc repro` (its outputs, dvc.lock and ledger not yet committed)."""
    root = make_root(tmp, TINY_KEYED, git=True)
    shutil.copy(PROJECT / ".gitignore", root / ".gitignore")
    sh(["dvc", "repro"], root)


def free_port() -> int:
    """A TCP port on loopback that no process listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group we started (the server or `serve` and their children)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@contextmanager
def prefect_server(home: Path, ui: bool = False) -> Iterator[dict]:
    """`prefect server start` on a free loopback port with its own PREFECT_HOME (SQLite); with `ui`, the web UI
    at its root (PREFECT_UI_ENABLED, the default of a real server), its API URL pointed at this port."""
    port = free_port()
    base, api = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/api"
    extra = {
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5",
        "PREFECT_UI_ENABLED": str(ui).lower(),
        "PREFECT_UI_API_URL": api,
    }
    log = open(home / "server.log", "w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env={**env(), **extra},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"prefect server did not start:\n{(home / 'server.log').read_text()[-3000:]}")
            time.sleep(1)
        yield {"url": api, "base": base, "env": {**extra, "PREFECT_API_URL": api}}
    finally:
        stop(proc)
        log.close()


def api_post(api: str, path: str, body: dict) -> list[dict]:
    """POST `body` to the Prefect REST API at `api` + `path`; the decoded JSON answer (an HTTP error raises)."""
    r = httpx.post(f"{api}{path}", json=body, timeout=30)
    r.raise_for_status()
    return r.json()
