"""The generator contract (ARCHITECTURE §3) and the helpers every generator shares: the budget, the
ledger session a generator sees, input checks, reserving the plan, merging params, the device.

The registry of implemented generators is `pipelines.generators.registry`; persistence is
`pipelines.generators.persistence`. This module imports no generator.
X may be a lazy table (tasks.train.EncodedTable): len() is free, rows are read by np.asarray.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pipelines.data.layout import Layout
from pipelines.privacy.events import Event, event_from_dict


@dataclass(frozen=True)
class Budget:
    """The privacy budget one generator may spend: target (ε, δ). ε = inf means non-private."""
    epsilon: float
    delta: float

    @property
    def private(self) -> bool:
        return math.isfinite(self.epsilon)


class BudgetSession(Protocol):
    """What a generator sees of the ledger: reserve the planned events, record the spent ones, for one
    (data set, run, stage). `pipelines.privacy.ledger.LedgerSession` implements it."""

    def reserve(self, events: list[Event]) -> None: ...
    def record(self, events: list[Event]) -> list[int]: ...


@runtime_checkable
class Generator(Protocol):
    name: str

    def plan(self, n_rows: int, budget: Budget) -> list[Event]: ...
    def fit(self, X: np.ndarray, session: BudgetSession, budget: Budget | None = None) -> None: ...
    def sample(self, n: int, seed: int) -> np.ndarray: ...
    def save(self, directory: Path) -> None: ...

    # Optional: `release_gates(self, real_encoded: np.ndarray) -> list[GateResult]`, the generator's own
    # gates, run by check@gen after the ledger gate (they may read real training rows: rule 6, say so in
    # the evidence's "outside_dp").


def check_width(layout: Layout, data: Any) -> None:
    """Refuse X unless it is 2-d with layout.width columns. Its row count is not checked: it is private
    (add/remove-one) and may differ from the public n̂ (len(X) of an EncodedTable) that plans and divisors use."""
    if len(data.shape) != 2 or data.shape[1] != layout.width:
        raise ValueError(f"X has shape {tuple(data.shape)}, expected (rows, {layout.width}) for this layout")


def reserve_plan(generator: Any, n_rows: int, session: BudgetSession, budget: Budget | None) -> list[Event]:
    """Step 1-2 of every `fit`: plan from `budget` and the public row count (or keep an earlier plan(),
    or plan from the generator's params), then reserve that plan in the ledger, before any row is read.
    Returns the planned events, which `fit` records once training is done."""
    if budget is not None or generator.privacy is None:
        p = generator.params
        generator.plan(n_rows, budget or Budget(p["epsilon"], float(p["delta"])))
    planned = [event_from_dict(e) for e in generator.privacy["events"]]
    session.reserve(planned)
    return planned


def check_encoded(name: str, layout: Layout, data: Any, why: str = "") -> None:
    """Refuse training rows that are not a (rows, layout.width) matrix in [0, 1] (numpy or torch), naming the
    first bad column and the fix; `why` says what breaks outside [0, 1]. Only the width is checked: the
    actual row count is private and may differ from the public n̂ the plan used (`check_width`)."""
    check_width(layout, data)
    inside = ((data >= 0) & (data <= 1)).all(0)
    bad = ~np.asarray(inside.cpu() if hasattr(inside, "cpu") else inside)  # torch on any device, or numpy
    if bad.any():
        col = int(np.flatnonzero(bad)[0])
        block = next(b for b in layout.blocks if b.start <= col < b.stop)
        raise ValueError(f"{name}: column '{block.column}' has encoded values outside [0, 1] (or NaN){why}. Fix: "
                         f"train on the output of the schema's Encoder (pipelines.data.transform), which scales "
                         f"numerics by the schema bounds and one-hot encodes categories")


def merge_params(name: str, defaults: dict[str, Any], params: dict | None,
                 phases: tuple[str, ...] = ("",)) -> dict[str, Any]:
    """A generator's params.yaml section over its DEFAULTS: unknown keys refused, `steps` or `epochs`
    (not both; steps wins over the default epochs) for each training phase (`<phase>steps`,
    `<phase>epochs`), epsilon as a float ("inf" allowed)."""
    params = params or {}
    unknown = set(params) - set(defaults)
    if unknown:
        raise ValueError(f"unknown {name} parameters {sorted(unknown)}; known: {sorted(defaults)}")
    merged = {**defaults, **params}
    for phase in phases:
        steps, epochs = f"{phase}steps", f"{phase}epochs"
        if params.get(epochs) is not None and params.get(steps) is not None:
            raise ValueError(f"give {name} '{steps}' or '{epochs}', not both")
        if merged[steps] is not None:
            merged[epochs] = None
    merged["epsilon"] = float(merged["epsilon"])
    return merged


def resolve_device(device: str) -> str:
    """'auto' picks CUDA when present; nothing requires a GPU."""
    import torch
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: cuda was requested but no CUDA device is available; use device: auto")
    return device
