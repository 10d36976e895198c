"""Public bins: the layout carries the schema's numeric facts, one binning (`pipelines.data.bins`)
serves MST/AIM's discretiser and the deep generators' `numeric_encoding: bins`, whose binned layout is what the
method trains on while samples come back as exact rows of the table's layout."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipelines.data.bins import BinnedEncoding, Discretizer, NumericBins
from pipelines.data.layout import Block, Layout
from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder
from pipelines.data.validation import conforms
from pipelines.errors import ParamError
from pipelines.generators.base import Budget
from pipelines.generators.registry import load_generator, make_generator
from pipelines.generators.mechanisms.embeddings import encoded_diameter

from support.generators import TINY
from support.ledger import FakeSession

DELTA = 1e-5
ROWS = 300
BINNED = ("dpwgan", "ppem", "dp_auto_gan", "pearl", "iw_mmd_gan")
EXTRA: dict[str, dict[str, Any]] = {  # Adult's protected columns are categorical: PPEM's x′ are numeric ones
    "ppem": {"protected": ["age", "fnlwgt"]},
    "iw_mmd_gan": {"weights": {"rebalance": {"column": "income", "observed": [0.75, 0.25], "target": [0.5, 0.5]}}},
}
HOURS_LO = [1, 10, 20, 25, 30, 35, 40, 41, 45, 50, 55, 60, 70, 80]  # schemas/adult.yaml's public edges
HOURS_HI = [9, 19, 24, 29, 34, 39, 40, 44, 49, 54, 59, 69, 79, 99]
FNLWGT_EDGES = (
    1,
    10000,
    20000,
    30000,
    40000,
    50000,
    60000,
    80000,
    100000,
    120000,
    150000,
    200000,
    250000,
    300000,
    400000,
    500000,
    600000,
    800000,
    1000000,
    1500000,
)  # schemas/adult.yaml


@pytest.fixture(scope="module")
def encoder(adult_schema) -> Encoder:
    return Encoder(adult_schema)


@pytest.fixture(scope="module")
def frame(adult_raw):
    rows = np.random.default_rng(0).choice(len(adult_raw), ROWS, replace=False)
    return adult_raw.iloc[np.sort(rows)].reset_index(drop=True)


@pytest.fixture(scope="module")
def table(encoder, frame) -> np.ndarray:
    return encoder.encode(frame)


# -- the layout's public facts ----------------------------------------------------------------------------------------
def test_the_layout_carries_the_schema_facts_and_old_layouts_still_load(encoder):
    hours = encoder.layout.block("hours_per_week")
    assert (hours.lower, hours.upper) == (1.0, 99.0) and hours.bins == (
        1,
        10,
        20,
        25,
        30,
        35,
        40,
        41,
        45,
        50,
        55,
        60,
        70,
        80,
        99,
    )
    assert encoder.layout.block("fnlwgt").bins == FNLWGT_EDGES and encoder.layout.block("sex").lower is None
    assert Layout.from_dict(encoder.layout.to_dict()) == encoder.layout  # JSON lists back to tuples
    old = {
        "blocks": [{"column": "a", "kind": "continuous", "start": 0, "stop": 1, "protected": False, "is_target": False}]
    }
    assert Layout.from_dict(old).blocks[0] == Block("a", "continuous", 0, 1)


def test_the_discretizer_from_the_layout_has_the_schema_bins(encoder):
    """The Adult schema file's edges for MST/AIM, read from the layout alone."""
    disc = Discretizer(encoder.layout, 32)
    nb = disc.bins["hours_per_week"]
    assert (nb.kind, list(nb.lo), list(nb.hi)) == ("integer", HOURS_LO, HOURS_HI)
    gain = disc.bins["capital_gain"]
    assert list(gain.lo) == [0, 1, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 10000, 15000, 20000, 30000, 50000]
    assert gain.hi[:2] == (0, 999) and gain.hi[-1] == 99999
    codes = Layout((Block("code", "integer", 0, 1, lower=1.0, upper=16.0),))
    assert list(Discretizer(codes, 32).bins["code"].lo) == list(range(1, 17))  # 16 values <= 32: one bin each
    age = disc.bins["age"]  # 74 values: 32 aligned bins
    assert list(age.lo) == sorted({math.ceil(e) for e in np.linspace(17, 90, 33)[:-1]}) and age.hi[-1] == 90
    fnl = disc.bins["fnlwgt"]
    assert fnl.kind == "continuous" and np.allclose(fnl.edges, FNLWGT_EDGES)  # the schema's public edges
    assert disc.shape == (32, 9, 19, 16, 7, 15, 6, 5, 2, 15, 10, 14, 42, 2)  # education_num: derived
    again = Discretizer.from_dict(encoder.layout, disc.to_dict())
    assert again.bins == disc.bins
    mst = make_generator("mst", encoder.layout, {"n_bins": 32}, "cpu")
    assert mst.discretizer.bins == disc.bins
    override = make_generator("mst", encoder.layout, {"bins": {"hours_per_week": [20, 40, 41, 60]}}, "cpu")
    assert list(override.discretizer.bins["hours_per_week"].lo) == [1, 20, 40, 41, 60]


def test_public_edges_need_public_bounds_and_numeric_columns():
    bare = Layout((Block("x", "continuous", 0, 1), Block("c", "categorical", 1, 3)))
    with pytest.raises(ValueError, match="column 'x': public bin edges need the column's public bounds"):
        Discretizer(bare, 4, {"x": [0.5]})
    with pytest.raises(ValueError, match=r"bins given for \['c'\], which are not numeric"):
        Discretizer(bare, 4, {"c": [0.5]})
    assert Discretizer(bare, 4).bins["x"] == NumericBins("unit", (0.0, 0.25, 0.5, 0.75, 1.0))
    with pytest.raises(ValueError, match="mst.bins: bins given for"):
        make_generator("mst", bare, {"bins": {"c": [1]}}, "cpu")
    with pytest.raises(ParamError, match="mst.bins of column 'x' must be a strictly increasing list"):
        make_generator("mst", bare, {"bins": {"x": [0.5, 0.2]}}, "cpu")


# -- the binned encoding ----------------------------------------------------------------------------------------------
def test_binned_layout_widths_on_adult(encoder):
    be = BinnedEncoding(encoder.layout, 20)
    widths = {b.column: (b.kind, b.width) for b in be.layout.blocks}
    assert widths["age.bin"] == ("categorical", 20) and widths["age.offset"] == ("continuous", 1)
    assert widths["fnlwgt.bin"] == ("categorical", 19) and widths["fnlwgt.offset"] == ("continuous", 1)
    assert "education_num.bin" not in widths and "education_num" not in widths  # derived
    assert widths["capital_gain.bin"] == ("categorical", 15) and widths["capital_loss.bin"] == ("categorical", 10)
    assert widths["hours_per_week.bin"] == ("categorical", 14) and widths["hours_per_week.offset"][1] == 1
    assert widths["native_country"] == ("categorical", 42) and widths["income"] == ("binary", 1)
    assert (encoder.layout.width, be.layout.width) == (107, 185)  # 107 − 5 numerics + 20+1+19+1+15+1+10+1+14+1
    assert be.layout.block("income").is_target and be.layout.blocks[-1].stop == 185
    kept = BinnedEncoding(encoder.layout, 20, scaled={"age"})
    assert kept.layout.block("age") == Block("age", "integer", 0, 1, lower=17.0, upper=90.0)
    assert kept.layout.width == 185 - 20


@pytest.mark.integration
def test_encode_decode_round_trip_is_exact_in_bin_and_value(encoder, adult_raw, adult_schema):
    X = encoder.encode(adult_raw)
    be = BinnedEncoding(encoder.layout, 20)
    M = be.encode(X)
    assert M.shape == (len(X), 185) and M.min() >= 0 and M.max() <= 1
    for b in be.layout.blocks:
        if b.kind == "categorical":
            assert (M[:, b.start : b.stop].sum(1) == 1).all(), b.column
    Y = be.decode(M)
    disc = be.discretizer
    assert (disc.codes(Y) == disc.codes(X)).all()  # the same bin
    assert np.abs(Y - X).max() <= 1e-6  # within 1e-6 of the range
    back, real = encoder.decode(Y), encoder.decode(X)
    for c in adult_schema.columns:
        if c.kind == "continuous":
            err = np.abs(back[c.name].to_numpy() - real[c.name].to_numpy()).max()
            assert err <= 1e-6 * (c.upper - c.lower), c.name
        else:
            assert (back[c.name].to_numpy() == real[c.name].to_numpy()).all(), c.name  # integers exact


def test_a_point_mass_bin_decodes_exactly(encoder):
    be = BinnedEncoding(encoder.layout, 20)
    hours = be.layout.block("hours_per_week.bin")
    k = HOURS_LO.index(40)
    M = np.zeros((5, be.layout.width), np.float32)
    for b in be.layout.blocks:  # any valid row: first category, binaries 0, offsets as below
        if b.kind == "categorical":
            M[:, b.start] = 1.0
    M[:, hours.start : hours.stop] = 0.0
    M[:, hours.start + k] = 1.0
    M[:, be.layout.block("hours_per_week.offset").start] = [0.0, 0.3, 0.5, 0.999, 1.0]
    assert (encoder.decode(be.decode(M))["hours_per_week"] == 40).all()
    nb = be.binned["hours_per_week"]
    assert nb.values(np.array([7, 7]), np.array([0.0, 1.0])).tolist() == [(41 - 1) / 98, (44 - 1) / 98]
    u = np.array([39 / 98], np.float32)  # 40 hours, encoded
    assert nb.codes(u).tolist() == [k]


def test_atoms_are_bins_of_their_own_that_decode_exactly(tmp_path):
    """Documented exact values (`atoms`). A continuous atom is a zero-width bin before the others; an
    integer atom a isolates [a, a] among the equal-width bins. 40 % zeros survive encode → codes → decode."""
    cost = Block("cost", "continuous", 0, 1, lower=0.0, upper=10.0, atoms=(0.0, 10.0))
    visits = Block("visits", "integer", 1, 2, lower=0.0, upper=200.0, atoms=(0.0,))
    layout = Layout((cost, visits))
    disc = Discretizer(layout, 4)
    nb = disc.bins["cost"]
    assert nb.size == 2 + 4 and nb.edges == (0.0, 2.5, 5.0, 7.5, 10.0)
    u = np.array([0.0, 1e-9, 0.05, 0.3, 0.99, 1.0], np.float32)  # 0, ≈0, 0.5, 3, 9.9, 10
    assert nb.codes(u).tolist() == [0, 0, 2, 3, 5, 1]
    assert nb.values(np.array([0, 1, 2]), np.array([0.7, 0.7, 0.5])).tolist() == [0.0, 1.0, 0.125]
    v = disc.bins["visits"]
    assert (v.lo[:3], v.hi[:2]) == ((0, 1, 50), (0, 49)) and v.point_masses is False
    assert NumericBins.from_dict(nb.to_dict()) == nb and "atoms" not in disc.bins["visits"].to_dict()
    assert Layout.from_dict(layout.to_dict()) == layout
    assert "atoms" not in Layout((Block("c", "continuous", 0, 1, lower=0.0, upper=1.0),)).to_dict()["blocks"][0]
    rng = np.random.default_rng(0)
    x = np.where(rng.random(1000) < 0.4, 0.0, rng.uniform(0.0, 1.0, 1000))  # 40 % exact zeros
    X = np.column_stack([x, np.where(x == 0.0, 0.0, 0.5)]).astype(np.float32)
    back = disc.decode(disc.codes(X), np.random.default_rng(1))
    assert ((back[:, 0] == 0.0) == (x == 0.0)).all() and ((back[:, 1] == 0.0) == (x == 0.0)).all()
    (tmp_path / "t.yaml").write_text(
        "name: t\ncolumns:\n  cost: {kind: continuous, lower: 0, upper: 10, atoms: [3.7]}\n"
    )
    enc = Encoder(load_schema(tmp_path / "t.yaml"))
    assert enc.layout.block("cost").atoms == (3.7,)
    assert enc.decode(np.array([[np.float32(0.37)], [0.38]]))["cost"].tolist() == [3.7, 3.8]  # float32 0.37: 3.6999998
    be = BinnedEncoding(layout, 4)  # the deep generators' binned encoding
    assert be.layout.block("cost.bin").width == 6
    assert ((be.decode(be.encode(X))[:, 0] == 0.0) == (x == 0.0)).all()


def test_decode_is_the_discretizers_uniform_draw_at_a_uniform_offset(encoder):
    """One implementation: the Discretizer's decoding is `NumericBins.values` at uniform offsets."""
    disc = Discretizer(encoder.layout, 20)
    codes = np.tile(np.array(disc.shape) - 1, (4000, 1))
    dec = disc.decode(codes, np.random.default_rng(0))
    gain = dec[:, encoder.layout.block("capital_gain").start] * 99999
    assert np.allclose(gain, np.rint(gain), atol=1e-2) and gain.min() >= 50000 - 1e-2
    assert abs(gain.mean() - (50000 + 99999) / 2) < 1000


def test_encoding_params_are_checked_naming_the_key(encoder):
    with pytest.raises(ParamError, match="dpwgan.numeric_encoding must be one of"):
        make_generator("dpwgan", encoder.layout, {"numeric_encoding": "onehot"}, "cpu")
    with pytest.raises(ParamError, match=r"pearl.numeric_bins must be an integer in \[2, 1000\]"):
        make_generator("pearl", encoder.layout, {"numeric_encoding": "bins", "numeric_bins": 1}, "cpu")
    with pytest.raises(ValueError, match="unknown support_points parameters"):
        make_generator("support_points", encoder.layout, {"numeric_encoding": "bins"}, "cpu")


# -- the deep generators on the binned layout ----------------------------------------------------------------------
def binned(name: str, encoder: Encoder, epsilon: float):
    params = {**TINY[name], **EXTRA.get(name, {}), "numeric_encoding": "bins", "epsilon": epsilon, "noise_seed": 0}
    return make_generator(name, encoder.layout, params, "cpu")


@pytest.mark.parametrize("epsilon", [math.inf, 1.0])
@pytest.mark.parametrize("name", BINNED)
@pytest.mark.slow
def test_binned_generators_fit_and_sample_exact_table_rows(name, epsilon, encoder, table, adult_schema, tmp_path: Path):
    gen = binned(name, encoder, epsilon)
    assert gen.table_layout == encoder.layout and gen.layout.width > encoder.layout.width
    session = FakeSession()
    gen.fit(table, session, Budget(epsilon, DELTA))
    x = gen.sample(200, 1)
    assert x.shape == (200, encoder.layout.width) and x.dtype == np.float32
    assert x.min() >= 0 and x.max() <= 1
    for b in encoder.layout.blocks:
        if b.kind == "categorical":
            assert (x[:, b.start : b.stop].sum(1) == 1).all(), b.column
        elif b.kind == "binary":
            assert np.isin(x[:, b.start], [0, 1]).all(), b.column
        elif b.kind == "integer" and b.column in gen.encoding.binning.binned:  # values of the bins: integers
            v = b.lower + x[:, b.start].astype(np.float64) * (b.upper - b.lower)
            assert np.abs(v - np.rint(v)).max() < 1e-3 * max(1.0, (b.upper - b.lower) / 1e4), b.column
    df = encoder.decode(x)
    assert conforms(df, adult_schema)["success"]
    if name == "ppem":  # x′ stays scaled: not rounded to the bins
        assert set(gen.encoding.binning.binned) == {"capital_gain", "capital_loss", "hours_per_week"}
    gen.save(tmp_path)
    again = load_generator(name, tmp_path)
    assert again.layout == gen.layout and again.table_layout == gen.table_layout
    np.testing.assert_array_equal(again.sample(50, 3), gen.sample(50, 3))


def test_plans_are_for_the_layout_the_method_trains_on(encoder):
    """PEARL's distance sensitivity uses the diameter of the binned features (one-hot bins: √2 each); PPEM keeps
    its protected x′ scaled (the α-LMDP KSD test needs a numeric value) and its gate reads table rows."""
    gen = binned("pearl", encoder, 1.0)
    features = [b for b in gen.layout.blocks if not b.is_target]
    assert (
        gen.diameter
        == encoded_diameter(features)
        > encoded_diameter([b for b in encoder.layout.blocks if not b.is_target])
    )
    assert gen.plan(1000, Budget(1.0, DELTA)).diameter == gen.diameter
    ppem = binned("ppem", encoder, 1.0)
    assert ppem.layout.block("age").kind == "integer" and ppem.layout.block("fnlwgt").kind == "continuous"
    assert "hours_per_week.bin" in [b.column for b in ppem.layout.blocks]


@pytest.mark.slow
def test_ppem_gate_reads_table_rows_under_bins(encoder, table):
    gen = binned("ppem", encoder, 1.0)
    gen.fit(table, FakeSession(), Budget(1.0, DELTA))
    (gate,) = gen.release_gates(table)
    assert gate.name and isinstance(gate.passed, bool)
