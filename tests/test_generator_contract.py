"""The generator contract, checked for EVERY registered generator: a name added to the registry is
tested here without touching this file (a tiny configuration in support.generators.TINY keeps it fast; without one its
defaults are used).

On breast cancer encoded by the schema's Encoder, each generator must
  - reserve its plan before reading a single row (a refused reservation reads nothing);
  - refuse encoded values outside [0, 1] and NaN naming the column, and a matrix of another width;
  - plan purely and deterministically (equal events twice, no network parameter or state changed);
  - record events equal to, or dominated by (ε at δ no larger than), the reserved plan;
  - be a PrivateGenerator whose plan is a typed PrivacyPlan that survives a JSON round trip;
  - sample exact rows of the layout (binaries 0/1, categorical blocks one-hot, numerics in [0, 1]) that
    decode and pass the schema's validation suite;
  - initialise from its public seed alone: generators built concurrently in threads are identical (no
    process-wide RNG, no lock);
  - give identical samples after save/load for the same seed;
  - draw its noise from OS entropy, not the public seed (two private fits without noise_seed differ; the
    same noise_seed gives identical ones); an ε = ∞ fit is a function of the public seed.
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pipelines.data.transform import Encoder
from pipelines.data.validation import conforms
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.persistence import finite_json
from pipelines.generators.names import GENERATORS
from pipelines.generators.registry import load_generator, make_generator
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.plan import PrivacyPlan, plan_from_dict

from support.generators import TINY
from support.ledger import FakeSession, Refused

DELTA = 1e-5
ROWS = 160  # training rows (a seeded subset of breast cancer's 569)
N_SAMPLE = 64


class CountingTable:
    """Like tasks.train.EncodedTable: len() is the public row count, every conversion to an array is a read."""

    def __init__(self, x: np.ndarray) -> None:
        self._x, self.reads = x, 0

    def __len__(self) -> int:
        return len(self._x)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        self.reads += 1
        return self._x.astype(dtype or self._x.dtype, copy=True)


@pytest.fixture(scope="module")
def encoder(bc_schema) -> Encoder:
    return Encoder(bc_schema)


@pytest.fixture(scope="module")
def table(bc_raw, encoder) -> np.ndarray:
    rows = np.random.default_rng(0).choice(len(bc_raw), ROWS, replace=False)
    return encoder.encode(bc_raw.iloc[np.sort(rows)].reset_index(drop=True))


def build(name: str, encoder: Encoder, **params: Any):
    return make_generator(name, encoder.layout, {**TINY.get(name, {}), **params}, "cpu")


def fit(name: str, encoder: Encoder, table: np.ndarray, epsilon: float, **params: Any):
    gen = build(name, encoder, epsilon=epsilon, **params)
    session = FakeSession()
    gen.fit(table, session, Budget(epsilon, DELTA))
    return gen, session


def state(gen: Any) -> dict[str, Any]:
    """Every network's parameters and buffers (and every array attribute), by attribute, with the module's
    identity: a copy to compare against after a call that must not change the generator."""
    out: dict[str, Any] = {}
    for key, value in vars(gen).items():
        if isinstance(value, torch.nn.Module):
            out[key] = (id(value), {k: v.detach().clone() for k, v in value.state_dict().items()})
        elif isinstance(value, np.ndarray):
            out[key] = value.copy()
    return out


def assert_same_state(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert before.keys() == after.keys()
    for key, value in before.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, after[key], err_msg=key)
            continue
        (ident, tensors), (ident_after, tensors_after) = value, after[key]
        assert ident == ident_after, f"plan() replaced the network '{key}'"
        assert tensors.keys() == tensors_after.keys(), key
        for k, t in tensors.items():
            assert torch.equal(t, tensors_after[k]), f"plan() changed {key}.{k}"


@pytest.fixture(scope="module")
def private_fits(encoder, table) -> dict[str, tuple[Any, FakeSession]]:
    """One private fit per generator with a fixed noise_seed (tests only), computed on first use."""
    cache: dict[str, tuple[Any, FakeSession]] = {}

    def get(name: str) -> tuple[Any, FakeSession]:
        if name not in cache:
            cache[name] = fit(name, encoder, table, 1.0, noise_seed=0)
        return cache[name]

    return get


names = pytest.mark.parametrize("name", GENERATORS)
SLOW_FITS = {"mst", "aim", "private_selection"}  # far slower fits (MST, a selection of several trainings; AIM most)
fitted_names = pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_FITS else n for n in GENERATORS]
)


@pytest.mark.slow
@names
def test_reservation_comes_before_any_read(name, encoder, table):
    data = CountingTable(table)
    with pytest.raises(Refused):
        build(name, encoder).fit(data, FakeSession(refuse=True), Budget(1.0, DELTA))
    assert data.reads == 0


@pytest.mark.integration
@names
@pytest.mark.parametrize("bad", [1.5, np.nan])
def test_out_of_range_values_are_refused_naming_the_column(name, bad, encoder, table):
    block = encoder.layout.blocks[3]
    x = table.copy()
    x[7, block.start] = bad
    with pytest.raises(ValueError, match=rf"column '{block.column}'.*outside \[0, 1\]"):
        build(name, encoder).fit(x, FakeSession(), Budget(1.0, DELTA))


@names
def test_a_matrix_of_another_width_is_refused(name, encoder, table):
    with pytest.raises(ValueError, match=rf"expected \(rows, {encoder.layout.width}\)"):
        build(name, encoder).fit(table[:, :-1], FakeSession(), Budget(1.0, DELTA))


@names
@pytest.mark.parametrize("constructed, planned", [(1.0, 1.0), (math.inf, 1.0), (1.0, math.inf)])
def test_plan_is_pure_and_deterministic(name, constructed, planned, encoder):
    gen = build(name, encoder, epsilon=constructed)
    before = state(gen)
    budget = Budget(planned, DELTA)
    first = gen.plan(ROWS, budget)
    assert first and gen.plan(ROWS, budget) == first
    assert build(name, encoder, epsilon=constructed).plan(ROWS, budget) == first
    assert_same_state(before, state(gen))


@names
def test_the_plan_is_typed_and_round_trips_through_strict_json(name, encoder):
    gen = build(name, encoder)
    assert isinstance(gen, PrivateGenerator)
    for epsilon in (1.0, math.inf):
        plan = gen.plan(ROWS, Budget(epsilon, DELTA))
        assert isinstance(plan, PrivacyPlan) and plan.n_rows == ROWS and plan.epsilon == epsilon
        text = json.dumps(finite_json(plan.to_dict()), allow_nan=False)
        assert plan_from_dict(json.loads(text)) == plan


@names
def test_concurrent_construction_is_identical(name, encoder):
    with ThreadPoolExecutor(4) as pool:
        built = list(pool.map(lambda _: build(name, encoder), range(4)))
    reference = state(built[0])
    for gen in built[1:]:
        other = state(gen)
        assert reference.keys() == other.keys()
        for key, (_, tensors) in reference.items():
            for k, t in tensors.items():
                assert torch.equal(t, other[key][1][k]), f"{key}.{k} differs between threads"


@fitted_names
def test_recorded_events_are_dominated_by_the_reserved_plan(name, private_fits):
    gen, session = private_fits(name)
    assert session.reserved and session.recorded
    if session.recorded != session.reserved:
        assert epsilon_pld(session.recorded, DELTA) <= epsilon_pld(session.reserved, DELTA) * (1 + 1e-9)
    assert epsilon_pld(session.reserved, DELTA) <= 1.0 * (1 + 1e-3)


@pytest.mark.slow
@fitted_names
def test_samples_have_the_layout_decode_and_conform(name, private_fits, encoder, bc_schema):
    gen, _ = private_fits(name)
    x = gen.sample(N_SAMPLE, 3)
    assert x.shape == (N_SAMPLE, encoder.layout.width)
    assert np.isfinite(x).all() and (x >= 0).all() and (x <= 1).all()
    for b in encoder.layout.blocks:
        if b.kind == "binary":
            assert set(np.unique(x[:, b.start])) <= {0.0, 1.0}, b.column
        elif b.kind == "categorical":
            block = x[:, b.start : b.stop]
            assert set(np.unique(block)) <= {0.0, 1.0} and (block.sum(1) == 1).all(), b.column
    df = encoder.decode(x)
    result = conforms(df, bc_schema)
    assert result["success"], result["failed"]


@pytest.mark.integration
@fitted_names
def test_save_load_gives_identical_samples(name, private_fits, tmp_path: Path):
    gen, _ = private_fits(name)
    gen.save(tmp_path)
    loaded = load_generator(name, tmp_path)
    np.testing.assert_array_equal(loaded.sample(N_SAMPLE, 5), gen.sample(N_SAMPLE, 5))


@pytest.mark.slow
@fitted_names
def test_noise_comes_from_os_entropy_not_the_public_seed(name, private_fits, encoder, table):
    seeded, _ = private_fits(name)
    again, _ = fit(name, encoder, table, 1.0, noise_seed=0)
    np.testing.assert_array_equal(again.sample(N_SAMPLE, 1), seeded.sample(N_SAMPLE, 1))
    first, _ = fit(name, encoder, table, 1.0)
    second, _ = fit(name, encoder, table, 1.0)
    assert not np.array_equal(first.sample(N_SAMPLE, 1), second.sample(N_SAMPLE, 1))


@pytest.mark.integration
@fitted_names
def test_a_non_private_fit_is_a_function_of_the_public_seed(name, encoder, table):
    first, session = fit(name, encoder, table, math.inf)
    second, _ = fit(name, encoder, table, math.inf)
    assert session.recorded and math.isinf(epsilon_pld(session.recorded, DELTA))
    np.testing.assert_array_equal(first.sample(N_SAMPLE, 1), second.sample(N_SAMPLE, 1))


def test_every_registered_generator_has_a_tiny_configuration():
    assert set(GENERATORS) <= set(TINY), f"add a tiny configuration for {sorted(set(GENERATORS) - set(TINY))}"
