"""The parameter model is the one place for every default: the reference page is written from it, params.yaml
restates none of its defaults, no module keeps a table of defaults beside it, and the params hashes follow the
values a release uses, not whether a default was written out."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import yaml

from pipelines.config import (
    PARAMETERS_PAGE,
    SECTIONS,
    generator_model,
    load_params,
    parameters_page,
    parse_params,
    read_params,
)
from pipelines.generators.names import GENERATORS
from pipelines.parameters import Section

ROOT = Path(__file__).resolve().parents[1]


def test_the_reference_page_is_written_from_the_declarations():
    """docs/parameters.md is `synthrelease parameters`' output: regenerate it when a declaration changes."""
    assert (ROOT / PARAMETERS_PAGE).read_text() == parameters_page(), "run `synthrelease parameters`"
    page = parameters_page()
    assert "| `iters` | integer | 300 | an integer in [1, 1000000] | mirror-descent iterations per round" in page
    assert "| `release_epsilon` | number | 1.0 | a positive number or inf |" in page
    assert "`dpwgan.calibration.share` defaults to 0.2." in page


def restated(given: dict[str, Any], model: type[Section], default: Section | None, path: str) -> list[str]:
    """The keys of `given` (a section as the file writes it) whose value equals the model's default."""
    out = []
    for key, value in given.items():
        field = model.model_fields[key]
        if default is not None:
            known = getattr(default, key)
        elif field.is_required():
            continue
        else:
            known = field.get_default(call_default_factory=True)
        if isinstance(known, Section) and isinstance(value, dict):
            out += restated(value, type(known), known, f"{path}.{key}")
        elif value == known and not isinstance(known, Section):
            out.append(f"{path}.{key}")
    return out


def test_params_yaml_holds_no_key_equal_to_its_default():
    given = read_params(ROOT / "params.yaml")
    models = {**SECTIONS, **{g: generator_model(g) for g in GENERATORS}}
    found = [k for k, v in given.items() if k == "device" and v == "auto"]
    for key, section in given.items():
        if key in models and isinstance(section, dict):
            found += restated(section, models[key], None, key)
    assert found == []


def test_no_module_keeps_a_table_of_defaults():
    """Defaults live in the fields' declarations only: no module-level `*_DEFAULTS` or `DEFAULTS` name."""
    names = []
    for path in (ROOT / "pipelines").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            names += [
                f"{path.relative_to(ROOT)}:{t.id}"
                for t in targets
                if isinstance(t, ast.Name) and t.id.endswith("DEFAULTS")
            ]
    assert names == []


def test_a_default_written_out_hashes_as_one_left_out():
    """The params hashes come from the resolved configuration: writing every default of a section out changes
    nothing a stage tracks; changing one value does."""
    base = read_params(ROOT / "params.yaml")
    config = load_params(ROOT / "params.yaml")
    written = {
        **base,
        "release": config.resolved["release"],
        "aim": {**config.resolved["aim"], "epsilon": None, "share": None},
    }
    again = parse_params(written)
    assert again.resolved == config.resolved and again.hash == config.hash
    changed = parse_params({**base, "aim": {"iters": 301}})
    assert changed.hash != config.hash and changed.resolved["aim"]["iters"] == 301


def test_the_resolved_file_is_what_dvc_tracks(tmp_path):
    """`synthrelease resolve --defaults` writes every key (the params stage's data/params.yaml): each key path a
    stage lists in dvc.yaml exists there."""
    from flows.cli import main
    from tasks.common import STAGE_PARAMS, param_value

    out = tmp_path / "params.yaml"
    assert main(["--params", str(ROOT / "params.yaml"), "resolve", "--defaults", "--out", str(out)]) == 0
    resolved = yaml.safe_load(out.read_text())
    assert resolved == load_params(ROOT / "params.yaml").resolved
    for stage, keys in STAGE_PARAMS.items():
        for key in keys:
            if key != "${item}":
                assert param_value(resolved, key) is not None or key.endswith(("noise_key_file",)), (stage, key)
