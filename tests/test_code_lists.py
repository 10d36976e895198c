"""Long code lists for the deep generators: the public buckets of consecutive codes
(`pipelines.data.code_lists`) and the model layout a deep generator trains on (`BinnedEncoding(code_lists=True)`):
a long list's bucket, one-hot, plus the code's place inside its bucket; samples come back as exact table rows."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pipelines.data.bins import BinnedEncoding
from pipelines.data.code_lists import CodeBuckets
from pipelines.data.layout import Block, Layout
from pipelines.errors import ParamError
from pipelines.generators.base import Budget
from pipelines.generators.registry import load_generator, make_generator

from support.generators import TINY
from support.ledger import FakeSession

K = 5000
DEEP = ("dpwgan", "ppem", "dp_auto_gan", "pearl", "iw_mmd_gan")
ROWS = 200


def test_buckets_of_consecutive_codes_known_answers():
    b = CodeBuckets(K)
    assert b.count == 64 and b.bucket[[0, 78, 79, 4999]].tolist() == [0, 0, 1, 63]  # ⌊64 k / 5000⌋
    sizes = np.diff(b.starts)
    assert b.starts[0] == 0 and b.starts[-1] == K and set(sizes.tolist()) == {78, 79} and sizes.sum() == K
    codes = np.arange(K)
    offsets = b.offsets(codes)
    assert ((offsets > 0) & (offsets < 1)).all()
    np.testing.assert_array_equal(b.codes_at(b.bucket[codes], offsets), codes)  # every code comes back
    assert b.codes_at(np.array([0, 0, 63]), np.array([0.0, 1.0, 1.0])).tolist() == [0, 78, 4999]
    small = CodeBuckets(150)  # 150 codes: 2 or 3 a bucket
    assert small.count == 64 and set(np.diff(small.starts).tolist()) == {2, 3}


def layout(target: int = 2) -> Layout:
    """age, a 5,000-code dx (a long list), a 3-code ward, a target of `target` classes (a long list above 100)."""
    return Layout(
        (
            Block("age", "continuous", 0, 1, lower=0.0, upper=100.0),
            Block("dx", "categorical", 1, 1 + K),
            Block("ward", "categorical", 1 + K, 4 + K),
            Block("y", "categorical", 4 + K, 4 + K + target, is_target=True),
        )
    )


def rows(n: int, target: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.zeros((n, layout(target).width), dtype=np.float32)
    X[:, 0] = rng.random(n)
    dx = np.minimum(rng.zipf(1.3, n) - 1, K - 1)
    X[np.arange(n), 1 + dx] = 1
    X[np.arange(n), 1 + K + rng.integers(0, 3, n)] = 1
    X[np.arange(n), 4 + K + rng.integers(0, target, n)] = 1
    return X, dx


def test_a_long_list_is_its_bucket_and_its_place_and_round_trips_exactly():
    enc = BinnedEncoding(layout(300), 20, scaled={"age"}, code_lists=True)
    assert [(b.column, b.kind, b.width) for b in enc.layout.blocks] == [
        ("age", "continuous", 1),
        ("dx.bucket", "categorical", 64),
        ("dx.code", "continuous", 1),
        ("ward", "categorical", 3),
        ("y", "categorical", 300),
    ]  # the target keeps every code
    X, dx = rows(1000, 300)
    Z = enc.encode(X)
    assert Z.shape == (1000, 369) and (Z[:, 1:65].sum(1) == 1).all()
    np.testing.assert_array_equal(Z[:, 1:65].argmax(1), CodeBuckets(K).bucket[dx])
    np.testing.assert_array_equal(enc.decode(Z), X)
    soft = np.zeros((1, 369))  # a generator's soft row
    soft[0, 1 + 3], soft[0, 1 + 7], soft[0, 65] = 0.2, 0.7, 0.5  # bucket 7 (codes 547-624), middle
    assert enc.decode(soft)[0, 1 : 1 + K].argmax() == 547 + 39
    assert BinnedEncoding(layout(300), 20, scaled={"age"}).layout.width == layout(300).width  # without: unchanged


def test_the_encoding_param_is_checked_and_one_hot_keeps_every_code():
    with pytest.raises(ParamError, match="dpwgan.code_lists must be one of"):
        make_generator("dpwgan", layout(), {"code_lists": "hashed"}, "cpu")
    assert (
        make_generator("dpwgan", layout(), {**TINY["dpwgan"], "code_lists": "one_hot"}, "cpu").encoding.binning is None
    )
    short = Layout(layout().blocks[:1] + (Block("ward", "categorical", 1, 4),))
    assert make_generator("dpwgan", short, TINY["dpwgan"], "cpu").encoding.binning is None  # no long list: no map


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [math.inf, 1.0])
@pytest.mark.parametrize("name", DEEP)
def test_deep_generators_train_on_the_buckets_and_sample_exact_table_rows(name, epsilon, tmp_path: Path):
    extra = {"protected": ["age"]} if name == "ppem" else {}
    params = {**TINY[name], **extra, "epsilon": epsilon, "noise_seed": 0}
    gen = make_generator(name, layout(), params, "cpu")
    assert gen.layout.width == 71 and "dx.bucket" in [b.column for b in gen.layout.blocks]
    X, _ = rows(ROWS)
    gen.fit(X, FakeSession(), Budget(epsilon, 1e-5))
    x = gen.sample(100, 1)
    assert x.shape == (100, layout().width)
    for b in layout().blocks[1:]:
        assert (x[:, b.start : b.stop].sum(1) == 1).all() and set(np.unique(x[:, b.start : b.stop])) <= {0.0, 1.0}
    gen.save(tmp_path)
    np.testing.assert_array_equal(load_generator(name, tmp_path).sample(50, 3), gen.sample(50, 3))
