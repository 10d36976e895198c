"""Audit cases for MST and AIM: the Gaussian measurement of a count marginal (`measure`) and the
exponential-mechanism selection (`select` over `l1_score`s), each on a worst-case neighbouring pair D, D' = D +
canary, run through the mechanisms' own code. tests/test_privacy_contract.py collects them (interface:
tests/audit_harness.py).

Configs ("audit"): 2 columns of 3 categories, planned at δ = AUDIT_DELTA = 1e-2 with the budget whose plan has
the scale MST_SCALE (MST) or AIM_SCALE (AIM, max_rounds 1), the convention of tests/audit_cases_dpsgd.py:
Gaussian claims ≈ 1.1–1.8 at δ = 1e-2 (at δ = 1e-5 the claim is set by tails that 1,000–2,000 runs cannot
resolve), selection claims ε ≈ 1.1–1.7. MST plans 2 one-way Gaussians, 1 selection and 1 two-way Gaussian; AIM
(one round) 2 one-way Gaussians and the rounds' zCDP filter budget ZCDPEvent(ρ_R).
- Gaussian event of multiplier σ: `measure` at σ√k·noise_scale of the canary's 1-way (or 2-way) marginal; the
  score is the noisy count in the canary's cell (the canary moves that cell by +1, the only change: Δ₂ = 1,
  attained). The first 1-way's last release runs the path of a numeric column whose bins are cut in parts (the
  rows' `Discretizer.fine_codes` measured by `measure_one_way`), scored on the canary's fine cell. The claim is
  the PLD ε at δ = 1e-2 of one of the k equal releases that compose the event (the harness's k-release rule;
  k = GAUSSIAN_SPLIT[owner]). MST: k = 1. AIM fixes ε_sel = 2/(3x) for the
  Gaussians' scale x, so an auditable selection (ε_sel = 1.11, x = 0.6) leaves Gaussian events of σ = 0.6
  (ε ≈ 5 at δ = 1e-2: beyond 2,000 runs); each is audited as k = 4 releases at σ√4 = 1.2 (a selection
  claim of 0.56 at x = 1.2 was not certifiable at half noise either: a binary output of two probabilities
  ≥ 0.02 resolves ≈ 0.6 at the Clopper-Pearson level of 2,000 runs).
- AIM's ZCDPEvent(ρ_R), ρ_R = 1/2x² + ε_sel²/8 for the one round: audited as ZCDP_SPLIT = 8 shares of ρ_R/8, each
  the round's Gaussian measurement at σ = x√8 = 1.70 (its ρ is 0.9·ρ_R/8: the selection's 0.1 share is left out,
  the `select` code is audited by MST's selection case), claim = the accountant's ε of ZCDPEvent(ρ_R/8) at
  δ = 1e-2 (1.49). That claim is the zCDP → (ε, δ) conversion, which no Gaussian attains (the release's exact ε
  is 1.14, measured ≈ 0.35 at 1×, ≈ 1.4–1.65 at 0.5×: not above 1.49 with certainty), so these cases run their
  power check at ZCDP_POWER = 0.35× noise (σ = 0.59, exact ε 4.7; measured ≈ 2.2–2.7 for σ = 0.6).
- Selection of ε: two candidates whose L1 scores the canary moves by +1 and −1 (possible under add/remove: the
  canary's cell is above the model in one marginal and below it in the other, Δ = 1 attained with opposite
  signs), drawn by `select` with ε/noise_scale; score 1 when the first candidate is selected. On D the first
  candidate trails by a gap g (u = [1, 1 + g]), on D' by g − 2 (u = [2, g]), so with ε' = ε/noise_scale the
  test "first selected" has TPR/FPR = (1 + e^{ε'g/2})/(1 + e^{ε'(g−2)/2}) < e^{ε'}: at 1× it cannot exceed the
  claim. g = GAP_LOGIT/ε puts D's log-odds against the first candidate at GAP_LOGIT = 4 at half noise
  (ε' = 2ε): FPR = 1/(1 + e^4) = 0.018 is measurable in 2,000 runs and the log ratio
  log((1 + e^4)/(1 + e^{4 − 2ε})) is 2.94 for ε = 1.67 and 2.08 for ε = 1.11, above the claims.
  (A gap of 1 would cap every test at e^{ε'/2}, which equals the claim at half noise: never certified.)
"""

from __future__ import annotations

import dataclasses
from functools import partial
import math

import numpy as np
from audit_harness import AuditCase

from pipelines.data.bins import Discretizer
from pipelines.data.layout import Block, Layout
from pipelines.generators.base import Budget
from pipelines.generators.registry import generator_class
from pipelines.marginal.aim import SELECT_RATIO, aim_events
from pipelines.marginal.measure import Passes, marginal, measure, measurement_event
from pipelines.marginal.one_way import Cells, measure_one_way
from pipelines.marginal.mst import mst_events
from pipelines.marginal.exponential import l1_score, select
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import DiscreteGaussianEvent, Event, GaussianEvent, PureEpsilonEvent, ZCDPEvent
from pipelines.privacy.unit import unit_event

AUDIT_DELTA = 1e-2
MST_SCALE = 1.2  # σ₁ = 1.70, σ₂ = 1.20, ε_sel = 1.67
AIM_SCALE = 0.6  # σ = 0.60 (1-way and the one round; audited as 4 releases of σ = 1.2), ε_sel = 1.11
GAUSSIAN_SPLIT = {"mst": 1, "aim": 4}
ZCDP_SPLIT = 8  # AIM's rounds' ZCDPEvent: 8 shares of ρ_R/8, each one measurement at σ = x√8 (module docstring)
ZCDP_POWER = 0.35  # their power check's noise scale (the zCDP claim is not attained by a Gaussian)
LAYOUT = Layout((Block("a", "categorical", 0, 3), Block("b", "categorical", 3, 6)))
CODES = np.array([[i % 3, (i // 3) % 3] for i in range(90)])  # 30 rows in every category of a and of b
CANARY = np.array([[0, 0]])


def budget(name: str) -> Budget:
    """The (ε, δ = 1e-2) whose PLD-calibrated plan has the scale MST_SCALE / AIM_SCALE (to the calibration's
    rtol): ε = the accountant's ε of the plan's events at that scale."""
    events = mst_events(MST_SCALE, 2) if name == "mst" else aim_events(AIM_SCALE, 2, 1)
    return Budget(epsilon_pld(events, AUDIT_DELTA), AUDIT_DELTA)


def plan(name: str) -> list[Event]:
    """The planned events of the generator's own plan() for the audit layout."""
    # AIM at σ₁ = x (one_way_share null): the 1-way measurement is the same `measure` at any σ₁ (the share only
    # sets σ₁ = m·x), audited here at the scale the cases are built for
    params = {"max_rounds": 1, "one_way_share": None} if name == "aim" else {}
    return list(generator_class(name)(LAYOUT, params, "cpu").plan(len(CODES), budget(name)).events)


def gaussian_scores(sigma: float, clique: tuple[int, ...], tag: str):
    def scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
        codes = np.vstack([CODES, CANARY]) if neighbour else CODES
        rng = np.random.default_rng([7919 * int(neighbour) + int(100 * noise_scale), len(tag), *tag.encode()])
        return np.array(
            [measure(marginal(codes, (3, 3), clique), sigma * noise_scale, rng)[0].ravel()[0] for _ in range(n_runs)]
        )

    return scores


NUMERIC = Layout((Block("v", "continuous", 0, 1, lower=0.0, upper=1.0),))  # one numeric column, v in [0, 1]
VALUES = np.linspace(0.01, 0.99, 90, dtype=np.float32)[:, None]  # 90 rows over 2 bins cut in 4 parts
CANARY_VALUE = np.array([[0.1]], dtype=np.float32)  # bin [0, 0.5), its part [0, 0.125): fine cell 0


def cut_bin_scores(sigma: float, tag: str, unit_rows: int = 1):
    """The 1-way measurement of a numeric column whose bins are cut (MST's and AIM's real path: the rows'
    `Discretizer.fine_codes`, counted and measured by `measure_one_way`); score: the canary's fine cell. D' adds
    one unit of `unit_rows` canary rows, all in that fine cell (the unit's largest shift: `unit_rows` in one
    count, L2 norm kΔ)."""
    disc = Discretizer(NUMERIC, 2, sub_bins=4)

    def scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
        rows = np.vstack([VALUES, *[CANARY_VALUE] * unit_rows]) if neighbour else VALUES
        cells = Cells(Passes(rows, (disc.fine_codes,)), tuple(disc.splits()))
        rng = np.random.default_rng([7907 * int(neighbour) + int(100 * noise_scale), len(tag), *tag.encode()])
        return np.array(
            [measure_one_way(cells, ["v"], sigma * noise_scale, rng, None).fine[0][0] for _ in range(n_runs)]
        )

    return scores


GAP_LOGIT = 4.0


def selection_scores(epsilon: float, tag: str):
    gap = GAP_LOGIT / epsilon
    model_a = np.array([29.5, 30.0, 30.5])  # a's canary cell: data 30 > model; L1 1 on D, 2 on D' (+1)
    model_b = np.array([31.0, 30 - gap / 2, 30 - gap / 2])  # b's canary cell: data 30 < model; L1 1 + g on D,
    # g on D' (−1)

    def scores(neighbour: bool, noise_scale: float, n_runs: int) -> np.ndarray:
        codes = np.vstack([CODES, CANARY]) if neighbour else CODES
        ma = np.bincount(codes[:, 0], minlength=3).astype(float)
        mb = np.bincount(codes[:, 1], minlength=3).astype(float)
        u = np.array([l1_score(ma, model_a), l1_score(mb, model_b)])
        rng = np.random.default_rng([104729 * int(neighbour) + int(100 * noise_scale), len(tag), *tag.encode()])
        return np.array([float(select(u, 1.0, epsilon / noise_scale, rng)[0] == 0) for _ in range(n_runs)])

    return scores


def cases_for(name: str) -> list[AuditCase]:
    out, k = [], GAUSSIAN_SPLIT[name]
    for i, e in enumerate(plan(name)):
        if isinstance(e, (GaussianEvent, DiscreteGaussianEvent)):  # `measure`: an exact discrete Gaussian
            clique = (0, 1) if "2-way" in e.query else (0,)
            release = dataclasses.replace(e, sigma=e.sigma * math.sqrt(k))
            for j in range(k):
                cut = i == 0 and j == k - 1  # the first 1-way's last release: on a numeric column's cut bins
                out.append(
                    AuditCase(
                        name,
                        "audit",
                        i,
                        f"{name} Gaussian measurement ({e.query}{' on cut bins' if cut else ''}; release {j + 1}/{k})",
                        partial(epsilon_pld, [release], AUDIT_DELTA),
                        AUDIT_DELTA,
                        cut_bin_scores(release.sigma, f"{name}:{i}:{j}")
                        if cut
                        else gaussian_scores(release.sigma, clique, f"{name}:{i}:{j}"),
                    )
                )
        elif isinstance(e, PureEpsilonEvent):
            out.append(
                AuditCase(
                    name,
                    "audit",
                    i,
                    f"{name} exponential-mechanism selection",
                    partial(float, e.epsilon),
                    0.0,
                    selection_scores(e.epsilon, f"{name}:{i}"),
                )
            )
        elif isinstance(e, ZCDPEvent):  # AIM's one round: its measurement at σ = x (the filter's rest after ε_sel)
            share = dataclasses.replace(e, rho=e.rho / ZCDP_SPLIT)
            rho_measure = e.rho * 0.5 / (0.5 + SELECT_RATIO**2 / 8)  # ρ_R less the selection's ε_sel²/8
            sigma = math.sqrt(ZCDP_SPLIT / (2 * rho_measure))  # σ = x√8: ρ_measure/8 per share
            for j in range(ZCDP_SPLIT):
                out.append(
                    AuditCase(
                        name,
                        "audit",
                        i,
                        f"{name} round measurement (zCDP filter share {j + 1}/{ZCDP_SPLIT})",
                        partial(epsilon_pld, [share], AUDIT_DELTA),
                        AUDIT_DELTA,
                        gaussian_scores(sigma, (0, 1), f"{name}:{i}:{j}"),
                        power_noise_scale=ZCDP_POWER,
                    )
                )
    return out


UNIT_SIGMA = 4.47  # the cut-bin 1-way at a unit of 2 rows: ZCDPEvent(ρ = 2²/2σ² = 0.1), claim ≈ 0.98 at δ = 1e-2
UNIT_POWER = 0.25  # its power check's noise scale (a zCDP claim, not attained by a Gaussian: as ZCDP_POWER)


def unit_plan() -> list[Event]:
    """The cut-bin 1-way measurement's event at a unit of 2 rows (`pipelines.privacy.unit.unit_event`)."""
    return [unit_event(measurement_event(UNIT_SIGMA, "1-way marginal counts"), 2)]


CASES = [
    *cases_for("mst"),
    *cases_for("aim"),
    AuditCase(
        "marginal:unit",
        "unit_2",
        0,
        "1-way measurement on cut bins at a unit of 2 rows (fine_codes, measure_one_way)",
        lambda: epsilon_pld(unit_plan(), AUDIT_DELTA),
        AUDIT_DELTA,
        cut_bin_scores(UNIT_SIGMA, "unit:cut", unit_rows=2),
        power_noise_scale=UNIT_POWER,
    ),
]
PLANS = {
    ("mst", "audit"): lambda: plan("mst"),
    ("aim", "audit"): lambda: plan("aim"),
    ("marginal:unit", "unit_2"): unit_plan,
}
