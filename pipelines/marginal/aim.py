"""AIM (McKenna, Mullins, Sheldon & Miklau 2022, "AIM: An Adaptive and Iterative Mechanism for Differentially
Private Synthetic Data", Alg. 2): its adaptive rounds under a zCDP privacy filter, as in the paper, with the
scale calibrated by the ledger's accountant.

Workload W: every 2-way marginal plus the 3-way marginals that contain the target column (configurable).
Candidates: the cliques of size 2..3 of W's downward closure, weight w_r = Σ_{s∈W} |r ∩ s|.

Rounds: measure all 1-way marginals (σ₁ = m·x each, `one_way_noise`); then, while selection slots and Gaussian
budget remain, select r by the exponential mechanism (ε_sel, Δ = max_r w_r, score
w_r(||M_r(D) - M_r(p̂)||₁ - sqrt(2/π)σ_t n_r): `select`), measure M_r with σ_t (Δ₂ = 1: `measure`), re-estimate p̂
(mbi, warm start), and halve σ_t when the model's r-marginal moved by less than the noise it was expected to
add, doubling ε_sel with it (the paper's annealing: σ_{t+1} = σ_t/2, ε_{t+1} = 2ε_t, so every round keeps the
0.9 / 0.1 split). A round that would leave less than one more round's budget spends the whole rest, split
0.9 / 0.1 the same way (the paper's rule).
Candidates whose model would exceed max_model_size × (fraction of the rounds' budget used) MB are dropped (the
paper's size filter).

The 1-way share (a departure in form, not in aim). The paper plans T = 16d rounds and measures the 1-way
marginals at its first round's σ₀ = x, so together they cost 0.9ρ/16, 5.6 % of the budget whatever d is. With the
K ≪ 16d rounds a small table affords (`SETTINGS_RULE`, 16 below n̂·ε = 5,000), σ₁ = x would give them
d/(d + 2K·(0.5 + ε_sel²x²/8)) of it: 63 % on the bundled table (d = 31, K = 16), leaving the rounds that measure
the target's pairs with σ ≈ 30 on cells of 28 rows. So σ₁ = m·x, with m ≥ 1 the smallest for which the 1-way
measurements take at most `share` of the plan's zCDP budget (`one_way_noise`; docs/aim-mst.md "The 1-way share").

Accounting. σ_t depends on earlier outputs, so the rounds are an adaptive composition whose
steps have no dominating pair fixed in advance; composing them by PLD as if fixed (a Gaussian
envelope plus K bounded-range slots, `fixed_schedule_events`) has no theorem behind it. The plan,
fixed before any row is read, is therefore
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
from dataclasses import dataclass
from itertools import combinations
from typing import ClassVar

import numpy as np
from scipy import optimize

from pipelines.marginal import estimate as est
from pipelines.marginal.compress import Compression
from pipelines.marginal.measure import Codes, chunk_passes, measure, measurement_event
from pipelines.marginal.select import aim_penalty, l1_score, select
from pipelines.privacy.accountant import calibrate_noise_scale
from pipelines.privacy.events import (BOUNDED_RANGE, Event, GaussianEvent, NonPrivateEvent, PureEpsilonEvent,
                                      ZCDPEvent)
from pipelines.privacy.plan import PrivacyPlan

MEASURE_SHARE = 0.9               # of a round's zCDP cost to its measurement, the rest to its selection (Alg. 2)
SELECT_RATIO = 2.0 / 3.0          # ε_sel = SELECT_RATIO / x: 1/2x² = 0.9ρ_t and ε_sel²/8 = 0.1ρ_t
ROUNDS_MECHANISM = "AIM rounds: zCDP filter (selections ε_sel²/8, measurements 1/2σ_t²)"
LAST_ROUND_MARGIN = 1e-9          # the last round spends (1 − margin) of what is left (rounding)


@dataclass(frozen=True, kw_only=True)
class AIMPlan(PrivacyPlan):
    """AIM's spend (the generator's privacy plan): `events` as `aim_events` lists them (ε = ∞: scale 0)."""
    scale: float                  # x: σ of a round before any annealing
    one_way: float                # σ₁ = m·x: σ of each 1-way measurement (`one_way_noise`)
    rounds: int                   # K: selection slots (the wall-clock-independent round limit)
    epsilon_select: float
    d: int
    kind: ClassVar[str] = "aim"

    @property
    def rho_rounds(self) -> float:
        """ρ_R = K·(1/2x² + ε_sel²/8): the rounds' zCDP budget (the filter's; ∞ when ε = ∞)."""
        return rounds_rho(self.scale, self.rounds) if self.scale > 0 else math.inf


def rounds_rho(x: float, rounds: int) -> float:
    """ρ_R of K = `rounds` rounds at scale x: each 1/2x² (a measurement at σ = x) + ε_sel²/8, ε_sel = 2/(3x)."""
    return rounds * (0.5 + SELECT_RATIO ** 2 / 8) / x ** 2


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
    return ([measurement_event(m * x, "1-way marginal counts")] * d
            + [ZCDPEvent(rounds_rho(x, rounds), ROUNDS_MECHANISM)])


def fixed_schedule_events(x: float, d: int, rounds: int) -> list[Event]:
    """The events of a fixed-schedule plan at the same scale: the rounds as one Gaussian envelope of
    Σσ_t⁻² = K/x² and K bounded-range slots, which `epsilon_pld` composes as if every step were fixed in advance.
    Not valid under annealing (module docstring); kept to report that figure next to the valid one."""
    return ([GaussianEvent(x, 1.0, "1-way marginal counts")] * d
            + [GaussianEvent(x / math.sqrt(rounds), 1.0, "AIM rounds: envelope of Σσ_t⁻² = K/x²")]
            + [PureEpsilonEvent(SELECT_RATIO / x, BOUNDED_RANGE)] * rounds)


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
            raise FilterExhausted(f"{what} (ρ = {rho:.6g}) would take the zCDP filter to {self.spent + rho:.6g}, "
                                  f"above its budget {self.budget:.6g}: the reserved guarantee would not hold")
        self.spent += rho


def last_round(left: float) -> tuple[float, float]:
    """(σ, ε_sel) of a last round that spends what is `left` of the filter, split as every round is (Alg. 2):
    1/2σ² = 0.9·left to the measurement, ε²/8 = 0.1·left to the selection, a hair under it (rounding)."""
    rest = left * (1 - LAST_ROUND_MARGIN)
    return (2 * MEASURE_SHARE * rest) ** -0.5, (8 * (1 - MEASURE_SHARE) * rest) ** 0.5


def plan_aim(d: int, rounds: int, epsilon: float, delta: float, *, n_rows: int,
             one_way_share: float | None = None) -> AIMPlan:
    """The AIM parameters for d columns and K = `rounds` at (ε, δ) (PLD-calibrated; ε = inf: no noise), the 1-way
    measurements at σ₁ = m·x, m = `one_way_noise`(d, K, `one_way_share`); `n_rows` is the public n̂ it is planned
    for, and the estimation's total unless the measurements contradict it (`estimate.estimation_total`)."""
    if rounds < 1:
        raise ValueError(f"max_rounds must be >= 1, got {rounds}")
    if math.isinf(epsilon):
        return AIMPlan(n_rows=n_rows, epsilon=epsilon, delta=delta, events=(NonPrivateEvent("epsilon: inf"),),
                       scale=0.0, one_way=0.0, rounds=rounds, epsilon_select=math.inf, d=d)
    m = one_way_noise(d, rounds, one_way_share)
    x = calibrate_noise_scale(epsilon, delta, lambda s: aim_events(s, d, rounds, m))
    return AIMPlan(n_rows=n_rows, epsilon=epsilon, delta=delta, events=tuple(aim_events(x, d, rounds, m)), scale=x,
                   one_way=m * x, rounds=rounds, epsilon_select=SELECT_RATIO / x, d=d)


# -- zCDP comparison (the papers' accounting) ---------------------------------------------------------------
def zcdp_epsilon(rho: float, delta: float) -> float:
    """ε(δ) of ρ-zCDP by the conversion of Canonne, Kamath & Steinke 2020 (Prop. 12), as mbi's cdp_rho inverts:
    min over α > 1 of αρ + (log(1/δ) + (α-1)log(1-1/α) - log α)/(α-1)."""
    f = lambda a: a * rho + (math.log(1 / delta) + (a - 1) * math.log1p(-1 / a) - math.log(a)) / (a - 1)
    res = optimize.minimize_scalar(f, bounds=(1.0001, 1e4), method="bounded")
    return float(min(res.fun, rho + 2 * math.sqrt(rho * math.log(1 / delta))))


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest ρ with zcdp_epsilon(ρ, δ) ≤ ε."""
    return float(optimize.brentq(lambda r: zcdp_epsilon(r, delta) - epsilon, 1e-9, 100.0, xtol=1e-12))


def zcdp_aim_scale(d: int, rounds: int, epsilon: float, delta: float) -> float:
    """x under the papers' zCDP accounting for the same plan: ρ = d/2x² + ρ_R (`rounds_rho`), the exponential
    mechanism as ε²/8-zCDP (Cesar & Rogers 2021), converted by Prop. 12 alone."""
    rho = zcdp_rho(epsilon, delta)
    return math.sqrt((d / 2 + rounds * (0.5 + SELECT_RATIO ** 2 / 8)) / rho)


def zcdp_mst_scale(d: int, epsilon: float, delta: float) -> float:
    """MST's scale s = sqrt(3/2ρ) under zCDP (σ₁ = s√d, σ₂ = s√(d-1), ε_sel = 2/(s√(d-1)))."""
    return math.sqrt(3 / (2 * zcdp_rho(epsilon, delta)))


# -- the mechanism ------------------------------------------------------------------------------------------
def workload(names: list[str], target: str | None, three_way: bool = True) -> list[tuple[str, ...]]:
    """All 2-way cliques plus the 3-way cliques containing `target` (when given and `three_way`)."""
    w = [tuple(c) for c in combinations(names, 2)]
    if target is not None and three_way:
        others = [n for n in names if n != target]
        w += [tuple(sorted((target, a, b), key=names.index)) for a, b in combinations(others, 2)]
    return w


def candidates(work: list[tuple[str, ...]]) -> dict[tuple[str, ...], float]:
    """Cliques of size >= 2 in the downward closure of the workload, with w_r = Σ_{s∈W} |r ∩ s|."""
    closure = {sub for s in work for k in range(2, len(s) + 1) for sub in combinations(s, k)}
    return {r: float(sum(len(set(r) & set(s)) for s in work)) for r in sorted(closure)}


def run_aim(codes: Codes, shape, names: list[str], plan: AIMPlan, rng, work, max_model_size: float,
            iters: int, final_iters: int, device: str = "cpu", progress=None, compress_above: int | None = None):
    """Run AIM under `plan` (its n̂ the estimation's total unless the measurements contradict it) on integer codes
    (a matrix, or `measure.Passes` over chunks of it), on the domain its 1-way measurements compress
    (`Compression`, columns above `compress_above` cells); returns (model on that domain, actual events, the rounds'
    log, the compression). The rows are read in two passes: the 1-way counts, then every candidate's on the
    compressed domain (`Passes.count`), which the rounds measure. Every round's selection and measurement pass
    the rounds' `ZCDPFilter` first (module docstring); each log entry holds the round's σ_t and ρ_t
    (Σρ_t ≤ plan.rho_rounds)."""
    idx = {n: i for i, n in enumerate(names)}
    private, chunks = plan.scale > 0, chunk_passes(codes)
    counts = chunks.count(shape, [(i,) for i in range(len(names))])
    one_way, events, log = [], [], []
    for n in names:
        y, ev = measure(counts[(idx[n],)], plan.one_way, rng, query=f"1-way {n}")
        one_way.append(y)
        events.append(ev)
    compression = Compression.from_one_way(one_way, plan.one_way, compress_above)
    shape = compression.shape
    dom = est.domain(names, shape, device)
    sizes = dict(zip(names, shape))
    cands = candidates(work)
    counts = chunks.then(compression.codes).count(shape, [[idx[a] for a in r] for r in cands])
    exact = {r: counts[tuple(idx[a] for a in r)] for r in cands}
    meas = []
    for n, y in zip(names, one_way):
        y, weights = compression.one_way(idx[n], y)
        meas.append(((n,), y, plan.one_way, weights))
    model = est.estimate(dom, meas, plan.n_rows, iters, device=device)
    budget = ZCDPFilter(plan.rho_rounds) if private else None
    sigma, eps_sel = plan.scale, plan.epsilon_select
    for t in range(plan.rounds):
        last = t == plan.rounds - 1
        if private:
            round_rho = eps_sel ** 2 / 8 + 0.5 * sigma ** -2
            if last or budget.left < 2 * round_rho:   # no room for two more rounds: this one spends the rest
                last, (sigma, eps_sel) = True, last_round(budget.left)
        used = 1.0 if not private else (budget.spent + eps_sel ** 2 / 8 + 0.5 * sigma ** -2) / budget.budget
        cliques = [c for c, *_ in meas]
        allowed = [r for r in cands if r in cliques or
                   est.model_size_mb(dom, cliques + [r]) <= max_model_size * used]
        if not allowed:
            break
        projected = est.project_many(model, allowed)
        scores = np.asarray([l1_score(exact[r], p, cands[r], aim_penalty(sigma, int(np.prod([sizes[a] for a in r]))))
                             for r, p in zip(allowed, projected)])
        if private:
            budget.spend(eps_sel ** 2 / 8, f"AIM round {t + 1}: selection")
        k, _ = select(scores, max(cands[r] for r in allowed), eps_sel, rng)
        r = allowed[k]
        if private:
            budget.spend(0.5 * sigma ** -2, f"AIM round {t + 1}: measurement")
        y, _ = measure(exact[r], sigma if private else 0.0, rng, query=f"AIM round {t + 1}: {' x '.join(r)}")
        before = projected[k]
        meas.append((r, y, sigma if private else 1.0))
        model = est.estimate(dom, meas, plan.n_rows, iters, warm_start=model, device=device)
        moved = float(np.abs(est.project_many(model, [r])[0] - before).sum())
        cells = int(np.prod([sizes[a] for a in r]))
        log.append({"round": t + 1, "clique": list(r), "sigma": sigma if private else 0.0,
                    "epsilon_select": eps_sel if private else None,
                    "rho": eps_sel ** 2 / 8 + 0.5 * sigma ** -2 if private else None, "moved": moved})
        if progress:
            progress(t + 1, plan.rounds)
        if last:
            break
        if private and moved <= aim_penalty(sigma, cells):
            sigma, eps_sel = sigma / 2, eps_sel * 2          # anneal both (Alg. 2): a round then costs 4ρ_t
    model = est.estimate(dom, meas, plan.n_rows, final_iters, warm_start=model, device=device)
    if not private:
        return model, [NonPrivateEvent("epsilon: inf")], log, compression
    # the rounds' guarantee is the filter's budget, whatever they spent of it (the plan's ZCDPEvent)
    return model, events + [ZCDPEvent(plan.rho_rounds, ROUNDS_MECHANISM)], log, compression
