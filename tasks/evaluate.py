"""Stage 5: sample synthetic rows in the original schema and measure fidelity, utility and privacy risk.

Besides the marginal distances and TSTR AUROC, the DP-auto-GAN paper's evaluation (§4, docs/metrics.md):
dimension-wise probability and prediction, k-way marginal TV, 2-way PCA marginal, Wasserstein score and
the target accuracy of its Table 2; the release scorecard (2-way marginals, correlation difference, MMD, W1,
detection AUC, PEARL's 10 classifiers and range queries), the privacy-risk attacks (docs/privacy-risk.md)
and the utility verdict against chance and an independent-marginals baseline (pipelines/evaluation/verdict.py),
whose results check@gen turns into gates. The plots are PNGs next to metrics.json (DVC plots).
What these compute from real rows alone (train-on-real fits, baseline scores, holdout references) is read from
the baseline stage's cache (tasks/baseline.py), so only the synthetic side is computed per generator.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines.data.rules import draw_within
from pipelines.data.transform import Encoder
from pipelines.data.validation import conforms
from pipelines.evaluation import outside_dp, scorecard, verdict
from pipelines.evaluation.figure import not_applicable
from pipelines.evaluation.attacks import suite
from pipelines.evaluation.fidelity import marginal_distances, summarise
from pipelines.evaluation.unsupervised import paper_metrics
from pipelines.evaluation.utility import auroc_table, target_scores
from pipelines.generators.registry import load_generator
from pipelines.io import ParquetParts, atomic_path, row_sample, write_json
from pipelines.progress import Steps
from pipelines.reporting import plots
from pipelines.reporting.report import evaluation_markdown, key_figures
from pipelines.runtime import beside
from pipelines.config import EVALUATE_PLOTS, Config
from tasks import baseline, common, unselected
from tasks.artifacts import publish
from tasks.progress import stage_progress


PLOTS = EVALUATE_PLOTS  # reports/<ds>/<gen>/<name>.png, declared as DVC plots
log = logging.getLogger(__name__)


SAMPLE_PART_ROWS = 1 << 18  # synthetic rows sampled, decoded, checked and written at a time (`synthetic_table`)


def synthetic_table(
    config: Config, generator: str, root: Path, n: int, out: Path, keep: np.ndarray | None
) -> tuple[pd.DataFrame, dict]:
    """`n` rows of the trained generator written to `out`, and its rows `keep` (sorted indices; every row when
    None) with the suite's verdict. The rows are sampled in parts of SAMPLE_PART_ROWS from one generator seeded by
    the public `evaluate.seed` (a table of at most that many rows is one call, `sample(n, seed)`), each part decoded
    to the schema, kept inside the schema's `rules` (`rules.draw_within`: a row that breaks one is replaced by a
    later draw that keeps them; the count is the conformance's `rules_replaced`), checked and written
    (`io.ParquetParts`, the bytes of one write), so the process holds one part and the rows kept. A part that fails
    the schema's suite is a decoder bug: an error, and the caller's `out` is removed."""
    p, sch = common.paths(config, root), common.schema(config, root)
    model, encoder = load_generator(generator, p.model(generator)), Encoder(sch)
    rng, parts, kept, replaced = np.random.default_rng(config.evaluate.seed), ParquetParts(out), [], 0
    for start in range(0, n, SAMPLE_PART_ROWS):
        part, broke = draw_within(
            lambda m: encoder.decode(model.sample(m, rng), rng), min(SAMPLE_PART_ROWS, n - start), sch.rules
        )
        replaced += broke
        conformance = conforms(part, sch)
        if not conformance["success"]:
            raise RuntimeError(
                f"decoded synthetic rows of '{generator}' fail the public schema's suite: "
                f"{conformance['failed']}. This is a bug in the decoder; nothing was written."
            )
        parts.add(part)
        kept.append(part if keep is None else part.iloc[keep[(keep >= start) & (keep < start + len(part))] - start])
    parts.close(encoder.decode(np.zeros((0, model.table_layout.width), dtype=np.float32)))
    if sch.rules:
        conformance = {**conformance, "rules_replaced": replaced}
    return pd.concat(kept, ignore_index=True) if len(kept) > 1 else kept[0].reset_index(drop=True), conformance


def measure(config: Config, generator: str, root: Path, out: Path) -> tuple[dict[str, bytes], dict]:
    """Samples the synthetic table into `out` (`synthetic_table`; the measurements read a seeded sample of at most
    `evaluate.read_max_rows` of its rows) and returns its plots and metrics.json's content; each measurement is a
    step of the 'evaluate' progress phase (the classifiers and scorecard report their own phases). The attacks run
    beside the other measurements (`runtime.beside`: a second process on a large table with two cores, else first,
    here). When the real rows do not allow the evaluation (a holdout with one target class or none, a degenerate
    column), metrics.json says why (`evaluation_unavailable`) and the plots say so: the table is still written,
    since whether anything is published is decided by the DP gates alone, never by the real-side evaluation."""
    i = baseline.inputs(config, root)
    sch, n, k = i.sch, i.n, i.knobs  # n: the synthetic rows measured, public
    real = baseline.cached(config, root, i) or {}  # the baseline stage's real side; {}: each metric computes its own
    seed, step = i.seed, Steps("evaluate", 8)
    keep = row_sample(i.n_published, k["read_max_rows"], [seed, baseline.READ_STREAMS["synthetic"]])
    synth, conformance = step.done(synthetic_table(config, generator, root, i.n_published, out, keep))  # n rows
    facts = {
        "generator": generator,
        "n_synthetic": i.n_published,
        "n_measured": n,
        "seed": seed,
        "settings": k,
        "schema_conformance": conformance["success"],
        **(
            {"rules": {"rules": [r.describe() for r in sch.rules], "rows_replaced": conformance["rules_replaced"]}}
            if sch.rules
            else {}
        ),
        "plots": [f"{name}.png" for name in PLOTS],
        "computed_on_real_data": outside_dp.EVALUATION_METRICS,
        "hashes": common.hashes(config, "evaluate", sch, generator),
    }
    reason = real.get(outside_dp.UNAVAILABLE)
    if reason is None:
        try:
            pngs, measured = real_side_metrics(i, real, synth, step)
            return pngs, {**facts, **measured}
        except Exception as e:  # noqa: BLE001 - a failure on the real side never blocks publication
            reason = outside_dp.unavailable_reason(e)
            log.warning(
                "evaluate@%s: the real-side evaluation cannot run on these rows (%s); the table is published "
                "if the DP gates pass, and the steward report says so",
                generator,
                reason,
                exc_info=True,
            )
    title = "not evaluated: the real rows do not allow it"
    return {name: not_applicable(title, reason) for name in PLOTS}, {**facts, outside_dp.UNAVAILABLE: reason}


def real_side_metrics(
    i: baseline.Inputs, real: dict[str, Any], synth: pd.DataFrame, step: Steps
) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The measurements against the real rows (`measure`), each a step of the 'evaluate' progress phase."""
    train, holdout, sch, n, k, seed = i.train, i.holdout, i.sch, i.n, i.knobs, i.seed
    card_knobs, attack_settings, verdict_settings = i.card_knobs, i.attacks, i.verdict
    with beside(
        suite.privacy_risk, train, synth, holdout, sch, attack_settings, seed, real.get("attacks"), rows=len(train)
    ) as attacks:
        distances = step.done(marginal_distances(holdout, synth, sch.columns))
        paper, pngs = step.done(paper_metrics(train, synth, holdout, sch, seed, k, real.get("paper")))
        cap = k["utility_max_rows"]
        baselines = step.done(verdict.baseline_tables(train, n, seed, verdict_settings["baseline_draws"], cap))
        tables = {"tstr": synth} if real else {"tstr": synth, "trtr": train, **baselines}
        scored = step.done(
            target_scores(tables, holdout, sch.columns, sch.target, seed, real.get("utility"), cap, sch.target_positive)
        )
        utility_verdict = step.done(
            verdict.utility_verdict(
                scored, synth, baselines, holdout, sch.columns, k["kway_bins"], verdict_settings, seed, cap
            )
        )
        card = step.done(scorecard.scorecard(train, synth, holdout, sch, seed, card_knobs, real.get("scorecard")))
        risk = step.done(attacks())
    pngs["membership_roc"] = plots.roc_curves(
        {"DOMIAS": risk["membership"]["domias"], "DCR": risk["membership"]["dcr"]},
        "Membership inference on the released table",
    )
    metrics = {
        "fidelity": distances,
        "fidelity_summary": summarise(distances),
        "utility": auroc_table(scored),
        "utility_verdict": utility_verdict,
        **paper,
        "scorecard": card,
        "privacy_risk": risk,
    }
    return pngs, metrics


def evaluate(config: Config, generator: str, root: Path = Path(".")) -> dict[str, Any]:
    """The evaluate stage of `generator` (module docstring); writes metrics.json and its plots and returns metrics."""
    return run(common.StageContext(config, root), generator)


def run(ctx: common.StageContext, generator: str) -> dict[str, Any]:
    """`evaluate` in its stage context."""
    config, root, p = ctx.config, ctx.root, ctx.paths
    skipped = unselected.write("evaluate", p, generator)
    if skipped is not None:  # release.select left it out: nothing to evaluate
        return skipped
    with (
        stage_progress(f"{p.dataset}-{generator}-evaluate-progress", f"evaluate@{generator}"),
        atomic_path(p.synthetic(generator)) as table,
    ):  # the table is in place only if every measurement ran
        pngs, metrics = measure(config, generator, root, table)
    for name in PLOTS:
        with atomic_path(p.metrics(generator).parent / f"{name}.png") as tmp:
            tmp.write_bytes(pngs[name])
    write_json(p.metrics(generator), metrics)
    publish(
        f"{p.dataset}-{generator}-metrics",
        markdown=evaluation_markdown(generator, metrics),  # steward's UI
        table=key_figures(metrics),
        description="INTERNAL: computed from real rows, not for publication",
    )
    return metrics
