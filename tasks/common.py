"""What every stage task needs: its paths, the schema, the ledger, and the hashes JSON carries."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.config import Paths, params_hash
from pipelines.data.schema import Schema, load_schema
from pipelines.privacy.ledger import Ledger

STAGE_PARAMS = {  # the params.yaml sections each stage depends on (mirrors dvc.yaml)
    "validate": ("dataset",),
    "prepare": ("dataset",),
    "train": ("dataset", "privacy", "device"),
    "check": ("dataset", "privacy", "risk_gates"),
    "evaluate": ("dataset", "privacy", "evaluate", "device"),
    "weight": ("dataset", "privacy", "weights", "device"),
}


def paths(params: dict[str, Any], root: Path) -> Paths:
    return Paths(params["dataset"]["name"], Path(root))


def schema(params: dict[str, Any], root: Path) -> Schema:
    return load_schema(paths(params, root).schema)


def ledger(params: dict[str, Any], root: Path) -> Ledger:
    location = str(params["privacy"]["ledger"])
    if "://" not in location and not Path(location).is_absolute():
        location = str(Path(root) / location)
    return Ledger(location)


def hashes(params: dict[str, Any], stage: str, sch: Schema, generator: str | None = None) -> dict[str, str]:
    """Schema hash and the hash of exactly the params sections this stage depends on."""
    sections = STAGE_PARAMS.get(stage, tuple(sorted(params)))
    if generator:
        sections = sections + (generator,)
    return {"schema": sch.hash(), "params": params_hash({s: params.get(s) for s in sections})}
