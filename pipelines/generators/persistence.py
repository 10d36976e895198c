"""Saving and loading generators: one strict-JSON <name>.json (generator, params, layout, privacy plan and
what else a generator keeps) plus one <network>.pt state dict per torch module."""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pipelines.data.layout import Layout

T = TypeVar("T")
PLAN_FLOATS = ("epsilon", "clip_norm", "ksd_clip", "autoencoder_clip_norm")  # may be inf in a privacy plan


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
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if networks:
        import torch
        for key, net in networks.items():
            torch.save(net.state_dict(), directory / f"{key}.pt")
    (directory / f"{name}.json").write_text(json.dumps(finite_json(meta), indent=2, sort_keys=True) + "\n")


def read_meta(directory: Path, name: str) -> dict[str, Any]:
    """<name>.json as written by `save_networks`, with the privacy plan's non-finite floats restored."""
    meta = json.loads((Path(directory) / f"{name}.json").read_text())
    privacy = meta.get("privacy")
    if privacy is not None:
        privacy.update({k: float(v) for k, v in privacy.items() if k in PLAN_FLOATS})
    return meta


def load_networks(directory: Path, networks: dict[str, Any], device: str) -> None:
    """Load each module's <network>.pt and put it in eval mode."""
    if not networks:
        return
    import torch
    for key, net in networks.items():
        net.load_state_dict(torch.load(Path(directory) / f"{key}.pt", map_location=device))
        net.eval()


def save_model(directory: Path, generator: Any, networks: dict[str, Any], /, **extra: Any) -> None:
    """Write `generator` (its name, params, layout, privacy plan) with its `networks` and the `extra` JSON keys."""
    save_networks(directory, generator.name, networks, {
        "generator": generator.name, "params": generator.params, "layout": generator.layout.to_dict(),
        "privacy": generator.privacy, **extra})


def load_model(cls: type[T], directory: Path, device: str,
               restore: Callable[[T, dict[str, Any]], None] | None = None) -> T:
    """A generator saved by `save_model`: constructed from the saved layout and params, `restore(model, meta)`
    (what else it saved), its `networks` property's state dicts loaded (none without one), its privacy plan."""
    meta = read_meta(directory, cls.name)
    model = cls(Layout.from_dict(meta["layout"]), meta["params"], device)
    if restore is not None:
        restore(model, meta)
    load_networks(directory, getattr(model, "networks", {}), device)
    model.privacy = meta["privacy"]
    return model
