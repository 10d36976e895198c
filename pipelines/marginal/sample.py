"""Rows from a Private-PGM model: mbi 2.0's randomised rounding (`MarkovRandomField.synthetic_data`, method
"round"), every draw from one seeded generator and every order fixed.

Columns are drawn in the reverse of the junction tree's elimination order. A column without drawn neighbours is
its 1-way marginal rounded to n rows: ⌊n·p_v⌋ of each value v and the remaining n − Σ⌊n·p_v⌋ rows given to
distinct values with probability ∝ the fractional parts, then shuffled. A column c with drawn neighbours P (the
columns drawn before it that share a junction-tree clique with it) is drawn from p(c | P), the model's marginal
on P ∪ {c} normalised over c, by stratified sampling inside each parent configuration g of m_g rows: the rows of
g in random order take u = (rank + U)/m_g, U ~ U[0, 1), and the value the conditional CDF puts u at.

Why not mbi's own: its draws come from NumPy's global generator, and it orders the parents as a `set` of column
names, so the rows change with the process's string hashing (PYTHONHASHSEED): the same model and seed gave a
different table in every process. Here the parents keep the elimination order,
and the groups are drawn in blocks, not one Python step per parent configuration.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BLOCK_CELLS = 4_000_000  # CDF cells per block of parent configurations (32 MB)


def rounded_column(p: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n values whose counts are n·p rounded at random (floors, then the remainder to distinct values with
    probability ∝ the fractional parts), in random order."""
    counts = np.asarray(p, dtype=float) * (n / p.sum())
    frac, whole = np.modf(counts)
    whole = whole.astype(np.int64)
    extra = n - int(whole.sum())
    if extra > 0:
        whole[rng.choice(len(p), extra, replace=False, p=frac / frac.sum())] += 1
    return rng.permutation(np.repeat(np.arange(len(p)), whole))


def conditional_column(cdf: np.ndarray, parent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One value per row from the row's conditional CDF `cdf[parent[i]]` (rows of configurations × values),
    stratified within each configuration (module docstring); a configuration of zero mass takes the last value."""
    n, k = len(parent), cdf.shape[-1]
    groups, inverse, counts = np.unique(parent, return_inverse=True, return_counts=True)
    shuffled = rng.permutation(n)
    rows = shuffled[np.argsort(inverse[shuffled], kind="stable")]  # grouped, in random order inside each group
    starts = np.concatenate([[0], np.cumsum(counts)])
    g = inverse[rows]
    u = (np.arange(n) - starts[g] + rng.random(n)) / counts[g]
    out = np.empty(n, dtype=np.int64)
    step = max(1, BLOCK_CELLS // k)
    for lo in range(0, len(groups), step):
        hi = min(lo + step, len(groups))
        a, b = starts[lo], starts[hi]
        local = g[a:b] - lo  # each configuration's CDF shifted by its block index: one sorted array per block
        shifted = (np.minimum(cdf[groups[lo:hi]], 1.0) + np.arange(hi - lo)[:, None]).ravel()
        out[rows[a:b]] = np.minimum(np.searchsorted(shifted, local + u[a:b], side="right") - local * k, k - 1)
    return out


def sample_codes(model, n: int, seed: int, names: Sequence[str]) -> np.ndarray:
    """n rows of integer codes (columns in `names` order) drawn from the mbi `model`, a function of `seed` alone."""
    from mbi import junction_tree, marginal_oracles

    rng, n = np.random.default_rng([int(seed), 0]), max(1, int(n))
    dom = model.domain
    tree, elimination = junction_tree.make_junction_tree(dom, [tuple(c) for c in model.cliques])
    cliques = [set(c) for c in tree.nodes]
    marginals = marginal_oracles.message_passing_stable(model.potentials.expand(list(tree.nodes)), model.total)
    data: dict[str, np.ndarray] = {}
    for col in elimination[::-1]:
        parents = tuple(p for p in data if any(col in c and p in c for c in cliques))  # in drawing order
        joint = np.asarray(marginals.project(parents + (col,)).datavector(flatten=False), dtype=float)
        if not parents:
            data[col] = rounded_column(np.maximum(joint, 0.0), n, rng)
            continue
        joint = np.maximum(joint, 0.0).reshape(-1, dom[col])
        mass = joint.sum(axis=1, keepdims=True)
        cdf = np.divide(joint, mass, out=np.zeros_like(joint), where=mass > 0).cumsum(axis=1)
        parent = np.ravel_multi_index(tuple(data[p] for p in parents), tuple(dom[p] for p in parents))
        data[col] = conditional_column(cdf, parent, rng)
    codes = np.stack([data[c] for c in names], axis=1)
    return codes[rng.permutation(n)]
