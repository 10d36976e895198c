"""The one configuration model (pipelines/config.py): every section refuses typos and wrong types with
the same one-line error (file, key path, problem, fix), and the CLI prints it and exits 2."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml

from flows.cli import main
from pipelines.config import load_params
from pipelines.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
BASE = yaml.safe_load((ROOT / "params.yaml").read_text())

# (section path, a typo of one of its keys, the key it should suggest)
TYPOS = [("dataset", "holdout_fractoin", "holdout_fraction"), ("privacy", "lifetime_epsilom", "lifetime_epsilon"),
         ("orchestration", "max_worker", "max_workers"), ("evaluate", "kway_bin", "kway_bins"),
         ("evaluate.attacks", "n_attack", "n_attacks"), ("risk_gates", "confidense", "confidence"),
         ("weights", "tempring", "tempering"), ("dpwgan", "batchsize", "batch_size"),
         ("ppem", "protectd", "protected"), ("dp_auto_gan", "autoencoder_shares", "autoencoder_share"),
         ("pearl", "frequency", "frequencies"), ("iw_mmd_gan", "estimater", "estimator"),
         ("support_points", "n_point", "n_points")]
# (section path, key, a value of the wrong type)
WRONG_TYPES = [("dataset", "holdout_fraction", "0.2"), ("privacy", "internal_release", "yes"),
               ("orchestration", "max_workers", 2.5), ("evaluate", "kway", "3"),
               ("evaluate.attacks", "max_rows", [1]), ("risk_gates", "confidence", "high"),
               ("weights", "psis", 1), ("dpwgan", "batch_size", 12.5), ("ppem", "hidden", "wide"),
               ("dp_auto_gan", "autoencoder_hidden", 60), ("pearl", "critic", "no"),
               ("iw_mmd_gan", "estimator", 3), ("support_points", "expansion", None)]
GENERATORS = [s for s, *_ in TYPOS[7:]]
# (generator, key, a value of the right type outside its range): the module's check_params refuses it
BAD_VALUES = [("pearl", "frequencies", 0), ("dp_auto_gan", "batch_size", 1), ("iw_mmd_gan", "kernel", "rbf"),
              ("support_points", "chains", 2), ("mst", "bins", {"age": [50, 0]}), ("aim", "bins", {"age": "0-50"}),
              ("dpwgan", "numeric_encoding", "onehot"), ("ppem", "numeric_bins", 1)]


def write(tmp_path: Path, path: str, key: str, value: object) -> Path:
    params = yaml.safe_load(yaml.safe_dump(BASE))
    section = params
    for part in path.split("."):
        section = section.setdefault(part, {})
    section[key] = value
    out = tmp_path / "params.yaml"
    out.write_text(yaml.safe_dump(params))
    return out


@pytest.mark.parametrize("path,typo,known", TYPOS)
def test_a_typo_names_the_key_and_the_closest_known_key(tmp_path, path, typo, known):
    with pytest.raises(InputError) as e:
        load_params(write(tmp_path, path, typo, 1))
    message = str(e.value)
    assert message.startswith(f"file {tmp_path / 'params.yaml'}: '{path}.{typo}': unknown {path} keys ['{typo}'].")
    assert f"Fix: did you mean '{known}'?" in message and "\n" not in message


@pytest.mark.parametrize("path,key,value", WRONG_TYPES)
def test_a_wrong_type_names_the_key(tmp_path, path, key, value):
    with pytest.raises(InputError, match=rf"^file .*params\.yaml: '{path}\.{key}': .*got {re.escape(repr(value))}\..* Fix: "):
        load_params(write(tmp_path, path, key, value))


@pytest.mark.parametrize("generator", GENERATORS)
def test_a_per_generator_delta_is_refused(tmp_path, generator):
    with pytest.raises(InputError, match=rf"'{generator}\.delta': a generator has no δ of its own.*"
                                         rf"Fix: delete 'delta:' under '{generator}:' and set 'privacy\.delta'"):
        load_params(write(tmp_path, generator, "delta", 1e-6))


@pytest.mark.parametrize("generator", GENERATORS)
def test_epsilon_is_a_positive_number_or_inf(tmp_path, generator):
    assert load_params(write(tmp_path, generator, "epsilon", "inf"))[generator]["epsilon"] == math.inf
    assert load_params(write(tmp_path, generator, "epsilon", 2))[generator]["epsilon"] == 2.0
    for bad in (0, -1.0, "lots", True):
        with pytest.raises(InputError, match=rf"'{generator}\.epsilon': must be a positive number or inf"):
            load_params(write(tmp_path, generator, "epsilon", bad))


def test_steps_or_epochs_not_both(tmp_path):
    params = yaml.safe_load(yaml.safe_dump(BASE))
    params["dpwgan"].update(steps=10, epochs=5)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(InputError, match=r"'dpwgan\.epochs': given together with 'dpwgan\.steps'.*not both"):
        load_params(tmp_path / "params.yaml")


@pytest.mark.parametrize("generator,key", [("dpwgan", "max_steps"), ("ppem", "max_steps"),
                                           ("dp_auto_gan", "autoencoder_max_steps"), ("dp_auto_gan", "max_steps")])
def test_a_step_cap_is_a_positive_count_or_null(tmp_path, generator, key):
    assert load_params(write(tmp_path, generator, key, None))[generator][key] is None
    assert load_params(write(tmp_path, generator, key, 500))[generator][key] == 500
    with pytest.raises(InputError, match=rf"'{generator}\.{key}': must be a positive number of steps, got 0"):
        load_params(write(tmp_path, generator, key, 0))


def test_a_top_level_typo_and_an_unregistered_generator(tmp_path):
    params = yaml.safe_load(yaml.safe_dump(BASE))
    params["dpwgn"] = params.pop("dpwgan")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(InputError, match=r"'dpwgn': unknown top-level keys \['dpwgn'\]\. Fix: did you mean 'dpwgan'"):
        load_params(tmp_path / "params.yaml")
    params = {**BASE, "generators": ["dpwgn"]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(InputError, match=r"'generators': 'dpwgn' is not a registered generator\. Fix: did you mean"):
        load_params(tmp_path / "params.yaml")


def test_the_values_the_tasks_read_are_the_files_own(tmp_path):
    """No default is injected beyond the ones load_params always filled (the params hashes stay put)."""
    params = load_params(ROOT / "params.yaml")
    assert params["dpwgan"] == {} and params["risk_gates"] == BASE["risk_gates"]  # ε: allocated (release_epsilon)
    assert params["evaluate"] == BASE["evaluate"] and params["weights"] == BASE["weights"]
    assert params["privacy"]["row_count_epsilon"] == 0.05 and params["device"] == "auto"


@pytest.mark.parametrize("path", [ROOT / "params.yaml", *sorted((ROOT / "params").glob("*.yaml"))],
                         ids=lambda p: p.name)
def test_every_bundled_params_file_parses(path):
    params = load_params(path)
    assert params["generators"] and isinstance(params["privacy"]["release_epsilon"], float)
    assert all(isinstance(params[g].get("epsilon", 0.0), float) for g in params["generators"])  # pinned or allocated


@pytest.mark.parametrize("path,typo,known", TYPOS[:8])
def test_the_cli_prints_one_line_and_exits_2(tmp_path, capsys, path, typo, known):
    bad = write(tmp_path, path, typo, 1).rename(tmp_path / "BAD.yaml")
    assert main(["--params", str(bad), "stage", "validate"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"error: file {bad}: '{path}.{typo}': unknown")


@pytest.mark.parametrize("generator,key,value", BAD_VALUES)
def test_a_value_out_of_range_names_the_key_path(tmp_path, capsys, generator, key, value):
    """Refused by load_params up front with the generator's key path, and by the CLI with exit 2 (no traceback)."""
    path = write(tmp_path, generator, key, value)
    params = yaml.safe_load(path.read_text())
    params[generator].setdefault("epsilon", 1.0)   # mst and aim have no section in the bundled params.yaml
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(InputError) as e:
        load_params(path)
    message = str(e.value)
    assert message.startswith(f"file {path}: '{generator}.{key}': ") and "\n" not in message
    assert f"Fix: correct '{generator}.{key}'" in message
    assert main(["--params", str(path), "stage", "validate"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err == f"error: {message}"
