"""Every numeric configuration key has one declared Range (pipelines/ranges.py) beside its default, and the
configuration is refused where it is parsed exactly when a value lies outside it: `load_params` with one
InputError naming the file, the key, the range, the value and the fix, and `synthrelease stage validate` with
exit code 2 before any stage writes anything (no ledger row)."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from flows.cli import main
from pipelines.config import generator_model, load_params, parse_params, section_models
from pipelines.errors import InputError, ParamError
from pipelines.generators.names import GENERATORS
from pipelines.parameters import Calibration, parsed
from pipelines.ranges import MAX_STEPS, Range, ints, reals
from support.config import ledger_count, root_with
from support.project import env

ROOT = Path(__file__).resolve().parents[1]
BASE = yaml.safe_load((ROOT / "params.yaml").read_text())
# (key path, a value of the right type outside its range) that only load_params' range checks stop: with
# batch_size 0 unchecked, prepare would spend the row count's ε, then budget would die dividing by it
SEVEN = [
    ("dpwgan.batch_size", 0, "an integer in [1, 1000000]"),
    ("dpwgan.clip_norm", -5, "a positive finite number"),
    ("dpwgan.lr_critic", -1, "a positive finite number"),
    ("dpwgan.latent_dim", 0, "an integer in [1, 8192]"),
    ("aim.max_model_size", -1, "a number in (0, 10000]"),
    ("aim.iters", 0, "an integer in [1, 1000000]"),
    ("mst.iters", -3, "an integer in [1, 1000000]"),
]
# keys without a default, or with a null one, whose value is not a number (a name, a file, columns, a mapping)
NOT_NUMBERS = {
    "dataset.name",
    "dataset.source",
    "privacy.ledger",
    "privacy.noise_key_file",
    "orchestration.dask_address",
    "evaluate.attacks.secret",
    "evaluate.attacks.known",
    "evaluate.attacks.linkability_columns",
    "weights.calibration",
    "ppem.protected",
    "iw_mmd_gan.weights",
    "aim.target",
    "private_selection.candidates",
}
# the smallest file every key is tried in: one generator, an internal release (so a fixed noise seed is allowed)
MINIMAL = {
    "dataset": BASE["dataset"],
    "privacy": {**BASE["privacy"], "internal_release": True},
    "generators": ["dpwgan"],
    "dpwgan": {},
}


def with_value(params: dict, path: str, value: Any) -> dict:
    """`params` with key path `path` ('evaluate.attacks.max_rows', 'dpwgan.calibration.sweeps') set to `value`."""
    out = copy.deepcopy(params)
    *parents, leaf = path.split(".")
    section = out
    for part in parents:
        if not isinstance(section.get(part), dict):
            section[part] = {}
        section = section[part]
    section[leaf] = value
    return out


def range_of(field: Any) -> Range | None:
    return next((m for m in field.metadata if isinstance(m, Range)), None)


def default_of(field: Any) -> Any:
    return None if field.is_required() else field.get_default(call_default_factory=True)


def models() -> dict[str, Any]:
    """Every model the configuration is checked by, by key path: the sections and every generator's section."""
    return {**section_models(), **{g: generator_model(g) for g in GENERATORS}}


def declared() -> dict[str, tuple[Range, Any]]:
    """Every declared Range by key path, with the key's default: read from the models (and, for the nested
    `calibration:` mapping each generator takes, from `Calibration` over the generator's default), not listed by
    hand."""
    out = {}
    for path, model in models().items():
        for key, field in model.model_fields.items():
            if range_of(field) is not None:
                out[f"{path}.{key}"] = range_of(field), default_of(field)
        if path in GENERATORS and "calibration" in model.model_fields:
            defaults = default_of(model.model_fields["calibration"])
            out.update(
                {
                    f"{path}.calibration.{k}": (range_of(f), getattr(defaults, k))
                    for k, f in Calibration.model_fields.items()
                    if range_of(f) is not None
                }
            )
    return out


DECLARED = declared()


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def tried(path: str, default: Any, v: Any) -> Any:
    """The value a key is tried with: `v`, or, for a list of numbers, its default with the last element `v`."""
    return [*default[:-1], v] if isinstance(default, list) else v


# -- (a) the seven keys only the range checks stop -----------------------------------------------------------------


@pytest.mark.parametrize("path,value,allowed", SEVEN, ids=[s[0] for s in SEVEN])
def test_the_seven_keys_are_refused_naming_the_key_the_range_and_the_fix(tmp_path, path, value, allowed):
    file = tmp_path / "params.yaml"
    file.write_text(yaml.safe_dump(with_value(BASE, path, value)))
    with pytest.raises(InputError) as e:
        load_params(file)
    message = str(e.value)
    assert message.startswith(f"file {file}: '{path}': must be {allowed}") and f", got {value}." in message
    assert f"Fix: correct '{path}' to {allowed} (its default: " in message and "\n" not in message
    with pytest.raises(InputError, match=rf"^file params\.yaml: '{path}': must be "):
        parse_params(with_value(BASE, path, value))


@pytest.mark.parametrize("path,value,allowed", SEVEN, ids=[s[0] for s in SEVEN])
def test_the_validate_stage_refuses_them_with_exit_2_and_writes_nothing(
    tmp_path, capsys, monkeypatch, path, value, allowed
):
    section, key = path.split(".")
    root = root_with(tmp_path, {section: {key: value}})
    monkeypatch.chdir(root)
    assert main(["--params", str(root / "params.yaml"), "stage", "validate"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: file {root / 'params.yaml'}: '{path}': must be {allowed}")
    assert f", got {value}. Fix: correct '{path}' to {allowed}" in err and err.count("\n") == 0
    assert ledger_count(root) == 0 and not (root / "ledger").exists() and not (root / "data").exists()
    assert not (root / "reports").exists()


def test_the_synthrelease_command_exits_2_on_a_zero_batch_size(tmp_path):
    """The installed `synthrelease` script (pyproject [project.scripts]) in a scratch project: exit status 2, the
    one-line error, no ledger and no data written (before, prepare spent the row count's ε and budget raised
    ZeroDivisionError)."""
    root = root_with(tmp_path, {"dpwgan": {"batch_size": 0}})
    done = subprocess.run(
        [str(Path(sys.executable).parent / "synthrelease"), "--params", "params.yaml", "stage", "validate"],
        cwd=root,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        "error: file params.yaml: 'dpwgan.batch_size': must be an integer in [1, 1000000], got 0. "
        "Fix: correct 'dpwgan.batch_size' to an integer in [1, 1000000] (its default: 128)."
    )
    assert not (root / "ledger").exists() and not (root / "data").exists() and not (root / "reports").exists()


# -- (b) every numeric key: declared, and refused exactly outside its range ------------------------------------------


def test_every_numeric_key_of_every_section_and_generator_has_a_declared_range():
    """A key whose default is a number, a list of numbers, null or absent (bar NOT_NUMBERS) without a Range fails
    here; so does a Range for a key the defaults lack, or an integer Range on a real-valued key."""
    missing = []
    for path, model in models().items():
        for key, field in model.model_fields.items():
            default = default_of(field)
            numbers = isinstance(default, list) and default and all(map(is_number, default))
            maybe_number = default is None and f"{path}.{key}" not in NOT_NUMBERS
            if (is_number(default) or numbers or maybe_number) and range_of(field) is None:
                missing.append(f"{path}.{key}")
        if path in GENERATORS and "calibration" in model.model_fields:
            defaults = default_of(model.model_fields["calibration"])
            missing += [
                f"{path}.calibration.{k}"
                for k, f in Calibration.model_fields.items()
                if (is_number(getattr(defaults, k)) or getattr(defaults, k) is None) and range_of(f) is None
            ]
    assert missing == []
    for path, (allowed, default) in DECLARED.items():
        values = default if isinstance(default, list) else [default]
        assert not (allowed.integer and any(isinstance(v, float) for v in values)), path
        assert default is None or allowed.admits(default), path  # no default lies outside its own range
    assert len(DECLARED) > 200 and set(p for p, _, _ in SEVEN) <= set(DECLARED)


@pytest.mark.integration
@pytest.mark.parametrize("path", sorted(DECLARED))
def test_a_value_is_refused_exactly_when_it_lies_outside_the_declared_range(path):
    allowed, default = DECLARED[path]
    assert default is None or allowed.admits(default)
    for v in (0, -1, 10**12):
        value = tried(path, default, v)
        params = with_value(MINIMAL, path, value)
        section = path.split(".")[0]
        if path.endswith(".share") and isinstance(params.get(section), dict):
            params[section].pop("epsilon", None)  # a pinned ε takes no share (check_pinned_or_share)
        if allowed.admits(value):
            parse_params(params)
        else:
            with pytest.raises(InputError) as e:
                parse_params(params)
            message = str(e.value)
            assert message.startswith(f"file params.yaml: '{path}': {allowed.requirement()}, got {value!r}."), message
            assert f" Fix: correct '{path}' to {allowed.describe()}" in message


# -- the Range itself ------------------------------------------------------------------------------------------------


def test_a_range_admits_its_interval_and_says_it_in_words():
    counts, share, cap = ints(1, MAX_STEPS), reals(gt=0, lt=1), ints(1, nullable=True)
    assert [counts.admits(v) for v in (0, 1, MAX_STEPS, MAX_STEPS + 1, 2.0, True, None)] == [
        False,
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    assert [share.admits(v) for v in (0, 1e-9, 0.5, 1, math.nan, "0.5")] == [False, True, True, False, False, False]
    assert [cap.admits(v) for v in (None, 1, 10**12, 0)] == [True, True, True, False]
    assert reals(gt=0).admits(math.inf) is False and reals(gt=0, infinite=True).admits(math.inf) is True
    assert counts.describe() == "an integer in [1, 10000000]" and share.describe() == "a number in (0, 1)"
    assert cap.describe() == "a positive integer or null" and reals(gt=0).describe() == "a positive finite number"
    assert reals(ge=0.001).describe() == "a finite number >= 0.001" and ints(0).describe() == "an integer >= 0"
    assert reals(gt=0, infinite=True).describe() == "a positive number or inf"
    widths = DECLARED["dpwgan.critic_hidden"][0]
    assert widths.describe() == "a list of integers in [1, 8192]" and widths.admits([32, 8192])
    assert not widths.admits([32, 0]) and not widths.admits(32)
    assert isinstance(reals(gt=0).checked(1), float) and counts.checked(5) == 5 and share.checked(0.5) == 0.5


def test_a_generator_built_directly_checks_the_same_ranges():
    """The generator's `Params` (what its constructor validates) refuses by the same declarations, naming the key;
    given steps void the default epochs."""
    from pipelines.generators.params import dpwgan

    with pytest.raises(ParamError, match=r"^dpwgan\.batch_size must be an integer in \[1, 1000000\], got 0$") as e:
        parsed(dpwgan.Params, {"batch_size": 0}, "dpwgan")
    assert e.value.fix == "correct 'dpwgan.batch_size' to an integer in [1, 1000000] (its default: 128)."
    p = parsed(dpwgan.Params, {"steps": 20}, "dpwgan")
    assert (p.steps, p.epochs) == (20, None)
    with pytest.raises(ParamError, match=r"^dpwgan\.epochs given together with 'steps'"):
        parsed(dpwgan.Params, {"steps": 20, "epochs": 3}, "dpwgan")
