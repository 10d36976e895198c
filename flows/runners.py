"""The release flow's task runner and per-task resources, chosen in params.yaml `orchestration`.

  orchestration:
    task_runner: threads | dask      threads (default): one process; dask: prefect-dask's DaskTaskRunner
    max_workers: 4                   threads: concurrent tasks
    dask_address: null               dask: a running scheduler (tcp://host:8786), e.g. on Kubernetes;
                                     null: a local cluster of `dask_workers` single-threaded processes
    dask_workers: 2
    dask_memory_limit: auto          null address: each worker process's memory limit (Dask pauses a worker at 80 %
                                     and restarts it at 95 %; auto: the machine's memory shared by the workers);
                                     also the limit of the out-of-core validate and prepare's local cluster
    dask_blocksize: 32MiB            bytes of the source table per part of the out-of-core validate and prepare

With `device: cuda`, torch stages (train, evaluate) ask Dask for one `GPU` resource, so they only
run on workers started with `--resources GPU=1` (a local cluster declares one per worker). Workers of
a remote cluster need the project importable and should preload it: `dask worker ADDRESS --preload
tasks.train` (docs/operations.md, "Scale-out").
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from pipelines.config import Config
from pipelines.errors import InputError

PRELOAD = ("tasks.train",)  # workers import the stages (torch, prefect) at start-up, not in the first task


def task_runner(config: Config) -> TaskRunner:
    """The task runner params.yaml asks for."""
    cfg = config.orchestration
    if cfg.task_runner == "threads":
        return ThreadPoolTaskRunner(max_workers=cfg.max_workers)
    from prefect_dask import DaskTaskRunner

    if cfg.dask_address:
        ledger = config.privacy.ledger
        if "://" not in ledger or ledger.startswith("sqlite"):
            raise InputError(
                f"a remote Dask cluster ({cfg.dask_address}) runs stages on other machines, which "
                f"cannot share the SQLite ledger {ledger!r} safely.",
                file="params.yaml",
                fix="set privacy.ledger to a PostgreSQL URL (postgresql+psycopg://user@host/db).",
            )
        return DaskTaskRunner(address=cfg.dask_address)
    worker = {"resources": {"GPU": 1}} if config.device == "cuda" else {}
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs={
            "n_workers": cfg.dask_workers,
            "threads_per_worker": 1,
            "processes": True,
            "dashboard_address": None,
            "preload": list(PRELOAD),
            "memory_limit": cfg.dask_memory_limit,
            **worker,
        },
    )


def concurrent_tasks(config: Config) -> int:
    """Tasks the flow's own process runs at once: max_workers with the threads runner; 1 with Dask (each
    worker process sizes its own threads, pipelines/runtime.py)."""
    cfg = config.orchestration
    return cfg.max_workers if cfg.task_runner == "threads" else 1


def torch_resources(config: Config) -> AbstractContextManager:
    """Around a torch stage's submit: Dask resource `GPU: 1` when params say `device: cuda`."""
    if config.device == "cuda" and config.orchestration.task_runner == "dask":
        import dask

        return dask.annotate(resources={"GPU": 1})
    return nullcontext()
