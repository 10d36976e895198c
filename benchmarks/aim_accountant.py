"""AIM's ε on a fixed-schedule accountant and on the adaptively valid one the release uses: data-independent, plans
only (no row is read). The comparison-only accounting lives here, not in the release's code: the fixed-schedule
events (`fixed_schedule_events`) and the papers' zCDP accounting (`zcdp_epsilon`, `zcdp_rho`, `zcdp_aim_scale`,
`zcdp_mst_scale`), which tests/test_aim_mst.py and tests/test_accountant.py check against the ledger's.

    python -m benchmarks.aim_accountant                  # breast cancer (d = 31, K = 16) and Adult (d = 15, K = 40)
    python -m benchmarks.aim_accountant --release        # also the default release's composed ε (params.yaml, ~1 min)

Per schema at ε = 1, δ = 1e-5 (d = the schema's columns, K = max_rounds as configured / the default):
- old plan: x calibrated on a fixed-schedule plan's events (`fixed_schedule_events`: a Gaussian envelope and K
  bounded-range slots, composed by PLD as if σ_t were fixed); "old ε" is what that accountant reports for it, "new ε
  (same run)" what the adaptively valid accountant gives the same run (d one-way Gaussians at x and the rounds'
  zCDP filter budget ρ_R), "RDP only" the plain RDP figure of that run (1.0326 at 31 columns);
- new plan: `plan_aim` (x calibrated on the release's events), its ε, and what the fixed-schedule accountant would
  say of the same schedule.
--release: the default release's planned events (every generator of params.yaml at its allocation) composed by the
new accountant, and the same events with AIM's plan in the old form at AIM's allocated ε.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from scipy import optimize

from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder
from pipelines.marginal.aim import SELECT_RATIO, aim_events, plan_aim
from pipelines.privacy.accountant import calibrate_noise_scale, epsilon_pld, epsilon_rdp
from pipelines.privacy.events import BOUNDED_RANGE, Event, GaussianEvent, PureEpsilonEvent

ROOT = Path(__file__).resolve().parents[1]

DELTA = 1e-5


def fixed_schedule_events(x: float, d: int, rounds: int) -> list[Event]:
    """The events of a fixed-schedule plan at AIM's scale x: the rounds as one Gaussian envelope of
    Σσ_t⁻² = K/x² and K bounded-range slots, which `epsilon_pld` composes as if every step were fixed in advance.
    Not valid under annealing (`pipelines.marginal.aim`'s docstring); the figure reported next to the valid one."""
    return (
        [GaussianEvent(x, 1.0, "1-way marginal counts")] * d
        + [GaussianEvent(x / math.sqrt(rounds), 1.0, "AIM rounds: envelope of Σσ_t⁻² = K/x²")]
        + [PureEpsilonEvent(SELECT_RATIO / x, BOUNDED_RANGE)] * rounds
    )


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
    """x under the papers' zCDP accounting for the same plan: ρ = d/2x² + ρ_R (`aim.rounds_rho`), the exponential
    mechanism as ε²/8-zCDP (Cesar & Rogers 2021), converted by Prop. 12 alone."""
    rho = zcdp_rho(epsilon, delta)
    return math.sqrt((d / 2 + rounds * (0.5 + SELECT_RATIO**2 / 8)) / rho)


def zcdp_mst_scale(d: int, epsilon: float, delta: float) -> float:
    """MST's scale s = sqrt(3/2ρ) under zCDP (σ₁ = s√d, σ₂ = s√(d-1), ε_sel = 2/(s√(d-1)))."""
    return math.sqrt(3 / (2 * zcdp_rho(epsilon, delta)))


def row(name: str, d: int, k: int, epsilon: float = 1.0) -> dict:
    x_old = calibrate_noise_scale(epsilon, DELTA, lambda s: fixed_schedule_events(s, d, k))
    new = plan_aim(d, k, epsilon, DELTA, n_rows=1000)
    return {
        "schema": name,
        "d": d,
        "K": k,
        "x_old": x_old,
        "old_eps": epsilon_pld(fixed_schedule_events(x_old, d, k), DELTA),
        "new_eps_same_run": epsilon_pld(aim_events(x_old, d, k), DELTA),
        "rdp_same_run": epsilon_rdp(aim_events(x_old, d, k), DELTA),
        "x_new": new.scale,
        "new_eps": epsilon_pld(new.events, DELTA),
        "old_eps_at_x_new": epsilon_pld(fixed_schedule_events(new.scale, d, k), DELTA),
        "x_zcdp": zcdp_aim_scale(d, k, epsilon, DELTA),
    }


def release() -> None:
    """The default release (params.yaml) composed now, and with AIM's events in the old form at its allocation."""
    from pipelines.config import allocated_section, load_params
    from pipelines.data.readers import read_table
    from pipelines.data.transform import train_holdout_split
    from pipelines.data.validation import validate_table
    from pipelines.generators.base import Budget
    from pipelines.generators.registry import make_generator
    from pipelines.privacy.allocation import Part, allocate

    config = load_params(ROOT / "params.yaml")
    ds = config.dataset
    schema = load_schema(ROOT / "schemas" / f"{ds.name}.yaml")
    raw, label = read_table(ds.source, schema)
    train, _ = train_holdout_split(validate_table(raw, schema, label)[0], ds.holdout_fraction, 0)
    layout, n = Encoder(schema).layout, len(train)  # n: near the public n̂ (the split is keyed in a release)
    delta = config.privacy.delta

    def planner(g: str):
        return lambda eps: (
            make_generator(g, layout, allocated_section(config.generator(g), eps), "cpu")
            .plan(n, Budget(eps, delta))
            .events
        )

    parts = [
        Part(g, planner(g), config.generator(g).get("epsilon"), config.generator(g).get("share") or 1.0)
        for g in config.generators
    ]
    alloc = allocate(parts, config.privacy.release_epsilon, delta)
    events = [e for p in alloc.parts.values() for e in p.events]
    print(
        f"default release ({ds.name}, {len(config.generators)} generators, release ε "
        f"{config.privacy.release_epsilon}): allocation per generator "
        f"{ {g: round(p.epsilon, 4) for g, p in alloc.parts.items()} }"
    )
    print(f"  composed now: {epsilon_pld(events, delta):.4f} (RDP alone {epsilon_rdp(events, delta):.4f})")
    if "aim" in alloc.parts:
        aim = alloc.parts["aim"]
        d, k = (
            len(layout.blocks),
            int(
                make_generator(
                    "aim", layout, allocated_section(config.generator("aim"), aim.epsilon), "cpu"
                ).params.max_rounds
            ),
        )
        x_old = calibrate_noise_scale(aim.epsilon, delta, lambda s: fixed_schedule_events(s, d, k))
        others = [e for g, p in alloc.parts.items() if g != "aim" for e in p.events]
        print(
            f"  AIM at its ε {aim.epsilon:.4f}: old plan x = {x_old:.3f}; the release composed by the old accountant "
            f"{epsilon_pld(others + fixed_schedule_events(x_old, d, k), delta):.4f}, the same run by the new "
            f"{epsilon_pld(others + aim_events(x_old, d, k), delta):.4f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", action="store_true", help="also compose the default release's plan (params.yaml)")
    args = ap.parse_args()
    rows = []
    for name, k in (("breast_cancer", 16), ("adult", 40)):
        d = len(Encoder(load_schema(ROOT / "schemas" / f"{name}.yaml")).layout.blocks)
        rows.append(row(name, d, k))
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in r.values()) + " |")
    if args.release:
        release()


if __name__ == "__main__":
    main()
