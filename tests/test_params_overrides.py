"""params/*.yaml are override files of params.yaml (`extends:`): what they set, how they merge, what `resolve`
writes for `dvc repro`, and the errors of a bad `extends:`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.cli import main
from pipelines.config import EXTENDS, load_params, merged, read_params
from pipelines.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
OVERRIDES = sorted((ROOT / "params").glob("*.yaml"))


def leaves(mapping: dict, prefix: str = "") -> dict[str, object]:
    """{"a.b": value} for every non-mapping value (an empty mapping is a leaf too)."""
    out: dict[str, object] = {}
    for key, value in mapping.items():
        if isinstance(value, dict) and value:
            out.update(leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_merged_merges_mappings_and_replaces_everything_else():
    base = {"a": {"x": 1, "y": [1, 2], "z": {"k": 1}}, "b": 2}
    assert merged(base, {"a": {"y": [3], "z": None}, "c": 4}) == {"a": {"x": 1, "y": [3], "z": None}, "b": 2, "c": 4}
    assert base == {"a": {"x": 1, "y": [1, 2], "z": {"k": 1}}, "b": 2}  # the base is not modified


@pytest.mark.parametrize("path", OVERRIDES, ids=lambda p: p.name)
def test_every_bundled_file_overrides_only_what_it_changes(path):
    """Each params/*.yaml extends params.yaml and sets nothing params.yaml already sets (a value equal to the
    base's would hide that the file does not change it; a paper's file may state the paper's value where it
    is also the default)."""
    own = yaml.safe_load(path.read_text())
    assert own[EXTENDS] == "../params.yaml"
    base = leaves(yaml.safe_load((ROOT / "params.yaml").read_text()))
    same = [k for k, v in leaves({k: v for k, v in own.items() if k != EXTENDS}).items() if base.get(k, object()) == v]
    assert same == []


def test_an_override_is_params_yaml_with_its_own_keys():
    whole, private = load_params(ROOT / "params.yaml"), load_params(ROOT / "params" / "private.yaml")
    assert private.release == whole.release.model_copy(update={"select": "private"})
    assert private.generators == ("aim", "mst", "private_selection")
    assert {k: v for k, v in private.given.items() if k not in ("release", "generators")} == {
        k: v for k, v in whole.given.items() if k not in ("release", "generators")
    }
    adult = load_params(ROOT / "params" / "adult-all.yaml")
    assert (
        adult.generator("iw_mmd_gan")["weights"] is None and adult.generator("pearl")["steps"] == 8000
    )  # over params.yaml's
    assert adult.dataset == whole.dataset.model_copy(update={"name": "adult", "source": "bundled:adult"})


def test_resolve_writes_the_whole_file_dvc_reads(tmp_path, capsys):
    out = tmp_path / "params.yaml"
    assert main(["--params", str(ROOT / "params" / "compare.yaml"), "resolve", "--out", str(out)]) == 0
    text = out.read_text()
    assert EXTENDS not in yaml.safe_load(text) and text.startswith("# written by `synthrelease --params")
    assert load_params(out).given == load_params(ROOT / "params" / "compare.yaml").given
    assert main(["--params", str(ROOT / "params" / "compare.yaml"), "resolve"]) == 0
    assert capsys.readouterr().out == text


def test_resolve_checks_before_it_writes(tmp_path, capsys):
    bad = tmp_path / "params" / "bad.yaml"
    bad.parent.mkdir()
    bad.write_text(f"extends: {ROOT / 'params.yaml'}\nrelease:\n  selct: all\n")
    out = tmp_path / "params.yaml"
    assert main(["--params", str(bad), "resolve", "--out", str(out)]) == 2
    assert "'release.selct': unknown" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize(
    "name, text, problem",
    [
        (
            "params.yaml",
            "extends: ../params.yaml\n",
            r"params\.yaml is the file dvc\.yaml reads and must be whole.*"
            r"Fix: keep the overrides in params/NAME\.yaml",
        ),
        ("a.yaml", "extends: a.yaml\n", r"'extends': 'a\.yaml' extends this file again \(a circle\)"),
        ("a.yaml", "extends: [x]\n", r"'extends': must be the path of the params file this one overrides"),
        ("a.yaml", "extends: missing.yaml\n", r"file .*missing\.yaml: the release configuration is missing"),
    ],
)
def test_a_bad_extends_names_the_file_and_the_fix(tmp_path, name, text, problem):
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=problem):
        read_params(tmp_path / name)


def test_a_circle_through_two_files_is_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(InputError, match=r"file .*b\.yaml: 'extends': 'a\.yaml' extends this file again"):
        read_params(tmp_path / "a.yaml")


def test_init_refuses_an_override_file_as_its_template(tmp_path):
    from pipelines.data.scaffold import params_text

    with pytest.raises(InputError, match=r"an override file .* is not a template.*resolve --out whole\.yaml"):
        params_text((ROOT / "params" / "private.yaml").read_text(), "clinic", "x.csv", "params/private.yaml")
