"""Scheduled releases: Prefect deployments of the release flow, one per data set (schedules.yaml).

  prefect server start                                   # the API and UI (SQLite; Postgres: docs/operations.md)
  PREFECT_API_URL=http://127.0.0.1:4200/api synthrelease serve [--schedules schedules.yaml]

`serve` registers every deployment with its cron or interval schedule and runs their flow runs in
subprocesses of this process (`prefect.serve`), each on the task runner its params file asks for
(flows/runners.py). A deployment has a concurrency limit of 1, so a run that outlasts its interval
delays the next instead of racing it, and two deployments may not share a data set: their runs
would overwrite each other's stage artefacts. The ledger is shared by all runs of all data sets.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from prefect.deployments.runner import RunnerDeployment
from prefect.schedules import Cron, Interval, Schedule

from flows.release import configured_flow
from pipelines.config import load_params
from pipelines.schedules import load_schedules


def schedule(entry: dict[str, Any]) -> Schedule:
    if "cron" in entry:
        return Cron(str(entry["cron"]), timezone=entry.get("timezone", "UTC"))
    return Interval(float(entry["interval"]), timezone=entry.get("timezone", "UTC"))


def deployments(schedules_path: Path, root: Path) -> list[RunnerDeployment]:
    """One RunnerDeployment per schedules entry; artefact paths resolve against the absolute `root`."""
    root = Path(root).resolve()
    out = []
    for e in load_schedules(schedules_path, root):
        config = load_params(root / e["params"])
        out.append(
            configured_flow(e["params"], str(root)).to_deployment(
                name=e["name"],
                schedules=[schedule(e)],
                concurrency_limit=1,
                parameters={"params_path": str(e["params"]), "root": str(root)},
                tags=[f"dataset:{config.dataset.name}"],
                description=e.get("description") or f"Scheduled private synthetic release of {config.dataset.name}",
            )
        )
    return out


def __getattr__(name: str) -> Any:
    """`release_flow_from_env`: the entrypoint for work pools (prefect.yaml), whose workers load the flow
    from code rather than from this process: `release_flow` on the task runner of the params file
    named by SYNTHRELEASE_PARAMS (default params.yaml, relative to SYNTHRELEASE_ROOT or the cwd)."""
    if name == "release_flow_from_env":
        return configured_flow(
            os.environ.get("SYNTHRELEASE_PARAMS", "params.yaml"), os.environ.get("SYNTHRELEASE_ROOT", ".")
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def serve(schedules_path: Path, root: Path, limit: int | None = None) -> None:
    """Register the deployments with the Prefect API (PREFECT_API_URL) and run their scheduled flow runs."""
    from prefect import serve as prefect_serve

    prefect_serve(*deployments(schedules_path, root), limit=limit)
