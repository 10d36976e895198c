"""Stage 3: train one generator under its budget, every data access recorded in the ledger."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from prefect import task

from pipelines.data.layout import Layout
from pipelines.errors import InputError
from pipelines.generators.base import Budget
from pipelines.generators.registry import make_generator
from pipelines.io import atomic_dir, read_json, sha256_file, write_json
from pipelines.marginal.calibrate import summary as calibration_summary
from pipelines.privacy.accountant import epsilon_pld, epsilon_rdp
from pipelines.privacy.events import event_from_dict, event_to_dict
from pipelines.privacy.noise import NoiseSource, binding_facts, load_noise_key
from pipelines.runtime import torch_threads
from tasks import common
from tasks.artifacts import publish
from tasks.progress import stage_progress


class EncodedTable:
    """The encoded training matrix, read from disk only when a generator converts it to an array.

    len() is the PUBLIC training row count n̂ (`rows_public` in the layout.json beside the file, written by
    prepare: the schema's documented count or a noisy count recorded in the ledger), not the number of rows
    in the file, which is private under add/remove-one. Generators plan, size q = B/n̂ and divide by n̂ while
    the array they read may have a different number of rows (`n_actual`, internal only). A generator can
    thus plan its spend and the ledger can refuse it before a single private value is read.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        layout = self.path.parent / "layout.json"
        summary = read_json(layout) if layout.exists() else {}
        if not isinstance(summary.get("rows_public"), int) or summary["rows_public"] < 1:
            raise InputError("the prepared data has no public row count 'rows_public'.", file=str(layout),
                             fix="re-run the prepare stage (`dvc repro -f prepare`), which writes it.")
        self.n_rows = summary["rows_public"]
        self.n_rows_source = str(summary.get("rows_public_source", ""))
        self.n_actual = pq.read_metadata(self.path).num_rows  # private: never in a public artefact
        self.reads = 0

    def __len__(self) -> int:
        """n̂, the public training row count (not the file's row count)."""
        return self.n_rows

    def content_hash(self) -> str:
        """sha256 of the file (keys the DP noise to this data; call only after the reservation)."""
        return sha256_file(self.path)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        self.reads += 1
        return pd.read_parquet(self.path).to_numpy(dtype=dtype or np.float32, copy=True)


@task(name="train")
def train(params: dict[str, Any], generator: str, run_id: str | None = None,
          root: Path = Path(".")) -> dict[str, Any]:
    torch_threads()  # this process's share of its cores (pipelines/runtime.py)
    p, sch = common.paths(params, root), common.schema(params, root)
    ds, priv = params["dataset"]["name"], params["privacy"]
    layout = Layout.from_dict(read_json(p.prepared / "layout.json")["layout"])
    table = EncodedTable(p.prepared / "train_encoded.parquet")
    gen = make_generator(generator, layout, common.generator_section(params, generator, root),
                         params.get("device", "auto"))
    budget = Budget(common.allocated_epsilon(params, generator, root), float(priv["delta"]))
    run_id = run_id or f"cli-{uuid.uuid4().hex[:12]}"
    led = common.ledger(params, root)
    session = led.session(ds, run_id, f"train@{generator}", float(priv["delta"]), float(priv["lifetime_epsilon"]),
                          internal=bool(priv.get("internal_release", False)))
    stage_hashes = common.hashes(params, "train", sch, generator)
    noise = NoiseSource.keyed(load_noise_key(priv.get("noise_key_file"), root), lambda: {"train": table.content_hash()},
                              f"{ds}/train@{generator}", binding_facts(stage_hashes, budget.epsilon, budget.delta))
    with stage_progress(f"{ds}-{generator}-train-progress", f"train@{generator}"):
        gen.fit(table, session, budget, noise)  # reserves the planned spend before converting `table`
    spent = {r["seq"]: r for r in led.rows(ds) if r["seq"] in session.row_ids}
    events = [event_from_dict(json.loads(spent[i]["event_json"])) for i in session.row_ids]
    row_ids = list(session.reservation.row_ids) + list(session.row_ids)
    privacy = {
        "generator": generator, "run_id": run_id, "dataset": ds, "n_rows": len(table),
        "rows_public": len(table), "rows_public_source": table.n_rows_source,
        "events": [event_to_dict(e) for e in events], "ledger_row_ids": row_ids,
        "epsilon_pld": epsilon_pld(events, budget.delta), "epsilon_rdp": epsilon_rdp(events, budget.delta),
        "target_epsilon": budget.epsilon, "delta": budget.delta, "calibration": calibration_summary(gen.privacy),
        "hashes": common.hashes(params, "train", sch, generator),
    }
    with atomic_dir(p.model(generator)) as out:
        gen.save(out)
        write_json(out / "privacy.json", privacy)
    publish(f"{ds}-{generator}-train", markdown=(
        f"## Trained `{generator}` on `{ds}`\n\nε = {privacy['epsilon_pld']:.4g} (PLD; RDP "
        f"{privacy['epsilon_rdp']:.4g}) at δ = {budget.delta:g}; ledger rows {row_ids}"))
    return privacy
