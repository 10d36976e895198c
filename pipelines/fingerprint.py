"""The code a budget-spending stage runs, as one hash per stage: what its DVC dependency is.

A stage that spends privacy budget (train@gen, weight@gen, prepare, discover) must re-run when, and only when, code that
can change its output changes: a re-run charges the ledger again. Listing whole folders in `dvc.yaml` made any
edit (a gate, another generator) re-train and re-charge every generator. Instead the `code` stage writes
`data/code/<part>.json` for each part: the sha256 of every source file in the part's *import closure* (the
modules of `pipelines`, `tasks` and `flows` reachable by any `import` statement, at module level or inside a
function, from the part's roots) and the versions of the numerical libraries. DVC re-runs the `code` stage on
any edit (it is cheap), but the file of a part whose closure did not change is byte-identical, so its stage
stays up to date.

Not followed: the imports inside `VALIDATION_ONLY` functions. They build every configured generator and the
attack suite to check what the params file names against the schema before any budget is spent; they can refuse
a run, never change what a stage computes (tests/test_fingerprint.py: they return nothing).
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path

from pipelines.io import canonical_json
from pipelines.privacy.noise import library_versions

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipelines", "tasks", "flows")
VALIDATION_ONLY = {("tasks.common", "check_against_schema")}


@cache
def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of PACKAGES under `root`, by dotted name (a package by its `__init__`)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported_names(name: str, path: Path, everywhere: bool = False) -> frozenset[str]:
    """Dotted names `name`'s source imports (absolute and relative), at module level and inside functions; those
    inside VALIDATION_ONLY functions too only if `everywhere`."""
    return _parsed_imports(name, path.read_text(), str(path), everywhere)


@cache
def _parsed_imports(name: str, text: str, path: str, everywhere: bool) -> frozenset[str]:
    tree = ast.parse(text, path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    skipped = {
        id(node)
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (name, fn.name) in VALIDATION_ONLY
        and not everywhere
        for node in ast.walk(fn)
    }
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
    return frozenset(out)


def closure(roots: list[str], root: Path = ROOT) -> list[str]:
    """The sorted modules of PACKAGES reachable from `roots` (each module imports its parent packages too)."""
    known = modules(root)
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name not in known:
            raise ValueError(f"{name} is not a module of {', '.join(PACKAGES)}")
        seen.add(name)
        for imported in imported_names(name, known[name]):
            parts = imported.split(".")
            todo.extend(
                p for p in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if p in known and p not in seen
            )
    return sorted(seen)


def fingerprint(roots: list[str], root: Path = ROOT) -> dict:
    """The part's code: sha256 of each module in its closure (by path) and the numerical libraries' versions."""
    known = modules(root)
    files = {
        known[m].relative_to(root).as_posix(): hashlib.sha256(known[m].read_bytes()).hexdigest()
        for m in closure(roots, root)
    }
    body = {"roots": sorted(roots), "files": files, "libraries": library_versions()}
    return {"sha256": hashlib.sha256(canonical_json(body).encode()).hexdigest(), **body}


def stage_roots() -> dict[str, list[str]]:
    """The roots of every budget-spending part: train@<generator> (the task, the generator's module and its
    params module, which the registry imports by name), weight@<generator>, prepare and discover."""
    from pipelines.config import SELECTION
    from pipelines.generators.names import CLASSES, params_module

    parts = {
        f"train-{name}": ["tasks.train", spec.partition(":")[0], params_module(name)] for name, spec in CLASSES.items()
    }
    # the private selection trains its candidates through the registry's by-name imports: all of them are its code
    parts[f"train-{SELECTION}"] += [spec.partition(":")[0] for spec in CLASSES.values()]
    return {**parts, "weight": ["tasks.weight"], "prepare": ["tasks.prepare"], "discover": ["tasks.discover"]}


def write_fingerprints(directory: Path, root: Path = ROOT) -> list[str]:
    """`<part>.json` in `directory` (replaced as a whole) for every part of `stage_roots`; returns the parts."""
    from pipelines.io import atomic_dir, write_json

    parts = stage_roots()
    with atomic_dir(Path(directory)) as tmp:
        for part, roots in parts.items():
            write_json(tmp / f"{part}.json", fingerprint(roots, root))
    return sorted(parts)
