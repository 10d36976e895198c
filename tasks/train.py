"""Stage 3: train one generator under its budget, every data access recorded in the ledger."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from pipelines.config import Config
from pipelines.data.encoded import EncodedTable
from pipelines.data.layout import Layout
from pipelines.evaluation.outside_dp import sampler_facts
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.registry import make_generator
from pipelines.io import atomic_dir, read_json, write_json
from pipelines.marginal.calibrate import summary as calibration_summary
from pipelines.privacy.accountant import epsilon_pld, epsilon_rdp
from pipelines.privacy.events import event_from_dict, event_to_dict
from pipelines.privacy.ledger import LedgerSession
from pipelines.privacy.noise import NoiseSource, binding_facts
from pipelines.privacy.paid import Binding, paid
from pipelines.runtime import torch_threads
from tasks import common, unselected
from tasks.artifacts import publish
from tasks.progress import stage_progress


def cluster(config: Config, gen: PrivateGenerator) -> AbstractContextManager[Any]:
    """The Dask client a generator that reads its rows in chunks counts them on (`RowChunks.map`: MST's and AIM's
    marginals, a row group per worker task) with `orchestration.task_runner: dask`; else none (None)."""
    if config.orchestration.task_runner == "dask" and gen.reads_in_chunks:
        from pipelines.data import out_of_core

        return out_of_core.client(config.orchestration)
    return nullcontext()


def train(config: Config, generator: str, run_id: str | None = None, root: Path = Path(".")) -> dict[str, Any]:
    """The train stage of `generator` (module docstring); writes models/<ds>/<gen>/ and returns its privacy.json."""
    return run(common.StageContext(config, root, run_id), generator)


def run(ctx: common.StageContext, generator: str) -> dict[str, Any]:
    """`train` in its stage context: the generator's fit is the stage's paid step (`paid`; the fit reserves its
    plan before it reads a row and records what it spent)."""
    torch_threads()  # this process's share of its cores (pipelines/runtime.py)
    config, p, sch = ctx.config, ctx.paths, ctx.schema
    ds, priv = config.dataset.name, config.privacy
    skipped = unselected.write("train", p, generator)
    if skipped is not None:  # release.select left it out: no ledger row, no model (pipelines/selection.py)
        return skipped
    layout = Layout.from_dict(read_json(p.prepared / "layout.json")["layout"])
    table = EncodedTable(p.prepared / "train_encoded.parquet")
    gen = make_generator(generator, layout, common.generator_section(config, generator, ctx.root), config.device)
    budget = Budget(common.allocated_epsilon(config, generator, ctx.root), priv.delta, sch.max_rows)
    account = ctx.account(f"train@{generator}", "cli")
    binding = Binding(
        ctx.noise_key,
        f"{ds}/train@{generator}",
        lambda: {"train": table.content_hash()},
        binding_facts(ctx.hashes("train", generator), budget.epsilon, budget.delta),
    )

    def fit(session: LedgerSession, noise: NoiseSource) -> None:
        with (
            cluster(config, gen) as table.client,
            stage_progress(f"{ds}-{generator}-train-progress", f"train@{generator}"),
        ):
            gen.fit(table, session, budget, noise)  # reserves the planned spend before converting `table`

    done = paid(ctx.ledger, account, binding, fit)
    spent = {r["seq"]: r for r in ctx.ledger.rows(ds) if r["seq"] in done.spent}
    events = [event_from_dict(json.loads(spent[i]["event_json"])) for i in done.spent]
    row_ids, run_id = done.row_ids, account.run_id
    privacy = {
        "generator": generator,
        "drawn_by": gen.drawn_by,
        "run_id": run_id,
        "dataset": ds,
        "n_rows": len(table),
        "rows_public": len(table),
        "rows_public_source": table.n_rows_source,
        "events": [event_to_dict(e) for e in events],
        "ledger_row_ids": row_ids,
        "epsilon_pld": epsilon_pld(events, budget.delta),
        "epsilon_rdp": epsilon_rdp(events, budget.delta),
        "target_epsilon": budget.epsilon,
        "delta": budget.delta,
        "unit": sch.unit_name,
        "calibration": calibration_summary(gen.privacy),
        **sampler_facts(events),  # exact_sampler, and where false the heuristic guarantee that holds instead
        "hashes": ctx.hashes("train", generator),
    }
    with atomic_dir(p.model(generator)) as out:
        gen.save(out)
        write_json(out / "privacy.json", privacy)
    publish(
        f"{ds}-{generator}-train",
        markdown=(
            f"## Trained `{generator}` on `{ds}`\n\nε = {privacy['epsilon_pld']:.4g} (PLD; RDP "
            f"{privacy['epsilon_rdp']:.4g}) at δ = {budget.delta:g}; ledger rows {row_ids}"
        ),
    )
    return privacy
