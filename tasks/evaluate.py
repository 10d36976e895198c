"""Stage 5: sample synthetic rows in the original schema and measure fidelity and utility.

Besides the marginal distances and TSTR AUROC, the DP-auto-GAN paper's evaluation (§4, docs/metrics.md):
dimension-wise probability and prediction, k-way marginal TV, 2-way PCA marginal, Wasserstein score and
the target accuracy of its Table 2; their plots are PNGs next to metrics.json (DVC plots).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from prefect import task

from pipelines.data.transform import Encoder
from pipelines.data.validation import conforms
from pipelines.errors import InputError
from pipelines.evaluation.fidelity import marginal_distances, summarise
from pipelines.evaluation.unsupervised import DEFAULTS, NULLABLE, PLOTS, paper_metrics
from pipelines.evaluation.utility import tstr_auroc
from pipelines.generators.base import load_generator
from pipelines.io import atomic_path, write_json, write_parquet
from tasks import common
from tasks.artifacts import publish


def knobs(settings: dict[str, Any]) -> dict[str, int | None]:
    """The evaluate knobs from params.yaml, each a positive integer (or null where a cap may be off)."""
    out = {}
    for key, default in DEFAULTS.items():
        value = settings.get(key, default)
        if value is None and key in NULLABLE:
            out[key] = None
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"evaluate.{key} must be a positive integer{' or null' if key in NULLABLE else ''}, "
                             f"got {value!r}.", file="params.yaml", fix=f"set 'evaluate.{key}: {default}'.")
        out[key] = value
    return out


@task(name="evaluate")
def evaluate(params: dict[str, Any], generator: str, root: Path = Path(".")) -> dict[str, Any]:
    p, sch = common.paths(params, root), common.schema(params, root)
    settings = params.get("evaluate") or {}
    k = knobs(settings)
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
    paper, pngs = paper_metrics(train, synth, holdout, sch, seed, k)
    metrics = {
        "generator": generator, "n_synthetic": n, "seed": seed, "settings": k,
        "schema_conformance": conformance["success"],
        "fidelity": distances, "fidelity_summary": summarise(distances),
        "utility": tstr_auroc(train, synth, holdout, sch.columns, sch.target, seed),
        **paper,
        "plots": [f"{name}.png" for name in PLOTS],
        "computed_on_real_data": "every metric here uses the real train and/or holdout rows (marginal distances, "
                                 "TSTR/TRTR AUROC, dimension-wise probability and prediction, k-way marginal TV, "
                                 "PCA fitted on real training rows, Wasserstein scores, target accuracy) and so do "
                                 "the plots; none is covered by the DP guarantee.",
        "hashes": common.hashes(params, "evaluate", sch, generator),
    }
    write_parquet(p.synthetic(generator), synth)
    for name in PLOTS:
        with atomic_path(p.metrics(generator).parent / f"{name}.png") as tmp:
            tmp.write_bytes(pngs[name])
    write_json(p.metrics(generator), metrics)
    models = (metrics["utility"].get("models") or {})
    publish(f"{p.dataset}-{generator}-metrics", markdown=(
        f"## Evaluation of `{generator}`\n\n{n} synthetic rows; mean TV {metrics['fidelity_summary'].get('mean_tv')}, "
        f"mean W1 {metrics['fidelity_summary'].get('mean_w1')}, Wasserstein score "
        f"{paper['wasserstein_score']['score']:.4f}, 2-way PCA score {paper['pca_marginal'].get('score')}, "
        f"target accuracy (synthetic / real) {paper['target_accuracy'].get('synthetic')} / "
        f"{paper['target_accuracy'].get('real')}"),
        table=[{"model": m, **v} for m, v in models.items()])
    return metrics
