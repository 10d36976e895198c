"""MST (McKenna, Miklau & Sheldon 2021, "Winning the NIST Contest: A scalable and general approach to
differentially private synthetic data", §4), accounted by the ledger's PLD accountant.

Steps, on integer codes from `pipelines.data.bins.Discretizer` (d columns):
1. measure every 1-way marginal with discrete Gaussian noise σ₁ (shift 1 each, exact sampler: `measure`);
2. estimate p̂ from them (a product distribution) and select d - 1 edges of a maximum spanning tree: while the
   tree is not spanning, the exponential mechanism (ε_sel, Δ = 1: `select`) picks one pair that joins two
   components, scored by ||M_ij(D) - M_ij(p̂)||₁ (Kruskal with noisy picks, as the paper's code);
3. measure the d - 1 selected 2-way marginals with σ₂;
4. estimate the graphical model from all measurements (mbi) and sample from it (post-processing).

Budget split (the paper's, in zCDP terms): ρ/3 for the 1-way measurements (σ₁² = 3d/2ρ), ρ/3 for the d - 1
selections (ε_sel² / 8 each), ρ/3 for the 2-way measurements (σ₂² = 3(d-1)/2ρ). We keep the shape and
replace the ρ-to-(ε, δ) conversion by our accountant: with one scale s, σ₁ = s√d, σ₂ = s√(d-1),
ε_sel = 2/(s√(d-1)) (the paper's ratios: s = sqrt(3/2ρ)), and s is the smallest scale whose composition of
d DiscreteGaussianEvent(σ₁, 1), d - 1 DiscreteGaussianEvent(σ₂, 1) and d - 1 bounded-range PureEpsilonEvent(ε_sel) meets
(ε, δ) by the ledger's accountant (min of the PLD and the RDP bound: `accountant.epsilon_pld`). The
parameters are fixed before any row is read, so the recorded events equal the planned ones exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import ClassVar

import numpy as np

from pipelines.marginal import estimate as est
from pipelines.marginal.one_way import Cells, measure_one_way
from pipelines.marginal.measure import Codes, chunk_passes, measure, measurement_event
from pipelines.marginal.exponential import l1_score, select
from pipelines.privacy.accountant import calibrate_noise_scale
from pipelines.privacy.events import BOUNDED_RANGE, Event, NonPrivateEvent, PureEpsilonEvent
from pipelines.privacy.plan import PrivacyPlan


@dataclass(frozen=True, kw_only=True)
class MSTPlan(PrivacyPlan):
    """MST's spend for d columns (the generator's privacy plan): one scale s (0 when ε = ∞), the measurements'
    σ₁ = s√d and σ₂ = s√(d-1), the selections' ε_sel = 2/(s√(d-1)); `events` as `mst_events` lists them."""

    scale: float
    sigma_1way: float
    sigma_2way: float
    epsilon_select: float
    d: int
    kind: ClassVar[str] = "mst"


def mst_events(scale: float, d: int) -> list[Event]:
    s1, s2, es = scale * math.sqrt(d), scale * math.sqrt(d - 1), 2.0 / (scale * math.sqrt(d - 1))
    return (
        [measurement_event(s1, "1-way marginal counts")] * d
        + [PureEpsilonEvent(es, BOUNDED_RANGE)] * (d - 1)
        + [measurement_event(s2, "2-way marginal counts")] * (d - 1)
    )


def plan_mst(d: int, epsilon: float, delta: float, *, n_rows: int) -> MSTPlan:
    """The MST parameters for d columns at (ε, δ) (PLD-calibrated; ε = inf: no noise); `n_rows` is the public n̂
    it is planned for, and the estimation's total unless the measurements contradict it
    (`estimate.estimation_total`)."""
    if d < 2:
        raise ValueError(f"MST needs at least 2 columns, got {d}")
    if math.isinf(epsilon):
        return MSTPlan(
            n_rows=n_rows,
            epsilon=epsilon,
            delta=delta,
            events=(NonPrivateEvent("epsilon: inf"),),
            scale=0.0,
            sigma_1way=0.0,
            sigma_2way=0.0,
            epsilon_select=math.inf,
            d=d,
        )
    s = calibrate_noise_scale(epsilon, delta, lambda x: mst_events(x, d))
    return MSTPlan(
        n_rows=n_rows,
        epsilon=epsilon,
        delta=delta,
        events=tuple(mst_events(s, d)),
        scale=s,
        sigma_1way=s * math.sqrt(d),
        sigma_2way=s * math.sqrt(d - 1),
        epsilon_select=2.0 / (s * math.sqrt(d - 1)),
        d=d,
    )


def select_tree(pairs: dict[tuple[int, ...], np.ndarray], names, model, epsilon: float, rng):
    """The d - 1 noisy maximum-spanning-tree edges (column index pairs) and their selection events, from the exact
    2-way counts `pairs` of every pair (i < j)."""
    d = len(names)
    one = [est.project(model, (n,)) for n in names]
    total = max(float(sum(one[0].ravel())), 1e-12)
    weights = {}
    for i, j in combinations(range(d), 2):
        indep = np.outer(one[i], one[j]) / total
        weights[(i, j)] = l1_score(pairs[(i, j)], indep)
    parent = list(range(d))

    def root(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    edges, events = [], []
    for _ in range(d - 1):
        cands = [e for e in weights if root(e[0]) != root(e[1])]
        idx, ev = select(np.asarray([weights[e] for e in cands]), 1.0, epsilon, rng)
        i, j = cands[idx]
        parent[root(i)] = root(j)
        edges.append((i, j))
        events.append(ev)
    return edges, events


def run_mst(
    codes: Codes,
    shape,
    names,
    plan: MSTPlan,
    rng,
    iters: int = 2000,
    device: str = "cpu",
    progress=None,
    compress_above: int | None = None,
    cells: Cells | None = None,
):
    """Run MST on integer codes (a matrix, or `measure.Passes` over chunks of it) under `plan` (its n̂
    the estimation's total unless the measurements contradict it), its 1-way measurements counted on `cells`
    (`pipelines.marginal.one_way`: the bins cut in parts; default the model's own cells), on the domain they
    compress (`Compression`, columns above `compress_above` cells); returns (model on that domain, actual events,
    selected edges, the compression, the bins' shapes). The rows are read in two passes: the 1-way counts, then
    every pair's on the compressed domain (`Passes.count`)."""
    d, chunks = len(names), chunk_passes(codes)
    first = measure_one_way(cells or Cells.coarse(chunks, shape), names, plan.sigma_1way, rng, compress_above)
    compression, events, meas = first.compression, list(first.events), list(first.measurements)
    shape = compression.shape
    pairs = chunks.then(compression.codes).count(shape, combinations(range(d), 2))
    dom = est.domain(names, shape, device)
    one_way = est.estimate(dom, meas, plan.n_rows, max(100, iters // 10), device=device)
    edges, sel_events = select_tree(pairs, names, one_way, plan.epsilon_select, rng)
    events += sel_events
    if progress:
        progress(f"mst: tree {[(names[i], names[j]) for i, j in edges]}")
    for i, j in edges:
        y, ev = measure(pairs[(i, j)], plan.sigma_2way, rng, query=f"2-way {names[i]} x {names[j]}")
        meas.append(((names[i], names[j]), y, plan.sigma_2way))
        events.append(ev)
    model = est.estimate(dom, meas, plan.n_rows, iters, device=device)
    if plan.scale == 0:
        events = [NonPrivateEvent("epsilon: inf")]
    return model, events, edges, compression, first.within
