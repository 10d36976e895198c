"""AIM (McKenna, Mullins, Sheldon & Miklau 2022, "AIM: An Adaptive and Iterative Mechanism for Differentially
Private Synthetic Data", Alg. 2): its adaptive rounds under a zCDP privacy filter, as in the paper, with the
scale calibrated by the ledger's accountant. `run_aim` follows Alg. 2 (and Private-PGM's `mechanisms/aim.py`) step
by step:
- initialise: σ₀ = x and ε₀ = ε_sel from the plan (K = max_rounds rounds, not T = 16d); measure every 1-way
  marginal (at σ₁ = m·x, `one_way_noise`) and estimate p̂₀ from them (mbi);
- while the rounds' budget lasts (and K slots remain), round t: a round that would leave less
  than one more round's cost (or the K-th) spends the whole rest, split 0.9 / 0.1 as every round (`last_round`; the
  paper decides it at the end of round t − 1, the same test); ρ_used grows by the round's cost; C_t:
  the candidates whose model stays within max_model_size × ρ_used/ρ_R MB (the size filter); select r_t by
  the exponential mechanism (ε_sel, Δ = max_r w_r, score w_r(||M_r(D) − M_r(p̂)||₁ − sqrt(2/π)σ_t n_r): `select`);
  measure M_{r_t} at σ_t (Δ₂ = 1: `measure`); re-estimate p̂_t (warm start); anneal
  (σ_{t+1} = σ_t/2, ε_{t+1} = 2ε_t, so every round keeps the 0.9 / 0.1 split) when p̂'s r_t-marginal moved by at
  most the noise the measurement was expected to add;
- the final estimation, from which the generator samples.
ε = ∞ (no noise) is `run_exact`, outside the private loop.

Workload W: every 2-way marginal plus the 3-way marginals that contain the target column (configurable).
Candidates: the cliques of size 2..3 of W's downward closure, weight w_r = Σ_{s∈W} |r ∩ s|.

The 1-way share (a departure in form, not in aim). The paper plans T = 16d rounds and measures the 1-way
marginals at its first round's σ₀ = x, so together they cost 0.9ρ/16, 5.6 % of the budget whatever d is. With the
K ≪ 16d rounds a small table affords (`SETTINGS_RULE`, 16 below n̂·ε = 5,000), σ₁ = x would give them
d/(d + 2K·(0.5 + ε_sel²x²/8)) of it: 63 % on the bundled table (d = 31, K = 16), leaving the rounds that measure
the target's pairs with σ ≈ 30 on cells of 28 rows. So σ₁ = m·x, with m ≥ 1 the smallest for which the 1-way
measurements take at most `share` of the plan's zCDP budget (`one_way_noise`; docs/aim-mst.md "The 1-way share").

Accounting. σ_t depends on earlier outputs, so the rounds are an adaptive composition whose steps have no
dominating pair fixed in advance; composing them by PLD as if fixed (a Gaussian envelope plus K bounded-range slots,
the figure `benchmarks/aim_accountant.py` reports for comparison) has no theorem behind it. The plan, fixed before
any row is read, is therefore
- d one-way DiscreteGaussianEvent(m·x, 1) (`measure`'s exact discrete Gaussian): σ₁ fixed in advance, not adaptive;
- one ZCDPEvent(ρ_R) for the rounds, ρ_R = K·(1/2x² + ε_sel²/8) (`rounds_rho`), ε_sel = 2/(3x) (the paper's
  0.9 / 0.1 split of a round's budget: 1/2σ² = 0.9ρ_t, ε²/8 = 0.1ρ_t), K = max_rounds.
Round t's selection is ε_sel²/8-zCDP (ε-bounded-range, Cesar & Rogers 2021) and its measurement 1/2σ_t²-zCDP
(Gaussian with Δ₂ = 1; the discrete Gaussian too, Canonne, Kamath & Steinke 2020). The loop runs them
through a `ZCDPFilter` of budget ρ_R, which admits a step only while Σ_t ρ_t stays ≤ ρ_R and raises
FilterExhausted otherwise; so whatever the data make of σ_t and of the number of rounds, the rounds are
ρ_R-zCDP (Rényi filter of Feldman & Zrnic 2021 at every order α; Whitehouse et al. 2023), the guarantee the
ZCDPEvent states. The run records the same events as the plan (the filter's budget, never the realised Σρ_t,
which is logged with each round). x is the smallest scale whose events meet (ε, δ) by the ledger's accountant,
which composes a list holding a ZCDPEvent only by methods valid under adaptivity (`accountant.epsilon_pld`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, ClassVar

import numpy as np

from pipelines.marginal import estimate as est
from pipelines.marginal.measure import Codes, Passes, chunk_passes, measure, measurement_event
from pipelines.marginal.one_way import Cells, measure_one_way
from pipelines.marginal.exponential import aim_penalty, l1_score, select
from pipelines.privacy.accountant import calibrate_noise_scale
from pipelines.privacy.events import Event, NonPrivateEvent, ZCDPEvent
from pipelines.privacy.plan import PrivacyPlan

MEASURE_SHARE = 0.9  # of a round's zCDP cost to its measurement, the rest to its selection (Alg. 2)
SELECT_RATIO = 2.0 / 3.0  # ε_sel = SELECT_RATIO / x: 1/2x² = 0.9ρ_t and ε_sel²/8 = 0.1ρ_t
ROUNDS_MECHANISM = "AIM rounds: zCDP filter (selections ε_sel²/8, measurements 1/2σ_t²)"
LAST_ROUND_MARGIN = 1e-9  # the last round spends (1 − margin) of what is left, and is the one that would leave
# less than (1 − margin) of a round's cost (rounding)

Clique = tuple[str, ...]


# -- the plan ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class AIMPlan(PrivacyPlan):
    """AIM's spend (the generator's privacy plan): `events` as `aim_events` lists them (ε = ∞: scale 0)."""

    scale: float  # x: σ of a round before any annealing
    one_way: float  # σ₁ = m·x: σ of each 1-way measurement (`one_way_noise`)
    rounds: int  # K: selection slots (the wall-clock-independent round limit)
    epsilon_select: float
    d: int
    kind: ClassVar[str] = "aim"

    @property
    def rho_rounds(self) -> float:
        """ρ_R = K·(1/2x² + ε_sel²/8): the rounds' zCDP budget (the filter's; ∞ when ε = ∞)."""
        return rounds_rho(self.scale, self.rounds) if self.scale > 0 else math.inf


def rounds_rho(x: float, rounds: int) -> float:
    """ρ_R of K = `rounds` rounds at scale x: each 1/2x² (a measurement at σ = x) + ε_sel²/8, ε_sel = 2/(3x)."""
    return rounds * (0.5 + SELECT_RATIO**2 / 8) / x**2


def one_way_noise(d: int, rounds: int, share: float | None) -> float:
    """m ≥ 1, σ₁ = m·x (module docstring): the smallest for which the d 1-way measurements take at most `share`
    of the plan's zCDP budget, d/2σ₁² ≤ share·(d/2σ₁² + ρ_R), ρ_R = K(1/2 + SELECT_RATIO²/8)/x² (`rounds_rho`),
    i.e. m² ≥ d(1 − share)/(2·share·K(1/2 + SELECT_RATIO²/8)); 1 (the paper's σ₁ = x) where they already do, or
    where `share` is None. Public inputs only (d, K, the section's share)."""
    if share is None:
        return 1.0
    return max(1.0, math.sqrt(d * (1 - share) / (2 * share * rounds_rho(1.0, rounds))))


def aim_events(x: float, d: int, rounds: int, m: float = 1.0) -> list[Event]:
    """The plan's events (module docstring): d fixed one-way Gaussians at σ₁ = m·x and the rounds' zCDP filter
    budget."""
    return [measurement_event(m * x, "1-way marginal counts")] * d + [
        ZCDPEvent(rounds_rho(x, rounds), ROUNDS_MECHANISM)
    ]


def plan_aim(
    d: int, rounds: int, epsilon: float, delta: float, *, n_rows: int, one_way_share: float | None = None
) -> AIMPlan:
    """The AIM parameters for d columns and K = `rounds` at (ε, δ) (PLD-calibrated; ε = inf: no noise), the 1-way
    measurements at σ₁ = m·x, m = `one_way_noise`(d, K, `one_way_share`); `n_rows` is the public n̂ it is planned
    for, and the estimation's total unless the measurements contradict it (`estimate.estimation_total`)."""
    if rounds < 1:
        raise ValueError(f"max_rounds must be >= 1, got {rounds}")
    if math.isinf(epsilon):
        return AIMPlan(
            n_rows=n_rows,
            epsilon=epsilon,
            delta=delta,
            events=(NonPrivateEvent("epsilon: inf"),),
            scale=0.0,
            one_way=0.0,
            rounds=rounds,
            epsilon_select=math.inf,
            d=d,
        )
    m = one_way_noise(d, rounds, one_way_share)
    x = calibrate_noise_scale(epsilon, delta, lambda s: aim_events(s, d, rounds, m))
    return AIMPlan(
        n_rows=n_rows,
        epsilon=epsilon,
        delta=delta,
        events=tuple(aim_events(x, d, rounds, m)),
        scale=x,
        one_way=m * x,
        rounds=rounds,
        epsilon_select=SELECT_RATIO / x,
        d=d,
    )


# -- the rounds' budget -----------------------------------------------------------------------------------------
class FilterExhausted(RuntimeError):
    """A step would take a zCDP filter past its budget (a bug in the loop: the plan's guarantee would not hold)."""


class ZCDPFilter:
    """A zCDP privacy filter (Feldman & Zrnic 2021; Whitehouse et al. 2023): steps whose ρ_t are chosen from
    earlier outputs run only while Σ_t ρ_t ≤ `budget`, fixed in advance; then the whole run is budget-zCDP.
    `spend(ρ)` must be called BEFORE the step runs: it admits the step or raises FilterExhausted (nothing run)."""

    def __init__(self, budget: float) -> None:
        if not (budget > 0 and math.isfinite(budget)):
            raise ValueError(f"a zCDP filter needs a positive finite budget, got {budget}")
        self.budget, self.spent = float(budget), 0.0

    @property
    def left(self) -> float:
        return self.budget - self.spent

    def spend(self, rho: float, what: str = "step") -> None:
        if not (rho >= 0 and math.isfinite(rho)):
            raise ValueError(f"{what}: a zCDP cost must be finite and >= 0, got {rho}")
        if self.spent + rho > self.budget:
            raise FilterExhausted(
                f"{what} (ρ = {rho:.6g}) would take the zCDP filter to {self.spent + rho:.6g}, "
                f"above its budget {self.budget:.6g}: the reserved guarantee would not hold"
            )
        self.spent += rho


def round_costs(sigma: float, epsilon_select: float) -> tuple[float, float]:
    """(ε_sel²/8, 1/2σ²): the zCDP costs of a round's selection and of its measurement."""
    return epsilon_select**2 / 8, 0.5 * sigma**-2


def last_round(left: float) -> tuple[float, float]:
    """(σ, ε_sel) of a last round that spends what is `left` of the filter, split as every round is (Alg. 2):
    1/2σ² = 0.9·left to the measurement, ε²/8 = 0.1·left to the selection, a hair under it (rounding)."""
    rest = left * (1 - LAST_ROUND_MARGIN)
    return (2 * MEASURE_SHARE * rest) ** -0.5, (8 * (1 - MEASURE_SHARE) * rest) ** 0.5


# -- the workload and the model the rounds refine ---------------------------------------------------------------
def workload(names: list[str], target: str | None, three_way: bool = True) -> list[Clique]:
    """All 2-way cliques plus the 3-way cliques containing `target` (when given and `three_way`)."""
    w = [tuple(c) for c in combinations(names, 2)]
    if target is not None and three_way:
        others = [n for n in names if n != target]
        w += [tuple(sorted((target, a, b), key=names.index)) for a, b in combinations(others, 2)]
    return w


def candidates(work: list[Clique]) -> dict[Clique, float]:
    """Cliques of size >= 2 in the downward closure of the workload, with w_r = Σ_{s∈W} |r ∩ s|."""
    closure = {sub for s in work for k in range(2, len(s) + 1) for sub in combinations(s, k)}
    return {r: float(sum(len(set(r) & set(s)) for s in work)) for r in sorted(closure)}


@dataclass
class AIMState:
    """What AIM's rounds read and refine: the candidates r (`weights` w_r, `answers` M_r(D), counted once on the
    model's domain `dom`), the measurements so far [(clique, y, σ[, query weights])] and p̂, the model mbi estimates
    from them (`iters` mirror-descent steps, warm-started; its total n̂ unless they contradict it)."""

    dom: Any
    sizes: dict[str, int]
    weights: dict[Clique, float]
    answers: dict[Clique, np.ndarray]
    n_rows: int
    iters: int
    device: str
    measurements: list[tuple] = field(default_factory=list)
    model: Any = None

    @classmethod
    def counted(
        cls,
        passes: Passes,
        names: list[str],
        shape: tuple[int, ...],
        work: list[Clique],
        n_rows: int,
        iters: int,
        device: str,
    ) -> "AIMState":
        """The state before any measurement: every candidate's exact counts in one pass over the rows."""
        idx = {n: i for i, n in enumerate(names)}
        dom = est.domain(names, shape, device)
        weights = candidates(work)
        counts = passes.count(shape, [[idx[a] for a in r] for r in weights])
        return cls(
            dom,
            dict(zip(names, shape)),
            weights,
            {r: counts[tuple(idx[a] for a in r)] for r in weights},
            n_rows,
            iters,
            device,
        )

    def cells(self, r: Clique) -> int:
        """n_r: the cells of clique r."""
        return int(np.prod([self.sizes[a] for a in r]))

    def estimate(self, iters: int | None = None) -> None:
        """p̂ from every measurement so far (warm-started from the last p̂), `iters` steps (default: the rounds')."""
        self.model = est.estimate(
            self.dom,
            self.measurements,
            self.n_rows,
            self.iters if iters is None else iters,
            warm_start=self.model,
            device=self.device,
        )

    def affordable(self, limit_mb: float) -> list[Clique]:
        """C_t (the size filter): the candidates already measured, and those whose model stays within `limit_mb`."""
        cliques = [c for c, *_ in self.measurements]
        return [r for r in self.weights if r in cliques or est.model_size_mb(self.dom, cliques + [r]) <= limit_mb]

    def scores(self, allowed: list[Clique], sigma: float) -> tuple[list[np.ndarray], np.ndarray]:
        """p̂'s marginal on each of `allowed` and its quality w_r(||M_r(D) − M_r(p̂)||₁ − sqrt(2/π)σn_r) at σ_t."""
        projected = est.project_many(self.model, allowed)
        return projected, np.asarray(
            [
                l1_score(self.answers[r], p, self.weights[r], aim_penalty(sigma, self.cells(r)))
                for r, p in zip(allowed, projected)
            ]
        )

    def add(self, r: Clique, y: np.ndarray, sigma: float, before: np.ndarray) -> float:
        """Measurement y of r at σ added and p̂ re-estimated; how far p̂'s r-marginal moved from `before` (L1)."""
        self.measurements.append((r, y, sigma))
        self.estimate()
        return float(np.abs(est.project_many(self.model, [r])[0] - before).sum())


def log_entry(
    t: int, r: Clique, sigma: float, epsilon_select: float | None, rho: float | None, moved: float
) -> dict[str, Any]:
    """Round t's line of the rounds' log (the generator's `structure`)."""
    return {
        "round": t + 1,
        "clique": list(r),
        "sigma": sigma,
        "epsilon_select": epsilon_select,
        "rho": rho,
        "moved": moved,
    }


# -- the mechanism ----------------------------------------------------------------------------------------------
def measure_related(
    state: AIMState, budget: ZCDPFilter, related: Sequence[Clique], rng, log: list[dict[str, Any]]
) -> None:
    """The schema's declared pairs (public: no selection) measured with what is left of the rounds' filter, in
    equal shares ρ = left/m, σ = (2ρ)^-½, each charged before it runs; their log entries have no ε_sel."""
    if not related or budget.left <= 0:
        return
    share = budget.left * (1 - LAST_ROUND_MARGIN) / len(related)
    sigma = (2 * share) ** -0.5
    for r in related:
        before = est.project_many(state.model, [r])[0]
        budget.spend(share, f"AIM declared pair {' x '.join(r)}: measurement")
        y, _ = measure(state.answers[r], sigma, rng, query=f"AIM declared pair: {' x '.join(r)}")
        log.append(log_entry(len(log), r, sigma, None, share, state.add(r, y, sigma, before)))


def run_aim(
    codes: Codes,
    shape,
    names: list[str],
    plan: AIMPlan,
    rng,
    work,
    max_model_size: float,
    iters: int,
    final_iters: int,
    device: str = "cpu",
    progress: Callable[[int, int], None] | None = None,
    compress_above: int | None = None,
    cells: Cells | None = None,
    related: Sequence[Clique] = (),
):
    """AIM (Alg. 2, the module docstring's steps) under `plan` on integer codes (a matrix, or `measure.Passes` over
    chunks of it), its 1-way measurements counted on `cells` (`pipelines.marginal.one_way`: the bins cut in parts;
    default the model's own cells), on the domain they compress (`Compression`, columns above `compress_above`
    cells); returns (model on that domain, actual events, the rounds' log, the compression, the bins' shapes).
    ε = ∞ (scale 0): `run_exact`. The rows are read in two passes: the 1-way counts, then every candidate's on the
    compressed domain. The last round's budget (what is left of the filter) goes to the schema's `related` pairs
    (public: no selection; `measure_related`) when there are any. Every selection and measurement passes the
    rounds' `ZCDPFilter` first; each log entry holds the round's σ_t and ρ_t (Σρ_t ≤ plan.rho_rounds)."""
    chunks = chunk_passes(codes)
    cells = cells or Cells.coarse(chunks, shape)
    if plan.scale == 0:
        return run_exact(chunks, cells, names, plan, work, max_model_size, iters, final_iters, device, progress)
    one_way = measure_one_way(cells, names, plan.one_way, rng, compress_above)  # initialise: the 1-way measurements
    compression = one_way.compression
    state = AIMState.counted(chunks.then(compression.codes), names, compression.shape, work, plan.n_rows, iters, device)
    state.measurements += one_way.measurements
    state.estimate()  # initialise: p̂₀
    budget = ZCDPFilter(plan.rho_rounds)
    sigma, eps_sel = plan.scale, plan.epsilon_select
    log = []
    for t in range(plan.rounds):  # while ρ_used < ρ
        last = t == plan.rounds - 1
        if last or budget.left < 2 * sum(round_costs(sigma, eps_sel)) * (1 - LAST_ROUND_MARGIN):  # spends the rest
            if related:  # the last round's budget goes to the declared pairs (below)
                break
            last, (sigma, eps_sel) = True, last_round(budget.left)
        select_rho, measure_rho = round_costs(sigma, eps_sel)
        used = (budget.spent + select_rho + measure_rho) / budget.budget  # ρ_used / ρ
        allowed = state.affordable(max_model_size * used)  # C_t: the size filter
        if not allowed:
            break
        projected, scores = state.scores(allowed, sigma)
        budget.spend(select_rho, f"AIM round {t + 1}: selection")
        k, _ = select(
            scores, max(state.weights[r] for r in allowed), eps_sel, rng
        )  # select r_t (exponential mechanism)
        r = allowed[k]
        budget.spend(measure_rho, f"AIM round {t + 1}: measurement")
        y, _ = measure(state.answers[r], sigma, rng, query=f"AIM round {t + 1}: {' x '.join(r)}")  # measure r_t
        moved = state.add(r, y, sigma, projected[k])  # re-estimate p̂_t
        log.append(log_entry(t, r, sigma, eps_sel, select_rho + measure_rho, moved))
        if progress:
            progress(t + 1, plan.rounds)
        if last:
            break
        if moved <= aim_penalty(sigma, state.cells(r)):  # anneal
            sigma, eps_sel = sigma / 2, eps_sel * 2
    measure_related(state, budget, [r for r in related if r in state.affordable(max_model_size)], rng, log)
    state.estimate(final_iters)  # the final estimation
    # the rounds' guarantee is the filter's budget, whatever they spent of it (the plan's ZCDPEvent)
    rounds = ZCDPEvent(plan.rho_rounds, ROUNDS_MECHANISM)
    return state.model, one_way.events + [rounds], log, compression, one_way.within


def run_exact(
    chunks: Passes,
    cells: Cells,
    names: list[str],
    plan: AIMPlan,
    work,
    max_model_size: float,
    iters: int,
    final_iters: int,
    device: str = "cpu",
    progress: Callable[[int, int], None] | None = None,
):
    """AIM without noise (ε = ∞: a non-private run, no budget): p̂₀ from the exact 1-way marginals, then K rounds
    that each add the exact marginal of the worst-approximated candidate (the argmax of `run_aim`'s score at σ = 0)
    within max_model_size MB; nothing is compressed (no noisy count to support a code), the bins' shapes are
    exact. Returns what `run_aim` returns, with one NonPrivateEvent."""
    one_way = measure_one_way(cells, names, 0.0, None, None)  # σ = 0: exact, weighed as σ = 1
    compression = one_way.compression
    state = AIMState.counted(chunks, names, compression.shape, work, plan.n_rows, iters, device)
    state.measurements += one_way.measurements
    state.estimate()
    log = []
    for t in range(plan.rounds):
        allowed = state.affordable(max_model_size)
        if not allowed:
            break
        projected, scores = state.scores(allowed, 0.0)
        k = int(np.argmax(scores))
        r = allowed[k]
        moved = state.add(r, state.answers[r], 0.0, projected[k])
        log.append(log_entry(t, r, 0.0, None, None, moved))
        if progress:
            progress(t + 1, plan.rounds)
    state.estimate(final_iters)
    return state.model, [NonPrivateEvent("epsilon: inf")], log, compression, one_way.within
