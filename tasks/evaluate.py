"""Stage 5: sample synthetic rows in the original schema and measure fidelity, utility and privacy risk.

Besides the marginal distances and TSTR AUROC, the DP-auto-GAN paper's evaluation (§4, docs/metrics.md):
dimension-wise probability and prediction, k-way marginal TV, 2-way PCA marginal, Wasserstein score and
the target accuracy of its Table 2; the release scorecard (2-way marginals, correlation difference, MMD, W1,
detection AUC, PEARL's 10 classifiers and range queries), the privacy-risk attacks (docs/privacy-risk.md)
and the utility verdict against chance and an independent-marginals baseline (pipelines/evaluation/verdict.py),
whose results check@gen turns into gates. The plots are PNGs next to metrics.json (DVC plots).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from prefect import task

from pipelines.config import PARAMS_FILE, check_section, fail
from pipelines.data.transform import Encoder
from pipelines.data.validation import conforms
from pipelines.evaluation import outside_dp, plots, scorecard, unsupervised, verdict
from pipelines.evaluation.attacks import suite
from pipelines.evaluation.fidelity import marginal_distances, summarise
from pipelines.evaluation.report import evaluation_markdown, key_figures
from pipelines.evaluation.unsupervised import paper_metrics
from pipelines.evaluation.utility import auroc_table, target_scores
from pipelines.generators.registry import load_generator
from pipelines.io import atomic_path, write_json, write_parquet
from tasks import common
from tasks.artifacts import publish
from tasks.train import EncodedTable


PLOTS = unsupervised.PLOTS + ("membership_roc",)  # reports/<ds>/<gen>/<name>.png, declared as DVC plots


def knobs(settings: dict[str, Any], defaults: dict[str, int | None] = unsupervised.DEFAULTS,
          nullable: tuple[str, ...] = unsupervised.NULLABLE) -> dict[str, int | None]:
    """The evaluate knobs from params.yaml, each a positive integer (or null where a cap may be off)."""
    out = {}
    for key, default in defaults.items():
        value = settings.get(key, default)
        if value is None and key in nullable:
            out[key] = None
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise fail(PARAMS_FILE, f"evaluate.{key}", f"must be a positive integer"
                       f"{' or null' if key in nullable else ''}, got {value!r}.", f"set 'evaluate.{key}: {default}'.")
        out[key] = value
    return out


def synthetic_table(params: dict[str, Any], generator: str, root: Path, n: int) -> tuple[pd.DataFrame, dict]:
    """`n` rows of the trained generator, sampled with the public `evaluate.seed` and decoded to the schema;
    a table that fails the schema's suite is a decoder bug (an error, nothing written)."""
    p, sch = common.paths(params, root), common.schema(params, root)
    seed = int((params.get("evaluate") or {}).get("seed", 0))
    synth = Encoder(sch).decode(load_generator(generator, p.model(generator)).sample(n, seed))
    conformance = conforms(synth, sch)
    if not conformance["success"]:
        raise RuntimeError(f"decoded synthetic rows of '{generator}' fail the public schema's suite: "
                           f"{conformance['failed']}. This is a bug in the decoder; nothing was written.")
    return synth, conformance


@task(name="evaluate")
def evaluate(params: dict[str, Any], generator: str, root: Path = Path(".")) -> dict[str, Any]:
    p, sch = common.paths(params, root), common.schema(params, root)
    settings = check_section("evaluate", params.get("evaluate"))
    k = knobs(settings)
    card_knobs = {**knobs(settings, scorecard.DEFAULTS, scorecard.NULLABLE), **k}
    attack_settings = suite.settings(settings.get("attacks"), sch)
    verdict_settings = verdict.settings(params.get("utility_gate"))
    train = pd.read_parquet(p.prepared / "train.parquet")
    holdout = pd.read_parquet(p.prepared / "holdout.parquet")
    n = int(settings.get("n_samples") or len(EncodedTable(p.prepared / "train_encoded.parquet")))  # n̂, public
    seed = int(settings.get("seed", 0))
    synth, conformance = synthetic_table(params, generator, root, n)
    distances = marginal_distances(holdout, synth, sch.columns)
    paper, pngs = paper_metrics(train, synth, holdout, sch, seed, k)
    risk = suite.privacy_risk(train, synth, holdout, sch, attack_settings, seed)
    baselines = verdict.baseline_tables(train, n, seed, verdict_settings["baseline_draws"])  # exact training marginals
    scored = target_scores({"tstr": synth, "trtr": train, **baselines}, holdout, sch.columns, sch.target, seed)
    pngs["membership_roc"] = plots.roc_curves({"DOMIAS": risk["membership"]["domias"], "DCR": risk["membership"]["dcr"]},
                                              "Membership inference on the released table")
    metrics = {
        "generator": generator, "n_synthetic": n, "seed": seed, "settings": k,
        "schema_conformance": conformance["success"],
        "fidelity": distances, "fidelity_summary": summarise(distances),
        "utility": auroc_table(scored),
        "utility_verdict": verdict.utility_verdict(scored, synth, baselines, holdout, sch.columns, k["kway_bins"],
                                                   verdict_settings, seed),
        **paper,
        "scorecard": scorecard.scorecard(train, synth, holdout, sch, seed, card_knobs),
        "privacy_risk": risk,
        "plots": [f"{name}.png" for name in PLOTS],
        "computed_on_real_data": outside_dp.EVALUATION_METRICS,
        "hashes": common.hashes(params, "evaluate", sch, generator),
    }
    write_parquet(p.synthetic(generator), synth)
    for name in PLOTS:
        with atomic_path(p.metrics(generator).parent / f"{name}.png") as tmp:
            tmp.write_bytes(pngs[name])
    write_json(p.metrics(generator), metrics)
    publish(f"{p.dataset}-{generator}-metrics", markdown=evaluation_markdown(generator, metrics),  # steward's UI
            table=key_figures(metrics), description="INTERNAL: computed from real rows, not for publication")
    return metrics
