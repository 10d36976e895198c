"""pipelines/runtime.py: each process's torch threads are its share of the cores it is given, and
`beside` runs a part in a second process only when it has a second core for it."""

from __future__ import annotations

import operator
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from flows.runners import concurrent_tasks
from pipelines import runtime
from sections import configured


@pytest.fixture
def four_cores(monkeypatch):
    """A process allowed on 4 CPUs, no OMP_NUM_THREADS, nothing recorded; torch's threads restored after."""
    before = torch.get_num_threads()
    monkeypatch.setattr(runtime.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "_concurrent", 1)
    yield
    torch.set_num_threads(before)


def test_threads_are_the_cores_divided_by_the_concurrent_tasks(four_cores):
    assert runtime.torch_threads(2) == 2 and torch.get_num_threads() == 2
    assert runtime.torch_threads() == 2  # a task keeps the flow's recorded share
    assert runtime.torch_threads(4) == 1 and runtime.torch_threads(8) == 1  # never fewer than one
    assert runtime.torch_threads(1) == 4  # a DVC stage: one task, every core


def test_omp_num_threads_caps_the_cores(four_cores, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what Dask's nanny gives its workers
    assert runtime.torch_threads(1) == 1


def test_a_non_positive_task_count_is_refused(four_cores):
    with pytest.raises(ValueError, match="positive"):
        runtime.torch_threads(0)


def test_the_flow_shares_its_process_among_max_workers_tasks():
    assert concurrent_tasks(configured({"orchestration": {"task_runner": "threads", "max_workers": 4}})) == 4
    assert concurrent_tasks(configured({"orchestration": {"task_runner": "dask"}})) == 1  # each worker sizes its own


@pytest.fixture
def two_cores(monkeypatch):
    """A DVC stage's process on 2 CPUs, every table large enough for `beside`'s second process."""
    monkeypatch.setattr(runtime, "available_cores", lambda: 2)
    monkeypatch.setattr(runtime, "_concurrent", 1)
    monkeypatch.setattr(runtime, "BESIDE_MIN_ROWS", 0)


@pytest.mark.integration
def test_beside_runs_a_large_part_in_a_second_process_with_two_cores(two_cores):
    with runtime.beside(os.getpid, rows=1) as pid:
        assert pid() != os.getpid()


def _frames_back(*frames: pd.DataFrame) -> tuple:
    return frames


@pytest.mark.slow
def test_beside_sends_frames_a_column_at_a_time_and_they_arrive_equal(two_cores):
    rng = np.random.default_rng(0)
    mixed = pd.DataFrame(
        {
            "n": rng.integers(0, 9, 500),
            "x": rng.random(500),
            "s": pd.Series(rng.choice(["a", "b"], 500), dtype="str"),
            "c": pd.Categorical(rng.choice(["u", "v"], 500)),
            "i": pd.array(np.where(rng.random(500) < 0.2, pd.NA, 3), dtype="Int64"),
        },
        index=pd.Index(rng.permutation(500) + 7, name="row"),
    )
    frames = (mixed, mixed.iloc[:0], pd.DataFrame(index=range(3)), mixed.rename(columns={"x": "n"}))
    with runtime.beside(_frames_back, *frames, rows=1) as back:
        received = back()
    for sent, got in zip(frames, received, strict=True):
        pd.testing.assert_frame_equal(got, sent, check_exact=True)


def test_beside_runs_here_when_small_shared_or_daemonic(two_cores, monkeypatch):
    with runtime.beside(os.getpid, rows=-1) as pid:  # under BESIDE_MIN_ROWS
        assert pid() == os.getpid()
    monkeypatch.setattr(runtime, "_concurrent", 2)  # the flow's threads share the 2 cores
    with runtime.beside(os.getpid, rows=1) as pid:
        assert pid() == os.getpid()
    monkeypatch.setattr(runtime, "_concurrent", 1)
    monkeypatch.setattr(runtime.multiprocessing.current_process(), "daemon", True)  # a Dask worker's process
    with runtime.beside(os.getpid, rows=1) as pid:
        assert pid() == os.getpid()


def test_beside_raises_the_second_processs_error_here(two_cores):
    with pytest.raises(ZeroDivisionError):
        with runtime.beside(operator.truediv, 1, 0, rows=1) as quotient:
            quotient()


def _exit_unless_in(pid: int) -> str:
    """Ends a process other than `pid` at once, without an answer; returns 'here' in `pid`."""
    if os.getpid() != pid:
        os._exit(3)
    return "here"


@pytest.mark.slow
def test_a_second_process_that_ends_without_an_answer_is_computed_here(two_cores, caplog):
    with runtime.beside(_exit_unless_in, os.getpid(), rows=1) as answer:
        assert answer() == "here"
    assert "ended without an answer (exit code 3)" in caplog.text


@pytest.mark.integration
def test_a_script_read_from_standard_input_still_gets_its_answer():
    """Spawn cannot re-import such a `__main__` (its second process dies at start): the part runs in the script."""
    script = (
        "import os\nfrom pipelines import runtime\n"
        "runtime.available_cores = lambda: 2\nruntime.BESIDE_MIN_ROWS = 0\n"
        "with runtime.beside(os.getpid, rows=1) as pid:\n    print(pid() == os.getpid())\n"
    )
    done = subprocess.run(
        [sys.executable, "-"],
        input=script,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]
