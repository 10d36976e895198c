"""How many torch threads a process runs: its share of the cores it is given, never more.

Every torch stage runs inside one process that may run several tasks at once: the Prefect flow's threads
runner runs up to `orchestration.max_workers` tasks in one process, a DVC stage or a Dask worker process
runs one task per worker thread. torch's default (one intra-op thread per core, for EVERY concurrent task)
oversubscribes the machine: on a busy 2-core machine small-network steps ran 20-45× slower with two threads
per process than with one (issue 20). So each process sets

    threads = max(1, cores // concurrent)      cores = the CPUs this process may run on (its affinity mask),
                                               capped by OMP_NUM_THREADS when that is set (Dask's nanny sets 1)

with `concurrent` the number of tasks it runs at once. The flow records it before it submits tasks
(`torch_threads(max_workers)`); each task calls `torch_threads()`, which keeps the process's recorded
value (1 in a DVC stage; a Dask worker's thread count inside a Dask worker).
"""
from __future__ import annotations

import os

import torch

_concurrent = 1


def available_cores() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one), capped by OMP_NUM_THREADS."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    omp = os.environ.get("OMP_NUM_THREADS", "")
    return min(cores, int(omp)) if omp.isdigit() and int(omp) > 0 else cores


def _dask_worker_threads() -> int | None:
    try:
        from distributed import get_worker
        return int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        return None


def torch_threads(concurrent: int | None = None) -> int:
    """Set torch's intra-op threads to max(1, cores // concurrent) (module docstring) and return it.

    `concurrent`: the tasks this process runs at once, recorded for later calls; None keeps the recorded
    value (1 unless a flow recorded its max_workers), or a Dask worker's thread count inside a Dask worker.
    """
    global _concurrent
    if concurrent is not None:
        if concurrent < 1:
            raise ValueError(f"concurrent must be a positive number of tasks, got {concurrent}")
        _concurrent = int(concurrent)
    share = _concurrent if concurrent is not None else (_dask_worker_threads() or _concurrent)
    threads = max(1, available_cores() // share)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads
