"""A numeric column's documented granularity (`step:`): parsed with its range checks, and every decoded value on the
grid lower + k·step within the bounds, for every generator (the shared decoder)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder
from pipelines.errors import SchemaError


def _schema(tmp_path, amount: dict):
    spec = {
        "name": "loans",
        "description": "",
        "source": {"documentation": "test"},
        "columns": {"amount": amount, "term": {"kind": "categorical", "categories": [36, 60]}},
    }
    path = tmp_path / "loans.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_schema(path)


def test_decoded_values_lie_on_the_documented_grid(tmp_path):
    sch = _schema(tmp_path, {"kind": "integer", "lower": 1000, "upper": 40010, "step": 25})
    assert sch.column("amount").step == 25.0 and sch.to_dict()["columns"]["amount"]["step"] == 25.0
    u = np.array([0.0, 0.00032, 0.5, 0.99999, 1.0])
    X = np.column_stack([u, np.ones(5), np.zeros(5)])
    out = Encoder(sch).decode(X)["amount"].tolist()
    # 1000 + u·39010, to the nearest multiple of 25, at most 40000 (the last multiple ≤ 40010)
    assert out == [1000, 1000, 20500, 40000, 40000]


def test_step_is_checked_where_it_is_parsed(tmp_path):
    with pytest.raises(SchemaError, match="step 2.5 is not a positive whole number with a multiple in the range"):
        _schema(tmp_path, {"kind": "integer", "lower": 0, "upper": 100, "step": 2.5})
    with pytest.raises(SchemaError, match="step 0 is not a positive number"):
        _schema(tmp_path, {"kind": "continuous", "lower": 0, "upper": 1, "step": 0})
