"""Stage 3b, after prepare: what evaluate@gen computes from the real rows alone, once per data set.

The train-on-real scores (TRTR AUROC of utility.MODELS and the 10 classifiers of the scorecard), the scores of
the utility verdict's independent-marginals baseline tables, the DP-auto-GAN metrics' fits on real rows
(dimension-wise prediction, target accuracy) and the attribute-inference attack's baseline are the same for
every generator: they depend on the real training and holdout rows, `evaluate`, `utility_gate` and the public
synthetic row count n alone. Each module's `real_side` computes its part with the seeds its metric uses, so a
metric given the cache returns exactly what it computes without it (tests/test_real_side.py); evaluate@gen then
fits only the synthetic side, so the real side's cost does not grow with the number of generators.

The cache holds values computed from real rows (scores on holdout rows): steward-internal, a DVC output under
data/ that is never copied into releases/ (docs/architecture.md, public and steward artefacts).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.config import Config, Metrics, Scorecard
from pipelines.data.encoded import EncodedTable
from pipelines.data.schema import Schema
from pipelines.errors import InputError
from pipelines.evaluation import scorecard, unsupervised, verdict
from pipelines.evaluation.attacks import suite
from pipelines.evaluation.outside_dp import EVALUATION_METRICS, UNAVAILABLE, unavailable_reason
from pipelines.evaluation.utility import scores_json, target_scores
from pipelines.io import read_json, read_parquet_rows, sha256_file, write_json
from pipelines.runtime import beside
from tasks import common

log = logging.getLogger(__name__)
READ_STREAMS = {"train": 0, "holdout": 1, "synthetic": 2}  # each table's sample: `row_sample(..., [seed, stream])`


@dataclass(frozen=True)
class Inputs:
    """What evaluate reads besides the synthetic table: the real rows, the schema and the checked settings."""

    train: pd.DataFrame
    holdout: pd.DataFrame
    sch: Schema
    n: int  # synthetic rows measured: n_published, at most evaluate.read_max_rows
    n_published: int  # synthetic rows sampled and published: evaluate.n_samples, else the public n̂
    seed: int
    knobs: dict[str, int | None]  # DP-auto-GAN metrics' knobs (config.Metrics)
    card_knobs: dict[str, int | None]  # the scorecard's (config.Scorecard) and the above
    attacks: dict[str, Any]  # evaluate.attacks (suite.settings)
    verdict: dict[str, Any]  # utility_gate (Config.utility_gate)


def inputs(config: Config, root: Path) -> Inputs:
    """The real rows (each table a seeded sample of at most `evaluate.read_max_rows` rows, `READ_STREAMS`) and the
    settings; the same for the baseline stage and every evaluate@gen, so the cache matches what each computes."""
    p, sch, settings = common.paths(config, root), common.schema(config, root), config.evaluate
    k = settings.model_dump(include=set(Metrics.model_fields))
    cap, published = k["read_max_rows"], settings.n_samples or len(EncodedTable(p.prepared / "train_encoded.parquet"))
    train, holdout = (
        read_parquet_rows(p.prepared / f"{side}.parquet", cap, [settings.seed, READ_STREAMS[side]])
        for side in ("train", "holdout")
    )
    return Inputs(
        train=train,
        holdout=holdout,
        sch=sch,
        n=published if cap is None else min(published, cap),
        n_published=published,
        seed=settings.seed,
        knobs=k,
        card_knobs={**settings.model_dump(include=set(Scorecard.model_fields)), **k},
        attacks=suite.settings(settings.attacks, sch),
        verdict=config.utility_gate.model_dump(),
    )


def utility_side(
    train: pd.DataFrame, holdout: pd.DataFrame, sch: Schema, n: int, seed: int, draws: int, cap: int | None
) -> dict[str, Any]:
    """The utility's real side: the train-on-real and independent-marginals baseline tables' scores, as JSON."""
    baselines = verdict.baseline_tables(train, n, seed, draws, cap)
    return scores_json(
        target_scores(
            {"trtr": train, **baselines},
            holdout,
            sch.columns,
            sch.target,
            seed,
            max_rows=cap,
            positive=sch.target_positive,
        )
    )


def real_side(i: Inputs) -> dict[str, Any]:
    """Every module's real side (module docstring), as JSON; the utility's beside the others (`runtime.beside`)."""
    with beside(
        utility_side,
        i.train,
        i.holdout,
        i.sch,
        i.n,
        i.seed,
        i.verdict["baseline_draws"],
        i.knobs["utility_max_rows"],
        rows=len(i.train),
    ) as utility:
        others = {
            "paper": unsupervised.real_side(i.train, i.holdout, i.n, i.sch, i.seed, i.knobs),
            "scorecard": scorecard.real_side(i.train, i.holdout, i.n, i.sch, i.seed, i.card_knobs),
            "attacks": suite.real_side(i.train, i.holdout, i.sch, i.attacks, i.seed),
        }
        return {"utility": utility(), **others}


def fingerprint(config: Config, root: Path, i: Inputs) -> dict[str, Any]:
    """What the cache was computed from: the real rows' files, the schema, the stage's params and n."""
    p = common.paths(config, root)
    return {
        **common.hashes(config, "baseline", i.sch),
        "n_synthetic": i.n,
        **{f"{name}.parquet": sha256_file(p.prepared / f"{name}.parquet") for name in ("train", "holdout")},
    }


def baseline(config: Config, root: Path = Path(".")) -> dict[str, Any]:
    """Writes data/baseline/<ds>/real_side.json (`Paths.real_side`)."""
    return run(common.StageContext(config, root))


def run(ctx: common.StageContext, generator: str | None = None) -> dict[str, Any]:
    """`baseline` in its stage context (`generator` unused: one baseline stage per data set)."""
    config, root = ctx.config, ctx.root
    i = inputs(config, root)
    try:
        side = real_side(i)
    except Exception as e:  # noqa: BLE001 - what the real rows allow is the steward's finding, never a stop
        log.warning(
            "baseline: the real-side evaluation cannot run on these rows (%s); the release goes on, its "
            "steward report says so",
            unavailable_reason(e),
            exc_info=True,
        )
        side = {UNAVAILABLE: unavailable_reason(e)}
    out = {
        "inputs": fingerprint(config, root, i),
        **side,
        "computed_on_real_data": EVALUATION_METRICS,
        "internal": "steward-internal: computed from real rows, never part of a release",
    }
    write_json(ctx.paths.real_side, out)
    return {"path": str(ctx.paths.real_side), "inputs": out["inputs"]}


def cached(config: Config, root: Path, i: Inputs) -> dict[str, Any] | None:
    """The baseline stage's cache for these inputs; None where there is none (each metric then computes its real
    side itself, with the same result). A cache computed from other rows or settings is an error."""
    path = common.paths(config, root).real_side
    if not path.exists():
        log.info(
            "no %s: evaluate computes the real-row baselines itself (run `synthrelease stage baseline` "
            "once to share them across generators)",
            path,
        )
        return None
    cache = read_json(path)
    now = fingerprint(config, root, i)
    if cache.get("inputs") != now:
        raise InputError(
            f"the cached real-row baselines were computed from other rows or settings "
            f"({cache.get('inputs')}; now {now}).",
            file=str(path),
            fix="run `synthrelease stage baseline` (`dvc repro` and the flow run it before evaluate).",
        )
    return cache
