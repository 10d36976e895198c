"""What the generator benchmarks on Adult share (`frontier.py`, `scaling.py`): the split, each generator's
params, a timed fit and sample under a throwaway ledger.

Not a release: the generators get a fixed `noise_seed` (a published noise seed voids the guarantee, so these
tables are benchmark artefacts only) and no row count is released (n̂ = the rows passed).
"""

from __future__ import annotations

import importlib
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from pipelines.data.readers import read_table
from pipelines.data.schema import Schema, load_schema
from pipelines.data.transform import Encoder, train_holdout_split
from pipelines.data.validation import validate_table
from pipelines.generators.base import Budget
from pipelines.generators.names import GENERATORS, params_module
from pipelines.generators.registry import generator_class
from pipelines.privacy.ledger import Ledger
from pipelines.runtime import torch_threads

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "schemas" / "adult.yaml"
# The one choice the defaults leave to the steward on Adult: PPEM's α-LMDP columns must be numeric, and the
# schema's protected columns (sex, race) are categorical. Age, a protected characteristic, is chosen here.
STEWARD_CHOICES: dict[str, dict[str, Any]] = {"ppem": {"protected": ["age"]}}


def bundled(name: str, seed: int, holdout_fraction: float = 0.2) -> tuple[Schema, pd.DataFrame, pd.DataFrame]:
    """(schema, training rows, holdout rows) of the validated bundled table `name` (`schemas/<name>.yaml`, read
    as `bundled:<name>`), split by the project's per-row keyed split (`train_holdout_split`, integer key =
    `seed`): the holdout is disjoint from every training subsample."""
    schema = load_schema(ROOT / "schemas" / f"{name}.yaml")
    raw, label = read_table(f"bundled:{name}", schema)
    train, holdout = train_holdout_split(validate_table(raw, schema, label)[0], holdout_fraction, seed)
    return schema, train, holdout


def adult(seed: int, holdout_fraction: float = 0.2) -> tuple[Schema, pd.DataFrame, pd.DataFrame]:
    """`bundled` Adult."""
    return bundled("adult", seed, holdout_fraction)


def subsample(frame: pd.DataFrame, rows: int, seed: int, flag: str = "--rows") -> pd.DataFrame:
    """A seeded subsample of `rows` rows; ValueError naming `flag` when the table has fewer."""
    if not 0 < rows <= len(frame):
        raise ValueError(f"{flag} {rows}: the table has {len(frame)} rows available here; pass 1..{len(frame)}")
    return frame.sample(n=rows, random_state=seed).reset_index(drop=True)


def sub_schema(schema: Schema, names: list[str]) -> Schema:
    """The schema restricted to `names` (schema order kept; protected columns and related pairs outside it dropped)."""
    unknown = sorted(set(names) - set(schema.names))
    if unknown:
        raise ValueError(f"{SCHEMA}: no columns {unknown}; columns: {', '.join(schema.names)}")
    return replace(
        schema,
        columns=tuple(c for c in schema.columns if c.name in names),
        protected=tuple(p for p in schema.protected if p in names),
        related=tuple(q for q in schema.related if set(q) <= set(names)),
    )


def overrides(
    params_file: Path | None, sets: list[str], generators: list[str], choices: dict[str, dict[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """Per-generator param overrides: `choices` (default: Adult's `STEWARD_CHOICES`), the generator's section of
    `params_file` (a params.yaml-shaped file or {generator: {key: value}}), then each `--set gen.key=value` (value
    read as YAML).
    `epsilon` and `share` are dropped from the file: the benchmark decides ε."""
    choices = STEWARD_CHOICES if choices is None else choices
    out: dict[str, dict[str, Any]] = {g: dict(choices.get(g, {})) for g in generators}
    if params_file is not None:
        loaded = yaml.safe_load(params_file.read_text()) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{params_file}: expected a mapping of generator sections, e.g. pearl: {{steps: 2000}}")
        for g in generators:
            section = loaded.get(g) or {}
            if not isinstance(section, dict):
                raise ValueError(f"{params_file}: section {g!r} must be a mapping of params, got {section!r}")
            out[g].update({k: v for k, v in section.items() if k not in ("epsilon", "share")})
    for item in sets:
        key, eq, value = item.partition("=")
        gen, dot, name = key.partition(".")
        if not (eq and dot and name) or gen not in GENERATORS:
            raise ValueError(
                f"--set {item!r}: expected GENERATOR.KEY=VALUE with GENERATOR one of "
                f"{', '.join(GENERATORS)}, e.g. pearl.steps=2000"
            )
        if gen in out:
            out[gen][name] = yaml.safe_load(value)
    return out


def generator_params(name: str, extra: dict[str, Any], seed: int) -> dict[str, Any]:
    """Defaults plus `extra`, with the public seed and a fixed noise seed where the generator's `Params` has
    those keys (the schema's bounds and public bins reach every generator through the encoder's layout)."""
    keys = importlib.import_module(params_module(name)).Params.model_fields
    fixed = {"seed": seed, "noise_seed": seed}
    return {**{k: v for k, v in fixed.items() if k in keys}, **extra}


@dataclass
class Run:
    """One generator fitted and sampled: the decoded synthetic table and the seconds each part took."""

    synth: pd.DataFrame
    fit_s: float
    sample_s: float
    privacy: dict[str, Any]
    uncalibrated: tuple[str, ...]  # columns the method keeps apart from the real marginals (PPEM's α-LMDP x′)


def fit_and_sample(
    name: str,
    schema: Schema,
    train: pd.DataFrame,
    params: dict[str, Any],
    epsilon: float,
    delta: float,
    seed: int,
    n_synth: int | None = None,
) -> Run:
    """Fit generator `name` on `train` at (ε, δ) under a throwaway ledger, then sample `n_synth` rows (default
    len(train)) and decode them. fit_s: planning, the ledger reservation, training; sample_s: sampling and
    decoding. Torch threads: this process's cores (`pipelines.runtime`)."""
    torch_threads()
    encoder = Encoder(schema)
    gen = generator_class(name)(encoder.layout, params, "cpu")
    X = encoder.encode(train)
    with tempfile.TemporaryDirectory() as tmp:
        session = Ledger(str(Path(tmp) / "ledger.sqlite")).session(
            "bench", "bench", f"train@{name}", delta, float("inf")
        )
        start = time.perf_counter()
        gen.fit(X, session, Budget(epsilon, delta))
        fit_s = time.perf_counter() - start
    start = time.perf_counter()
    synth = encoder.decode(gen.sample(n_synth or len(train), np.random.default_rng(seed)))
    sample_s = time.perf_counter() - start
    privacy = {k: v for k, v in gen.privacy.to_dict().items() if k != "events"}
    return Run(synth, fit_s, sample_s, privacy, tuple(sorted(gen.calibration.hidden)))
