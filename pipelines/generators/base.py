"""The generator contract (ARCHITECTURE §3) and the registry of implemented generators.

Lifecycle, as the train stage drives it:
  gen = make_generator(name, layout, params, device)
  gen.fit(X, session, budget)   # 1. plan(len(X), budget): data-independent, public row count only
                                # 2. session.reserve(planned): refused here, before X is converted
                                # 3. train; 4. session.record(actual events)
  gen.save(dir); Generator.load(dir); gen.sample(n, seed)

X may be a lazy table (tasks.train.EncodedTable): len() is free, rows are read by np.asarray.
"""
from __future__ import annotations

import json
import math
import threading
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


class LedgerSession(Protocol):
    """What a generator sees of the ledger: one (data set, run, stage)."""

    def reserve(self, events: list[Event]) -> None: ...
    def record(self, events: list[Event]) -> list[int]: ...


@runtime_checkable
class Generator(Protocol):
    name: str

    def plan(self, n_rows: int, budget: Budget) -> list[Event]: ...
    def fit(self, X: np.ndarray, session: LedgerSession, budget: Budget | None = None) -> None: ...
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


def reserve_plan(generator: Any, n_rows: int, session: LedgerSession, budget: Budget | None) -> list[Event]:
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
    bad = np.asarray(~((data >= 0) & (data <= 1)).all(0))
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


def finite_json(obj: Any) -> Any:
    """Strict JSON: non-finite floats (ε = inf, clip_norm = inf) become the strings float() reads back."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def save_networks(directory: Path, name: str, networks: dict[str, Any], meta: dict[str, Any]) -> None:
    """Write <network>.pt per torch module and <name>.json (strict JSON) into `directory`."""
    import torch
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for key, net in networks.items():
        torch.save(net.state_dict(), directory / f"{key}.pt")
    (directory / f"{name}.json").write_text(json.dumps(finite_json(meta), indent=2, sort_keys=True) + "\n")


def read_meta(directory: Path, name: str) -> dict[str, Any]:
    """<name>.json as written by `save_networks`, with the privacy plan's non-finite floats restored."""
    meta = json.loads((Path(directory) / f"{name}.json").read_text())
    privacy = meta.get("privacy")
    if privacy is not None:
        privacy.update({k: float(v) for k, v in privacy.items()
                        if k in ("epsilon", "clip_norm", "ksd_clip", "autoencoder_clip_norm")})
    return meta


def load_networks(directory: Path, networks: dict[str, Any], device: str) -> None:
    """Load each module's <network>.pt and put it in eval mode."""
    import torch
    for key, net in networks.items():
        net.load_state_dict(torch.load(Path(directory) / f"{key}.pt", map_location=device))
        net.eval()


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


GENERATORS = ("dpwgan", "ppem", "dp_auto_gan", "pearl", "iw_mmd_gan", "support_points", "mst", "aim")  # the registry's names


def generator_class(name: str) -> type:
    """The class implementing generator `name` (imported lazily: torch is slow to import)."""
    if name == "dpwgan":
        from pipelines.generators.dpwgan import DPWGAN
        return DPWGAN
    if name == "ppem":
        from pipelines.generators.ppem import PPEM
        return PPEM
    if name == "dp_auto_gan":
        from pipelines.generators.dp_auto_gan import DPAutoGAN
        return DPAutoGAN
    if name == "pearl":
        from pipelines.generators.pearl import PEARL
        return PEARL
    if name == "iw_mmd_gan":
        from pipelines.generators.iw_mmd_gan import IWMMDGAN
        return IWMMDGAN
    if name == "support_points":
        from pipelines.generators.support_points import SupportPoints
        return SupportPoints
    if name == "mst":
        from pipelines.generators.mst import MST
        return MST
    if name == "aim":
        from pipelines.generators.aim import AIM
        return AIM
    raise ValueError(f"unknown generator {name!r}; implemented: {', '.join(GENERATORS)}")


_INIT_LOCK = threading.Lock()


def make_generator(name: str, layout: Layout, params: dict, device: str = "auto") -> Generator:
    """Constructors seed torch's process-wide RNG (fork_rng + manual_seed) to initialise their networks;
    one at a time, or generators built concurrently by the flow's threads would interleave its draws."""
    with _INIT_LOCK:
        return generator_class(name)(layout=layout, params=params, device=resolve_device(device))


def load_generator(name: str, directory: Path) -> Generator:
    return generator_class(name).load(Path(directory))
