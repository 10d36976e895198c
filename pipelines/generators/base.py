"""The generator contract (ARCHITECTURE §3): the abstract base class `PrivateGenerator` that owns every
generator's lifecycle, and what it needs: the budget, the ledger session a generator sees, input checks,
merging params, the device.

The registry of implemented generators is `pipelines.generators.registry`; persistence is
`pipelines.generators.persistence`; typed plans are `pipelines.privacy.plan`. This module imports no generator.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import numpy as np

from pipelines.data.layout import Layout, project_to_layout
from pipelines.generators.persistence import load_networks, read_meta, save_networks
from pipelines.privacy.events import Event
from pipelines.privacy.noise import NoiseSource, Streams
from pipelines.privacy.plan import PrivacyPlan, plan_from_dict


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


def check_width(layout: Layout, data: Any) -> None:
    """Refuse X unless it is 2-d with layout.width columns. Its row count is not checked: it is private
    (add/remove-one) and may differ from the public n̂ (len(X) of an EncodedTable) that plans and divisors use."""
    if len(data.shape) != 2 or data.shape[1] != layout.width:
        raise ValueError(f"X has shape {tuple(data.shape)}, expected (rows, {layout.width}) for this layout")


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


class PrivateGenerator(ABC):
    """The template every generator follows (scikit-learn's estimator shape: parameters in the constructor,
    validated once; Opacus's separation: the mechanisms and the accountant never import a method).

    Lifecycle, owned here; a subclass implements only its method (`_plan`, `_fit`, `_sample`, and `build`
    and `networks` when it has networks, `_state` / `_restore` when it keeps more than networks):

      gen = Cls(layout, params, device)        # params over `defaults` (merge_params), then build()
      gen.plan(n̂, budget) -> PrivacyPlan        # pure: public row count and budget only, no side effects
      gen.fit(X, session, budget, noise)       # plan; session.reserve(plan.events) BEFORE X is read;
                                               # read and check X; _fit(data, streams); session.record(spent)
      gen.sample(n, rng)                       # _sample, then the layout's one discretiser (exact rows)
      gen.save(dir); Cls.load(dir, device)     # <name>.json (params, layout, plan, state) + <network>.pt

    X may be a lazy table (tasks.train.EncodedTable): len() is the public n̂, rows are read by np.asarray.
    Randomness is explicit: initialisation and sampling from the public `seed` (`networks.initialise`,
    `sample`'s rng), DP noise from the `NoiseSource` passed to `fit` (OS entropy when none; params'
    `noise_seed` overrides it, for tests and audits), bound to the plan's privacy by `Streams`.
    A generator may also define `release_gates(self, real_encoded) -> list[GateResult]`, its own gates, run
    by check@gen after the ledger gate (they may read real training rows: say so in the evidence).
    """

    name: ClassVar[str]
    defaults: ClassVar[dict[str, Any]]
    phases: ClassVar[tuple[str, ...]] = ("",)  # training phases with their own steps / epochs (merge_params)
    input_note: ClassVar[str] = ""              # why encoded values must lie in [0, 1] (check_encoded's message)

    def __init__(self, layout: Layout, params: dict | None = None, device: str = "cpu") -> None:
        self.layout, self.device = layout, device
        self.params = merge_params(self.name, self.defaults, params, self.phases)
        self.check_params(self.params)
        self.privacy: PrivacyPlan | None = None
        self.build()

    @staticmethod
    def check_params(params: dict[str, Any]) -> None:
        """The rules of the params beyond their types (ParamError naming the key): a generator with rules sets
        this to its `pipelines.generators.params.<name>.check_params`, which `pipelines.config` also runs."""

    def build(self) -> None:
        """Create the networks or statistics from the (public) params; called once by the constructor."""

    @property
    def networks(self) -> dict[str, Any]:
        """The torch modules saved as <key>.pt and loaded back (none by default)."""
        return {}

    # -- privacy plan ------------------------------------------------------------------------
    def plan(self, n_rows: int, budget: Budget) -> PrivacyPlan:
        """The spend for `n_rows` (public n̂) under `budget`: data-independent, no side effect but remembering
        the plan for `fit`."""
        if n_rows < 1:
            raise ValueError(f"n_rows must be >= 1, got {n_rows}")
        self.privacy = self._plan(int(n_rows), budget)
        return self.privacy

    @abstractmethod
    def _plan(self, n_rows: int, budget: Budget) -> PrivacyPlan:
        """The method's plan: its mechanism parameters calibrated to `budget` for n̂ = `n_rows`."""

    # -- training ----------------------------------------------------------------------------
    def fit(self, X: Any, session: BudgetSession, budget: Budget | None = None,
            noise: NoiseSource | None = None) -> "PrivateGenerator":
        """Plan (from `budget` and len(X) = n̂, else an earlier plan(), else params' epsilon/delta), reserve the
        plan in the ledger before X is read, read and check X, train, record the events actually spent."""
        p = self.params
        if budget is not None or self.privacy is None:
            self.plan(len(X), budget or Budget(p["epsilon"], float(p["delta"])))
        plan = self.privacy
        session.reserve(list(plan.events))
        data = self._read(X)
        source = (noise or NoiseSource()).overridden(p["noise_seed"])
        spent = self._fit(data, source.streams(plan.private, int(p["seed"])))
        session.record(list(spent))
        return self

    def _read(self, X: Any) -> np.ndarray:
        """X as float32 rows of the layout's width in [0, 1] (its row count is private: not checked)."""
        data = np.asarray(X, dtype=np.float32)
        check_encoded(self.name, self.layout, data, self.input_note)
        return data

    @abstractmethod
    def _fit(self, data: np.ndarray, streams: Streams) -> Sequence[Event]:
        """Train on `data` under the reserved plan `self.privacy`; return the events actually spent."""

    # -- sampling ----------------------------------------------------------------------------
    def sample(self, n: int, rng: np.random.Generator | int) -> np.ndarray:
        """n synthetic encoded rows (float32), exact rows of the layout (`project_to_layout`: numerics in
        [0, 1], binaries 0/1, categoricals one-hot). `rng` (or an integer seed) drives every draw."""
        if self.privacy is None:
            raise RuntimeError(f"{self.name}: fit() or load() first")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(int(rng))
        if n == 0:
            return np.zeros((0, self.layout.width), dtype=np.float32)
        return project_to_layout(self._sample(int(n), rng), self.layout)

    @abstractmethod
    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n rows of the layout's width (soft values allowed: `sample` discretises them)."""

    # -- persistence -------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """What the method keeps beyond params, layout, plan and networks (strict JSON)."""
        return {}

    def _restore(self, state: dict[str, Any]) -> None:
        """Restore `_state()` after construction, before the networks' state dicts are loaded."""

    def save(self, directory: Path) -> None:
        """Write <name>.json (generator, params, layout, privacy plan, `_state()`) and <network>.pt."""
        save_networks(directory, self.name, self.networks, {
            "generator": self.name, "params": self.params, "layout": self.layout.to_dict(),
            "privacy": None if self.privacy is None else self.privacy.to_dict(), "state": self._state()})

    @classmethod
    def load(cls, directory: Path, device: str = "cpu") -> "PrivateGenerator":
        """A generator saved by `save`: built from the saved layout and params, `_restore`d, its networks'
        state dicts loaded, its plan typed."""
        meta = read_meta(directory, cls.name)
        model = cls(Layout.from_dict(meta["layout"]), meta["params"], device)
        model._restore(meta["state"])
        load_networks(directory, model.networks, device)
        model.privacy = None if meta["privacy"] is None else plan_from_dict(meta["privacy"])
        return model
