"""The generator contract (docs/architecture.md, contracts): the abstract base class `PrivateGenerator` that owns every
generator's lifecycle, and what it needs: the budget, the ledger session a generator sees, input checks,
the device.

The registry of implemented generators is `pipelines.generators.registry`; persistence is
`pipelines.generators.persistence`; typed plans are `pipelines.privacy.plan`. This module imports no generator.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Protocol

import numpy as np

from pipelines.data.encoded import RowChunks
from pipelines.io import ROW_GROUP_ROWS
from pipelines.data.layout import Layout
from pipelines.parameters import GeneratorParams, parsed
from pipelines.generators.encoding import ModelEncoding
from pipelines.generators.persistence import load_networks, read_meta, save_networks
from pipelines.marginal.calibration import Calibration, Weights, counts
from pipelines.privacy.events import Event
from pipelines.gates.release import GateResult
from pipelines.privacy.noise import NoiseSource, Streams
from pipelines.privacy.plan import PrivacyPlan, plan_from_dict
from pipelines.privacy.unit import unit_events, unit_plan


@dataclass(frozen=True)
class Budget:
    """The privacy budget one generator may spend: target (ε, δ) for one privacy unit of at most `unit_rows` rows
    (1: one row). ε = inf means non-private."""

    epsilon: float
    delta: float
    unit_rows: int = 1

    @property
    def private(self) -> bool:
        return math.isfinite(self.epsilon)


STANDALONE_DELTA = 1e-5  # δ of fit() given no budget and no plan (library use); the pipeline plans at privacy.delta


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
        raise ValueError(
            f"{name}: column '{block.column}' has encoded values outside [0, 1] (or NaN){why}. Fix: "
            f"train on the output of the schema's Encoder (pipelines.data.transform), which scales "
            f"numerics by the schema bounds and one-hot encodes categories"
        )


def read_checked(X: Any, check: Callable[[np.ndarray], None]) -> np.ndarray:
    """X as float32 rows, refused by `check` unless they are of the layout's width in [0, 1] (the row count is
    private: not checked)."""
    data = np.asarray(X, dtype=np.float32)
    check(data)
    return data


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


def runtime_facts(device: str, session: Any = None) -> dict[str, Any]:
    """What of the run, beyond code, params and plan, decides a private step's result bit for bit (the noise
    binding, pipelines/privacy/noise.py): the device and torch's thread count; on a device without
    deterministic reductions (CUDA) also the ledger reservation (seq, run, stage), which no other spend shares,
    so that a re-run there never reuses noise for a result that may differ."""
    import torch

    facts: dict[str, Any] = {"device": str(device), "threads": torch.get_num_threads()}
    reservation = getattr(session, "reservation", None)
    if not str(device).startswith("cpu") and reservation is not None:
        facts["reservation"] = [reservation.seq, reservation.run_id, reservation.stage]
    return facts


class PrivateGenerator(ABC):
    """The template every generator follows (scikit-learn's estimator shape: parameters in the constructor,
    validated once; Opacus's separation: the mechanisms and the accountant never import a method).

    Lifecycle, owned here; a subclass implements only its method (`_plan`, `_fit`, `_sample`, and `build`
    and `networks` when it has networks, `_state` / `_restore` when it keeps more than networks):

      gen = Cls(layout, params, device)        # params checked by Cls.Params, then build(); with
                                               # numeric_encoding: bins or a long code list the method sees
                                               # the model layout (`self.layout`, the `self.encoding` part,
                                               # `pipelines.generators.encoding`); the table's is
                                               # `self.table_layout`
      gen.plan(n̂, budget) -> PrivacyPlan        # pure: public row count and budget only, no side effects;
                                               # under a unit of k rows the row-level plan whose events, at
                                               # the unit (`planned_events`), meet the budget
      gen.fit(X, session, budget, noise)       # plan; session.reserve(plan.events) BEFORE X is read;
                                               # read and check X (or, `reads_in_chunks`, hand `_fit` passes
                                               # over it, each chunk checked as read); _fit(data, streams);
                                               # session.record(spent)
      gen.sample(n, rng)                       # _sample, then the layout's one discretiser (exact rows of
                                               # the table: `encoding.table_rows`), then the DP marginal
                                               # calibration (below)
      gen.save(dir); Cls.load(dir, device)     # <name>.json (params, layout, plan, state) + <network>.pt

    X may be a lazy table (pipelines.data.encoded.EncodedTable): len() is the public n̂, rows are read by np.asarray.
    Randomness is explicit: initialisation and sampling from the public `seed` (`networks.initialise`,
    `sample`'s rng), DP noise from the `NoiseSource` passed to `fit` (OS entropy when none; params'
    `noise_seed` overrides it, for tests and audits), bound to the plan's privacy by `Streams`.
    `release_gates(real_encoded)`: a generator's own gates (none by default), run by check@gen after the DP
    gates (they may read real training rows: say so in the evidence). `drawn_by`: the registered generator whose
    model draws the rows: itself (a meta-generator sets its chosen candidate, an output of its own DP mechanism:
    `PrivateSelection`).

    Calibration: `self.calibration` (`pipelines.marginal.calibration.Calibration`, on when the params'
    `calibration.share` > 0) is composed around the method: `plan` lets it split ε, `fit` records its event after
    `_fit` (which sees the method's plan alone), `sample` lets it rake an oversampled draw, `save`/`load` keep its
    noisy marginals. A subclass hands the parts what only it knows as constructor arguments: `scaled`, the numeric
    columns the encoding keeps scaled under bins (default: the protected ones); `uncalibrated`, the columns the
    calibration must not measure nor match (PPEM's x′); `weights`, public importance weights its marginals sum
    instead of counting rows (IW-MMD-GAN).
    """

    name: ClassVar[str]
    Params: ClassVar[type[GeneratorParams]]  # its parameters module's class (`__init_subclass__`)
    input_note: ClassVar[str] = ""  # why encoded values must lie in [0, 1] (check_encoded's message)
    reads_in_chunks: ClassVar[bool] = False  # `_fit` gets `RowChunks` (passes over row groups), not one matrix
    chunk_rows: int = ROW_GROUP_ROWS  # rows per chunk when it does (an instance may read smaller chunks)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A method class names itself (`name`); its parameters are the `Params` class of its parameters module
        `pipelines.generators.params.<name>` (which `pipelines.config` reads too, without importing the method)."""
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            cls.Params = importlib.import_module(f"pipelines.generators.params.{cls.name}").Params

    def __init__(
        self,
        layout: Layout,
        params: GeneratorParams | dict[str, Any] | None = None,
        device: str = "cpu",
        *,
        scaled: Iterable[str] | None = None,
        uncalibrated: Iterable[str] = (),
        weights: Callable[[], Weights] = counts,
    ) -> None:
        self.table_layout = layout  # the table's layout; `layout`: the one the method trains on
        self.device = device
        self.params = parsed(self.Params, params, self.name)  # ParamError naming `<name>.key`
        self.encoding = ModelEncoding(layout, self.params, scaled)
        self.layout = self.encoding.layout
        self.privacy: PrivacyPlan | None = None
        self.unit_rows = 1  # the privacy unit's rows the plan was made for (`plan`)
        self.drawn_by = self.name
        self.calibration = Calibration.of(self.name, layout, self.params, uncalibrated, weights)
        self.build()

    def release_gates(self, real_encoded: Any) -> list[GateResult]:
        """This generator's own release gates on the encoded training rows (array-like; a lazy EncodedTable is
        read by np.asarray only by a gate that needs it): PPEM's α-LMDP tests, the support points' R̂. They read
        real rows outside DP, so `release.non_dp_gates` decides whether they refuse."""
        return []

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

        def row_plan(epsilon: float) -> PrivacyPlan:  # the method and its calibration at row level
            return self.calibration.plan(
                lambda eps: self._plan(int(n_rows), Budget(eps, budget.delta)), int(n_rows), epsilon, budget.delta
            )

        # under a unit of k rows: the row-level plan whose events, converted to the unit, meet (ε, δ)
        self.privacy = unit_plan(row_plan, budget.epsilon, budget.delta, budget.unit_rows)
        self.unit_rows = int(budget.unit_rows)
        return self.privacy

    def planned_events(self) -> list[Event]:
        """The plan's events at the privacy unit it was made for (`pipelines.privacy.unit.unit_events`): what the
        ledger reserves and composes."""
        if self.privacy is None:
            raise RuntimeError(f"{self.name}: plan() first")
        return unit_events(self.privacy.events, self.unit_rows)

    @abstractmethod
    def _plan(self, n_rows: int, budget: Budget) -> PrivacyPlan:
        """The method's plan: its mechanism parameters calibrated to `budget` for n̂ = `n_rows`."""

    # -- training ----------------------------------------------------------------------------
    def fit(
        self, X: Any, session: BudgetSession, budget: Budget | None = None, noise: NoiseSource | None = None
    ) -> "PrivateGenerator":
        """Plan (from `budget` and len(X) = n̂, else an earlier plan(), else params' epsilon at STANDALONE_DELTA),
        reserve the plan in the ledger before X is read, read and check X, train, record the events actually spent."""
        p = self.params
        if budget is not None or self.privacy is None:
            self.plan(len(X), budget or Budget(p.epsilon, STANDALONE_DELTA))
        plan = self.privacy
        session.reserve(self.planned_events())
        # the check as a function of the rows that a Dask worker can run (`RowChunks.map`: no part of the generator)
        check = partial(check_encoded, self.name, self.table_layout, why=self.input_note)
        data = RowChunks(X, check, self.chunk_rows) if self.reads_in_chunks else read_checked(X, check)
        source = (
            (noise or NoiseSource())
            .overridden(p.noise_seed)
            .bound(plan=plan.to_dict(), **runtime_facts(self.device, session))
        )
        streams = source.streams(plan.private, p.seed)
        self.privacy = plan.method_plan()  # the method trains under its own part of the plan
        try:
            spent = list(self._fit(self.encoding.model_rows(data), streams))
        finally:
            self.privacy = plan
        if (event := self.calibration.measure(plan, data, streams)) is not None:
            spent.append(event)
        session.record(unit_events(spent, self.unit_rows))
        return self

    @abstractmethod
    def _fit(self, data: np.ndarray, streams: Streams) -> Sequence[Event]:
        """Train on `data` under the reserved plan `self.privacy`; return the events actually spent."""

    # -- sampling ----------------------------------------------------------------------------
    def sample(self, n: int, rng: np.random.Generator | int) -> np.ndarray:
        """n synthetic encoded rows (float32), exact rows of the table's layout (`encoding.table_rows`: numerics in
        [0, 1], binaries 0/1, categoricals one-hot). `rng` (or an integer seed) drives every draw."""
        if self.privacy is None:
            raise RuntimeError(f"{self.name}: fit() or load() first")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(int(rng))
        if n == 0:
            return np.zeros((0, self.table_layout.width), dtype=np.float32)
        return self.calibration.sample(lambda m: self.encoding.table_rows(self._sample(m, rng)), int(n), rng)

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
        save_networks(
            directory,
            self.name,
            self.networks,
            {
                "generator": self.name,
                "params": self.params.model_dump(),
                "layout": self.table_layout.to_dict(),
                "privacy": None if self.privacy is None else self.privacy.to_dict(),
                "state": self._state(),
                "calibration": self.calibration.to_dict(),
            },
        )

    @classmethod
    def load(cls, directory: Path, device: str = "cpu") -> "PrivateGenerator":
        """A generator saved by `save`: built from the saved layout and params, `_restore`d, its networks'
        state dicts loaded, its plan typed."""
        meta = read_meta(directory, cls.name)
        model = cls(Layout.from_dict(meta["layout"]), meta["params"], device)
        model._restore(meta["state"])
        load_networks(directory, model.networks, device)
        model.privacy = None if meta["privacy"] is None else plan_from_dict(meta["privacy"])
        model.calibration.restore(meta.get("calibration"), model.privacy, directory)
        return model
