"""The generator registry: names map to classes, and importing it imports no generator."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipelines.data.layout import Block, Layout, sub_layout
from pipelines.generators.names import CLASSES, GENERATORS
from pipelines.generators.registry import generator_class


def loaded_modules(statement: str) -> list[str]:
    """The generator, torch, jax, pandas and dp_accounting modules a fresh interpreter holds after `statement`."""
    code = (
        f"import sys; {statement}; "
        "print(__import__('json').dumps(sorted(m for m in sys.modules if m.startswith(('pipelines.generators.', "
        "'torch', 'jax', 'mbi', 'pandas', 'dp_accounting')))))"
    )
    return json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


@pytest.mark.integration
def test_importing_the_registry_imports_no_generator_and_no_torch():
    loaded = loaded_modules("import pipelines.generators.registry")
    assert [m for m in loaded if m.startswith("pipelines.")] == [
        "pipelines.generators.base",
        "pipelines.generators.encoding",  # the lifecycle's model-encoding part (no torch)
        "pipelines.generators.names",
        "pipelines.generators.persistence",
        "pipelines.generators.registry",
    ]
    assert not [m for m in loaded if m.startswith(("torch", "jax", "mbi"))]


def test_checking_params_yaml_imports_no_generator_method():
    """pipelines.config checks every generator's section from its params module alone: no method, not the
    lifecycle (the accounting), no torch, jax, mbi or pandas, so a stage of a generator the release left out
    (tasks/unselected.py) starts in well under a second."""
    loaded = loaded_modules("from pipelines.config import load_params; load_params('params.yaml')")
    assert {f"pipelines.generators.params.{g}" for g in GENERATORS} <= set(loaded)
    assert [m for m in loaded if not m.startswith("pipelines.generators.params")] == ["pipelines.generators.names"]


@pytest.mark.parametrize("name", GENERATORS)
def test_every_name_resolves_to_its_class(name):
    cls = generator_class(name)
    assert cls.name == name and f"{cls.__module__}:{cls.__name__}" == CLASSES[name]


def test_an_unknown_name_lists_the_implemented_ones():
    with pytest.raises(ValueError, match="unknown generator 'nope'; implemented: dpwgan, ppem"):
        generator_class("nope")


def test_sub_layout_reindexes_the_blocks_from_zero():
    layout = Layout(
        (
            Block("a", "continuous", 0, 1),
            Block("b", "categorical", 1, 4, protected=True),
            Block("c", "binary", 4, 5, is_target=True),
        )
    )
    assert sub_layout([layout.blocks[1], layout.blocks[2]]) == Layout(
        (Block("b", "categorical", 0, 3, protected=True), Block("c", "binary", 3, 4, is_target=True))
    )
