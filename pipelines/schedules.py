"""The release schedules of schedules.yaml, read and checked once: which deployment releases which data set, when.

flows/deploy.py registers them with Prefect; the budget stage reads the one of its data set to state, before any
row is read, when the last release the remaining budget allows will run (`run_dates`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import yaml
from cronsim import CronSim

from pipelines.config import load_params
from pipelines.errors import InputError

SCHEDULES = "schedules.yaml"  # the project's schedules, at its root

KEYS = {"name", "params", "cron", "timezone", "interval", "description"}


def load_schedules(path: Path, root: Path) -> list[dict[str, Any]]:
    """The deployment entries of `path`, checked: names unique, one schedule each, one per data set."""
    path = Path(path)
    if not path.exists():
        raise InputError("the schedules file is missing.", file=str(path), fix="pass --schedules PATH.")
    entries = (yaml.safe_load(path.read_text()) or {}).get("deployments")
    if not isinstance(entries, list) or not entries:
        raise InputError(
            "'deployments' must be a non-empty list.",
            file=str(path),
            fix="add '- {name: ..., params: params.yaml, cron: \"0 2 * * *\"}' under 'deployments:'.",
        )
    seen: dict[str, str] = {}
    for e in entries:
        name = e.get("name") if isinstance(e, dict) else None
        if not name or not e.get("params"):
            raise InputError(
                f"every deployment needs 'name' and 'params', got {e!r}.",
                file=str(path),
                fix="e.g. '- {name: nightly, params: params.yaml, cron: \"0 2 * * *\"}'.",
            )
        if set(e) - KEYS:
            raise InputError(
                f"deployment '{name}' has unknown keys {sorted(set(e) - KEYS)}.",
                file=str(path),
                fix=f"use only {sorted(KEYS)}.",
            )
        if ("cron" in e) == ("interval" in e):
            raise InputError(
                f"deployment '{name}' needs exactly one of 'cron' and 'interval'.",
                file=str(path),
                fix="e.g. 'cron: \"0 2 * * *\"' (daily at 02:00) or 'interval: 86400' (seconds).",
            )
        dataset = load_params(Path(root) / e["params"]).dataset.name
        if name in seen.values() or dataset in seen:
            raise InputError(
                f"deployment '{name}' repeats a name or the data set '{dataset}' of deployment "
                f"'{seen.get(dataset, name)}'.",
                file=str(path),
                fix="one deployment per data set (give it one schedule), with a unique name.",
            )
        seen[dataset] = name
    return entries


def entry_for(dataset: str, root: Path, path: Path | None = None) -> dict[str, Any] | None:
    """The deployment of `path` (default: the project's schedules.yaml) that releases `dataset`; None where the
    file or such a deployment is missing, or the file is malformed (the budget stage then states the count alone,
    and `synthrelease serve` reports the file's problem)."""
    path = Path(path or Path(root) / SCHEDULES)
    try:
        entries = load_schedules(path, root)
    except InputError:
        return None
    return next((e for e in entries if load_params(Path(root) / e["params"]).dataset.name == dataset), None)


def run_dates(entry: dict[str, Any], count: int, after: datetime) -> list[datetime]:
    """The next `count` times the deployment `entry` runs after `after`: its cron in its timezone, or every
    `interval` seconds (counted from `after`, as a served interval schedule starts when it is served)."""
    zone = ZoneInfo(str(entry.get("timezone", "UTC")))
    start = after.astimezone(zone)
    if "cron" in entry:
        times = CronSim(str(entry["cron"]), start)
        return [next(times) for _ in range(count)]
    step = timedelta(seconds=float(entry["interval"]))
    return [start + (i + 1) * step for i in range(count)]


def runway(left: int, most: int, entry: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
    """What the budget stage states of the releases still possible: `left` further runs (of at most `most`
    searched: `at_least` when the search stopped there), and, when `entry` is the data set's deployment, its name and
    the time its last possible run comes (None when none is left or the count is a lower bound)."""
    last = run_dates(entry, left, now)[-1] if entry is not None and 0 < left < most else None
    return {
        "releases_left": left,
        "at_least": left >= most,
        "deployment": None if entry is None else entry["name"],
        "last_release": None if last is None else last.isoformat(),
    }


def runway_sentence(dataset: str, r: dict[str, Any]) -> str:
    """The budget stage's sentence on `runway`'s facts, for its log and its Prefect artefact."""
    count = f"at least {r['releases_left']}" if r["at_least"] else str(r["releases_left"])
    when = (
        f"; deployment '{r['deployment']}' would run the last of them at {r['last_release']}"
        if r["last_release"]
        else f" (deployment '{r['deployment']}')"
        if r["deployment"]
        else ""
    )
    return (
        f"After this run, the lifetime budget of `{dataset}` allows {count} further releases of this plan on "
        f"changed rows{when}; a rerun on unchanged rows reuses what was paid and spends nothing."
    )
