"""A numeric column's documented granularity (`step:`): parsed with its range checks, and every decoded value on the
grid lower + k·step within the bounds, for every generator (the shared decoder)."""

from __future__ import annotations

import numpy as np
import pytest
from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder
from pipelines.errors import SchemaError

from support.schemas import loans_schema


def test_decoded_values_lie_on_the_documented_grid(tmp_path):
    sch = loans_schema(tmp_path, {"kind": "integer", "lower": 1000, "upper": 40010, "step": 25})
    assert sch.column("amount").step == ((0.0, 25.0),) and sch.to_dict()["columns"]["amount"]["step"] == 25.0
    u = np.array([0.0, 0.00032, 0.5, 0.99999, 1.0])
    X = np.column_stack([u, np.ones(5), np.zeros(5)])
    out = Encoder(sch).decode(X)["amount"].tolist()
    # 1000 + u·39010, to the nearest multiple of 25, at most 40000 (the last multiple ≤ 40010)
    assert out == [1000, 1000, 20500, 40000, 40000]


def test_step_is_checked_where_it_is_parsed(tmp_path):
    with pytest.raises(SchemaError, match="step 2.5 is not a positive whole number with a multiple in the range"):
        loans_schema(tmp_path, {"kind": "integer", "lower": 0, "upper": 100, "step": 2.5})
    with pytest.raises(SchemaError, match="step 0 is not a positive number"):
        loans_schema(tmp_path, {"kind": "continuous", "lower": 0, "upper": 1, "step": 0})


def test_a_step_by_magnitude_puts_each_value_on_its_own_pieces_grid(tmp_path):
    """`step: [[0, 0.1], [1, 1]]` (tenths of a year below 1, whole years from 1): each decoded value on the grid of
    its magnitude's piece, within the bounds."""
    sch = loans_schema(tmp_path, {"kind": "continuous", "lower": 0, "upper": 64, "step": [[0, 0.1], [1, 1]]})
    col = sch.column("amount")
    assert col.step == ((0.0, 0.1), (1.0, 1.0)) and sch.to_dict()["columns"]["amount"]["step"] == [[0, 0.1], [1, 1]]
    values = np.array([0.03, 0.46, 0.96, 1.4, 37.6, 63.9, 64.0])
    np.testing.assert_allclose(col.on_grid(values), [0.0, 0.5, 1.0, 1.0, 38.0, 64.0, 64.0], atol=1e-12)
    X = np.column_stack([values / 64, np.ones(7), np.zeros(7)])
    np.testing.assert_allclose(Encoder(sch).decode(X)["amount"], [0.0, 0.5, 1.0, 1.0, 38.0, 64.0, 64.0], atol=1e-9)


@pytest.mark.parametrize(
    "step, problem",
    [
        ([[1, 0.1], [2, 1]], r"step pieces start at \[1.0, 2.0\]: the first must start at 0"),
        ([[0, 0.1], [0, 1]], "each later one above the last"),
        ([[0, 0.1], [1, -1]], "step -1 is not a positive number"),
        ([[0, 0.1], [1]], "not a number or"),
        ([], "not a number or"),
    ],
)
def test_a_step_by_magnitude_is_checked_where_it_is_parsed(tmp_path, step, problem):
    with pytest.raises(SchemaError, match=problem):
        loans_schema(tmp_path, {"kind": "continuous", "lower": 0, "upper": 64, "step": step})


def test_a_discovered_step_fills_the_schema_as_pieces_or_as_one_number(tmp_path):
    """The discover stage's pieces fill `step: discover`; a domain file holding one number (one grid) still loads; a
    step not below the range is no step."""
    spec = {"kind": "continuous", "lower": 0, "upper": 64, "step": "discover"}
    loans_schema(tmp_path, spec)  # writes loans.yaml
    path = tmp_path / "loans.yaml"
    pieces = load_schema(path, discovered={"amount": {"step": [[0.0, 0.1], [1.0, 1.0]]}}).column("amount").step
    assert pieces == ((0.0, 0.1), (1.0, 1.0))
    assert load_schema(path, discovered={"amount": {"step": 0.1}}).column("amount").step == ((0.0, 0.1),)
    assert load_schema(path, discovered={"amount": {"step": [[0.0, 100.0]]}}).column("amount").step is None
    assert load_schema(path, discovered={"amount": {"step": None}}).column("amount").step is None


def test_published_multiples_are_the_decimals_they_stand_for(tmp_path):
    """1054 cents is published as 10.54, not as the product 1054 × 0.01 = 10.540000000000001."""
    col = loans_schema(tmp_path, {"kind": "continuous", "lower": 0, "upper": 1000, "step": 0.01}).column("amount")
    out = col.on_grid(np.array([10.54, 20.99, 879.17, 270.59, 0.3]))
    assert [repr(float(v)) for v in out] == ["10.54", "20.99", "879.17", "270.59", "0.3"]
    assert 1054 * 0.01 != 10.54  # what the product alone would publish
