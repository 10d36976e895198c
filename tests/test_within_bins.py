"""The numeric bins' shape from the 1-way measurements (pipelines/marginal/one_way.py, pipelines/data/bins.py): the
parts of a bin and their inverse (known answers, integers kept whole), the fine codes (one fine cell per row and
column), the model's re-expressed measurement, the shapes and their decoding, and the privacy facts: the same
event per column as the uncut measurement, no budget for the shapes."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.data.bins import Discretizer, NumericBins
from pipelines.data.layout import Block, Layout
from pipelines.generators.base import Budget
from pipelines.generators.params.mst import public_sub_bins
from pipelines.generators.registry import generator_class
from pipelines.marginal.measure import Passes, shrunk_shares
from pipelines.marginal.one_way import Cells, WithinBins, coarse, measure_one_way
from pipelines.privacy.events import DiscreteGaussianEvent

from support.ledger import FakeSession

CONTINUOUS = NumericBins("continuous", (0.0, 10.0, 20.0), lower=0.0, upper=20.0, atoms=(5.0,))
INTEGER = NumericBins("integer", lo=(0, 6), hi=(5, 6), lower=0.0, upper=6.0)  # bins {0..5} and {6}


def test_the_parts_of_a_bin_known_answers():
    assert CONTINUOUS.splits(4).tolist() == [1, 4, 4]  # the atom is one value: one part
    assert INTEGER.splits(4).tolist() == [4, 1]  # 6 integers in 4 parts; a bin of one value: one part
    parts = CONTINUOUS.sub_cells(np.array([1, 1, 2]), np.array([0.3, 0.999, 0.5]), np.array([4, 4, 4]))
    assert parts.tolist() == [1, 3, 2]
    assert CONTINUOUS.sub_offsets(np.array([1]), np.array([1]), np.array([0.5]), np.array([4])).tolist() == [0.375]
    # integers 0..5 at their offsets (j + 0.5)/6: parts ⌊j·4/6⌋ = 0, 0, 1, 2, 2, 3
    offsets = (np.arange(6) + 0.5) / 6
    parts = INTEGER.sub_cells(np.zeros(6, int), offsets, np.full(6, 4))
    assert parts.tolist() == [0, 0, 1, 2, 2, 3]


def test_an_integer_part_decodes_to_exactly_its_integers():
    u = np.random.default_rng(0).random(4000)
    for part, integers in [(0, {0, 1}), (1, {2}), (2, {3, 4}), (3, {5})]:
        o = INTEGER.sub_offsets(np.zeros(4000, int), np.full(4000, part), u, np.full(4000, 4))
        values = INTEGER.values(np.zeros(4000, int), o) * 6  # encoded over [0, 6]
        assert set(np.rint(values).astype(int)) == integers


LAYOUT = Layout(
    (
        Block("v", "continuous", 0, 1, lower=0.0, upper=8.0),
        Block("v__missing", "binary", 1, 2),
        Block("c", "categorical", 2, 5),
    )
)


def rows() -> np.ndarray:
    """8 rows: v at 0.5, 1.5, ..., 6.5 (encoded /8) with the last one null, and a 3-category column."""
    X = np.zeros((8, 5), np.float32)
    X[:, 0] = (np.arange(8) + 0.5) / 8
    X[7, 0], X[7, 1] = 0.0, 1.0
    X[np.arange(8), 2 + np.arange(8) % 3] = 1.0
    return X


def test_fine_codes_put_each_row_in_one_part_of_its_bin():
    disc = Discretizer(LAYOUT, 2, fold_missing=True, sub_bins=4)  # v: bins [0, 4), [4, 8), null cell
    assert [s.tolist() for s in disc.splits()] == [[4, 4, 1], [1, 1, 1]]
    fine = disc.fine_codes(rows())
    assert fine[:, 0].tolist() == [0, 1, 2, 3, 4, 5, 6, 8]  # 7 values in their parts, the null in fine cell 8
    assert fine[:, 1].tolist() == disc.codes(rows())[:, 1].tolist()  # a category is its own cell
    assert (Discretizer(LAYOUT, 2, fold_missing=True).fine_codes(rows()) == disc.codes(rows())).all()
    assert Discretizer.from_dict(LAYOUT, disc.to_dict()).sub_bins == 4


def test_the_model_measurement_is_the_bins_sum_weighed_by_its_parts():
    y, w = coarse(np.array([1.0, 2, 3, 4, 10, 20, 30, 40, 7]), np.array([4, 4, 1]))
    assert y.tolist() == [5.0, 50.0, 7.0] and w.tolist() == [0.5, 0.5, 1.0]  # Σ/√4, weights 1/√4
    assert coarse(np.array([1.0, 2]), np.array([1, 1]))[1] is None


def test_exact_counts_give_the_exact_shape_and_decoding_follows_it():
    disc = Discretizer(LAYOUT, 2, fold_missing=True, sub_bins=4)
    X = rows()
    X[:6, 0] = 0.05  # six values in bin 0's first part, one in bin 1's third part (6.5/8), one null
    cells = Cells(Passes(X, (disc.fine_codes,)), tuple(disc.splits()))
    one = measure_one_way(cells, disc.names, 0.0, None, None)
    assert one.within.shares == {0: ((1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 1.0, 0.0), ())}
    assert one.measurements[0][1].tolist() == [3.0, 0.5, 1.0] and one.measurements[1][3] is None
    codes = np.zeros((1000, 2), np.int64)
    decoded = disc.decode(codes, np.random.default_rng(1), one.within)[:, 0] * 8
    assert decoded.min() >= 0 and decoded.max() < 1.0  # all inside [0, 1): the bin's measured first part
    uniform = disc.decode(codes, np.random.default_rng(1))[:, 0] * 8
    assert uniform.max() > 3.9  # without the shape: anywhere in [0, 4)
    assert WithinBins.from_dict(one.within.to_dict()) == one.within


def test_a_shape_is_shrunk_to_uniform_where_its_parts_differ_by_noise_alone():
    # deviations (−6, 4, 2, 0) from the mean 100: Σd² = 56; σ = 2: λ = 1 − 3·4/56 = 11/14
    assert shrunk_shares(np.array([94.0, 104.0, 102.0, 100.0]), 2.0).tolist() == pytest.approx(
        ((100 + np.array([-6, 4, 2, 0]) * 11 / 14) / 400).tolist()
    )
    assert shrunk_shares(np.array([94.0, 104.0, 102.0, 100.0]), 5.0) is None  # 3·25 ≥ 56: noise alone, uniform
    assert shrunk_shares(np.array([3.0, 1.0]), 0.0).tolist() == [0.75, 0.25]  # exact counts: their proportions
    assert shrunk_shares(np.array([0.0, 0.0]), 0.0) is None


def test_the_public_rule_cuts_bins_only_where_parts_hold_many_sigma_of_rows():
    assert public_sub_bins(None, 8000, 45.0, 50) == 1  # 80 rows per half-bin against 10σ₁ = 450
    assert public_sub_bins(None, 100_000, 20.0, 32) == 8  # 100,000/(32·8) = 390 ≥ 200; /(32·16) = 195 < 200
    assert public_sub_bins(None, 1_000_000, 30.0, 40) == 16  # the cap
    assert public_sub_bins(None, 10, 0.0, 40) == 16  # exact counts (ε = ∞)
    assert public_sub_bins(3, 10, 45.0, 50) == 3  # the section's own value


def test_cutting_the_bins_costs_nothing_more():
    """The same events as the uncut measurement (one DiscreteGaussianEvent(σ, 1) per column), a fine count per
    row and column (the partition of the sensitivity argument), and the generator's plan unchanged."""
    disc = Discretizer(LAYOUT, 2, fold_missing=True, sub_bins=4)
    cells = Cells(Passes(rows(), (disc.fine_codes,)), tuple(disc.splits()))
    one = measure_one_way(cells, disc.names, 3.0, np.random.default_rng(0), None)
    assert one.events == [DiscreteGaussianEvent(3.0, 1, 1, f"1-way {n}") for n in disc.names]
    exact = measure_one_way(cells, disc.names, 0.0, None, None)
    assert [float(y.sum()) for y in exact.fine] == [8.0, 8.0]  # every row in exactly one fine cell of each column
    for name in ("aim", "mst"):
        plans = [
            generator_class(name)(LAYOUT, {"sub_bins": s}, "cpu").plan(2000, Budget(1.0, 1e-5)).events for s in (1, 4)
        ]
        assert plans[0] == plans[1]


@pytest.mark.parametrize("name", ["aim", "mst"])
def test_a_skewed_column_keeps_its_shape_inside_the_bins(name, tmp_path):
    """4,000 rows, v exponential (mean 0.5 on [0, 8]): 2 bins, so bin [0, 4) holds 98 % of the rows, half of
    them below 0.35. Uniform decoding puts 9 % of the bin's rows below 0.35; cut in 8 parts, the measured shape
    puts the first part [0, 0.5) at its real 63 % (noise σ ≈ 20 at ε = 1 against 2,500 rows)."""
    rng = np.random.default_rng(0)
    X = np.zeros((4000, 5), np.float32)
    X[:, 0] = np.minimum(rng.exponential(0.5, 4000), 7.99) / 8
    X[np.arange(4000), 2 + rng.integers(0, 3, 4000)] = 1.0
    extra = {"max_rounds": 2, "final_iters": 100} if name == "aim" else {}
    params = {"noise_seed": 1, "iters": 100, "n_bins": 2, "sub_bins": 8, **extra}
    gen = generator_class(name)(LAYOUT, params, "cpu")
    gen.fit(X, FakeSession(), Budget(1.0, 1e-5))
    v = gen.sample(4000, 0)[:, 0] * 8
    real = float((X[:, 0] * 8 < 0.5).mean())  # 0.63
    assert abs((v < 0.5).mean() - real) < 0.05
    gen.save(tmp_path)
    again = generator_class(name).load(tmp_path)
    assert again.marginals.within == gen.marginals.within and np.array_equal(again.sample(300, 3), gen.sample(300, 3))
