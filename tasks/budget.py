"""Pre-flight budget check of a whole release run: every generator's plan, before any stage trains.

Each train stage still reserves its own plan atomically (the ledger refuses a stage that no longer
fits when two runs race); this check makes a run that cannot fit fail before it trains anything,
so a scheduled run over the lifetime budget spends nothing and releases nothing.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task

from pipelines.data.layout import Layout
from pipelines.generators.base import Budget
from pipelines.generators.registry import make_generator
from pipelines.io import read_json
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import Event
from pipelines.weights import estimators as weight_estimators
from tasks import common
from tasks.artifacts import publish
from tasks.train import EncodedTable
from tasks.weight import settings as weight_settings


def planned_events(params: dict[str, Any], root: Path) -> dict[str, list[Event]]:
    """Each generator's and each weight@gen stage's planned events, from public quantities only (the public
    training row count n̂ that prepare wrote, `EncodedTable.__len__`; the synthetic row count is
    evaluate.n_samples or n̂)."""
    p, delta = common.paths(params, root), float(params["privacy"]["delta"])
    layout = Layout.from_dict(read_json(p.prepared / "layout.json")["layout"])
    n_rows = len(EncodedTable(p.prepared / "train_encoded.parquet"))
    plans = {g: make_generator(g, layout, params[g], "cpu").plan(n_rows, Budget(float(params[g]["epsilon"]), delta))
             for g in params["generators"]}
    s = weight_settings(params)
    n_synthetic = int((params.get("evaluate") or {}).get("n_samples") or n_rows)
    for g in s["generators"]:
        plans[f"weight@{g}"] = weight_estimators.plan(s["estimator"], s, layout, n_rows, n_synthetic,
                                                      s["epsilon"], delta).events
    return plans


@task(name="budget")
def budget(params: dict[str, Any], root: Path = Path(".")) -> dict[str, Any]:
    """Raise BudgetExceededError (spent / planned / remaining) unless the run's whole plan fits."""
    ds, priv = params["dataset"]["name"], params["privacy"]
    delta, lifetime = float(priv["delta"]), float(priv["lifetime_epsilon"])
    led = common.ledger(params, root)
    plans = planned_events(params, root)
    session = led.session(ds, "preflight", "budget", delta, lifetime, internal=bool(priv.get("internal_release", False)))
    spent = led.spent(ds, delta)
    after = session.check([e for events in plans.values() for e in events])
    rows = [{"generator": g, "epsilon_planned": round(epsilon_pld(ev, delta), 6)} for g, ev in plans.items()]
    summary = {"dataset": ds, "epsilon_spent": spent, "epsilon_after": after, "lifetime_epsilon": lifetime,
               "epsilon_remaining_after": max(lifetime - after, 0.0), "delta": delta, "plans": rows}
    publish(f"{ds}-budget", table=rows, markdown=(
        f"## Budget of `{ds}` before training\n\nspent ε = {spent:.4g}; with this run's plans (composed, "
        f"PLD) ε = {after:.4g} of the lifetime {lifetime:g}; remaining ε = "
        f"{max(lifetime - after, 0.0):.4g} at δ = {delta:g}"))
    return summary
