"""Rows from a Private-PGM model (pipelines/marginal/sample.py): the rounding's known counts, the stratified
conditional draw, the model's clique marginals reproduced, and the same rows in every process whatever its string
hashing (mbi's own sampler gave a different table per process)."""

from __future__ import annotations

import pytest

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from pipelines.marginal import estimate as est
from pipelines.marginal.sample import conditional_column, rounded_column, sample_codes

PROJECT = Path(__file__).resolve().parents[1]
NAMES, SHAPE = ("a", "b", "c", "d", "e"), (3, 4, 2, 5, 3)
CLIQUES = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d"), ("d", "e")]  # a cycle: a junction tree of triples


def toy_model(seed: int = 0):
    """A model whose potentials are random on a cyclic set of cliques (no data read)."""
    mbi = est._mbi()
    import jax.numpy as jnp
    from mbi import marginal_oracles

    rng = np.random.default_rng(seed)
    dom = mbi.Domain(NAMES, SHAPE)
    tables = {cl: mbi.Factor(dom.project(cl), jnp.asarray(rng.normal(0, 1.0, dom.project(cl).shape))) for cl in CLIQUES}
    pots = mbi.CliqueVector(dom, CLIQUES, tables)
    return mbi.MarkovRandomField(
        potentials=pots, marginals=marginal_oracles.message_passing_stable(pots, 1000.0), total=1000.0
    )


def test_rounding_gives_the_floors_and_the_remainder_to_distinct_values():
    rng = np.random.default_rng(0)
    assert np.bincount(rounded_column(np.array([0.5, 0.25, 0.25]), 4, rng), minlength=3).tolist() == [2, 1, 1]
    for _ in range(20):  # n·p = (3.5, 3.5, 3): the 10th row goes to value 0 or 1, never both, never 2
        counts = np.bincount(rounded_column(np.array([0.35, 0.35, 0.3]), 10, rng), minlength=3).tolist()
        assert counts in ([4, 3, 3], [3, 4, 3])


def test_the_conditional_draw_is_stratified_within_each_parent_configuration():
    """m rows of one configuration take each value within one row of m·p (i.i.d. draws would miss by √m); a
    configuration of zero mass takes the last value."""
    rng = np.random.default_rng(0)
    p = np.array([[0.1, 0.6, 0.3], [0.5, 0.5, 0.0], [0.0, 0.0, 0.0]])
    cdf = p.cumsum(axis=1)
    parent = rng.permutation(np.repeat([0, 1, 2], [997, 500, 3]))
    out = conditional_column(cdf, parent, rng)
    for g, m in ((0, 997), (1, 500)):
        assert np.abs(np.bincount(out[parent == g], minlength=3) - m * p[g]).max() <= 1
    assert (out[parent == 2] == 2).all()


@pytest.mark.integration
def test_samples_reproduce_the_models_clique_marginals():
    model, n = toy_model(), 20_000
    codes = sample_codes(model, n, 3, NAMES)
    assert codes.shape == (n, 5) and (codes >= 0).all() and (codes < np.array(SHAPE)).all()
    for cl in CLIQUES:
        idx = [NAMES.index(c) for c in cl]
        shape = [SHAPE[i] for i in idx]
        expected = np.array(model.project(cl).datavector(flatten=False), float)
        observed = (
            np.bincount(
                np.ravel_multi_index(tuple(codes[:, i] for i in idx), shape), minlength=int(np.prod(shape))
            ).reshape(shape)
            / n
        )
        # stratified draws: TV ≈ 0.003 here; a parent order mixed up (a column drawn from another's
        # conditional) or i.i.d. rounding of the wrong axis moves it by 0.1 or more
        assert 0.5 * np.abs(observed - expected / expected.sum()).sum() < 0.02
    assert np.array_equal(codes, sample_codes(model, n, 3, NAMES))
    assert not np.array_equal(codes, sample_codes(model, n, 4, NAMES))


@pytest.mark.slow
def test_the_same_model_and_seed_give_the_same_rows_in_every_process(tmp_path):
    est.save_model(toy_model(), tmp_path / "model.npz")
    script = (
        "import hashlib, sys\nfrom pathlib import Path\nfrom pipelines.marginal import estimate as est\n"
        "from pipelines.marginal.sample import sample_codes\n"
        f"codes = sample_codes(est.load_model(Path(sys.argv[1])), 5000, 11, {NAMES!r})\n"
        "print(hashlib.sha256(codes.tobytes()).hexdigest())\n"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "model.npz")],
            cwd=PROJECT,
            env={**os.environ, "PYTHONHASHSEED": h, "PYTHONPATH": str(PROJECT)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()[-1]
        for h in ("1", "2")
    }
    here = hashlib.sha256(sample_codes(est.load_model(tmp_path / "model.npz"), 5000, 11, NAMES).tobytes()).hexdigest()
    assert digests == {here}
