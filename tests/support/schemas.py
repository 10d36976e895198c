"""A two-column loans schema written to a test's folder: one numeric column under test beside a categorical term."""

from __future__ import annotations

from pathlib import Path

import yaml

from pipelines.data.schema import Schema, load_schema


def loans_schema(tmp_path: Path, amount: dict) -> Schema:
    """`loans.yaml` in `tmp_path` with the column `amount` as `amount` declares it, loaded."""
    spec = {
        "name": "loans",
        "description": "",
        "source": {"documentation": "test"},
        "columns": {"amount": amount, "term": {"kind": "categorical", "categories": [36, 60]}},
    }
    path = tmp_path / "loans.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_schema(path)
