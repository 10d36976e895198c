"""Saving and loading generators: one strict-JSON <name>.json (generator, params, layout, privacy plan and
what else a generator keeps) plus one <network>.pt state dict per torch module."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


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
    """<name>.json as written by `save_networks` (the plan's "inf" strings are restored by `plan_from_dict`)."""
    return json.loads((Path(directory) / f"{name}.json").read_text())


def load_networks(directory: Path, networks: dict[str, Any], device: str) -> None:
    """Load each module's <network>.pt and put it in eval mode."""
    if not networks:
        return
    import torch

    for key, net in networks.items():
        net.load_state_dict(torch.load(Path(directory) / f"{key}.pt", map_location=device))
        net.eval()
