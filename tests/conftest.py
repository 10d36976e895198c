"""Shared fixtures: the two public schemas and their bundled raw tables (read once per session)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pipelines.data.readers import read_table
from pipelines.data.schema import Schema, load_schema

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


@pytest.fixture(scope="session")
def adult_schema() -> Schema:
    return load_schema(SCHEMAS / "adult.yaml")


@pytest.fixture(scope="session")
def bc_schema() -> Schema:
    return load_schema(SCHEMAS / "breast_cancer.yaml")


@pytest.fixture(scope="session")
def adult_raw(adult_schema: Schema) -> pd.DataFrame:
    return read_table("bundled:adult", adult_schema)[0]


@pytest.fixture(scope="session")
def bc_raw(bc_schema: Schema) -> pd.DataFrame:
    return read_table("bundled:breast_cancer", bc_schema)[0]
