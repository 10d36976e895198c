"""The release configuration (params.yaml) and where each stage's artefacts live."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipelines.errors import InputError
from pipelines.io import canonical_json, sha256_text

REQUIRED = {
    "dataset": ("name", "source", "holdout_fraction"),
    "privacy": ("delta", "lifetime_epsilon", "ledger"),
}


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """Read and check params.yaml; every problem names the key and the fix."""
    path = Path(path)
    if not path.exists():
        raise InputError("the release configuration is missing.", file=str(path),
                         fix="run from the project root or pass --params PATH.")
    try:
        params = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise InputError(f"not valid YAML ({e}).", file=str(path), fix="correct the YAML syntax.") from e
    for section, keys in REQUIRED.items():
        for key in keys:
            if key not in (params.get(section) or {}):
                raise InputError(f"missing key '{section}.{key}'.", file=str(path),
                                 fix=f"add '{key}:' under '{section}:' (see the README).")
    if "split_seed" in params["dataset"]:
        raise InputError("'dataset.split_seed' was removed: the train/holdout split is now a keyed hash of each "
                         "row's content with a secret key (so adding a row moves no other row, and nobody can "
                         "recompute the split from a public seed).", file=str(path),
                         fix="delete 'split_seed:' under 'dataset:' (docs/architecture.md, 'Neighbouring relation').")
    params["privacy"]["row_count_epsilon"] = parse_epsilon(
        params["privacy"].get("row_count_epsilon", 0.05), "privacy.row_count_epsilon", path)
    if not math.isfinite(params["privacy"]["row_count_epsilon"]):
        raise InputError("'privacy.row_count_epsilon' must be finite: the training row count is released with "
                         "Laplace noise when the schema declares no public 'rows'.", file=str(path),
                         fix="set 'row_count_epsilon: 0.05', or declare rows: {count, source} in the schema.")
    gens = params.get("generators")
    if not isinstance(gens, list) or not gens:
        raise InputError("'generators' must be a non-empty list.", file=str(path),
                         fix="e.g. 'generators: [dpwgan]'.")
    for g in gens:
        if not isinstance(params.get(g), dict):
            raise InputError(f"generator '{g}' is listed but has no '{g}:' section.", file=str(path),
                             fix=f"add a '{g}:' section with at least 'epsilon:'.")
        params[g]["epsilon"] = parse_epsilon(params[g].get("epsilon"), f"{g}.epsilon", path)
    delta = params["privacy"]["delta"]
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise InputError(f"privacy.delta must lie in (0, 1), got {delta!r}.", file=str(path),
                         fix="use e.g. 1.0e-5 (well below 1/number of rows).")
    params["privacy"]["lifetime_epsilon"] = parse_epsilon(
        params["privacy"]["lifetime_epsilon"], "privacy.lifetime_epsilon", path)
    params.setdefault("device", "auto")
    params.setdefault("evaluate", {})
    return params


def parse_epsilon(value: Any, key: str, path: Path) -> float:
    """ε is a positive number or 'inf' (non-private; such a model can never pass the ledger gate)."""
    try:
        eps = float(value)
    except (TypeError, ValueError):
        eps = math.nan
    if not eps > 0:
        raise InputError(f"'{key}' must be a positive number or inf, got {value!r}.", file=str(path),
                         fix=f"set '{key}: 1.0' (or another positive ε).")
    return eps


def params_hash(params: dict[str, Any]) -> str:
    return sha256_text(canonical_json(params))


@dataclass(frozen=True)
class Paths:
    """Artefact locations for one data set (relative to the project root)."""
    dataset: str
    root: Path = Path(".")

    @property
    def schema(self) -> Path:
        return self.root / "schemas" / f"{self.dataset}.yaml"

    @property
    def validated(self) -> Path:
        return self.root / "data" / "raw" / self.dataset / "validated.parquet"

    @property
    def validation_report(self) -> Path:
        return self.root / "reports" / self.dataset / "validation.json"

    @property
    def prepared(self) -> Path:
        return self.root / "data" / "prepared" / self.dataset

    def model(self, gen: str) -> Path:
        return self.root / "models" / self.dataset / gen

    def checks(self, gen: str) -> Path:
        return self.root / "reports" / self.dataset / gen / "checks.json"

    def metrics(self, gen: str) -> Path:
        return self.root / "reports" / self.dataset / gen / "metrics.json"

    def synthetic(self, gen: str) -> Path:
        return self.root / "data" / "synthetic" / self.dataset / f"{gen}.parquet"

    @property
    def releases(self) -> Path:
        return self.root / "releases" / self.dataset

    @property
    def release_index(self) -> Path:
        return self.releases / "latest.json"
