"""A budget-spending stage's code fingerprint covers the code it runs and nothing else (pipelines/fingerprint.py):
editing a gate or another generator leaves a generator's train fingerprint (its DVC dependency) byte-identical;
editing its own module, the base class or the accountant changes it."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from pipelines import fingerprint as fp
from pipelines.generators.names import CLASSES

PROJECT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def copy(tmp_path) -> Path:
    for package in fp.PACKAGES:
        shutil.copytree(PROJECT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def touch(root: Path, relative: str) -> None:
    path = root / relative
    path.write_text(path.read_text() + "\n# an edit\n")


@pytest.mark.integration
def test_train_closure_holds_its_generator_the_base_and_accounting_only():
    for name, spec in CLASSES.items():
        own = spec.partition(":")[0]
        mods = fp.closure(fp.stage_roots()[f"train-{name}"])
        assert {
            own,
            "pipelines.generators.base",
            "pipelines.privacy.accountant",
            "pipelines.privacy.noise",
            "tasks.train",
        } <= set(mods), name
        others = {s.partition(":")[0] for n, s in CLASSES.items() if n != name} - {"pipelines.generators.mst"}
        if name == "private_selection":  # it trains every candidate through the registry: all of them are its code
            assert others <= set(mods)
        else:
            assert not others & set(mods), (name, others & set(mods))  # AIM is MST's subclass: it runs MST's code
        assert not [
            m
            for m in mods
            if m.startswith(("pipelines.evaluation.attacks", "flows", "tasks.evaluate", "tasks.check", "tasks.release"))
        ], name


@pytest.mark.integration
def test_a_gate_or_another_generator_edit_leaves_the_fingerprint_and_an_own_edit_changes_it(copy):
    roots = fp.stage_roots()["train-dpwgan"]
    before = fp.fingerprint(roots, copy)
    fp.modules.cache_clear()
    for unrelated in (
        "pipelines/evaluation/attacks/gates.py",
        "pipelines/generators/ppem.py",
        "pipelines/generators/aim.py",
        "pipelines/evaluation/verdict.py",
        "tasks/release.py",
    ):
        touch(copy, unrelated)
    assert fp.fingerprint(roots, copy) == before
    for own in (
        "pipelines/generators/dpwgan.py",
        "pipelines/generators/base.py",
        "pipelines/privacy/accountant.py",
        "tasks/train.py",
    ):
        touch(copy, own)
        after = fp.fingerprint(roots, copy)
        assert after["sha256"] != before["sha256"] and after["files"][own] != before["files"].get(own), own
        before = after


def test_relative_and_deferred_imports_are_followed(copy):
    (copy / "pipelines/generators/mst.py").write_text(
        (copy / "pipelines/generators/mst.py").read_text() + "\n\ndef later():\n    from ..evaluation import verdict\n"
    )
    fp.modules.cache_clear()
    assert "pipelines.evaluation.verdict" in fp.closure(["pipelines.generators.mst"], copy)
    fp.modules.cache_clear()


def test_only_configuration_checks_are_not_followed():
    """Each VALIDATION_ONLY function exists and returns nothing: it checks (raises) and never computes a value a
    stage could use, so the code it imports cannot change an output."""
    for module, function in fp.VALIDATION_ONLY:
        tree = ast.parse(fp.modules()[module].read_text())
        [fn] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
        returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
        assert not returns, (module, function)


def test_write_fingerprints_writes_every_spending_part(tmp_path):
    parts = fp.write_fingerprints(tmp_path / "code")
    assert {f"train-{n}" for n in CLASSES} | {"weight", "prepare", "discover"} == set(parts)
    assert sorted(p.stem for p in (tmp_path / "code").iterdir()) == parts
