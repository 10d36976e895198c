"""The import graph of pipelines/, tasks/ and flows/ (every import statement, at module level or inside a function):
no circle anywhere, the library (pipelines/) never imports a task or a flow, and a task imports no other task, only
the tasks' shared helpers. In tests/, no file imports a test module: what tests share lives in tests/support/."""

from __future__ import annotations

import pytest

import ast
from pathlib import Path

from pipelines.fingerprint import imported_names, modules

TESTS = Path(__file__).resolve().parent

HELPERS = {"tasks", "tasks.common", "tasks.artifacts", "tasks.progress", "tasks.unselected"}  # not stages
# The one stage that reads another's output through its module: evaluate reads the baseline stage's cache with
# the reader that lives beside its writer (tasks/baseline.py).
READS_ANOTHER_STAGE = {("tasks.evaluate", "tasks.baseline")}


def graph() -> dict[str, set[str]]:
    known = modules()
    out = {}
    for name, path in known.items():
        edges = set()
        for imported in imported_names(name, path, everywhere=True):
            parts = imported.split(".")
            edges |= {p for p in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if p in known}
        out[name] = edges - {name}
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


@pytest.mark.integration
def test_no_import_circle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_library_imports_no_task_or_flow_and_tasks_import_no_other_task():
    g = graph()
    assert {
        (m, d) for m, ds in g.items() if m.startswith("pipelines") for d in ds if d.startswith(("tasks", "flows"))
    } == set()
    assert {
        (m, d)
        for m, ds in g.items()
        if m.startswith("tasks.") and m not in HELPERS
        for d in ds
        if d.startswith("tasks") and d not in HELPERS
    } == READS_ANOTHER_STAGE


def imported_modules(path: Path) -> set[str]:
    """Every module an import statement of `path` names (at module level or inside a function)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


def test_no_test_file_imports_a_test_module_and_support_defines_no_tests():
    """What tests share lives in tests/support/, not in a test module: a test module that another imports ties
    their edits together, and under pytest's importlib import mode it cannot be imported by name at all. The
    support modules define no test_ name that a reader would take for a test."""
    importing = {
        str(path.relative_to(TESTS)): sorted(
            m for m in imported_modules(path) if any(p.startswith("test_") for p in m.split("."))
        )
        for path in sorted(TESTS.rglob("*.py"))
    }
    assert {path: names for path, names in importing.items() if names} == {}
    assert "test_imports.py" in importing and "support/project.py" in importing
    defined = {
        (str(path.relative_to(TESTS)), node.name)
        for path in sorted((TESTS / "support").glob("*.py"))
        for node in ast.parse(path.read_text()).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.lower().startswith("test")
    }
    assert defined == set()


def test_no_library_module_takes_the_runs_config_or_paths():
    """The library gets the values it needs (a section, a path, a number), never the run's `Config` or `Paths`
    (pipelines/config.py defines them; the stages in tasks/ build them)."""
    named = []
    root = TESTS.parent
    for path in (root / "pipelines").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "pipelines.config":
                named += [f"{path.relative_to(root)}:{a.name}" for a in node.names if a.name in ("Config", "Paths")]
    assert named == []
