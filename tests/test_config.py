"""The one configuration model (pipelines/config.py): every section refuses typos and wrong types with
the same one-line error (file, key path, problem, fix), and the CLI prints it and exits 2."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml

from flows.cli import main
from pipelines.config import Config, load_params, noise_seed_keys, params_hash, parse_params, read_params
from pipelines.errors import InputError

from support.config import BASE, ROOT, ledger_count, root_with

# (section path, a typo of one of its keys, the key it should suggest)
TYPOS = [
    ("dataset", "holdout_fractoin", "holdout_fraction"),
    ("privacy", "lifetime_epsilom", "lifetime_epsilon"),
    ("orchestration", "max_worker", "max_workers"),
    ("evaluate", "kway_bin", "kway_bins"),
    ("evaluate.attacks", "n_attack", "n_attacks"),
    ("risk_gates", "confidense", "confidence"),
    ("weights", "tempring", "tempering"),
    ("dpwgan", "batchsize", "batch_size"),
    ("ppem", "protectd", "protected"),
    ("dp_auto_gan", "autoencoder_shares", "autoencoder_share"),
    ("pearl", "frequency", "frequencies"),
    ("iw_mmd_gan", "estimater", "estimator"),
    ("support_points", "n_point", "n_points"),
]
# (section path, key, a value of the wrong type)
WRONG_TYPES = [
    ("dataset", "holdout_fraction", "0.2"),
    ("privacy", "internal_release", "yes"),
    ("orchestration", "max_workers", 2.5),
    ("evaluate", "kway", "3"),
    ("evaluate.attacks", "max_rows", [1]),
    ("risk_gates", "confidence", "high"),
    ("weights", "psis", 1),
    ("dpwgan", "batch_size", 12.5),
    ("ppem", "hidden", "wide"),
    ("dp_auto_gan", "autoencoder_hidden", 60),
    ("pearl", "critic", "no"),
    ("iw_mmd_gan", "estimator", 3),
    ("support_points", "expansion", None),
]
GENERATORS = [s for s, *_ in TYPOS[7:]]
# (generator, key, a value of the right type outside its range): the module's check_params refuses it
BAD_VALUES = [
    ("pearl", "frequencies", 0),
    ("dp_auto_gan", "batch_size", 1),
    ("iw_mmd_gan", "kernel", "rbf"),
    ("support_points", "chains", 2),
    ("mst", "bins", {"age": [50, 0]}),
    ("aim", "bins", {"age": "0-50"}),
    ("dpwgan", "numeric_encoding", "onehot"),
    ("ppem", "numeric_bins", 1),
]


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
    with pytest.raises(
        InputError, match=rf"^file .*params\.yaml: '{path}\.{key}': .*got {re.escape(repr(value))}\..* Fix: "
    ):
        load_params(write(tmp_path, path, key, value))


@pytest.mark.parametrize("generator", GENERATORS)
def test_a_per_generator_delta_is_refused(tmp_path, generator):
    with pytest.raises(
        InputError,
        match=rf"'{generator}\.delta': a generator has no δ of its own.*"
        rf"Fix: delete 'delta:' under '{generator}:' and set 'privacy\.delta'",
    ):
        load_params(write(tmp_path, generator, "delta", 1e-6))


@pytest.mark.parametrize("generator", GENERATORS)
def test_epsilon_is_a_positive_number_or_inf(tmp_path, generator):
    assert load_params(write(tmp_path, generator, "epsilon", "inf")).generator(generator)["epsilon"] == math.inf
    assert load_params(write(tmp_path, generator, "epsilon", 2)).generator(generator)["epsilon"] == 2.0
    for bad in (0, -1.0, "lots", True):
        with pytest.raises(InputError, match=rf"'{generator}\.epsilon': must be a positive number or inf"):
            load_params(write(tmp_path, generator, "epsilon", bad))


def test_steps_or_epochs_not_both(tmp_path):
    params = yaml.safe_load(yaml.safe_dump(BASE))
    params["dpwgan"].update(steps=10, epochs=5)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(InputError, match=r"'dpwgan\.epochs': given together with 'steps'.*not both"):
        load_params(tmp_path / "params.yaml")


@pytest.mark.parametrize(
    "generator,key",
    [
        ("dpwgan", "max_steps"),
        ("ppem", "max_steps"),
        ("dp_auto_gan", "autoencoder_max_steps"),
        ("dp_auto_gan", "max_steps"),
    ],
)
def test_a_step_cap_is_a_positive_count_or_null(tmp_path, generator, key):
    assert load_params(write(tmp_path, generator, key, None)).generator(generator)[key] is None
    assert load_params(write(tmp_path, generator, key, 500)).generator(generator)[key] == 500
    with pytest.raises(
        InputError,
        match=rf"'{generator}\.{key}': must be an integer in \[1, 10000000\] or null, "
        rf"got 0\. Fix: correct '{generator}\.{key}' to ",
    ):
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


def test_the_hashed_mapping_is_the_resolved_one_and_the_sections_hold_every_default(tmp_path):
    """`given` is what the file gives; the params hash covers `resolved`, every key with the value the stages use
    (so a default written out hashes as one left out); the typed sections the tasks read hold every default, as
    floats where they are numbers of a float default."""
    config = load_params(ROOT / "params.yaml")
    given, resolved = config.given, config.resolved
    assert (
        given["dpwgan"] == {} and "risk_gates" not in BASE and resolved["risk_gates"] == config.risk_gates.model_dump()
    )
    assert resolved["dpwgan"]["epsilon"] is None and resolved["dpwgan"]["epochs"] == 60  # ε: allocated
    assert resolved["privacy"]["row_count_epsilon"] == resolved["privacy"]["row_loss_epsilon"] == 0.05
    assert resolved["device"] == "auto"
    assert resolved["aim"]["sub_bins"] is None and resolved["mst"]["sub_bins"] is None  # the public rule
    assert config.hash == params_hash(resolved) == "fdebeb4223e719ae2467709d1e66fa9f68cf6c551be7f2d5446cbc467db98c93"
    assert config.generator("dpwgan") == {} and config.device == "auto" and config.privacy.row_count_epsilon == 0.05
    assert config.orchestration.model_dump() == {
        "task_runner": "threads",
        "max_workers": 4,
        "dask_address": None,
        "dask_workers": 2,
        "dask_memory_limit": "auto",
        "dask_blocksize": "32MiB",
    }
    assert config.evaluate.attacks.max_rows == 2000 and config.evaluate.seed == 0 and config.evaluate.n_samples is None
    assert config.release.select == "auto" and config.weights.generators == "selected" and config.weights.share == 0.25
    assert config.risk_gates.exact_match_excess_max == 0.0
    one = parse_params({**yaml.safe_load(yaml.safe_dump(BASE)), "risk_gates": {"linkability_risk_max": 1}})
    assert isinstance(one.risk_gates.linkability_risk_max, float) and one.given["risk_gates"] == {
        "linkability_risk_max": 1
    }


@pytest.mark.parametrize(
    "path", [ROOT / "params.yaml", *sorted((ROOT / "params").glob("*.yaml"))], ids=lambda p: p.name
)
def test_every_bundled_params_file_parses(path):
    config = load_params(path)
    assert isinstance(config, Config) and config.generators and isinstance(config.privacy.release_epsilon, float)
    assert all(
        isinstance(config.generator(g).get("epsilon", 0.0), float) for g in config.generators
    )  # pinned or allocated
    from pipelines.data.schema import load_schema
    from tasks.common import check_against_schema

    check_against_schema(config, load_schema(ROOT / "schemas" / f"{config.dataset.name}.yaml"))  # its columns


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
    params[generator].setdefault("epsilon", 1.0)  # mst and aim have no section in the bundled params.yaml
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(InputError) as e:
        load_params(path)
    message = str(e.value)
    assert message.startswith(f"file {path}: '{generator}.{key}': ") and "\n" not in message
    assert f"Fix: correct '{generator}.{key}'" in message
    assert main(["--params", str(path), "stage", "validate"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err == f"error: {message}"


# -- a fixed noise_seed: internal releases only -----------------------------------------------------------------


@pytest.mark.parametrize("section", ["dpwgan", "ppem", "mst", "weights", "dataset"])
def test_a_noise_seed_is_refused_in_a_public_release(tmp_path, section):
    with pytest.raises(InputError) as e:
        load_params(write(tmp_path, section, "noise_seed", 7))
    message = str(e.value)
    assert (
        message.startswith(
            f"file {tmp_path / 'params.yaml'}: '{section}.noise_seed': a fixed noise seed in a public release"
        )
        and "regenerated and subtracted" in message
        and "\n" not in message
    )
    assert f"Fix: delete 'noise_seed:' under '{section}:'" in message
    assert "SYNTHRELEASE_NOISE_KEY" in message and "privacy.noise_key_file" in message
    assert "'privacy.internal_release: true'" in message
    with pytest.raises(InputError, match=rf"'{section}\.noise_seed': .*got 'x'"):
        load_params(write(tmp_path, section, "noise_seed", "x"))


def test_an_internal_release_may_fix_its_noise_seeds(tmp_path):
    from pipelines.release.manifest import noise_seed_statement

    params = yaml.safe_load(yaml.safe_dump(BASE))
    params["privacy"]["internal_release"] = True
    for section in ("dataset", "dpwgan", "weights"):
        params.setdefault(section, {})["noise_seed"] = 7
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    loaded = load_params(tmp_path / "params.yaml")
    assert [loaded.dataset.noise_seed, loaded.generator("dpwgan")["noise_seed"], loaded.weights.noise_seed] == [7, 7, 7]
    assert noise_seed_keys(loaded.given) == ["dataset.noise_seed", "dpwgan.noise_seed", "weights.noise_seed"]
    assert noise_seed_keys(load_params(ROOT / "params.yaml").given) == []
    assert noise_seed_statement([]) is None and "internal release" in noise_seed_statement(["dpwgan.noise_seed"])


@pytest.mark.parametrize("section", ["dpwgan", "weights", "dataset"])
def test_the_validate_stage_refuses_a_public_noise_seed(tmp_path, capsys, monkeypatch, section):
    root = root_with(tmp_path, {section: {"noise_seed": 7}})
    monkeypatch.chdir(root)
    assert main(["--params", str(root / "params.yaml"), "stage", "validate"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: file {root / 'params.yaml'}: '{section}.noise_seed': a fixed noise seed")
    assert ledger_count(root) == 0 and not (root / "data").exists() and not (root / "reports").exists()


def test_the_release_stage_refuses_a_public_noise_seed_whatever_path_the_params_took(tmp_path):
    import dataclasses
    from tasks.release import release

    config = load_params(ROOT / "params.yaml")  # then a seed set past load_params's check
    config = dataclasses.replace(
        config,
        given={**config.given, "weights": {"noise_seed": 3}},
        weights=config.weights.model_copy(update={"noise_seed": 3}),
    )
    with pytest.raises(InputError, match=r"'weights\.noise_seed': a fixed noise seed in a public release"):
        release(config, tmp_path)
    assert not any(tmp_path.iterdir())


# -- every configuration error before any budget is spent --------------------------------------------------------

# (section, key, a value of the right type out of its range): without load_params' range checks, each would pass
# validate, prepare and budget
OUT_OF_RANGE = [
    ("risk_gates", "confidence", 1.5),
    ("utility_gate", "confidence", 7),
    ("evaluate.attacks", "max_rows", -5),
    ("evaluate", "n_samples", -5),
    ("evaluate", "kway", 0),
    ("weights", "epochs", 0),
    ("weights", "momentum", 1.0),
    ("weights", "tempering", 2.0),
    ("orchestration", "max_workers", 0),
    ("orchestration", "dask_memory_limit", "lots"),
    ("orchestration", "dask_blocksize", "100kB"),
    ("dataset", "holdout_fraction", 1.5),
]


@pytest.mark.parametrize("path,key,value", OUT_OF_RANGE)
def test_a_value_out_of_range_stops_the_validate_stage(tmp_path, capsys, monkeypatch, path, key, value):
    """load_params runs every section's range checks (the ones its reader runs), naming this file and the key."""
    root = root_with(tmp_path, {path: {key: value}})
    with pytest.raises(InputError) as e:
        load_params(root / "params.yaml")
    message = str(e.value)
    assert message.startswith(f"file {root / 'params.yaml'}: '{path}.{key}': ") and " Fix: " in message
    monkeypatch.chdir(root)
    assert main(["--params", str(root / "params.yaml"), "stage", "validate"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
    assert ledger_count(root) == 0 and not (root / "data").exists()


# a pinned generator (its own ε) naming a column the schema lacks: refused for that column, not as "cannot divide
# the release ε"
MISSING_COLUMNS = [
    ("ppem", {"epsilon": 1.0, "protected": ["mean_radius", "no_such_column"]}, "ppem.protected"),
    (
        "iw_mmd_gan",
        {
            "epsilon": 1.0,
            "estimator": "sniw",
            "weights": {"rebalance": {"column": "no_such_column", "observed": [0.5, 0.5], "target": [0.5, 0.5]}},
        },
        "iw_mmd_gan.weights.rebalance.column",
    ),
    ("mst", {"epsilon": 1.0, "bins": {"no_such_column": [0, 10]}}, "mst.bins"),
    ("dpwgan", {"epsilon": 1.0, "calibration": {"pairs": [["no_such_column", "target"]]}}, "dpwgan.calibration.pairs"),
]


@pytest.mark.parametrize("generator,section,key", MISSING_COLUMNS, ids=[m[0] for m in MISSING_COLUMNS])
def test_a_column_the_schema_lacks_stops_the_validate_stage(tmp_path, capsys, monkeypatch, generator, section, key):
    root = root_with(tmp_path, {generator: section})
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["generators"] = [generator]
    params[generator] = section
    params.setdefault("weights", {})["generators"] = []
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    load_params(root / "params.yaml")  # types and ranges hold: the schema decides
    monkeypatch.chdir(root)
    assert main(["--params", str(root / "params.yaml"), "stage", "validate"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: file params.yaml: '{key}': ") and "no_such_column" in err and " Fix: " in err
    assert "release_epsilon" not in err and err.count("Fix:") == 1
    assert ledger_count(root) == 0 and not (root / "data").exists()


def prepared_with(tmp_path, monkeypatch, generator: str) -> tuple[Path, dict]:
    """A project listing `generator` alone (OS-entropy noise, no weights) whose validate and prepare stages ran
    through the CLI, in the working directory; its root and raw params mapping."""
    root = root_with(tmp_path, {"privacy": {"noise_key_file": None}, "weights": {"generators": []}})
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["generators"] = [generator]
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(root)
    monkeypatch.delenv("SYNTHRELEASE_NOISE_KEY", raising=False)
    for stage in ("validate", "prepare"):
        assert main(["--params", "params.yaml", "stage", stage]) == 0
    return root, params


@pytest.mark.slow
def test_the_budget_stage_names_the_column_not_the_release_epsilon(tmp_path, capsys, monkeypatch):
    """validate and prepare ran on a good configuration; then a pinned section names a missing column (DVC re-runs
    budget, which tracks the whole file, but not validate): budget refuses with the column, spending nothing."""
    root, params = prepared_with(tmp_path, monkeypatch, "ppem")
    params["ppem"] = {"epsilon": 1.0, "protected": ["no_such_column"]}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    capsys.readouterr()
    assert main(["--params", "params.yaml", "stage", "budget"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: file params.yaml: 'ppem.protected': names unknown columns ['no_such_column']")
    assert "release_epsilon" not in err and not (root / "data" / "allocation").exists()
    assert ledger_count(root) == 4  # prepare's row-loss test and count check (planned, spent); nothing of the budget


@pytest.mark.integration
def test_a_plan_that_fails_at_the_whole_release_epsilon_is_its_sections_problem(tmp_path, capsys, monkeypatch):
    """A generator whose plan cannot be made from its settings even at the whole release ε is reported as that
    section's problem, never as a budget the steward should raise; nothing is allocated."""
    from pipelines.generators.mst import MST

    root, _ = prepared_with(tmp_path, monkeypatch, "mst")

    def broken(self, *a, **k):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(MST, "plan", broken)
    capsys.readouterr()
    assert main(["--params", "params.yaml", "stage", "budget"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "error: file params.yaml: 'mst': the privacy plan of 'mst' cannot be made from its settings "
        "at ε = 1 (ZeroDivisionError: float division by zero)"
    )
    assert "raise 'privacy.release_epsilon'" not in err and not (root / "data" / "allocation").exists()


@pytest.mark.slow
def test_an_internal_release_with_noise_seeds_says_so_in_its_manifest(tmp_path):
    from tasks.check import check
    from tasks.evaluate import evaluate
    from tasks.release import release
    from tasks.train import train
    from tasks.weight import weight
    from support.project import make_root, run_stages

    root = make_root(
        tmp_path,
        {
            "generators": ["dpwgan"],
            "privacy": {"internal_release": True},
            "dataset": {"noise_seed": 1},
            "dpwgan": {"steps": 20, "noise_seed": 0},
            "weights": {"generators": ["dpwgan"], "epochs": 1, "analysis_max_rows": 200, "noise_seed": 2},
            "evaluate": {"kway_subsets": 10, "ot_max_rows": 200, "attacks": {"n_attacks": 100}},
        },
    )
    run_stages(root, "budget")
    params = load_params(root / "params.yaml")
    train(params, "dpwgan", "internal", root)
    evaluate(params, "dpwgan", root)
    weight(params, "dpwgan", "internal", root)
    check(params, "dpwgan", root)
    index = release(params, root)
    [entry] = index["released"]
    manifest = json.loads((root / entry["path"] / "manifest.json").read_text())
    assert manifest["audience"] == "internal only"
    assert manifest["noise_seed_used"] == ["dataset.noise_seed", "dpwgan.noise_seed", "weights.noise_seed"]
    statement = manifest["noise_seed_statement"]
    assert "dpwgan.noise_seed" in statement and "no differential-privacy guarantee" in statement
    assert "must never leave the organisation" in statement


@pytest.mark.parametrize(
    "path", [ROOT / "params.yaml", *sorted((ROOT / "params").glob("*.yaml"))], ids=lambda p: p.name
)
def test_every_bundled_params_file_resolves_every_key_dvc_tracks(path):
    """The stages track keys of data/params.yaml, the params stage's resolved file (`synthrelease resolve
    --defaults`): every key a stage lists is in the resolved configuration of each bundled file, and every listed
    generator has its section."""
    from tasks.common import STAGE_PARAMS, param_value

    config = load_params(path)
    missing = [
        key
        for key in sorted({k for keys in STAGE_PARAMS.values() for k in keys if k != "${item}"})
        if param_value(config.resolved, key) is None
        and key.rsplit(".", 1)[-1] not in config.resolved.get(key.split(".")[0], {})
    ]
    params = read_params(path)
    assert missing == [] and all(g in params for g in params["generators"])
