"""Long code lists in MST and AIM: domain compression by the noisy 1-way counts
(pipelines/marginal/compress.py): the mapping's known answers, the re-expressed 1-way measurement, decoding of the
merged cell by its codes' noisy counts shrunk toward their mean (uniform when they differ by noise alone), and a
400-code column through both generators (its rare codes merged, its common ones kept at their rates, the model's
cliques the compressed size, save/load)."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.data.layout import Block, Layout
from pipelines.generators.base import Budget
from pipelines.generators.registry import generator_class
from pipelines.marginal.compress import Compression
from pipelines.marginal.estimate import estimation_total

from support.ledger import FakeSession

DELTA = 1e-5


def test_the_supported_codes_and_the_merged_cell_known_answers():
    y = [np.array([50.0, 1, 0, 40, -2, 3]), np.array([7.0, 9.0])]
    c = Compression.from_one_way(y, 5.0, threshold=4)  # 3σ = 15: codes 0 and 3 of column 0 kept
    assert c.supported == {0: (0, 3)} and c.shape == (3, 2)  # column 1: 2 cells, not above the threshold
    assert c.rare == {}  # the merged codes' counts 1, 0, −2, 3 differ by noise alone at σ = 5: uniform
    assert c.mapping(0).tolist() == [0, 2, 2, 1, 2, 2]
    assert c.codes(np.array([[0, 1], [3, 0], [5, 1]])).tolist() == [[0, 1], [1, 0], [2, 1]]
    y2, w = c.one_way(0, y[0])  # merged: 1 + 0 − 2 + 3 = 2 over m = 4 cells, scaled by 1/√4
    assert y2.tolist() == [50.0, 40.0, 1.0] and w.tolist() == [1.0, 1.0, 0.5]
    assert c.one_way(1, y[1])[1] is None
    assert Compression.from_one_way(y, 5.0, None).supported == {}  # null: never
    assert Compression.from_one_way(y, 0.0, 4).supported == {}  # exact counts (ε = inf): never
    assert Compression.from_one_way(y, 5.0, 6).supported == {}  # 6 cells: not above 6
    assert Compression.from_dict(c.to_dict()) == c and Compression.from_dict(None) is None


def test_the_measured_total_is_unchanged_by_the_re_expression():
    rng = np.random.default_rng(0)
    y = rng.normal(0, 3, 500)
    y[:20] += 100
    c = Compression.from_one_way([y], 3.0, 100)
    y2, w = c.one_way(0, y)
    other = (("b",), np.array([400.0, 1700.0]), 3.0)
    assert estimation_total([(("a",), y2, 3.0, w), other], 2000) == pytest.approx(
        estimation_total([(("a",), y, 3.0), other], 2000), rel=1e-12
    )


def test_the_merged_cell_decodes_by_its_codes_noisy_counts_shrunk_toward_their_mean():
    y = np.array([90.0, 12.0, 0.0, 80.0, -3.0, 7.0])  # σ = 5: codes 0 and 3 kept (≥ 15), 1, 2, 4, 5 merged
    c = Compression.from_one_way([y], 5.0, threshold=4)
    # merged counts 12, 0, −3, 7: mean 4, d = (8, −4, −7, 3), Σd² = 138, λ = 1 − 3·25/138; p ∝ 4 + λd
    lam = 1 - 75 / 138
    expected = (4 + lam * np.array([8, -4, -7, 3])) / 16
    assert c.supported == {0: (0, 3)} and c.rare == {0: pytest.approx(tuple(expected))}
    assert Compression.from_dict(c.to_dict()) == c
    out = c.expand(np.array([[2]] * 9000), np.random.default_rng(3))[:, 0]
    # 9,000 draws: each merged code's share within 5 standard errors (at most 0.027)
    shares = np.array([(out == code).mean() for code in (1, 2, 4, 5)])
    assert np.abs(shares - expected).max() < 0.027
    noise = Compression.from_one_way([np.array([90.0, 3.0, -2.0, 80.0, 1.0, -4.0])], 5.0, threshold=4)
    assert noise.supported == {0: (0, 3)} and noise.rare == {}  # Σd² = 38 below 3·25: noise alone, uniform
    assert Compression.from_one_way([y], 5.0, 4, exempt={0}).supported == {}  # exempt (cut bins): never


def test_the_merged_cell_decodes_uniformly_to_its_codes():
    c = Compression({0: (2, 5)}, (8,))
    codes = np.array([[0]] * 20 + [[1]] * 20 + [[2]] * 6000)
    out = c.expand(codes, np.random.default_rng(3))[:, 0]
    assert out[:20].tolist() == [2] * 20 and out[20:40].tolist() == [5] * 20
    merged = out[40:]
    assert set(np.unique(merged)) == {0, 1, 3, 4, 6, 7}
    # 6,000 draws over 6 codes: each share 1/6 within 5 standard errors (0.024)
    assert np.abs(np.bincount(merged, minlength=8)[[0, 1, 3, 4, 6, 7]] / 6000 - 1 / 6).max() < 0.024


def long_code_table(n: int, k: int, seed: int = 0) -> tuple[Layout, np.ndarray]:
    """A k-code column `dx` (one-hot) whose first 5 codes hold 90 % of the rows (the rest spread over 300 rare
    codes), and a binary target that follows the code."""
    rng = np.random.default_rng(seed)
    common = rng.random(n) < 0.9
    dx = np.where(common, rng.integers(0, 5, n), rng.integers(5, 305, n))
    y = (rng.random(n) < np.where(dx < 5, 0.2 + 0.15 * dx, 0.5)).astype(np.float32)
    X = np.zeros((n, k + 1), np.float32)
    X[np.arange(n), dx] = 1
    X[:, k] = y
    return Layout((Block("dx", "categorical", 0, k), Block("y", "binary", k, k + 1, is_target=True))), X


@pytest.mark.integration
@pytest.mark.parametrize("name", ["mst", "aim"])
def test_a_long_code_list_is_modelled_on_its_supported_codes(name, tmp_path):
    layout, X = long_code_table(4000, 400)
    extra = {"max_rounds": 3, "final_iters": 200} if name == "aim" else {}
    gen = generator_class(name)(layout, {"noise_seed": 1, "iters": 200, **extra}, "cpu")
    gen.fit(X, FakeSession(), Budget(1.0, DELTA))
    kept = gen.compression.supported[0]
    assert set(range(5)) <= set(kept) and len(kept) < 20  # the common codes; few rare ones reach 3σ
    assert dict(zip(gen.model.domain.attributes, gen.model.domain.shape))["dx"] == len(kept) + 1
    S = gen.sample(4000, 0)
    codes = S[:, :400].argmax(1)
    for v in range(5):  # each common code's share of rows (18 %) and its target rate, within DP and sampling noise
        assert abs((codes == v).mean() - (X[:, v] == 1).mean()) < 0.03
        assert abs(S[codes == v, 400].mean() - X[X[:, v] == 1, 400].mean()) < 0.1
    rare = ~np.isin(codes, kept)
    assert 0.05 < rare.mean() < 0.15 and np.unique(codes[rare]).size > 30  # the merged mass, spread over codes
    gen.save(tmp_path)
    again = generator_class(name).load(tmp_path)
    assert again.compression == gen.compression and np.array_equal(again.sample(500, 9), gen.sample(500, 9))
