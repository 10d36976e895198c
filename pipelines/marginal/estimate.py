"""Private-PGM (`mbi` 2.0) estimation, marginal queries, sampling and persistence: post-processing only.

JAX runs on the CPU unless `device` is 'cuda' (and a CUDA build of jaxlib is installed: the `cuda` extra);
float64 is enabled before mbi is imported (mbi warns that float32 stalls estimation on large totals).

Sampling: pipelines/marginal/sample.py (mbi's randomised rounding, seeded and in a fixed order).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
import opt_einsum


# XLA's CPU compiler at its defaults spends most of a small model's estimation compiling: mbi compiles its mirror
# descent loop and its belief propagation anew for every model structure (every AIM round).
# Compiled without LLVM optimisation and without the fusion emitters, a small model compiles several times faster
# and fits in under half the time; the compiled code runs slower, so the loop of a large
# model, where running dominates compiling, is compiled at XLA's defaults (`OPTIMISED_ABOVE`). Flags the caller's
# XLA_FLAGS already sets are left as set. docs/performance.md, "AIM's compile time".
FAST_COMPILE_FLAGS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
XLA_OPTIONS = {"xla_backend_optimization_level": 3, "xla_cpu_use_fusion_emitters": True}
# cells x iterations of one estimation above which its loop is compiled at XLA's defaults: ~3 s more to compile
# against ~1e-8 s less per cell and iteration to run (measured at 15,200 and 1,000,000 Adult rows)
OPTIMISED_ABOVE = 3e8


# the newest jaxlib (major, minor) whose XLA has the CPU fusion-emitter flag: jaxlib 0.11.2 aborts the process on it
# in XLA_FLAGS ("Unknown flag") and refuses it as a compile option (seen on an H200 machine, docs/performance.md)
FUSION_FLAG_UNTIL = (0, 10)


def _jaxlib_version() -> tuple[int, int]:
    from importlib.metadata import version

    major, minor = version("jaxlib").split(".")[:2]
    return int(major), int(minor)


def _known(flags: dict) -> dict:
    """`flags` less those the installed jaxlib's XLA does not know (the fusion-emitter flag after FUSION_FLAG_UNTIL)."""
    if _jaxlib_version() <= FUSION_FLAG_UNTIL:
        return flags
    return {k: v for k, v in flags.items() if k != "xla_cpu_use_fusion_emitters"}


def _fast_compile_flags() -> None:
    """Add FAST_COMPILE_FLAGS to XLA_FLAGS (before JAX starts its backend: the flags are read once per process)."""
    flags = os.environ.get("XLA_FLAGS", "")
    extra = [f"--{k}={str(v).lower()}" for k, v in _known(FAST_COMPILE_FLAGS).items() if f"--{k}=" not in flags]
    if extra:
        os.environ["XLA_FLAGS"] = " ".join([flags, *extra]).strip()


def _mbi(device: str = "cpu"):
    if device != "cuda":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        _fast_compile_flags()
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    import mbi

    return mbi


def domain(names: Sequence[str], shape: Sequence[int], device: str = "cpu"):
    return _mbi(device).Domain(tuple(names), tuple(int(s) for s in shape))


CONTRADICTION_Z = 4.0  # standard errors of the measured total beyond which it contradicts the public n̂


def _weight_sigma(sigma: float) -> float:
    """A measurement's σ as the estimation weighs it: σ = 0 (exact, non-private) counts as σ = 1."""
    return float(sigma) if sigma > 0 else 1.0


def _query_weights(measurement: Sequence) -> np.ndarray | None:
    """A measurement's query weights (its optional 4th item: a compressed 1-way), None for the plain marginal."""
    return measurement[3] if len(measurement) > 3 else None


def estimation_total(measurements: Sequence[tuple], n_rows: float) -> float:
    """The total the estimation uses: the public n̂ = `n_rows`, unless the noisy measurements contradict it.

    The measured total T̂ is the inverse-variance weighted mean of the measured marginals' sums (weight
    1/(σ²·cells): Private-PGM's `minimum_variance_unbiased_total`), with standard error s = (Σ 1/(σ²·cells))^-½.
    |T̂ − n̂| > 4·s means the documented count does not describe the rows (an extract of a documented table, rows
    dropped by validation); a total fixed at n̂ then spreads the surplus over every cell and the model's
    distribution falls toward uniform (Adult's 16,000-row extract under its documented 48,842 rows loses
    2-/3-way score 949 → 599 / 893 → 490), so T̂ is used (at least 1). Otherwise n̂, the better-known of the
    two. Post-processing of the DP measurements and a public count: no budget. σ = 0 (exact) counts as σ = 1.
    A measurement with query weights w (a compressed 1-way: pipelines/marginal/compress.py) measures w_i·M_i, so
    its sum is Σ y_i/w_i with variance σ²·Σ 1/w_i²."""
    sums, variances = [], []
    for m in measurements:
        y, s, w = np.ravel(m[1]), m[2], _query_weights(m)
        w = np.ones(y.size) if w is None else np.asarray(w)
        sums.append(float(np.sum(y / w)))
        variances.append(_weight_sigma(s) ** 2 * float(np.sum(1.0 / w**2)))
    if not sums:
        return float(n_rows)
    sums, variances = np.array(sums), np.array(variances)
    measured = float(np.sum(sums / variances) / np.sum(1.0 / variances))
    error = float(np.sum(1.0 / variances) ** -0.5)
    return float(n_rows) if abs(measured - n_rows) <= CONTRADICTION_Z * error else max(1.0, measured)


def estimate(dom, measurements: Sequence[tuple], n_rows: float, iters: int, warm_start=None, device: str = "cpu"):
    """A MarkovRandomField fitted (mirror descent) to noisy marginals [(clique, noisy counts, σ[, query weights])],
    its total `estimation_total` (the public n̂ = `n_rows` unless the measurements contradict it). The number of
    rows sampled is the caller's. σ = 0 (exact, non-private) measurements get σ = 1 as their weight; query weights
    w (a compressed 1-way, pipelines/marginal/compress.py) make the measurement w ⊙ M (mbi's `WeightedQuery`)."""
    mbi = _mbi(device)
    ms = []
    for m in measurements:
        cl, y, s = m[:3]
        w = _query_weights(m)
        query = {} if w is None else {"query": _weighted_query(tuple(float(x) for x in w))}
        ms.append(mbi.LinearMeasurement(np.asarray(y, dtype=np.float64).ravel(), tuple(cl), _weight_sigma(s), **query))
    cells = model_size_mb(dom, [m[0] for m in measurements]) * 2**20 / 8
    return _mirror_descent(device != "cuda" and cells * iters > OPTIMISED_ABOVE).estimate(
        dom, ms, known_total=estimation_total(measurements, n_rows), iters=int(iters), warm_start=warm_start
    )


@cache
def _mirror_descent(optimised: bool):
    """mbi's MirrorDescent; `optimised`: its loop (`_multi_step`, the jitted scan of mirror-descent steps)
    compiled with XLA_OPTIONS, whatever the process's XLA_FLAGS (FAST_COMPILE_FLAGS). Called after `_mbi`. CPU
    only: XLA_OPTIONS are CPU compiler options, which the GPU compiler refuses ("No such compile option"), and on
    CUDA mbi's own jit already compiles at XLA's defaults (`_mbi` sets FAST_COMPILE_FLAGS on the CPU only)."""
    import jax
    from mbi import estimation

    if not optimised:
        return estimation.MirrorDescent()

    class Optimised(estimation.MirrorDescent):
        _multi_step = jax.jit(
            estimation.Estimator._multi_step.__wrapped__,
            static_argnames=["self"],
            donate_argnames=["state"],
            compiler_options=_known(XLA_OPTIONS),
        )

    return Optimised()


@cache
def _weighted_query(weights: tuple[float, ...]):
    """mbi's WeightedQuery, one object per weight vector: mbi hashes a query by identity and JAX compiles per
    query, so AIM's re-estimations reuse one compiled program for an unchanged compressed 1-way."""
    from mbi.marginal_loss import WeightedQuery

    return WeightedQuery(np.asarray(weights, dtype=np.float64))


def project(model, clique: Sequence[str]) -> np.ndarray:
    """The model's marginal counts on `clique` (shape: the clique's domain sizes)."""
    return np.asarray(model.project(tuple(clique)).datavector(flatten=False), dtype=np.float64)


def project_many(model, cliques: Sequence[Sequence[str]]) -> list[np.ndarray]:
    """The model's marginal counts on each clique (axes in the clique's order), computed in NumPy.

    `project` runs mbi's JAX variable elimination, which compiles one XLA program per clique and model
    structure (slow each time, and the compiled programs accumulate in memory): AIM scores ~200
    candidates per round. Here the model p(x) ∝ exp(Σ_c θ_c(x_c)) (mbi's log-potentials θ_c) is marginalised
    by one einsum per clique over the factors exp(θ_c − max θ_c) (opt_einsum's greedy contraction order), and
    the result scaled to the model's total; a clique inside one of the model's cliques is summed from that
    clique's marginal. Same numbers as `project` up to float64 rounding (tests/test_aim_mst.py).

    opt_einsum, not `np.einsum(optimize="greedy")`: NumPy's greedy path caps every intermediate at the largest
    operand's size, and once AIM's model has a cycle that cap forces a contraction over most of the domain at once.
    On AIM's larger models (Adult at 100,000 rows, round 17, 18 cliques) opt_einsum's projection is hundreds of
    times faster than NumPy's, with the same marginals to float64 rounding (`python benchmarks/aim_projection.py`).
    """
    pots, total = model.potentials, float(model.total)
    axis = {a: i for i, a in enumerate(pots.domain.attributes)}
    operands: list = []
    for cl in pots.cliques:
        theta = np.asarray(pots.tables[cl].values, dtype=np.float64)
        operands += [np.exp(theta - theta.max()), [axis[a] for a in pots.tables[cl].domain.attributes]]
    marg = {
        cl: (
            np.asarray(model.marginals.tables[cl].values, dtype=np.float64),
            tuple(model.marginals.tables[cl].domain.attributes),
        )
        for cl in model.marginals.cliques
    }
    out = []
    for r in cliques:
        r = tuple(r)
        inside = next(((v, attrs) for v, attrs in marg.values() if set(r) <= set(attrs)), None)
        if inside is not None:
            v, attrs = inside
            summed = v.sum(axis=tuple(i for i, a in enumerate(attrs) if a not in r))
            kept = [a for a in attrs if a in r]
            out.append(np.transpose(summed, [kept.index(a) for a in r]))
            continue
        v = opt_einsum.contract(*operands, [axis[a] for a in r], optimize="greedy")
        z = float(v.sum())
        out.append(v * (total / z) if z > 0 and math.isfinite(z) else project(model, r))
    return out


def model_size_mb(dom, cliques: Sequence[Sequence[str]]) -> float:
    """mbi's junction-tree size (`mbi.junction_tree.hypothetical_model_size`: MB of float64 cells) of a model on
    `cliques`, computed as mbi defines it without building its graphs: AIM asks it of every candidate in every
    round, and mbi's pure-Python version (networkx graphs, a Domain per step) was half of AIM's fit at the default.

    mbi triangulates the cliques' interaction graph, eliminating the attributes in `greedy_order`'s order (or, when
    the graph is a tree, in depth-first post-order), and sums the domain sizes of the triangulated graph's maximal
    cliques. Here: the same greedy order (at each step the attribute, first in domain order among ties, whose
    neighbourhood's domain is smallest, mbi's `min` over its OrderedDict), then the maximal cliques of the filled
    graph, which are the elimination cliques {a} ∪ N(a) that no other contains (Fulkerson & Gross 1965: the
    maximal cliques of a chordal graph are among the cliques of a perfect elimination order). A tree's maximal
    cliques are its edges, whatever the order. Equal to mbi's on random models: tests/test_aim_mst.py."""
    attrs, sizes = list(dom.attributes), dict(zip(dom.attributes, dom.shape))
    edges = {a: set() for a in attrs}
    for cl in cliques:
        for a in cl:
            edges[a].update(b for b in cl if b != a)
    n_edges = sum(len(v) for v in edges.values()) // 2
    if n_edges == len(attrs) - 1 and n_edges > 0 and _connected(edges):  # mbi's nx.is_tree branch
        cells = sum(sizes[a] * sizes[b] for a in attrs for b in edges[a] if attrs.index(a) < attrs.index(b))
        return cells * 8 / 2**20
    found = _elimination_cliques(attrs, sizes, edges, {a for cl in cliques for a in cl})
    maximal = [c for c in found if not any(c < other for other in found)]
    return sum(math.prod(sizes[a] for a in c) for c in maximal) * 8 / 2**20


def _connected(edges: dict[str, set[str]]) -> bool:
    """Whether the graph of `edges` (every attribute a node) is connected."""
    start = next(iter(edges))
    seen, todo = {start}, [start]
    while todo:
        for b in edges[todo.pop()] - seen:
            seen.add(b)
            todo.append(b)
    return len(seen) == len(edges)


def _elimination_cliques(
    attrs: list[str], sizes: dict[str, int], edges: dict[str, set[str]], held: set[str]
) -> list[frozenset]:
    """The cliques {a} ∪ N(a) met eliminating the attributes in mbi's greedy order (`greedy_order(domain, cliques,
    stochastic=False)[0]`: each step the first remaining attribute, in domain order, whose cliques' union has the
    smallest domain), each elimination joining the attribute's neighbours. That union is the attribute and its
    current neighbours, or nothing (cost 1) for an attribute in no clique (not in `held`); eliminating an attribute
    merges its cliques as it joins its neighbours, so only its neighbours' costs change (exact integers, so ties
    break as mbi's do)."""
    nb = {a: set(edges[a]) for a in attrs}

    def cost(a: str) -> int:
        return sizes[a] * math.prod(sizes[v] for v in nb[a]) if a in held else 1

    costs = {a: cost(a) for a in attrs}
    remaining, found = list(attrs), []
    while remaining:
        best = min(remaining, key=costs.__getitem__)  # the first of the smallest, in domain order
        remaining.remove(best)
        found.append(frozenset({best} | nb[best]))
        for u in nb[best]:
            nb[u] |= nb[best] - {u}
            nb[u].discard(best)
        for u in nb.pop(best):
            costs[u] = cost(u)
    return found


def save_model(model, path: Path) -> None:
    """Write the model to the .npz `path`, no pickle: one array per clique's potentials and, as a JSON string, the
    domain, the cliques and the total."""
    pots = model.potentials
    arrays = {f"p{i}": np.asarray(pots.tables[cl].values) for i, cl in enumerate(pots.cliques)}
    meta = {
        "cliques": [list(cl) for cl in pots.cliques],
        "total": float(model.total),
        "attributes": list(pots.domain.attributes),
        "shape": list(pots.domain.shape),
    }
    np.savez_compressed(path, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)


def load_model(path: Path, device: str = "cpu"):
    """The MarkovRandomField saved by `save_model` at `path` (marginals recomputed from the potentials)."""
    mbi = _mbi(device)
    from mbi import marginal_oracles
    import jax.numpy as jnp

    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        dom = mbi.Domain(tuple(meta["attributes"]), tuple(meta["shape"]))
        cliques = [tuple(c) for c in meta["cliques"]]
        tables = {cl: mbi.Factor(dom.project(cl), jnp.asarray(z[f"p{i}"])) for i, cl in enumerate(cliques)}
    pots = mbi.CliqueVector(dom, cliques, tables)
    marginals = marginal_oracles.message_passing_stable(pots, float(meta["total"]))
    return mbi.MarkovRandomField(potentials=pots, marginals=marginals, total=float(meta["total"]))
