"""A minimal project root for the configuration tests: the public schemas and params.yaml with edits merged into
its sections, where `synthrelease stage ...` runs; and how many ledger rows a run left there."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "params.yaml").read_text())


def root_with(tmp_path: Path, edits: dict[str, dict]) -> Path:
    """A minimal project root (the public schemas, a params.yaml with `edits` merged into its sections) that
    `synthrelease stage ...` runs in: what validate would write, and the ledger, land under it."""
    shutil.copytree(ROOT / "schemas", tmp_path / "schemas")
    params = yaml.safe_load(yaml.safe_dump(BASE))
    for path, values in edits.items():
        section = params
        for part in path.split("."):
            section = section.setdefault(part, {})
        section.update(values)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    return tmp_path


def ledger_count(root: Path) -> int:
    """The number of rows in the ledger under `root` (0 where no stage opened it)."""
    path = root / "ledger" / "privacy.sqlite"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as con:
        return con.execute("SELECT COUNT(*) FROM privacy_events").fetchone()[0]
