"""What every stage task needs: its context (paths, schema, ledger, run id), and the hashes JSON carries."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import uuid
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from pipelines import selection
from pipelines.config import (
    PARAMS_FILE,
    SELECTION,
    Config,
    Paths,
    epsilon_value,
    generator_model,
    generator_params,
    params_hash,
)
from pipelines.data.schema import Schema, load_schema
from pipelines.errors import InputError
from pipelines.io import read_json
from pipelines.privacy.ledger import Ledger
from pipelines.privacy.noise import load_noise_key
from pipelines.privacy.paid import Account
from pipelines.selection import HEURISTIC, Selection

DVC_YAML = Path(__file__).resolve().parents[1] / "dvc.yaml"
ITEM = "${item}"  # a foreach stage's own generator (or weight estimator) section


def stage_params(dvc_yaml: Path = DVC_YAML) -> dict[str, tuple[str, ...]]:
    """Each stage's params.yaml keys, read from dvc.yaml itself (one place): a section ("dataset") or
    a dotted key ("privacy.delta"), or `${item}`: a foreach stage's own generator section, which
    `hashes` resolves. The hashes the artefacts carry then cover exactly what DVC tracks."""
    try:
        stages = yaml.safe_load(Path(dvc_yaml).read_text())["stages"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
        raise InputError(
            f"cannot read the stages' params from the pipeline definition ({e}).",
            file=str(dvc_yaml),
            fix="run from a checkout that has dvc.yaml with a 'stages:' mapping.",
        ) from e
    out = {}
    for name, stage in stages.items():
        body = stage.get("do", stage)
        keys = []
        for entry in body.get("params") or ():
            if isinstance(entry, dict):  # {params-file: [keys]}: only params.yaml is the release configuration
                keys += [k for f, ks in entry.items() if Path(f).name == "params.yaml" for k in ks or ()]
                if any(Path(f).name == "params.yaml" and not ks for f, ks in entry.items()):
                    break  # `- params.yaml:` with no keys: the whole file (a stage missing here hashes all of it)
            else:
                keys.append(str(entry))
        else:
            out[name] = tuple(keys)
    return out


STAGE_PARAMS = stage_params()  # parsed once, at import


@dataclass
class StageContext:
    """What one stage run works in, derived once: the checked configuration, the project `root`, the run id its
    ledger rows carry (None: each paid step names its own, `account`), and, on first use, the data set's paths,
    public schema, ledger and steward noise key."""

    config: Config
    root: Path = Path(".")
    run_id: str | None = None

    @cached_property
    def paths(self) -> Paths:
        return Paths(self.config.dataset.name, Path(self.root))

    @cached_property
    def schema(self) -> Schema:
        """The public schema, its `discover` parts filled from the discover stage's output (`Paths.discovered`)."""
        found = self.paths.discovered
        return load_schema(self.paths.schema, read_json(found)["columns"] if found.exists() else None)

    @cached_property
    def pending_schema(self) -> Schema:
        """The public schema with its `discover` parts still placeholders: what the discover stage reads, and the
        name, unit and population every ledger handle declares (the same in both)."""
        return load_schema(self.paths.schema, pending=True)

    @property
    def source(self) -> str:
        """`dataset.source` as a path the stage can open: `bundled:<name>`, or relative to the project root."""
        source = self.config.dataset.source
        if source.startswith("bundled:") or Path(source).is_absolute():
            return source
        return str(Path(self.root) / source)

    @cached_property
    def noise_key(self) -> bytes | None:
        """The steward key (pipelines.privacy.noise.load_noise_key), None without one."""
        return load_noise_key(self.config.privacy.noise_key_file, Path(self.root))

    @cached_property
    def ledger(self) -> Ledger:
        """The data set's ledger; with a steward key its rows are HMAC-chained (pipelines/privacy/ledger.py)."""
        location = self.config.privacy.ledger
        if "://" not in location and not Path(location).is_absolute():
            location = str(Path(self.root) / location)
        led = Ledger(location, self.noise_key)
        if self.paths.schema.exists():  # every stage has it; `synthrelease ledger verify` may run without
            sch = self.pending_schema  # one budget per population
            led.declare(self.config.dataset.name, population(self.config, sch), sch.unit_name)
        return led

    def hashes(self, stage: str, generator: str | None = None) -> dict[str, str]:
        """`hashes` of this stage's params keys and the schema."""
        return hashes(self.config, stage, self.schema, generator)

    def account(self, stage: str, run_prefix: str) -> Account:
        """The ledger account of a paid step of ledger stage `stage`: this run's id, else `<run_prefix>-<random>`,
        at the release's δ and lifetime ε."""
        priv = self.config.privacy
        return Account(
            self.paths.dataset,
            self.run_id or f"{run_prefix}-{uuid.uuid4().hex[:12]}",
            stage,
            priv.delta,
            priv.lifetime_epsilon,
            priv.internal_release,
        )


def paths(config: Config, root: Path) -> Paths:
    return StageContext(config, root).paths


def schema(config: Config, root: Path) -> Schema:
    return StageContext(config, root).schema


def ledger(config: Config, root: Path) -> Ledger:
    """The data set's ledger (`StageContext.ledger`)."""
    return StageContext(config, root).ledger


def population(config: Config, sch: Schema) -> str:
    """The population whose lifetime budget the table shares: the schema's `population`, else the data set."""
    return sch.population or config.dataset.name


def released_head(p: Paths) -> tuple[dict[str, Any] | None, str]:
    """The ledger head {"seq", "hash", ...} the last release of `p.dataset` recorded in releases/<ds>/latest.json
    (None before the first release, or for a release made before heads were recorded), and that file."""
    index = p.release_index
    head = read_json(index).get("ledger_head") if index.exists() else None
    return head, str(index.relative_to(p.root) if index.is_relative_to(p.root) else index)


def param_value(params: dict[str, Any], key: str) -> Any:
    """params[key] for a section, params[a][b] for a dotted key "a.b" (None where absent)."""
    value: Any = params
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def hashes(config: Config, stage: str, sch: Schema, generator: str | None = None) -> dict[str, str]:
    """Schema hash and the hash of exactly the params keys dvc.yaml lists for this stage (`${item}`: the
    generator's section) in the resolved configuration (`Config.resolved`: every key with the value the stages
    use); a stage dvc.yaml does not know hashes the whole configuration."""
    given = config.resolved
    keys = [
        generator if k == ITEM else k for k in STAGE_PARAMS.get(stage, tuple(sorted(given))) if k != ITEM or generator
    ]
    return {"schema": sch.hash(), "params": params_hash({k: param_value(given, k) for k in keys})}


def allocated_epsilon(config: Config, part: str, root: Path) -> float:
    """The ε that `part` (a generator, or "weights") plans and spends: its section's pinned `epsilon`, else what
    the budget stage allocated to it from privacy.release_epsilon (`Paths.allocation`, tasks/budget.py).

    A missing allocation, or one written for another release ε, δ or a then-pinned part, is an InputError:
    training at a stale ε would spend other than the release states."""
    pinned = config.weights.epsilon if part == "weights" else config.generator(part).get("epsilon")
    if pinned is not None:
        return epsilon_value(pinned)
    path, priv = paths(config, root).allocation(part), config.privacy
    fix = "run the budget stage first: `synthrelease stage budget` (`dvc repro` and the flow run it before training)."
    if not path.exists():
        raise InputError(f"'{part}' has no ε of its own and no allocated ε.", file=str(path), fix=fix)
    entry = read_json(path)
    now = {"release_epsilon": priv.release_epsilon, "delta": priv.delta}
    if entry.get("pinned") or any(float(entry.get(k, "nan")) != v for k, v in now.items()):
        raise InputError(
            f"the allocation of '{part}' was made for another configuration ({entry}; now {now}).",
            file=str(path),
            fix=fix,
        )
    return float(entry["epsilon"])


def check_against_schema(config: Config, sch: Schema) -> None:
    """What the configuration names of the table, checked against its public schema before any budget is spent
    (the validate and budget stages call it; `load_params` checked every type and range without the schema):
    a public row count (documented or noisy); each listed generator is built on the schema's layout (the columns
    its section names: ppem.protected, iw_mmd_gan.weights, mst/aim bins, calibration pairs, ...); the columns of
    evaluate.attacks, and the weights' public calibration file. Each problem is one InputError naming the key, the
    column and the fix."""
    from pipelines.data.transform import Encoder
    from pipelines.evaluation.attacks import suite
    from pipelines.generators.base import Budget
    from pipelines.generators.registry import make_generator
    from pipelines.privacy.unit import unit_events
    from pipelines.weights.postprocess import calibration_rows

    if sch.rows is None and config.privacy.row_count_epsilon is None:
        raise InputError(
            f"'privacy.row_count_epsilon' is null, but the schema '{sch.name}' declares no public "
            "'rows': the training row count would have no public value.",
            file=PARAMS_FILE,
            fix="set 'row_count_epsilon: 0.05' (prepare then releases a noisy count), or declare "
            "rows: {count, source} in the schema from the table's documentation.",
        )
    if sch.unit is not None and config.privacy.row_count_epsilon is None:
        raise InputError(
            f"'privacy.row_count_epsilon' is null, but schema '{sch.name}' declares a privacy_unit: "
            "bounding each unit to max_rows rows changes the row count, so no documented count "
            "describes the rows used.",
            file=PARAMS_FILE,
            fix="set 'row_count_epsilon: 0.05' (prepare then releases a noisy count of those rows).",
        )
    if sch.unit is not None and config.orchestration.task_runner == "dask":
        raise InputError(
            f"schema '{sch.name}' declares a privacy_unit, which the Dask runner does not bound yet (a "
            "unit's rows may lie in several parts).",
            file=PARAMS_FILE,
            fix="set 'orchestration.task_runner: local' for this table.",
        )
    fatal = [f"'{c.name}'" for c in (*sch.columns, *sch.derived) if c.on_invalid == "fatal"] + [
        f"rule '{r.describe()}'" for r in sch.rules if r.on_invalid == "fatal"
    ]
    if fatal and not config.privacy.internal_release:
        raise InputError(
            f"on_invalid: fatal on {', '.join(fatal)}: a fatal policy stops the run on one row, so "
            "whether a public release happens at all would be an exact function of single records, "
            "outside the DP guarantee.",
            file=f"schemas/{config.dataset.name}.yaml",
            fix="use on_invalid: drop (or clip for a numeric column): the rows are counted in "
            "validation.json and prepare's DP row-loss test decides whether the release goes on; "
            "fatal is for internal releases only (privacy.internal_release: true).",
        )
    select(config, 0)  # the selection's refusals (a heuristic generator without its opt-in): params only
    layout = Encoder(sch).layout
    for name in config.generators:
        try:
            gen = make_generator(
                name,
                layout,
                generator_params(config, name, config.generator(name).get("epsilon") or config.privacy.release_epsilon),
                "cpu",
            )
            if hasattr(type(gen), "weight_fn"):  # iw_mmd_gan builds its public weight function lazily
                gen.weight_fn
        except ValueError as e:
            raise generator_error(e, name, sch) from None
        if sch.unit is not None and name == "private_selection":  # its candidates' accounting at the unit
            try:
                unit_events(
                    gen.plan(UNIT_CHECK_ROWS, Budget(config.privacy.release_epsilon, config.privacy.delta)).events,
                    sch.max_rows,
                )
            except ValueError as e:
                raise InputError(
                    f"'{name}' cannot run at the schema's privacy unit ({sch.unit_name}): {e}",
                    file=PARAMS_FILE,
                    fix=f"name only candidates without DP-SGD in '{name}.candidates' (mst, aim, pearl, "
                    "support_points), or choose one generator (release.select: auto).",
                ) from None
    suite.settings(config.evaluate.attacks, sch)
    weights = config.weights
    if weights.generators and weights.calibration is not None:
        calibration_rows(Path(weights.calibration), sch)


UNIT_CHECK_ROWS = 1000  # the public row count a unit's refusal is checked at (it does not depend on it)


def select(config: Config, n_rows: int) -> Selection:
    """The release's selection (pipelines/selection.py `select`) from the params and the public training row count
    `n_rows` (n̂): `release.select`, the configured generators, the release ε, `support_points.accept_heuristic` and,
    under `private`, the private selection's candidates."""
    mode = config.release.select
    accepted = config.generator(HEURISTIC).get(
        "accept_heuristic", generator_model(HEURISTIC).model_fields["accept_heuristic"].default
    )
    private = (
        generator_params(config, SELECTION, 1.0)["candidates"]
        if mode == "private" and SELECTION in config.generators
        else ()
    )
    return selection.select(mode, config.generators, n_rows, config.privacy.release_epsilon, bool(accepted), private)


def generator_error(e: ValueError, name: str, sch: Schema) -> InputError:
    """A generator's refusal of its params (a ValueError naming the key) as the InputError of params.yaml."""
    named = re.findall(rf"\b{re.escape(name)}(?:\.\w+)+", str(e))  # the key path the message names
    key = getattr(e, "key", None) or (named[0] if named else name)
    problem, _, fix = str(e).partition(" Fix: ")
    problem = problem.removeprefix(key).lstrip(": ").rstrip(".")  # the message's own key path, once
    return InputError(
        f"'{key}': {problem}.",
        file=PARAMS_FILE,
        fix=fix
        or (
            f"correct '{key}' so that it names columns of the public schema '{sch.name}' (of the kind it "
            "needs), or delete it for its default."
        ),
    )


def generator_section(config: Config, generator: str, root: Path) -> dict[str, Any]:
    """The generator's params.yaml section at its allocated (or pinned) ε, as its class takes it."""
    return generator_params(config, generator, allocated_epsilon(config, generator, root))


SPLIT_KEY_CONTEXT = b"synthrelease/train-holdout-split/v1"


def salt_path(config: Config, root: Path) -> Path:
    """Where the data set's split salt lives when there is no steward key: next to the ledger when the ledger
    is a file path (`ledger/<ds>.split-salt`), else `data/secrets/<ds>.split-salt`. Both are gitignored, not
    DVC outputs (so `dvc repro` keeps them) and never copied into `releases/`."""
    ds, location = config.dataset.name, config.privacy.ledger
    if "://" in location:
        return Path(root) / "data" / "secrets" / f"{ds}.split-salt"
    ledger = Path(location) if Path(location).is_absolute() else Path(root) / location
    return ledger.parent / f"{ds}.split-salt"


def _read_or_create_salt(path: Path) -> bytes:
    """The 256-bit salt in `path` (hex), created with `secrets` on first use (exclusive create, mode 0600,
    so two concurrent first runs agree on one salt)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32) + "\n")
    text = path.read_text().strip()
    try:
        salt = bytes.fromhex(text)
    except ValueError:
        salt = b""
    if len(salt) < 32:
        raise InputError(
            "the split salt is not 64+ hex digits.",
            file=str(path),
            fix="delete the file: the next prepare creates a new salt (and a new train/holdout split; "
            "re-run it with `dvc repro -f prepare`).",
        )
    return salt


def split_key(config: Config, root: Path) -> tuple[bytes, str]:
    """(key, where it comes from). With a steward noise key: HMAC-SHA256(noise key, context | data set), a
    split-specific key (the noise key itself is never used raw). Else the data set's salt file."""
    ds = config.dataset.name
    noise_key = load_noise_key(config.privacy.noise_key_file, root)
    if noise_key is not None:
        key = hmac.new(noise_key, SPLIT_KEY_CONTEXT + b"\x1f" + ds.encode(), hashlib.sha256).digest()
        return key, "HMAC-SHA256 of the steward's noise key"
    path = salt_path(config, root)
    return _read_or_create_salt(path), f"random salt in {path}"


def unit_facts(sch: Schema) -> dict[str, str]:
    """The privacy unit a paid result was computed for, for its inputs hash (nothing for one row, so row-level hashes
    are unchanged): a result paid at another unit is never reused, its noise was calibrated for another sensitivity."""
    return {} if sch.unit is None else {"unit": sch.unit_name}
