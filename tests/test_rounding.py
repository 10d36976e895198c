"""A numeric column's `rounding` (pipelines/data/rounding.py): parsed with its checks, discovered from the step's
granularity histogram, and drawn when the published values are decoded, so that their shares on each coarser grid
match the table's."""

from __future__ import annotations

import numpy as np
import pytest
from pipelines.data.rounding import probabilities, round_as_table
from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder
from pipelines.errors import SchemaError
from pipelines.privacy.discovery import STEP_LADDER, grid_step, step_bins

from support.schemas import loans_schema

INCOME = [[0, []], [10000, [[1, 0.1], [1000, 0.4], [5000, 0.2], [10000, 0.3]]]]


def _coarsest_shares(values: np.ndarray, grids: list[float]) -> np.ndarray:
    """The share of `values` whose coarsest grid among `grids` is each one."""
    on = np.stack([np.abs(values / g - np.rint(values / g)) < 1e-9 for g in grids])
    coarsest = len(grids) - 1 - np.argmax(on[::-1], axis=0)
    return np.bincount(coarsest, minlength=len(grids)) / len(values)


def test_the_rounding_probabilities_solve_the_chain_of_grids():
    # rounding to 1 lands on a whole thousand 1 time in 1000: p₀·0.999 = 0.6
    np.testing.assert_allclose(probabilities((1.0, 1000.0), (0.6, 0.4)), [0.6 / 0.999, 1 - 0.6 / 0.999], rtol=1e-9)
    # every value on the coarser grid: round to it alone
    np.testing.assert_allclose(probabilities((1.0, 1000.0), (0.0, 1.0)), [0.0, 1.0], atol=1e-12)
    # none on it is out of reach (rounding to 1 lands on a thousand now and then): the nearest, round to 1 alone
    np.testing.assert_allclose(probabilities((1.0, 1000.0), (1.0, 0.0)), [1.0, 0.0], atol=1e-12)
    p = probabilities((1.0, 1000.0, 5000.0, 10000.0), (0.1, 0.4, 0.2, 0.3))
    assert p.min() >= 0 and p.sum() == pytest.approx(1.0)


def test_published_values_take_the_tables_shares_of_each_grid():
    """200,000 whole-dollar incomes uniform in [10,000, 100,000): rounded by INCOME's piece, the shares of their
    coarsest grids are the documented ones (each within 0.005; the binomial sd is ≈ 0.001)."""
    rng = np.random.default_rng(0)
    values = np.rint(rng.uniform(10000, 100000, 200_000))
    rounding = tuple((float(f), tuple((float(g), float(q)) for g, q in s)) for f, s in INCOME)
    out = round_as_table(values, rounding, 0.0, 1e6, rng)
    np.testing.assert_allclose(_coarsest_shares(out, [1, 1000, 5000, 10000]), [0.1, 0.4, 0.2, 0.3], atol=0.005)
    below = np.rint(rng.uniform(0, 9999, 1000))  # the piece from 0 is the step alone: unchanged
    np.testing.assert_array_equal(round_as_table(below, rounding, 0.0, 1e6, rng), below)
    # a rounding that would leave the bounds keeps the step's grid: 99,999 never becomes 100,000 under upper 99,999
    top = round_as_table(np.full(1000, 99_999.0), rounding, 0.0, 99_999.0, rng)
    assert top.max() <= 99_999.0 and set(np.unique(top)) <= {99_999.0, 99_000.0, 95_000.0, 90_000.0}


def test_the_decoder_rounds_as_the_table_only_with_a_noise_stream(tmp_path):
    sch = loans_schema(tmp_path, {"kind": "continuous", "lower": 0, "upper": 200000, "step": 1, "rounding": INCOME})
    assert sch.to_dict()["columns"]["amount"]["rounding"] == INCOME
    u = np.random.default_rng(1).uniform(0.05, 0.5, 20_000)
    X = np.column_stack([u, np.ones(len(u)), np.zeros(len(u))])
    plain = Encoder(sch).decode(X)["amount"].to_numpy()
    np.testing.assert_array_equal(plain, np.rint(u * 200000))  # the step alone
    drawn = Encoder(sch).decode(X, np.random.default_rng(2))["amount"].to_numpy()
    shares = _coarsest_shares(drawn, [1, 1000, 5000, 10000])
    assert shares[0] < 0.12 and shares[3] > 0.28 and np.abs(drawn - plain).max() <= 5000


@pytest.mark.parametrize(
    "spec, problem",
    [
        ({"rounding": [[0, [[1000, 1.0]]]]}, "rounding needs the column's step"),
        ({"step": 1, "rounding": [[10, []]]}, r"rounding pieces start at \[10.0\]"),
        ({"step": 1, "rounding": [[0, []], [0, []]]}, "each later one above the last"),
        ({"step": 1, "rounding": [[0, [[1, 0.5], [1000, 0.3], [2500, 0.2]]]]}, "not increasing multiples"),
        ({"step": 25, "rounding": [[0, [[10, 0.5], [1000, 0.5]]]]}, "of the step 25 there"),
        ({"step": 1, "rounding": [[0, [[1, 0.5], [1000, 0.4]]]]}, "not non-negative numbers summing to 1"),
        ({"step": 1, "rounding": [[0, [[1, 1.2], [1000, -0.2]]]]}, "not non-negative numbers summing to 1"),
        ({"step": 1, "rounding": [[0, [[1, "half"]]]]}, "not a list of"),
        ({"step": 1, "rounding": 1000}, "not .from, .*pieces"),
        ({"rounding": "discover"}, "'rounding: discover' without a step"),
    ],
)
def test_rounding_is_checked_where_it_is_parsed(tmp_path, spec, problem):
    with pytest.raises(SchemaError, match=problem) as raised:
        loans_schema(tmp_path, {"kind": "continuous", "lower": 0, "upper": 200000, **spec})
    assert "amount" in str(raised.value)


def test_rounding_is_a_numeric_key(tmp_path):
    with pytest.raises(SchemaError, match=r"categorical column cannot have rounding"):
        loans_schema(tmp_path, {"kind": "categorical", "categories": ["a"], "rounding": [[0, []]]})


def test_rounding_is_discovered_from_the_granularity_histogram(tmp_path):
    """Incomes in whole dollars, 30 % of them whole ten-thousands, 40 % whole thousands otherwise: the discovered step
    is 1 and the discovered shares are within 0.04 of the table's (Lap(1/0.05) on each of 350 bins; the step's share is
    the rest of the band's noisy total, sd ≈ 0.005; the largest error over 40 seeds was 0.019); a documented step is
    measured against."""
    rng = np.random.default_rng(0)
    n = 20_000
    which = rng.choice(3, size=n, p=[0.3, 0.4, 0.3])
    raw = rng.uniform(10000, 94999, n)  # every value in [10,000, 100,000)
    values = np.where(which == 0, np.rint(raw / 10000) * 10000, np.where(which == 1, np.rint(raw / 1000) * 1000, raw))
    values = np.rint(values)
    found, _ = grid_step(values, 0.05, 1, rng)
    assert found.step == [[0.0, 1.0]]
    [start, shares] = next(p for p in found.rounding if p[1])
    truth = _coarsest_shares(values, [g for g, _ in shares])
    assert start == 10000.0 and [g for g, _ in shares][0] == 1.0 and {1000.0, 10000.0} <= {g for g, _ in shares}
    np.testing.assert_allclose([q for _, q in shares], truth, atol=0.04)
    assert all(not s for f, s in found.rounding if f != 10000.0)  # no rows at any other magnitude
    documented, _ = grid_step(values, 0.05, 1, rng, step=((0.0, 1000.0),))
    assert next(p for p in documented.rounding if p[1])[1][0][0] == 1000.0  # the documented step first
    # the discovered parts fill the schema; a rounding with no coarser grid anywhere is none
    spec = {"kind": "continuous", "lower": 0, "upper": 200000, "step": "discover", "rounding": "discover"}
    loans_schema(tmp_path, spec)
    path = tmp_path / "loans.yaml"
    col = load_schema(path, discovered={"amount": {"step": found.step, "rounding": found.rounding}}).column("amount")
    assert col.step == ((0.0, 1.0),) and col.rounding is not None and col.rounding[0] == (0.0, ())
    flat = {"amount": {"step": 1.0, "rounding": [[0.0, []]]}}
    assert load_schema(path, discovered=flat).column("amount").rounding is None
    assert step_bins(np.array([30000.0]), STEP_LADDER).tolist() == [12]  # 30,000 is on the 10,000 grid


def test_step_and_rounding_share_one_histogram_and_one_share_of_the_budget(tmp_path):
    import pandas as pd

    from pipelines.data.discovery import discover, planned_events, steps
    from pipelines.privacy.discovery import step_event

    spec = {"kind": "continuous", "lower": 0, "upper": 200000, "step": "discover", "rounding": "discover"}
    loans_schema(tmp_path, spec)
    sch = load_schema(tmp_path / "loans.yaml", pending=True)
    [plan] = steps(sch, 0.1, 1e-6)
    assert (sorted(plan.keys), plan.epsilon) == (["rounding", "step"], 0.1) and planned_events([plan], sch) == [
        step_event(0.1, 1)
    ]
    values = np.rint(np.random.default_rng(0).uniform(10, 99, 5000)) * 1000
    frame = pd.DataFrame({"amount": values})
    domain, events = discover(frame, None, sch, [plan], lambda context: np.random.default_rng(0))
    assert set(domain["columns"]["amount"]) == {"step", "rounding"} and events == [step_event(0.1, 1)]
    # with a documented step, rounding alone: the same one histogram
    loans_schema(tmp_path, {**spec, "step": 1})
    [alone] = steps(load_schema(tmp_path / "loans.yaml", pending=True), 0.1, 1e-6)
    assert alone.keys == ("rounding",)


def test_rounding_never_moves_an_atom(tmp_path):
    """An atom (decoded exactly) stays exact under rounding: 12,500 is never rounded to 12,000 or 13,000."""
    spec = {"kind": "continuous", "lower": 0, "upper": 200000, "step": 1, "rounding": INCOME, "atoms": [12500]}
    sch = loans_schema(tmp_path, spec)
    X = np.column_stack([np.full(2000, 12500 / 200000), np.ones(2000), np.zeros(2000)])
    assert set(Encoder(sch).decode(X, np.random.default_rng(0))["amount"]) == {12500.0}
