"""AIM (McKenna, Mullins, Sheldon & Miklau 2022, "AIM: An Adaptive and Iterative Mechanism for Differentially
Private Synthetic Data", Alg. 2), with its budget loop decided by the ledger's PLD accountant instead of zCDP.

Workload W: every 2-way marginal plus the 3-way marginals that contain the target column (configurable).
Candidates: the cliques of size 2..3 of W's downward closure, weight w_r = Σ_{s∈W} |r ∩ s|.

Rounds: measure all 1-way marginals (σ = x each); then, while selection slots and Gaussian budget remain,
select r by the exponential mechanism (ε_sel, Δ = max_r w_r, score w_r(||M_r(D) - M_r(p̂)||₁ - sqrt(2/π)σ_t n_r):
`select`), measure M_r with σ_t (Δ₂ = 1: `measure`), re-estimate p̂ (mbi, warm start), and halve σ_t when the
model's r-marginal moved by less than the noise it was expected to add (the paper's annealing). The last round
spends the whole remaining Gaussian budget. Candidates whose model would exceed
max_model_size × (fraction of the Gaussian budget used) MB are dropped (the paper's size filter).

Accounting: the plan, fixed before any row is read, is K = max_rounds bounded-range selection slots
PureEpsilonEvent(ε_sel, BOUNDED_RANGE) plus Gaussian measurements of total inverse variance S = (d + K)/x²
(one 1-way event per column at σ = x and one envelope GaussianEvent(x/√K) for the rounds), with
ε_sel = 2/(3x) (the paper's 0.9 / 0.1 split of a round's zCDP budget: 1/2σ² = 0.9ρ_t, ε²/8 = 0.1ρ_t) and x
the smallest scale whose composition meets (ε, δ) by the ledger's accountant (the min of the PLD and the RDP
bound, `accountant.epsilon_pld`) (`plan_aim`). The loop keeps Σ_t σ_t⁻² ≤ S_rounds = K/x² and uses at most
K selections, so the actual events are dominated by the plan: Gaussian events compose exactly into one
Gaussian of multiplier (Σσ_t⁻²)^(-1/2) ≥ the envelope's, and a sub-multiset of the planned pure events
composes to at most the plan (PLD and RDP composition are monotone in each component). Adaptivity: σ_t is
chosen from earlier outputs; the Gaussian part is then a fully adaptive Gaussian composition under the filter Σσ_t⁻² ≤ S, whose privacy is that of the
single Gaussian with σ = S^(-1/2) (Smith & Thakurta 2022, fully adaptive GDP composition), and the selection
slots have fixed ε_sel; docs/aim-mst.md gives the argument and its limits.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import ClassVar

import numpy as np
from scipy import optimize

from pipelines.marginal import estimate as est
from pipelines.marginal.measure import marginal, measure
from pipelines.marginal.select import aim_penalty, l1_score, select
from pipelines.privacy.accountant import calibrate_noise_scale
from pipelines.privacy.events import BOUNDED_RANGE, Event, GaussianEvent, NonPrivateEvent, PureEpsilonEvent
from pipelines.privacy.plan import PrivacyPlan

SELECT_RATIO = 2.0 / 3.0          # ε_sel = SELECT_RATIO / x (the paper's 0.1 / 0.9 zCDP split per round)


@dataclass(frozen=True, kw_only=True)
class AIMPlan(PrivacyPlan):
    """AIM's spend (the generator's privacy plan): `events` as `aim_events` lists them (ε = ∞: scale 0)."""
    scale: float                  # x: σ of each 1-way measurement and of a round before any annealing
    rounds: int                   # K: selection slots (the wall-clock-independent round limit)
    epsilon_select: float
    d: int
    kind: ClassVar[str] = "aim"

    @property
    def gaussian_rounds_budget(self) -> float:
        """S_rounds = K / x²: the total inverse variance the rounds may spend."""
        return self.rounds / self.scale ** 2 if self.scale > 0 else math.inf


def aim_events(x: float, d: int, rounds: int) -> list[Event]:
    return ([GaussianEvent(x, 1.0, "1-way marginal counts")] * d
            + [GaussianEvent(x / math.sqrt(rounds), 1.0, "AIM rounds: envelope of Σσ_t⁻² = K/x²")]
            + [PureEpsilonEvent(SELECT_RATIO / x, BOUNDED_RANGE)] * rounds)


def plan_aim(d: int, rounds: int, epsilon: float, delta: float, *, n_rows: int) -> AIMPlan:
    """The AIM parameters for d columns and K = `rounds` at (ε, δ) (PLD-calibrated; ε = inf: no noise); `n_rows`
    is the public n̂ the estimation uses as the table's total."""
    if rounds < 1:
        raise ValueError(f"max_rounds must be >= 1, got {rounds}")
    if math.isinf(epsilon):
        return AIMPlan(n_rows=n_rows, epsilon=epsilon, delta=delta, events=(NonPrivateEvent("epsilon: inf"),),
                       scale=0.0, rounds=rounds, epsilon_select=math.inf, d=d)
    x = calibrate_noise_scale(epsilon, delta, lambda s: aim_events(s, d, rounds))
    return AIMPlan(n_rows=n_rows, epsilon=epsilon, delta=delta, events=tuple(aim_events(x, d, rounds)), scale=x,
                   rounds=rounds, epsilon_select=SELECT_RATIO / x, d=d)


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
    """x under zCDP for the same plan: ρ = (d + K)/2x² + K ε_sel²/8 with ε_sel = SELECT_RATIO/x (the exponential
    mechanism as ε²/8-zCDP, Cesar & Rogers 2021)."""
    rho = zcdp_rho(epsilon, delta)
    return math.sqrt(((d + rounds) / 2 + rounds * SELECT_RATIO ** 2 / 8) / rho)


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


def run_aim(codes: np.ndarray, shape, names: list[str], plan: AIMPlan, rng, work, max_model_size: float,
            iters: int, final_iters: int, device: str = "cpu", progress=None):
    """Run AIM under `plan` (its n̂ as the estimation's total); returns (model, actual events, the rounds' log)."""
    dom = est.domain(names, shape, device)
    idx = {n: i for i, n in enumerate(names)}
    sizes = dict(zip(names, shape))
    private = plan.scale > 0
    cands = candidates(work)
    exact = {r: marginal(codes, shape, [idx[a] for a in r]) for r in cands}
    meas, events, log = [], [], []
    for n in names:
        y, ev = measure(codes, shape, (idx[n],), plan.scale, rng, query=f"1-way {n}")
        meas.append(((n,), y, plan.scale))
        events.append(ev)
    model = est.estimate(dom, meas, plan.n_rows, iters, device=device)
    S_total = plan.gaussian_rounds_budget
    S_left = S_total
    sigma = plan.scale
    for t in range(plan.rounds):
        if private and S_left <= 0:
            break
        last = t == plan.rounds - 1 or (private and S_left - sigma ** -2 < sigma ** -2)
        if private and last:
            sigma = (S_left * (1 - 1e-9)) ** -0.5           # the rest of the budget (never above S_left)
        used = 1.0 if not private else (S_total - S_left + sigma ** -2) / S_total
        cliques = [c for c, *_ in meas]
        allowed = [r for r in cands if r in cliques or
                   est.model_size_mb(dom, cliques + [r]) <= max_model_size * used]
        if not allowed:
            break
        projected = est.project_many(model, allowed)
        scores = np.asarray([l1_score(exact[r], p, cands[r], aim_penalty(sigma, int(np.prod([sizes[a] for a in r]))))
                             for r, p in zip(allowed, projected)])
        k, sev = select(scores, max(cands[r] for r in allowed), plan.epsilon_select, rng)
        r = allowed[k]
        y, gev = measure(codes, shape, [idx[a] for a in r], sigma if private else 0.0, rng,
                         query=f"AIM round {t + 1}: {' x '.join(r)}")
        events += [sev, gev]
        if private:
            S_left -= sigma ** -2
        before = projected[k]
        meas.append((r, y, sigma if private else 1.0))
        model = est.estimate(dom, meas, plan.n_rows, iters, warm_start=model, device=device)
        moved = float(np.abs(est.project_many(model, [r])[0] - before).sum())
        cells = int(np.prod([sizes[a] for a in r]))
        log.append({"round": t + 1, "clique": list(r), "sigma": sigma if private else 0.0, "moved": moved})
        if progress:
            progress(t + 1, plan.rounds)
        if last:
            break
        if private and moved <= aim_penalty(sigma, cells):
            sigma /= 2                                       # anneal; the next round's `last` test caps it
    model = est.estimate(dom, meas, plan.n_rows, final_iters, warm_start=model, device=device)
    if not private:
        events = [NonPrivateEvent("epsilon: inf")]
    return model, events, log
