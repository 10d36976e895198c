"""Stage budget (after prepare, before any training): divide the release ε, then check the whole run's plan.

1. Allocation. `privacy.release_epsilon` is the ε of this release run: every configured generator and the
   importance weights (`weights:`, when `weights.generators` is not empty), composed by the ledger's accountant.
   Parts that pin their own `epsilon` keep it; the others share the rest by their `share` (equal by default),
   calibrated so that the composed ε of all planned events equals the release ε (pipelines/privacy/allocation.py).
   Plans use only public facts (n̂ = `rows_public` of data/prepared/<ds>/layout.json and the config), so the
   allocation reads no private row and costs nothing. Written to data/allocation/<ds>/: `<part>.json` per part
   (what train@gen and weight@gen read, `tasks.common.allocated_epsilon`; only the part's own ε, so a change
   that leaves a part's ε alone does not retrain it) and `release.json` (the whole allocation).
2. Pre-flight. Each train/weight stage still reserves its own plan atomically (the ledger refuses a stage that
   no longer fits when two runs race); this check makes a run that cannot fit the lifetime budget fail before
   it trains anything, so a scheduled run over the budget spends nothing and releases nothing.
3. Runway. How many further releases of this plan the lifetime budget allows after this run
   (pipelines/privacy/runway.py) and, for the data set's deployment in schedules.yaml, when the last of them would
   run (pipelines/schedules.py): in the summary, the Prefect artefact and, below `privacy.warn_releases_left`, a
   warning in the run's log.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any


from pipelines.config import ALLOCATION_SUMMARY, SELECTION, Config, Paths, generator_params
from pipelines.data.encoded import EncodedTable
from pipelines.data.layout import Layout
from pipelines.errors import InputError
from pipelines.generators.base import Budget
from pipelines.generators.persistence import finite_json
from pipelines.generators.registry import make_generator
from pipelines.io import atomic_dir, read_json, write_json
from pipelines.privacy.allocation import Allocation, AllocationError, Part, allocate
from pipelines.privacy.events import Event
from pipelines.privacy.ledger import external
from pipelines.privacy.release_test import planned_event
from pipelines.privacy.row_count import count_event
from pipelines.privacy.row_loss import loss_event
from pipelines.privacy.runway import MOST, releases_left
from pipelines.schedules import entry_for, runway, runway_sentence
from pipelines.selection import Selection
from pipelines.weights import estimators as weight_estimators
from tasks import common
from tasks.artifacts import publish
from tasks.progress import run_logger

PREPARE = "prepare"  # the row-loss test and the row count prepare spends, pinned at their own ε
WEIGHTS = "weights"  # the importance weights' part (one ε for every weight@gen stage)
RELEASE_TEST = "release_test"  # the DP release test of each selected table (check@gen), pinned at release.test_epsilon


def release_parts(config: Config, root: Path, chosen: Selection) -> tuple[list[Part], dict[str, list[str]]]:
    """The run's parts (a planner each, pinned ε or share) and the stages each part's events belong to: prepare's
    DP row-loss test and noisy row count (pinned at `privacy.row_loss_epsilon` and `privacy.row_count_epsilon`:
    part of the release, so that every event of the run composes to at most the release ε), the generators
    `chosen` selects, the weights of those `weighted` names, and the DP release test of each selected table
    (check@gen; pinned at `release.test_epsilon` each, pipelines/privacy/release_test.py).

    Planners are pure: public n̂ (`EncodedTable.__len__`, from layout.json), the layout and the params; the
    synthetic row count of weight@gen is evaluate.n_samples or n̂. The weights part's events are those of every
    weight@gen stage (one plan per weighted generator)."""
    p, delta = common.paths(config, root), config.privacy.delta
    layout = Layout.from_dict(read_json(p.prepared / "layout.json")["layout"])
    n_rows = len(EncodedTable(p.prepared / "train_encoded.parquet"))

    k = common.schema(config, root).max_rows  # rows per privacy unit: every event is planned at the unit

    def generator_planner(name: str):
        def events(eps: float) -> list[Event]:
            gen = make_generator(name, layout, generator_params(config, name, eps), "cpu")
            gen.plan(n_rows, Budget(eps, delta, k))
            return gen.planned_events()

        return events

    priv = config.privacy
    prepared = [loss_event(priv.row_loss_epsilon, k)] + (
        [] if priv.row_count_epsilon is None else [count_event(priv.row_count_epsilon, k)]
    )
    parts = [Part(PREPARE, lambda eps: prepared, sum(e.epsilon for e in prepared))]
    parts += [
        Part(g, generator_planner(g), config.generator(g).get("epsilon"), config.generator(g).get("share") or 1.0)
        for g in chosen.selected
    ]
    stages = {PREPARE: [PREPARE], **{g: [f"train@{g}"] for g in chosen.selected}}
    s, with_weights = config.weights, config.weighted(chosen.selected)
    if with_weights:
        n_synthetic = config.evaluate.n_samples or n_rows

        def weights_planner(eps: float):
            one = weight_estimators.unit_plan(
                s.estimator, s.model_dump(), layout, n_rows, n_synthetic, eps, delta, k
            ).unit_events
            return [e for _ in with_weights for e in one]

        parts.append(Part(WEIGHTS, weights_planner, s.epsilon, s.share))
        stages[WEIGHTS] = [f"weight@{g}" for g in with_weights]
    fraction, tested = config.dataset.holdout_fraction, list(chosen.selected)
    parts.append(
        Part(
            RELEASE_TEST,
            lambda eps: [planned_event(eps, fraction, k) for _ in tested],
            config.release.test_epsilon,
            1.0,
        )
    )
    stages[RELEASE_TEST] = [f"check@{g}" for g in tested]
    return parts, stages


def selection(config: Config, root: Path) -> Selection:
    """The release's selection (pipelines/selection.py) from params and the public n̂ (layout.json; no row read)."""
    return common.select(config, len(EncodedTable(common.paths(config, root).prepared / "train_encoded.parquet")))


def allocation(config: Config, root: Path, chosen: Selection | None = None) -> tuple[Allocation, dict[str, list[str]]]:
    """Divide privacy.release_epsilon across the parts of the run `chosen` (default: `selection`) selects; an
    impossible division is an InputError."""
    priv = config.privacy
    parts, stages = release_parts(config, root, chosen or selection(config, root))
    for part in parts:  # a part that cannot plan even at the whole release ε: its configuration, not the budget
        nominal = part.epsilon if part.epsilon is not None else priv.release_epsilon
        try:
            part.planner(nominal)
        except (ValueError, ArithmeticError) as e:
            section = (
                "release.test_epsilon"
                if part.name == RELEASE_TEST
                else "privacy"
                if part.name == PREPARE
                else part.name
            )
            raise InputError(
                f"'{section}': the privacy plan of '{part.name}' cannot be made from its settings at "
                f"ε = {nominal:g} ({type(e).__name__}: {e}).",
                file="params.yaml",
                fix=f"correct the '{section}' settings the message names, or delete them for their defaults.",
            ) from e
    try:
        return allocate(parts, priv.release_epsilon, priv.delta), stages
    except (AllocationError, ValueError) as e:
        raise InputError(
            f"'privacy.release_epsilon': cannot divide the release ε {priv.release_epsilon} across "
            f"{[p.name for p in parts]}: {e}.",
            file="params.yaml",
            fix="raise 'privacy.release_epsilon', or lower or remove the pinned 'epsilon:' of a "
            "generator (or of 'weights:'), or lower 'release.test_epsilon' (pinned for each "
            "selected table), so that the others can share the rest.",
        ) from e


def write_allocation(
    p: Paths,
    alloc: Allocation,
    chosen: Selection,
    stages: dict[str, list[str]],
    extra: dict[str, Any],
    inputs: dict[str, dict[str, Any]] | None = None,
) -> None:
    """data/allocation/<ds>/: one file per part (its own ε, what `allocated_epsilon` checks it against, and the
    part's `inputs`: the private selection's candidates and their sections, so that its train stage re-runs when
    one changes), one per configured generator (and the weights) left out of this run (`{"selected": false}`:
    train@gen and weight@gen then spend nothing), and the whole allocation with the selection in release.json."""
    with atomic_dir(p.allocations) as out:
        for name, part in alloc.parts.items():
            entry = {
                "part": name,
                "epsilon": part.epsilon,
                "pinned": part.pinned,
                "delta": alloc.delta,
                **(inputs or {}).get(name, {}),
            }
            if not part.pinned:  # a pinned part's file stays the same when the release ε changes: no retraining
                entry.update(share=part.share, release_epsilon=alloc.release_epsilon)
            write_json(out / f"{name}.json", finite_json(entry))
        for name in [*chosen.candidates, WEIGHTS]:
            if name not in alloc.parts:  # the same bytes whatever the release ε: an unselected stage never re-runs
                write_json(
                    out / f"{name}.json",
                    {
                        "part": name,
                        "selected": False,
                        "select": chosen.mode,
                        "selected_generators": list(chosen.selected),
                    },
                )
        write_json(
            out / f"{ALLOCATION_SUMMARY}.json",
            finite_json({**alloc.to_dict(), "stages": stages, "selection": chosen.to_dict(), **extra}),
        )


def budget(config: Config, root: Path = Path(".")) -> dict[str, Any]:
    """Allocate the release ε (written to data/allocation/<ds>/), then raise BudgetExceededError (spent / planned
    / remaining) unless the run's whole plan fits the lifetime budget; nothing is written when it does not."""
    return run(common.StageContext(config, root))


def run(ctx: common.StageContext, generator: str | None = None) -> dict[str, Any]:
    """`budget` in its stage context (`generator` unused: one budget stage per data set)."""
    config, root, p = ctx.config, ctx.root, ctx.paths
    ds, priv = config.dataset.name, config.privacy
    delta, lifetime = priv.delta, priv.lifetime_epsilon
    common.check_against_schema(config, ctx.schema)  # a section changed since validate ran
    chosen = selection(config, root)
    alloc, stages = allocation(config, root, chosen)
    led = ctx.ledger
    session = led.session(ds, "preflight", "budget", delta, lifetime, internal=priv.internal_release)
    spent = led.spent(ds, delta)
    this_run = [e for name, part in alloc.parts.items() if name != PREPARE for e in part.events]  # prepare's: paid
    after = session.check(this_run)
    left = releases_left(external([*led.effective_events(ds), *this_run]), external(alloc.events), delta, lifetime)
    plan = runway(left, MOST, entry_for(ds, root), datetime.now(timezone.utc))
    if left < priv.warn_releases_left:
        run_logger().warning(
            "budget: %s Fewer than privacy.warn_releases_left = %d: plan the schedule or ask the "
            "privacy officer about the lifetime budget now.",
            runway_sentence(ds, plan),
            priv.warn_releases_left,
        )
    rows = [
        {
            "part": name,
            "stages": ", ".join(stages[name]),
            "pinned": part.pinned,
            "epsilon_allocated": part.epsilon,
            "epsilon_planned": round(part.epsilon_planned, 6),
        }
        for name, part in alloc.parts.items()
    ]
    inputs = (
        {
            SELECTION: {
                k: v for k, v in generator_params(config, SELECTION, 1.0).items() if k in ("candidates", "sections")
            }
        }
        if SELECTION in alloc.parts
        else {}
    )
    write_allocation(
        p,
        alloc,
        chosen,
        stages,
        {
            "dataset": ds,
            "rows_public": len(EncodedTable(p.prepared / "train_encoded.parquet")),
            "hashes": ctx.hashes("budget"),
        },
        inputs,
    )
    summary = {
        "dataset": ds,
        "release_epsilon": alloc.release_epsilon,
        "epsilon_release": alloc.epsilon_composed,
        "epsilon_spent": spent,
        "epsilon_after": after,
        "lifetime_epsilon": lifetime,
        "epsilon_remaining_after": max(lifetime - after, 0.0),
        "delta": delta,
        "parts": rows,
        **plan,
    }
    publish(
        f"{ds}-budget",
        table=finite_json(rows),
        markdown=(
            f"## Budget of `{ds}` before training\n\n{chosen.reason}.\n\nThis release: ε = "
            f"{alloc.epsilon_composed:.4g} (all its generators and weights composed, PLD; release ε "
            f"{alloc.release_epsilon:g}) at δ = {delta:g}.\n\n"
            f"Lifetime of `{ds}`: spent ε = {spent:.4g} before this run, {after:.4g} after it, of {lifetime:g}; "
            f"remaining ε = {max(lifetime - after, 0.0):.4g}.\n\n{runway_sentence(ds, plan)}"
        ),
    )
    return summary
