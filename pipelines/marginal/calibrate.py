"""DP marginal calibration of any generator's samples: noisy count marginals of the real
training rows, then raking of the generator's own samples to them (post-processing).

Marginals. Over the discretised table (`pipelines.data.bins.Discretizer`: bins from the layout's public facts
only, with the generator's `numeric_bins` where it has one, `public_discretizer`): every column's 1-way marginal,
plus the 2-way marginals of the configured pairs (`pairs: target`: every column with the schema's target; `none`; or
explicit [[a, b], ...]); m marginals in all (`marginals`).

Sensitivity and event (add/remove one record). The marginals are importance-WEIGHTED counts
M_r(D)[c] = Σ_{x∈D, x_r=c} w(x) with a public weight function 0 ≤ w(x) ≤ w_max of the row and a public bound w_max
(`Calibration.weights`: IW-MMD-GAN's weights, so that its samples are calibrated to the weighted
distribution w·p it targets); plain counts are the case w ≡ 1, w_max = 1, on the same code path. A record x lies
in exactly one cell x_r of r, so adding or removing it changes that cell by w(x) and no other:
‖M_r(D) − M_r(D')‖₂ = w(x) ≤ w_max, i.e. Δ₂ = w_max per marginal (1 for counts, `pipelines.marginal.measure`). The
m marginals stacked are one query M = (M_1, ..., M_m): a record changes exactly one cell of each by the same w(x),
so ‖M(D) − M(D')‖₂ = √(m·w(x)²) ≤ √m·w_max, attained by a record of weight w_max. The plan fixes the noise
multiplier z and sets σ = z·√m·w_max (weighting costs no ε, its noise per cell is w_max times larger).

Exact noise on a lattice. Plain counts are integers and get discrete Gaussian noise N_ℤ(0, σ²)
per cell, drawn exactly; a record moves one cell of each of the m marginals by 1, and the other cells' noise has
the same law under D and D', so the release is m 1-D discrete Gaussians with shift 1: DiscreteGaussianEvent(σ, 1,
count = m), accounted exactly (`calibration_event`). Weighted counts are first put on the lattice γℤ, γ = w_max/K
(K = CALIBRATION_LATTICE_STEPS): each row's weight becomes the integer k(x) = min(K, max(0, round(w(x)/γ))) ∈
[0, K], a function of that row alone, and a cell holds the exact integer Σ k(x). Adding or removing x changes one
cell of each marginal by k(x) ≤ K lattice points, whatever the float rounding inside k (the clip alone bounds it),
so the release Σ k + N_ℤ(0, σ_γ²), σ_γ = σ/γ = z·√m·K, is m 1-D discrete Gaussians with shift ≤ K: the event
DiscreteGaussianEvent(σ_γ, K, m), whose ratio σ_γ/K = z√m equals the continuous plan's σ/w_max. The noisy lattice
counts times γ (post-processing) are the weighted counts; a row's weight is represented to within γ/2 = w_max/2K.

Budget (`plan_calibration`). A generator's ε covers its method and its calibration: the method is planned at
(1 − share)·ε (`pipelines.marginal.calibration.Calibration.plan`); σ is then the smallest noise (to 0.1 %) with
ε_PLD(method's events ∪ {`calibration_event`(σ)}) ≤ ε at δ (`accountant.calibrate_noise_scale`): composition is
sub-additive, so the calibration gets more than share·ε alone. ε = ∞: exact marginals (σ = 0), a NonPrivateEvent.

Post-processing (no real rows: only the noisy counts). `NoisyMarginals.targets`: each column's 1-way estimate is
the inverse-variance weighted mean of its noisy 1-way counts and the sums over the other axis of every measured
2-way marginal containing it (a sum of k noisy cells has variance kσ²; the weighted mean is the minimum-variance
unbiased combination of independent estimates), clipped at 0 and normalised (weighted counts normalised estimate
the marginals of the weighted distribution w·p / E_p[w]); each noisy 2-way table, clipped at
0, is raked to its two 1-way estimates, so all targets are consistent. `NoisyMarginals.calibrate`: M =
oversample × n rows from the generator; their row weights are raked (iterative proportional fitting, Deming &
Stephan 1940, "On a least squares adjustment of a sampled frequency table when the expected marginal totals are
known", Ann. Math. Statist. 11(4)) to every target in turn, each weight bounded by WEIGHT_CAP × uniform, for at
most `sweeps` sweeps or until every weighted marginal is within `tolerance` (total variation) of its target; n rows
are drawn with probability ∝ weight; then `match` moves the fewest rows between cells so that every marginal equals
its target up to rounding (the update of PrivSyn's GUM, Zhang et al. 2021, USENIX Security, §5: re-weighting alone
cannot reach cells the generator never visits, and on a generator far off in several columns at once the unbounded
raking collapses onto a handful of rows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipelines.data.bins import Discretizer
from pipelines.data.layout import Layout
from pipelines.data.rules import broken_rows
from pipelines.privacy.accountant import MIN_NOISE_MULTIPLIER, calibrate_noise_scale, epsilon_pld
from pipelines.privacy.events import DiscreteGaussianEvent, Event, NonPrivateEvent
from pipelines.privacy.mechanisms import discrete_gaussian_mechanism
from pipelines.privacy.plan import CalibrationPlan, PrivacyPlan

Clique = tuple[str, ...]
TABLE_SWEEPS = 50  # raking sweeps of one noisy 2-way table to its two 1-way estimates (`targets`)
CALIBRATION_LATTICE_STEPS = 64  # K: importance weights in [0, w_max] go on the lattice (w_max/K)ℤ (module docstring)
WEIGHT_CAP = 20.0  # bounded raking: a row's weight stays below WEIGHT_CAP × the uniform 1/M (`rake`), so that
# resampling cannot collapse onto a few rows when the generator is far from the targets


def public_discretizer(layout: Layout, n_bins: int | None = None) -> Discretizer:
    """The cells the calibration measures: the layout's public bins (never derived from rows), `n_bins` equal-width
    bins for a numeric column without public edges (the generator's own `numeric_bins`, so that a generator
    trained on binned numerics is calibrated on the same bins; the Discretizer's default when None)."""
    return Discretizer(layout) if n_bins is None else Discretizer(layout, int(n_bins))


def marginals(
    layout: Layout, pairs: str | Sequence[str | Sequence[str]], section: str = "generator"
) -> tuple[Clique, ...]:
    """Every column's 1-way marginal, then the 2-way marginals of `pairs`: 'target' (each column with the layout's
    target, none without a target, and the schema's public `related` pairs, `Layout.related`), 'none', or a list
    whose items are 'target' or explicit column pairs [a, b] (checked against the layout; a pair given twice, in
    either order, is measured once). In a pair (a, b) the calibration moves a within the cells of b
    (`NoisyMarginals.match`)."""
    names = [b.column for b in layout.blocks]
    one = tuple((c,) for c in names)
    if pairs == "none":
        return one
    target = next((b.column for b in layout.blocks if b.is_target), None)
    two: dict[frozenset[str], Clique] = {}
    for item in ["target"] if pairs == "target" else pairs:
        if item == "target":
            found = [(c, target) for c in names if target is not None and c != target] + list(layout.related)
        else:
            missing = [c for c in item if c not in names]
            if missing:
                raise ValueError(
                    f"{section}.calibration.pairs names column '{missing[0]}', which is not in the "
                    f"table's layout. Fix: use columns of the schema ({', '.join(names)})"
                )
            found = [tuple(item)]
        for q in found:
            two.setdefault(frozenset(q), q)
    return one + tuple(two.values())


def describe(cliques: Sequence[Clique], w_max: float | None = None) -> str:
    """ "noisy 1-way marginals of 15 columns and 14 pairs with 'income'" (the shared column named when every one of
    several pairs holds it); "noisy importance-weighted (w ≤ 1.34) 1-way marginals ..." when weighted."""
    ones = sum(len(c) == 1 for c in cliques)
    twos = [c for c in cliques if len(c) == 2]
    weighted = "" if w_max is None else f"importance-weighted (w ≤ {w_max:.3g}) "
    out = f"noisy {weighted}1-way marginals of {ones} columns"
    if twos:
        shared = set(twos[0]).intersection(*twos)
        out += f" and {len(twos)} pairs" + (f" with '{sorted(shared)[0]}'" if len(twos) > 1 and shared else "")
    return out


def summary(plan: PrivacyPlan) -> dict[str, Any] | None:
    """What the manifest and the reports say about a plan's calibration (all public: plan facts), None without one:
    its `CalibrationPlan` fields, a `description` (`describe`) and the generator's whole target `generator_epsilon`."""
    if plan.calibration is None:
        return None
    return {
        **plan.calibration.to_dict(),
        "description": describe(plan.calibration.marginals, plan.calibration.w_max),
        "generator_epsilon": plan.epsilon,
    }


def calibration_event(sigma: float, m: int, w_max: float | None = None) -> Event:
    """The one event of measuring m count marginals (importance-weighted with weights in [0, `w_max`] when
    `w_max` is given) with noise σ each, in the counts' units (module docstring): plain counts
    DiscreteGaussianEvent(σ, 1, m); weighted ones DiscreteGaussianEvent(σ·K/w_max, K, m) on the lattice (w_max/K)ℤ;
    σ = 0 (ε = ∞) is a NonPrivateEvent."""
    if sigma == 0:
        return NonPrivateEvent("epsilon: inf")
    if w_max is None:
        return DiscreteGaussianEvent(
            float(sigma), 1, int(m), f"calibration: {m} count marginals (one cell each moves by 1, add/remove one)"
        )
    k = CALIBRATION_LATTICE_STEPS
    return DiscreteGaussianEvent(
        float(sigma) * k / float(w_max),
        k,
        int(m),
        f"calibration: {m} importance-weighted count marginals, weights in [0, {w_max:.6g}] "
        f"on the lattice w_max/{k} (one cell each moves by <= {k} points, add/remove one)",
    )


def plan_calibration(
    method_events: Sequence[Event],
    cliques: Sequence[Clique],
    share: float,
    epsilon: float,
    delta: float,
    w_max: float | None = None,
) -> CalibrationPlan:
    """The calibration's plan given the method's planned events (at (1 − share)·ε): σ of every marginal, the
    smallest with ε_PLD(method ∪ calibration) ≤ `epsilon` at `delta` for the joint query's Δ₂ = √m·w_max (`w_max`
    the public weight bound of importance-weighted marginals, None for counts: module docstring); ε = ∞: σ = 0."""
    m = len(cliques)
    if m == 0:
        raise ValueError("calibration needs at least one marginal (a layout without columns)")
    if w_max is not None and not (0 < w_max < math.inf):
        raise ValueError(f"the calibration's weight bound w_max must be positive and finite, got {w_max}")
    if math.isinf(epsilon):
        return CalibrationPlan(
            share=share,
            sigma=0.0,
            marginals=tuple(cliques),
            method_epsilon=math.inf,
            epsilon=math.inf,
            event=calibration_event(0.0, m),
            w_max=w_max,
        )
    events = list(method_events)
    scale = math.sqrt(m) * (1.0 if w_max is None else w_max)  # Δ₂ of the joint query: σ = multiplier × scale

    def of(x: float) -> list[Event]:  # the composed events at calibration multiplier x = σ/Δ₂
        return [*events, calibration_event(x * scale, m, w_max)]

    try:
        z = calibrate_noise_scale(epsilon, delta, of)
    except ValueError:  # so loose a target that the smallest searched multiplier meets it: take that one
        if epsilon_pld(of(MIN_NOISE_MULTIPLIER), delta) > epsilon:
            raise
        z = MIN_NOISE_MULTIPLIER
    event = calibration_event(z * scale, m, w_max)
    return CalibrationPlan(
        share=share,
        sigma=z * scale,
        marginals=tuple(cliques),
        method_epsilon=(1 - share) * epsilon,
        epsilon=epsilon_pld([event], delta),
        event=event,
        w_max=w_max,
    )


def expected_noise_tv(plan: CalibrationPlan, shape: Sequence[int], columns: Sequence[str], n_rows: int) -> float:
    """The noise's expected total variation error on a 1-way marginal estimate, averaged over the measured 1-way
    marginals: a column of k cells gets N(0, σ²) on each count of n̂ rows, E|N(0, σ²)| = σ√(2/π), so
    TV ≈ ½·k·σ·√(2/π)/n̂ (before clipping). Public: the plan's σ, the public bins' sizes `shape` (per column of
    `columns`) and n̂. `Calibration.plan` (pipelines/marginal/calibration.py) turns the calibration off above a
    steward's `max_noise_tv` (default null: never), for a method that models the table better than such noisy
    marginals would (breast cancer, 458 rows at ε ≈ 0.24: TV ≈ 3; Adult, 16,000 rows at ε = 1: 0.012;
    docs/calibration.md)."""
    sizes = dict(zip(columns, shape))
    ks = [sizes[q[0]] for q in plan.marginals if len(q) == 1]
    return float(np.mean([0.5 * k * plan.sigma * math.sqrt(2 / math.pi) / n_rows for k in ks])) if ks else 0.0


def rake(
    cells: Sequence[np.ndarray], targets: Sequence[np.ndarray], sweeps: int, tolerance: float
) -> tuple[np.ndarray, float]:
    """Row weights (summing to 1) raked to `targets` (probability vectors over flat cells; `cells[k]` holds each
    row's cell of marginal k) by iterative proportional fitting (Deming & Stephan 1940): each step multiplies the
    weights of the rows in cell c by target[c] / current[c], then caps every weight at WEIGHT_CAP × uniform
    (bounded raking, in the spirit of Deville & Särndal 1992's bounded calibration); at most `sweeps` sweeps,
    stopping once the largest total variation distance between a weighted marginal and its target is ≤ `tolerance`. A
    target whose mass
    lies entirely on cells without rows cannot be approached at all and leaves the weights unchanged. Returns
    (weights, that largest distance)."""
    rows = len(cells[0])
    w = np.full(rows, 1.0 / rows)

    def gap() -> float:
        return max(0.5 * float(np.abs(np.bincount(c, w, minlength=t.size) - t).sum()) for c, t in zip(cells, targets))

    for _ in range(sweeps):
        for c, t in zip(cells, targets):
            current = np.bincount(c, w, minlength=t.size)
            ratio = np.divide(t, current, out=np.zeros_like(t), where=current > 0)
            if not (ratio > 0).any():
                continue
            w = np.minimum(w * ratio[c], WEIGHT_CAP * w.sum() / rows)  # bounded: no row above WEIGHT_CAP× uniform
            w /= w.sum()
        if gap() <= tolerance:
            break
    return w, gap()


def _apportion(n: int, p: np.ndarray) -> np.ndarray:
    """Integer counts summing to n, proportional to the probability vector p (largest remainders)."""
    raw = n * p
    out = np.floor(raw).astype(np.int64)
    out[np.argsort(out - raw)[: n - int(out.sum())]] += 1
    return out


def _probabilities(counts: np.ndarray) -> np.ndarray:
    """Noisy counts → a probability table: negatives clipped to 0, normalised (uniform when nothing is left)."""
    p = np.clip(counts, 0.0, None)
    total = p.sum()
    return p / total if total > 0 else np.full(p.shape, 1.0 / p.size)


def _fit_table(
    table: np.ndarray, row: np.ndarray, col: np.ndarray, sweeps: int, allowed: np.ndarray | float = 1.0
) -> np.ndarray:
    """A non-negative 2-way table raked to the margins `row` and `col` (a tiny floor keeps empty rows rakeable),
    zero where `allowed` is (cells a public rule rules out stay empty: raking only multiplies)."""
    t = (np.clip(table, 0.0, None) + 1e-12) * allowed
    for _ in range(sweeps):
        t *= np.divide(row, t.sum(1), out=np.zeros_like(row), where=t.sum(1) > 0)[:, None]
        t *= np.divide(col, t.sum(0), out=np.zeros_like(col), where=t.sum(0) > 0)[None, :]
    return t / t.sum()


class NoisyMarginals:
    """The noisy count marginals of the training rows on `cliques` (noise std `sigma`, 0: exact) over the
    `discretizer`'s cells, and the calibration of a generator's samples to them (module docstring)."""

    def __init__(
        self, discretizer: Discretizer, cliques: Sequence[Clique], counts: Sequence[np.ndarray], sigma: float
    ) -> None:
        self.discretizer, self.cliques, self.sigma = discretizer, tuple(tuple(c) for c in cliques), float(sigma)
        self.counts = [np.asarray(c, dtype=np.float64) for c in counts]
        self._index = {n: i for i, n in enumerate(discretizer.names)}

    @classmethod
    def measure(
        cls,
        discretizer: Discretizer,
        plan: CalibrationPlan,
        data: np.ndarray,
        rng: np.random.Generator | None,
        weights: np.ndarray | None = None,
    ) -> tuple["NoisyMarginals", Event]:
        """Measure `plan.marginals` of the encoded training rows `data` with σ = `plan.sigma`: the count of each
        cell, or the sum of the rows' public importance `weights` (given exactly when `plan.w_max` is, each in
        [0, plan.w_max]) snapped to the lattice (w_max/K)ℤ row by row, + exact discrete Gaussian noise per cell
        (`discrete_gaussian_mechanism`; module docstring), noise from `rng` (the fit's calibration stream); returns
        them (in the counts' units) and the one joint event (`calibration_event`)."""
        bound = 1.0 if plan.w_max is None else plan.w_max
        if (weights is None) != (plan.w_max is None):
            raise ValueError(
                "the calibration plan's w_max and the measured weights disagree: importance weights "
                "need a plan made with their public bound w_max (plan_calibration), counts one without"
            )
        w = np.ones(len(data)) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape != (len(data),) or not np.all((w >= 0) & (w <= bound)):
            raise ValueError(
                f"calibration weights must be one value in [0, w_max = {bound:.6g}] per training row "
                f"(the public bound the plan's σ assumes); got shape {w.shape} for {len(data)} rows"
            )
        out = cls(discretizer, plan.marginals, [], plan.sigma)
        event = calibration_event(plan.sigma, len(plan.marginals), plan.w_max)
        if weights is None:
            unit, points = 1.0, np.ones(len(data), dtype=np.int64)
        else:  # each row's weight as k(x) ∈ [0, K] lattice points of w_max/K (module docstring)
            k = CALIBRATION_LATTICE_STEPS
            unit = bound / k
            points = np.clip(np.rint(w * (k / bound)), 0, k).astype(np.int64)
        for clique, cells in zip(out.cliques, out.cells(data)):
            dims = out._dims(clique)
            if plan.sigma == 0:
                out.counts.append(np.bincount(cells, w, minlength=math.prod(dims)).reshape(dims))
                continue
            exact = np.bincount(cells, points, minlength=math.prod(dims)).astype(np.int64).reshape(dims)
            noisy, _ = discrete_gaussian_mechanism(exact, event.sensitivity, event.sigma, rng, 1, event.query)
            out.counts.append(noisy.astype(np.float64) * unit)
        return out, event

    def targets(self) -> list[np.ndarray]:
        """Consistent probability tables, one per clique (module docstring, post-processing)."""
        one: dict[str, np.ndarray] = {}
        for name in dict.fromkeys(c for q in self.cliques for c in q):  # the measured columns only
            parts = [(c, 1.0) for q, c in zip(self.cliques, self.counts) if q == (name,)]
            if self.sigma > 0:
                for q, c in zip(self.cliques, self.counts):
                    if len(q) == 2 and name in q:
                        axis = 1 - q.index(name)
                        parts.append((c.sum(axis), 1.0 / c.shape[axis]))  # variance c.shape[axis]·σ²
            weight = sum(w for _, w in parts)
            one[name] = _probabilities(sum(w * c for c, w in parts) / weight)
        return [
            one[q[0]] if len(q) == 1 else _fit_table(c, one[q[0]], one[q[1]], TABLE_SWEEPS, self._allowed(q))
            for q, c in zip(self.cliques, self.counts)
        ]

    def _allowed(self, clique: Clique) -> np.ndarray | float:
        """1 on the cells of a 2-way clique that keep the layout's rules naming only its columns, 0 on the others
        (public structure, so zeroing them is post-processing); 1 where no rule applies. A rule's columns are
        categorical or binary, whose cells are their category positions (`Discretizer.codes`)."""
        rules = [r for r in self.discretizer.layout.rules if set(r.columns) <= set(clique)]
        if not rules:
            return 1.0
        dims = self._dims(clique)
        grid = np.indices(dims).reshape(len(clique), -1)
        keep = ~broken_rows(pd.DataFrame(dict(zip(clique, grid))), rules).to_numpy()
        return keep.reshape(dims).astype(np.float64)

    def cells(self, rows: np.ndarray) -> list[np.ndarray]:
        """Each encoded row's flat cell in every clique's marginal, one array per clique."""
        codes = self.discretizer.codes(rows)
        return [np.ravel_multi_index(tuple(codes[:, self._index[c]] for c in q), self._dims(q)) for q in self.cliques]

    def _dims(self, clique: Clique) -> tuple[int, ...]:
        return tuple(self.discretizer.shape[self._index[c]] for c in clique)

    def match(self, rows: np.ndarray, targets: Sequence[np.ndarray], rng: np.random.Generator) -> np.ndarray:
        """`rows` with the fewest cell changes that make every 1-way marginal, then every 2-way marginal (a, b)
        within each cell of b, equal to its target up to rounding (largest remainders): in each group, randomly
        chosen rows of the cells above their share move to the cells below it, their value drawn uniformly inside
        the new bin (`Discretizer.decode`); only the clique's first column changes, and a move that would make the
        row break one of the layout's public rules is not made. Raking can only re-weight rows that exist; this
        reaches cells the generator never visits, at the price of those rows' joint structure."""
        rows = rows.copy()
        for q, t in sorted(zip(self.cliques, targets), key=lambda qt: len(qt[0])):
            col = self._index[q[0]]
            codes = self.discretizer.codes(rows)
            group = np.zeros(len(rows), dtype=np.int64) if len(q) == 1 else codes[:, self._index[q[1]]]
            probs = t.reshape(1, -1) if len(q) == 1 else t.T
            new = codes[:, col].copy()
            for g in range(probs.shape[0]):
                members = np.flatnonzero(group == g)
                if not len(members) or probs[g].sum() <= 0:
                    continue
                want = _apportion(len(members), probs[g] / probs[g].sum())
                have = np.bincount(new[members], minlength=len(want))
                legal = self._legal(codes[members], q[0], len(want))
                if legal is not None:
                    self._legal_moves(members, new, have, want, legal, rng)
                    continue
                movers = [
                    rng.choice(members[new[members] == k], have[k] - want[k], replace=False)
                    for k in np.flatnonzero(have > want)
                ]
                if movers:
                    new[rng.permutation(np.concatenate(movers))] = np.repeat(
                        np.arange(len(want)), np.maximum(want - have, 0)
                    )
            moved = np.flatnonzero(new != codes[:, col])
            if len(moved):
                codes = codes[moved]
                codes[:, col] = new[moved]
                block = self.discretizer.layout.block(q[0])
                rows[moved, block.start : block.stop] = self.discretizer.decode(codes, rng)[:, block.start : block.stop]
        return rows

    def _legal(self, codes: np.ndarray, column: str, k: int) -> np.ndarray | None:
        """For rows with cell `codes`, whether each would keep the layout's rules with `column` set to each of its
        k cells (rows × k); None when no rule names the column."""
        rules = [r for r in self.discretizer.layout.rules if column in r.columns]
        if not rules:
            return None
        names = dict.fromkeys(c for r in rules for c in r.columns)
        frame = pd.DataFrame({c: codes[:, self._index[c]] for c in names})
        return np.stack([~broken_rows(frame.assign(**{column: v}), rules).to_numpy() for v in range(k)], axis=1)

    @staticmethod
    def _legal_moves(
        members: np.ndarray,
        new: np.ndarray,
        have: np.ndarray,
        want: np.ndarray,
        legal: np.ndarray,
        rng: np.random.Generator,
    ) -> None:
        """`match`'s moves inside one group when rules name the column: each under-full cell v (in random order)
        takes its missing rows from random rows of the over-full cells that keep the rules with value v, at most
        each cell's surplus; a cell no such row can reach stays short. Vectorised per cell. Updates `new`."""
        spare = np.maximum(have - want, 0)
        cell = new[members]
        free = spare[cell] > 0
        for v in rng.permutation(np.flatnonzero(want > have)):
            pick = rng.permutation(np.flatnonzero(free & legal[:, v]))
            order = np.argsort(cell[pick], kind="stable")  # each candidate's place among its cell's, in
            ranks = np.empty(len(pick), dtype=np.int64)  # the shuffled order
            ranks[order] = np.arange(len(pick)) - np.searchsorted(cell[pick][order], cell[pick][order], side="left")
            pick = pick[ranks < spare[cell[pick]]][: want[v] - have[v]]
            np.subtract.at(spare, cell[pick], 1)
            new[members[pick]] = v
            free[pick] = False
            free &= spare[cell] > 0

    def calibrate(
        self, rows: np.ndarray, n: int, rng: np.random.Generator, sweeps: int, tolerance: float
    ) -> np.ndarray:
        """n rows: drawn with replacement from the exact encoded `rows` (the generator's oversampled draw) with
        probability ∝ their raked weights (`rake` to `targets`, weights capped), then `match`ed to the targets."""
        targets = self.targets()
        weights, _ = rake(self.cells(rows), [t.ravel() for t in targets], sweeps, tolerance)
        return self.match(rows[rng.choice(len(rows), size=int(n), replace=True, p=weights)], targets, rng)

    # -- persistence (strict JSON, saved with the model) -------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "discretizer": self.discretizer.to_dict(),
            "cliques": [list(q) for q in self.cliques],
            "sigma": self.sigma,
            "counts": [c.tolist() for c in self.counts],
        }

    @classmethod
    def from_dict(cls, layout: Layout, d: dict[str, Any]) -> "NoisyMarginals":
        return cls(
            Discretizer.from_dict(layout, d["discretizer"]),
            [tuple(q) for q in d["cliques"]],
            [np.asarray(c, dtype=np.float64) for c in d["counts"]],
            float(d["sigma"]),
        )
