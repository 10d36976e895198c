"""pipelines/runtime.py: each process's torch threads are its share of the cores it is given (issue 20)."""
from __future__ import annotations

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
