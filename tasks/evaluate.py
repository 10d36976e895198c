"""Stage 5: sample synthetic rows in the original schema and measure fidelity and utility."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from prefect import task

from pipelines.data.transform import Encoder
from pipelines.data.validation import conforms
from pipelines.evaluation.fidelity import marginal_distances, summarise
from pipelines.evaluation.utility import tstr_auroc
from pipelines.generators.base import load_generator
from pipelines.io import write_json, write_parquet
from tasks import common
from tasks.artifacts import publish


@task(name="evaluate")
def evaluate(params: dict[str, Any], generator: str, root: Path = Path(".")) -> dict[str, Any]:
    p, sch = common.paths(params, root), common.schema(params, root)
    settings = params.get("evaluate") or {}
    train = pd.read_parquet(p.prepared / "train.parquet")
    holdout = pd.read_parquet(p.prepared / "holdout.parquet")
    gen = load_generator(generator, p.model(generator))
    n = int(settings.get("n_samples") or len(train))
    seed = int(settings.get("seed", 0))
    synth = Encoder(sch).decode(gen.sample(n, seed))
    conformance = conforms(synth, sch)
    if not conformance["success"]:
        raise RuntimeError(f"decoded synthetic rows of '{generator}' fail the public schema's suite: "
                           f"{conformance['failed']}. This is a bug in the decoder; nothing was written.")
    distances = marginal_distances(holdout, synth, sch.columns)
    metrics = {
        "generator": generator, "n_synthetic": n, "seed": seed,
        "schema_conformance": conformance["success"],
        "fidelity": distances, "fidelity_summary": summarise(distances),
        "utility": tstr_auroc(train, synth, holdout, sch.columns, sch.target, seed),
        "computed_on_real_data": "marginal distances and TSTR/TRTR AUROC use the real train and holdout "
                                 "rows; they are not covered by the DP guarantee.",
        "hashes": common.hashes(params, "evaluate", sch, generator),
    }
    write_parquet(p.synthetic(generator), synth)
    write_json(p.metrics(generator), metrics)
    models = (metrics["utility"].get("models") or {})
    publish(f"{p.dataset}-{generator}-metrics", markdown=(
        f"## Evaluation of `{generator}`\n\n{n} synthetic rows; mean TV {metrics['fidelity_summary'].get('mean_tv')}, "
        f"mean W1 {metrics['fidelity_summary'].get('mean_w1')}"),
        table=[{"model": m, **v} for m, v in models.items()])
    return metrics
