"""Private domain discovery of a table: the schema's `<key>: discover` parts, found by the mechanisms of
pipelines/privacy/discovery.py on the columns that ask for it, and only those.

Budget. `privacy.discovery_epsilon` = ε_d is divided equally over the steps: one partition selection per
`categories: discover` column and per `atoms: discover` column (its exact values as keys: a value held by enough
units is an atom, at most MAX_ATOMS of them, the most frequent by noisy count), one bounds histogram per numeric
column with `lower` and/or `upper: discover` (one histogram gives both bounds), one granularity histogram per
column with `step` and/or `rounding: discover` (one histogram gives both; rounding is measured against the
documented step where the step is documented). The partition selections share δ_d = DELTA_SHARE·δ equally. By
basic composition the whole discovery is (ε_d, δ_d)-DP at the unit; the ledger composes the recorded events with
the rest of the data set's (PLD), which is never above that sum.

What is read: the discovered columns' values (nulls excluded: `missing: allowed` says whether the column may be
empty, discovery never does) and, with a declared privacy unit, its id column, to keep at most `max_rows` rows per
unit (pipelines/data/units.py) before any count. Every other column is left unread.

A discovered category list is the released values, sorted, then OTHER: validation puts every other value of the
column there (pipelines/data/validation.py), so a rare value is kept as "(other)" rather than dropped or
published. A discovered bound is the grid edge the mechanism releases (an integer column's: rounded outwards).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from pipelines.data.schema import Schema
from pipelines.errors import InputError
from pipelines.privacy.discovery import (
    approximate_bounds,
    bounds_threshold,
    grid_edges,
    grid_step,
    partition_event,
    partition_threshold,
    select_partitions,
    step_event,
)
from pipelines.privacy.events import DiscreteLaplaceEvent, Event, event_to_dict

DELTA_SHARE = 0.1  # δ_d: the partition selections' part of the data set's δ
MAX_ATOMS = 64  # the most discovered atoms per column (the most frequent by noisy count): each is a bin of its own
SELECTED = ("categories", "atoms")  # the keys partition selection discovers
GRANULARITY = ("step", "rounding")  # the keys of the granularity histogram (`grid_step`): one per column


@dataclass(frozen=True)
class Step:
    """One discovery mechanism run: a column, the keys it fills, its (ε, δ)."""

    column: str
    keys: tuple[str, ...]
    epsilon: float
    delta: float = 0.0


def steps(schema: Schema, epsilon: float, delta: float) -> list[Step]:
    """The discovery steps of `schema`'s requests at ε_d = `epsilon` and the data set's `delta` (module docstring):
    one partition selection per `categories` or `atoms` request, one bounds histogram per column for its bounds."""
    groups: dict[tuple[str, str], list[str]] = {}
    for column, key in schema.discovered:
        kind = key if key in SELECTED else "step" if key in GRANULARITY else "bounds"
        groups.setdefault((column, kind), []).append(key)
    n_steps, n_selected = len(groups), sum(kind in SELECTED for _, kind in groups)
    return [
        Step(column, tuple(keys), epsilon / n_steps, DELTA_SHARE * delta / n_selected if kind in SELECTED else 0.0)
        for (column, kind), keys in groups.items()
    ]


def planned_events(plan: list[Step], schema: Schema) -> list[Event]:
    """The events `discover` records for `plan`, as the mechanisms state them (reserved before a row is read)."""
    k = schema.max_rows

    def event(s: Step) -> Event:
        if s.delta > 0:
            return partition_event(s.epsilon, s.delta, k)
        if set(s.keys) & set(GRANULARITY):
            return step_event(s.epsilon, k, schema.column(s.column).kind == "integer")
        return DiscreteLaplaceEvent(
            scale=k / s.epsilon, sensitivity=k, dims=len(grid_edges()) - 1, query="approximate bounds histogram"
        )

    return [event(s) for s in plan]


def unit_counts(values: pd.Series, units: np.ndarray | None) -> dict[str, int]:
    """Each present value's number of distinct units holding it (rows when every row is its own unit)."""
    present = values.notna().to_numpy()
    text = values[present].astype(str).str.strip()
    frame = pd.DataFrame(
        {"value": text.to_numpy(), "unit": units[present] if units is not None else np.arange(len(text))}
    )
    frame = frame[frame["value"] != ""]
    return {str(v): int(n) for v, n in frame.drop_duplicates().groupby("value").size().items()}


def discover(
    frame: pd.DataFrame,
    units: np.ndarray | None,
    schema: Schema,
    plan: list[Step],
    rng: Callable[[str], np.random.Generator],
) -> tuple[dict[str, Any], list[Event]]:
    """({column: {key: value, ...}}, plus each step's facts under "steps"; the events to record) of running `plan`
    on `frame` (the discovered columns' values, at most `schema.max_rows` rows per unit; `units`: their unit
    pseudonyms, None without a declared unit). `rng(context)`: the step's private noise stream."""
    k = schema.max_rows
    columns: dict[str, dict[str, Any]] = {}
    facts: list[dict[str, Any]] = []
    events: list[Event] = []
    for step in plan:
        col = next(c for c in schema.declared if c.name == step.column)
        if "categories" in step.keys:
            found, event = select_partitions(
                unit_counts(frame[col.name], units), step.epsilon, step.delta, k, rng(f"discover:{col.name}")
            )
            columns.setdefault(col.name, {})["categories"] = found
            facts.append(
                {
                    **_step_facts(step),
                    "threshold": partition_threshold(step.epsilon, step.delta, k),
                    "found": len(found),
                }
            )
        elif "atoms" in step.keys:  # a numeric column's exact values: each value's text is its key
            numbers = pd.to_numeric(frame[col.name], errors="coerce")
            found, event = select_partitions(
                unit_counts(numbers.map(repr, na_action="ignore"), units),
                step.epsilon,
                step.delta,
                k,
                rng(f"discover:{col.name}:atoms"),
                limit=MAX_ATOMS,
            )
            columns.setdefault(col.name, {})["atoms"] = sorted(float(v) for v in found)
            facts.append(
                {
                    **_step_facts(step),
                    "threshold": partition_threshold(step.epsilon, step.delta, k),
                    "found": len(found),
                }
            )
        elif set(step.keys) & set(GRANULARITY):
            values = pd.to_numeric(frame[col.name], errors="coerce").to_numpy(dtype=np.float64)
            documented = None if "step" in step.keys else col.step  # rounding against the documented step
            found_grid, event = grid_step(
                values[np.isfinite(values)],
                step.epsilon,
                k,
                rng(f"discover:{col.name}:step"),
                col.kind == "integer",
                documented,
            )
            found = {"step": found_grid.step, "rounding": found_grid.rounding}
            columns.setdefault(col.name, {}).update({key: found[key] for key in step.keys})
            facts.append(_step_facts(step))
        else:
            values = pd.to_numeric(frame[col.name], errors="coerce").to_numpy(dtype=np.float64)
            bounds, event = approximate_bounds(
                values[np.isfinite(values)], step.epsilon, k, rng(f"discover:{col.name}")
            )
            found_bounds = {"lower": bounds.lower, "upper": bounds.upper}
            if col.kind == "integer" and bounds.lower is not None and bounds.upper is not None:
                found_bounds = {"lower": float(math.floor(bounds.lower)), "upper": float(math.ceil(bounds.upper))}
            columns.setdefault(col.name, {}).update({key: found_bounds[key] for key in step.keys})
            facts.append({**_step_facts(step), "threshold": bounds_threshold(step.epsilon, k)})
        events.append(event)
    return {"columns": columns, "steps": facts, "events": [event_to_dict(e) for e in events]}, events


def _step_facts(step: Step) -> dict[str, Any]:
    return {"column": step.column, "keys": list(step.keys), "epsilon": step.epsilon, "delta": step.delta}


def check_found(domain: dict[str, Any], schema: Schema, file: str) -> None:
    """InputError for a discovery that found too little to make a domain (no category above the threshold, no
    bin above it), naming the column and what to do; the spend is recorded by then, and a re-run reuses the
    result rather than spending again."""
    for step in domain["steps"]:
        name, found = step["column"], domain["columns"][step["column"]]
        if "categories" in step["keys"] and found["categories"] == []:
            what = "no value"
        elif any(found.get(k, 0) is None for k in step["keys"] if k in ("lower", "upper")):
            what = "no bin of the bounds' grid"
        else:
            continue
        raise InputError(
            f"discovery found {what} held by at least {step['threshold']} "
            f"{'units' if schema.unit is not None else 'rows'} at ε = {step['epsilon']:.3g} (recorded in the "
            "ledger).",
            file=file,
            column=name,
            fix="document this part of the column's domain in the schema, or raise privacy.discovery_epsilon "
            "(a larger ε lowers the threshold); a table this small may not support discovery.",
        )
