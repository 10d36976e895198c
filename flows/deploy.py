"""Scheduled releases: Prefect deployments of the release flow, one per data set (schedules.yaml).

  prefect server start                                   # the API and UI (SQLite; Postgres: README)
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

import yaml
from prefect.deployments.runner import RunnerDeployment
from prefect.schedules import Cron, Interval, Schedule

from flows.release import configured_flow
from pipelines.config import load_params
from pipelines.errors import InputError

KEYS = {"name", "params", "cron", "timezone", "interval", "description"}


def load_schedules(path: Path, root: Path) -> list[dict[str, Any]]:
    """The deployment entries of `path`, checked: names unique, one schedule each, one per data set."""
    path = Path(path)
    if not path.exists():
        raise InputError("the schedules file is missing.", file=str(path), fix="pass --schedules PATH.")
    entries = (yaml.safe_load(path.read_text()) or {}).get("deployments")
    if not isinstance(entries, list) or not entries:
        raise InputError("'deployments' must be a non-empty list.", file=str(path),
                         fix="add '- {name: ..., params: params.yaml, cron: \"0 2 * * *\"}' under 'deployments:'.")
    seen: dict[str, str] = {}
    for e in entries:
        name = e.get("name") if isinstance(e, dict) else None
        if not name or not e.get("params"):
            raise InputError(f"every deployment needs 'name' and 'params', got {e!r}.", file=str(path),
                             fix="e.g. '- {name: nightly, params: params.yaml, cron: \"0 2 * * *\"}'.")
        if set(e) - KEYS:
            raise InputError(f"deployment '{name}' has unknown keys {sorted(set(e) - KEYS)}.", file=str(path),
                             fix=f"use only {sorted(KEYS)}.")
        if ("cron" in e) == ("interval" in e):
            raise InputError(f"deployment '{name}' needs exactly one of 'cron' and 'interval'.", file=str(path),
                             fix="e.g. 'cron: \"0 2 * * *\"' (daily at 02:00) or 'interval: 86400' (seconds).")
        dataset = load_params(Path(root) / e["params"]).dataset.name
        if name in seen.values() or dataset in seen:
            raise InputError(f"deployment '{name}' repeats a name or the data set '{dataset}' of deployment "
                             f"'{seen.get(dataset, name)}'.", file=str(path),
                             fix="one deployment per data set (give it one schedule), with a unique name.")
        seen[dataset] = name
    return entries


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
        out.append(configured_flow(e["params"], str(root)).to_deployment(
            name=e["name"], schedules=[schedule(e)], concurrency_limit=1,
            parameters={"params_path": str(e["params"]), "root": str(root)},
            tags=[f"dataset:{config.dataset.name}"],
            description=e.get("description") or f"Scheduled private synthetic release of {config.dataset.name}"))
    return out


def __getattr__(name: str) -> Any:
    """`release_flow_from_env`: the entrypoint for work pools (prefect.yaml), whose workers load the flow
    from code rather than from this process: `release_flow` on the task runner of the params file
    named by SYNTHRELEASE_PARAMS (default params.yaml, relative to SYNTHRELEASE_ROOT or the cwd)."""
    if name == "release_flow_from_env":
        return configured_flow(os.environ.get("SYNTHRELEASE_PARAMS", "params.yaml"),
                               os.environ.get("SYNTHRELEASE_ROOT", "."))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def serve(schedules_path: Path, root: Path, limit: int | None = None) -> None:
    """Register the deployments with the Prefect API (PREFECT_API_URL) and run their scheduled flow runs."""
    from prefect import serve as prefect_serve
    prefect_serve(*deployments(schedules_path, root), limit=limit)
