"""The DP quality score of a synthetic table: how far its marginals are from the real rows', and
how many real rows a classifier learnt from it gets wrong, released with exact discrete Laplace noise, so that a
private selection can rank candidates by it.

Workload W (public: the layout and the params only): every column's 1-way marginal, then the 2-way marginals of
each column with the schema's target (and the schema's `related` pairs); without a target, every pair of columns
(the first MAX_PAIRS in column order). Cells: the layout's public bins (`Discretizer`, `bins` equal-width bins per
numeric column over its schema bounds; never derived from rows).

Score. For real rows D and a synthetic table S of exactly n̂ rows (the public row count), with c_m(·) the count
vector of marginal m, y(x) a row's target cell (its public bin) and h_S a classifier fitted on S alone (TASK_MODEL,
seeded; every column but the target in, the target cell out),

    err(D; S)  = Σ_{m ∈ W} ‖c_m(D) − c_m(S)‖₁
    miss(D; S) = #{x ∈ D : h_S(x) ≠ y(x)}                 (0 without a target)
    q(D; S)    = err(D; S) + |W|·miss(D; S),   released as q(D; S) + Y,  Y ~ Lap_ℤ(Δ/ε).

Both terms count rows out of place: q/|W| is a marginal's mean L1 error plus the real rows the table mislabels, so
of two tables with equal marginals the one that models the target scores better (the marginal error alone chose
MST's table on Adult with the best marginals and a task near chance: docs/selection.md).

Sensitivity (add/remove one record, S fixed: it is drawn from a model trained before, under that model's own
budget, and the draw is post-processing; so is h_S, fitted on S alone). Adding or removing one row of D changes
each c_m(D) in exactly one cell by 1, so each ‖c_m(D) − c_m(S)‖₁ changes by at most 1 (triangle inequality) and
err by at most |W|; it adds or removes one term of miss's sum, which is 0 or 1, so |W|·miss changes by at most |W|.
q is an integer query of sensitivity Δ = 2|W| with a target (attained: a row in cells S leaves empty, which h_S
mislabels) and |W| without. The discrete Laplace of scale t = Δ/ε is then ε-DP (Canonne, Kamath & Steinke 2020),
accounted exactly as the 1-D discrete Laplace with shift Δ (`DiscreteLaplaceEvent`, dims = 1). A smaller released
score is better; S having exactly n̂ rows makes c_m(S) and c_m(D) comparable counts without a divisor that
depends on D.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier

from pipelines.data.bins import Discretizer
from pipelines.data.layout import Block, Layout
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
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]][:MAX_PAIRS]
    return tuple((c,) for c in names) + tuple(pairs)


def marginal_error(
    discretizer: Discretizer, cliques: tuple[Clique, ...], real: np.ndarray, synthetic: np.ndarray
) -> int:
    """err(D; S) = Σ_m ‖c_m(D) − c_m(S)‖₁ over the cliques (encoded rows of the discretizer's layout)."""
    index = {c: j for j, c in enumerate(discretizer.names)}
    real_codes, synthetic_codes = discretizer.codes(real), discretizer.codes(synthetic)
    total = 0
    for q in cliques:
        columns = [index[c] for c in q]
        gap = marginal(real_codes, discretizer.shape, columns) - marginal(synthetic_codes, discretizer.shape, columns)
        total += int(np.abs(gap).sum())  # exact: counts below 2^53 are exact in float64
    return total


def task_model() -> HistGradientBoostingClassifier:
    """h_S's learner: gradient boosting (it sees the interactions a table has or lacks, as the evaluation's RF and GBM
    do), seeded, without the random validation split its early stopping would draw."""
    return HistGradientBoostingClassifier(random_state=0, early_stopping=False)


def task_errors(discretizer: Discretizer, target: Block, real: np.ndarray, synthetic: np.ndarray) -> int:
    """miss(D; S): the real rows whose target cell differs from the prediction of `task_model` fitted on the
    synthetic rows (every encoded column but the target's in); a table with one target cell predicts it."""
    j = discretizer.names.index(target.column)
    features = np.r_[0 : target.start, target.stop : discretizer.layout.width]
    y_real, y_synthetic = discretizer.codes(real)[:, j], discretizer.codes(synthetic)[:, j]
    if np.unique(y_synthetic).size == 1:
        return int((y_real != y_synthetic[0]).sum())
    model = task_model().fit(np.asarray(synthetic, dtype=np.float64)[:, features], y_synthetic)
    return int((model.predict(np.asarray(real, dtype=np.float64)[:, features]) != y_real).sum())


@dataclass(frozen=True)
class QualityScore:
    """q(D; S) of the module docstring for one layout: its workload, public bins and target (None: err alone)."""

    discretizer: Discretizer
    cliques: tuple[Clique, ...]
    target: Block | None

    @classmethod
    def of(cls, layout: Layout, n_bins: int) -> "QualityScore":
        return cls(Discretizer(layout, n_bins), workload(layout), next((b for b in layout.blocks if b.is_target), None))

    @property
    def sensitivity(self) -> int:
        """Δ = 2|W| with a target, |W| without (module docstring)."""
        return len(self.cliques) * (1 if self.target is None else 2)

    def value(self, real: np.ndarray, synthetic: np.ndarray) -> int:
        """q(D; S) = err + |W|·miss, exact."""
        err = marginal_error(self.discretizer, self.cliques, real, synthetic)
        if self.target is None:
            return err
        return err + len(self.cliques) * task_errors(self.discretizer, self.target, real, synthetic)

    def event(self, epsilon: float) -> DiscreteLaplaceEvent:
        """The event of one score release at `epsilon`: Lap_ℤ(Δ/ε) on an integer query of sensitivity Δ."""
        task = "" if self.target is None else f" and {len(self.cliques)} x the mislabelled real rows"
        return DiscreteLaplaceEvent(
            scale=self.sensitivity / epsilon,
            sensitivity=self.sensitivity,
            count=1,
            dims=1,
            query=f"marginal error of a synthetic table over {len(self.cliques)} marginals{task}",
        )

    def noisy(
        self, real: np.ndarray, synthetic: np.ndarray, epsilon: float, rng: np.random.Generator
    ) -> tuple[int, DiscreteLaplaceEvent]:
        """q(D; S) + Lap_ℤ(Δ/ε) (noise from `rng`, the fit's CSPRNG stream) and its event."""
        event = self.event(epsilon)
        noisy, event = discrete_laplace_mechanism(
            np.asarray([self.value(real, synthetic)]), event.sensitivity, event.scale, rng, 1, 1, event.query
        )
        return int(noisy[0]), event
