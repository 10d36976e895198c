"""The DP quality score of a synthetic table (issue 30, item 2): how far its marginals are from the real rows',
released with exact discrete Laplace noise, so that a private selection can rank candidates by it.

Workload W (public: the layout and the params only): every column's 1-way marginal, then the 2-way marginals of
each column with the schema's target (and the schema's `related` pairs); without a target, every pair of columns
(the first MAX_PAIRS in column order). Cells: the layout's public bins (`Discretizer`, `bins` equal-width bins per
numeric column over its schema bounds; never derived from rows).

Score. For real rows D and a synthetic table S of exactly n̂ rows (the public row count), with c_m(·) the count
vector of marginal m,

    err(D; S) = Σ_{m ∈ W} ‖c_m(D) − c_m(S)‖₁,    released as err(D; S) + Y,  Y ~ Lap_ℤ(|W|/ε).

Sensitivity (add/remove one record, S fixed: it is drawn from a model trained before, under that model's own
budget, and the draw is post-processing). Adding or removing one row of D changes each c_m(D) in exactly one cell
by 1, so each ‖c_m(D) − c_m(S)‖₁ changes by at most 1 (triangle inequality) and err by at most |W|: an integer
query of sensitivity Δ = |W|. The discrete Laplace of scale t = Δ/ε is then ε-DP (Canonne, Kamath & Steinke 2020),
accounted exactly as the 1-D discrete Laplace with shift Δ (`DiscreteLaplaceEvent`, dims = 1). A smaller
released score is better; S having exactly n̂ rows makes c_m(S) and c_m(D) comparable counts without a divisor
that depends on D.
"""
from __future__ import annotations

import numpy as np

from pipelines.data.bins import Discretizer
from pipelines.data.layout import Layout
from pipelines.marginal.calibrate import Clique, marginals
from pipelines.marginal.measure import marginal
from pipelines.privacy.events import DiscreteLaplaceEvent
from pipelines.privacy.mechanisms import discrete_laplace_mechanism

MAX_PAIRS = 100  # 2-way marginals of a table without a target: the first pairs in column order


def workload(layout: Layout) -> tuple[Clique, ...]:
    """W: every 1-way marginal, the target's pairs (and `related`), or, without a target, the first MAX_PAIRS
    pairs of columns (module docstring)."""
    if any(b.is_target for b in layout.blocks):
        return marginals(layout, "target")
    names = [b.column for b in layout.blocks]
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]][:MAX_PAIRS]
    return tuple((c,) for c in names) + tuple(pairs)


def score_event(n_marginals: int, epsilon: float) -> DiscreteLaplaceEvent:
    """The event of one score release at `epsilon`: Lap_ℤ(|W|/ε) on an integer query of sensitivity |W|."""
    return DiscreteLaplaceEvent(scale=n_marginals / epsilon, sensitivity=int(n_marginals), count=1, dims=1,
                                query=f"marginal error of a synthetic table over {n_marginals} marginals")


def marginal_error(discretizer: Discretizer, cliques: tuple[Clique, ...], real: np.ndarray,
                   synthetic: np.ndarray) -> int:
    """err(D; S) = Σ_m ‖c_m(D) − c_m(S)‖₁ over the cliques (encoded rows of the discretizer's layout)."""
    index = {c: j for j, c in enumerate(discretizer.names)}
    real_codes, synthetic_codes = discretizer.codes(real), discretizer.codes(synthetic)
    total = 0
    for q in cliques:
        columns = [index[c] for c in q]
        gap = marginal(real_codes, discretizer.shape, columns) - marginal(synthetic_codes, discretizer.shape, columns)
        total += int(np.abs(gap).sum())   # exact: counts below 2^53 are exact in float64
    return total


def noisy_score(discretizer: Discretizer, cliques: tuple[Clique, ...], real: np.ndarray, synthetic: np.ndarray,
                epsilon: float, rng: np.random.Generator) -> tuple[int, DiscreteLaplaceEvent]:
    """err(D; S) + Lap_ℤ(|W|/ε) (noise from `rng`, the fit's CSPRNG stream) and its event (module docstring)."""
    event = score_event(len(cliques), epsilon)
    value = np.asarray([marginal_error(discretizer, cliques, real, synthetic)])
    noisy, event = discrete_laplace_mechanism(value, event.sensitivity, event.scale, rng, 1, 1, event.query)
    return int(noisy[0]), event
