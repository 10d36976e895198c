"""Score a PUBLISHED synthetic table (a release bundle's synthetic.parquet, or a table in its form) against the
steward's real rows: the figures of the steward report's fidelity and utility sections (marginal distances,
TSTR/TRTR AUROC, the utility verdict), by the evaluate stage's own functions, so a release's table scored here gets
the numbers its generator's metrics.json holds (docs/metrics.md, "Scoring a published table").

A bundle holds the declared columns (real nulls, surrogate identifiers, dates, maybe a `weight` column); the
metrics read the modelled ones (pipelines/data/declared.py). `check_columns` checks the table's columns against the
schema's declared ones and `modelled_table` maps it back (`to_modelled`; identifiers, derived columns and the
weights left out: none of them is modelled). The caller passes the real rows and settings evaluate reads
(tasks/baseline.py `inputs`, `EvaluationInputs`) and the baseline stage's cache of their real side where it was
computed for as many synthetic rows ({} otherwise: each metric then computes its real side itself, with the same
result, tests/test_real_side.py); the synthetic rows measured are evaluate's seeded sample of at most
`evaluate.read_max_rows` rows.

Everything returned reads real rows: steward-only output, outside the DP guarantee, never for a release.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from pipelines.data.declared import to_modelled
from pipelines.data.schema import ID_KIND, Schema
from pipelines.errors import InputError
from pipelines.evaluation import verdict
from pipelines.evaluation.fidelity import marginal_distances, summarise
from pipelines.reporting.report_words import fmt
from pipelines.evaluation.utility import auroc_table, target_scores
from pipelines.io import ParquetColumns, parquet_rows, read_parquet_rows

BUNDLE_TABLE = "synthetic.parquet"  # a release bundle's table (releases/<ds>/<id>/)
WEIGHT_COLUMN = "weight"  # the DP importance weights a bundle may carry (pipelines/weights/release.py)
STEWARD_ONLY = (
    "steward-only, outside the DP guarantee, never for publication: every figure reads real rows (marginal "
    "distances against the real holdout rows; TSTR/TRTR AUROC of classifiers fitted on the synthetic and "
    f"the real training rows and tested on real holdout rows; the {verdict.OUTSIDE_DP})"
)


def synthetic_file(path: Path) -> Path:
    """The table to score: `path` itself, or a bundle directory's BUNDLE_TABLE."""
    path = Path(path)
    table = path / BUNDLE_TABLE if path.is_dir() else path
    if not table.is_file():
        raise InputError(
            "no such synthetic table.",
            file=str(table),
            fix=f"pass a published {BUNDLE_TABLE} or its release bundle's directory "
            "(releases/<dataset>/<release id>/).",
        )
    return table


def check_bundle(table: Path, sch: Schema, dataset: str) -> None:
    """A table inside a release bundle (a manifest.json beside it) must have been released for this data set under
    this schema; a table without a manifest is checked by its columns alone (`check_columns`)."""
    manifest_file = table.parent / "manifest.json"
    if not manifest_file.is_file():
        return
    manifest = json.loads(manifest_file.read_text())
    if manifest.get("dataset") != dataset:
        raise InputError(
            f"the bundle was released for data set '{manifest.get('dataset')}', not '{dataset}'.",
            file=str(table),
            fix=f"pass the params file of data set '{manifest.get('dataset')}' (--params params/<name>.yaml).",
        )
    released = (manifest.get("hashes") or {}).get("schema")
    if released is not None and released != sch.hash():
        raise InputError(
            f"the bundle was released under another schema ({released}; schemas/{dataset}.yaml is "
            f"now {sch.hash()}), so its columns do not mean what they meant.",
            file=str(table),
            fix="restore the schema the release used (its manifest.json's hashes.schema) or score a "
            "table released under the current one.",
        )


def check_columns(columns: list[str], sch: Schema, file: str) -> None:
    """The published table's `columns` (of the table at `file`) against the schema's declared ones: every declared
    column that is read and modelled must be there; identifier columns, derived columns and the `weight` column may
    be (none is modelled); any other column is an error, as is a missing one."""
    optional = {c.name for c in sch.declared if c.kind == ID_KIND or c.is_derived} | {WEIGHT_COLUMN}
    declared = sch.declared_names
    for name in declared:
        if name not in columns and name not in optional:
            raise InputError(
                "the published table has no such column, which the schema declares.",
                file=file,
                column=name,
                fix=f"score the release's {BUNDLE_TABLE} unmodified, or a table with "
                f"every declared column of schemas/{sch.name}.yaml "
                f"({', '.join(declared)}) and real nulls where it allows them.",
            )
    for name in columns:
        if name not in declared and name != WEIGHT_COLUMN:
            raise InputError(
                "the published table has this column, which the schema does not declare.",
                file=file,
                column=name,
                fix=f"drop the column, or pass the params file of the data set whose "
                f"schema declares it (the declared columns: {', '.join(declared)}).",
            )


def published_file(path: Path, sch: Schema, dataset: str) -> Path:
    """The published table to score (`synthetic_file`), checked before any real row is read: its bundle's manifest
    (`check_bundle`) and its columns, read from its footer (`check_columns`)."""
    table = synthetic_file(path)
    check_bundle(table, sch, dataset)
    try:
        columns = ParquetColumns(table).columns
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(
            f"not a readable Parquet table ({e}).",
            file=str(table),
            fix=f"pass a release bundle's {BUNDLE_TABLE} (or a Parquet table of the declared columns).",
        ) from e
    check_columns(columns, sch, str(table))
    return table


def modelled_table(df: pd.DataFrame, sch: Schema, file: str) -> pd.DataFrame:
    """The published table `df` (read from `file`) as the modelled columns (`to_modelled`), its columns checked
    (`check_columns`) and its identifiers, derived columns and weights left out."""
    check_columns(list(df.columns), sch, file)
    read = [c.name for c in sch.read if not c.is_derived]
    return to_modelled(df[read], sch).reset_index(drop=True)


PREPARED = ("train", "holdout", "train_encoded")  # data/prepared/<ds>/<name>.parquet: what evaluate reads


def check_prepared(prepared: Path) -> None:
    """The prepared real rows evaluate reads (`PREPARED`) must be under `prepared`."""
    for name in PREPARED:
        if not (prepared / f"{name}.parquet").is_file():
            raise InputError(
                "the prepared real rows the table is scored against are not there.",
                file=str(prepared / f"{name}.parquet"),
                fix="run `synthrelease stage validate` and `synthrelease stage prepare` (or `dvc repro "
                "prepare`) with the same params file first.",
            )


class EvaluationInputs(Protocol):
    """What evaluate@gen reads besides its synthetic table (tasks/baseline.py `Inputs`, built by `inputs`)."""

    train: pd.DataFrame
    holdout: pd.DataFrame
    sch: Schema
    n: int  # synthetic rows measured
    seed: int
    knobs: dict[str, int | None]  # evaluate's knobs: read_max_rows, utility_max_rows, kway_bins, ...
    verdict: dict[str, Any]  # utility_gate


def measured_rows(table: Path, max_rows: int | None) -> dict[str, int]:
    """The published table's row count ("n_published") and the rows of it evaluate measures ("n": at most
    `evaluate.read_max_rows`), read from its footer."""
    rows = parquet_rows(table)
    return {"n_published": rows, "n": rows if max_rows is None else min(rows, max_rows)}


def score_published(table: Path, i: EvaluationInputs, real: dict[str, Any], stream: int) -> dict[str, Any]:
    """The fidelity and utility figures of the published table at `table` against the real rows of `i` (whose `n`
    is the table's measured rows, `measured_rows`), as evaluate@gen computes them (tasks/evaluate.py
    `real_side_metrics`): the seeded sample of at most `evaluate.read_max_rows` of its rows (seed (`i.seed`,
    `stream`): evaluate's synthetic stream) mapped to the modelled columns (`modelled_table`), `real` the baseline
    stage's cache of the real side for these inputs ({}: each metric computes its own, with the same result).
    Returns {"fidelity": per-column distances, "fidelity_summary", "utility": TSTR/TRTR AUROC per model,
    "utility_verdict", "synthetic", "n_synthetic", "n_measured", "seed", "computed_on_real_data"}.
    Steward-only: every figure reads real rows (STEWARD_ONLY)."""
    sch, seed, k, s = i.sch, i.seed, i.knobs, i.verdict
    synth = modelled_table(read_parquet_rows(table, k["read_max_rows"], [seed, stream]), sch, str(table))
    cap = k["utility_max_rows"]
    distances = marginal_distances(i.holdout, synth, sch.columns)
    baselines = verdict.baseline_tables(i.train, i.n, seed, s["baseline_draws"], cap)
    tables = {"tstr": synth} if real else {"tstr": synth, "trtr": i.train, **baselines}
    scored = target_scores(
        tables, i.holdout, sch.columns, sch.target, seed, real.get("utility"), cap, sch.target_positive
    )
    return {
        "synthetic": str(table),
        "n_synthetic": parquet_rows(table),
        "n_measured": len(synth),
        "seed": seed,
        "fidelity": distances,
        "fidelity_summary": summarise(distances),
        "utility": auroc_table(scored),
        "utility_verdict": verdict.utility_verdict(
            scored, synth, baselines, i.holdout, sch.columns, k["kway_bins"], s, seed, cap
        ),
        "computed_on_real_data": STEWARD_ONLY,
    }


def figures(score: dict[str, Any]) -> list[tuple[str, str]]:
    """The (figure, value) rows `synthrelease score` prints: the fidelity summary and the most distant column, each
    model's TSTR and TRTR AUROC, and the utility verdict with its 2-way comparison."""
    summary, distances = score["fidelity_summary"], score["fidelity"]
    rows = [("synthetic rows (measured)", f"{score['n_synthetic']} ({score['n_measured']})")]
    rows += [
        (f"fidelity: {label}", fmt(summary[key]))
        for key, label in (
            ("mean_tv", "mean TV, categorical columns"),
            ("max_tv", "max TV, categorical columns"),
            ("mean_w1", "mean W1, numeric columns (schema-scaled)"),
            ("max_w1", "max W1, numeric columns (schema-scaled)"),
        )
    ]
    if distances:
        name, worst = max(distances.items(), key=lambda kv: kv[1]["value"])
        rows.append((f"fidelity: most distant column ({worst['metric'].upper()})", f"{name} {fmt(worst['value'])}"))
    utility = score["utility"]
    if "skipped" in utility:
        rows.append(("utility: TSTR AUROC", f"skipped: {utility['skipped']}"))
    for model, m in (utility.get("models") or {}).items():
        rows += [(f"utility: {model} TSTR AUROC", fmt(m["tstr"])), (f"utility: {model} TRTR AUROC", fmt(m["trtr"]))]
    v = score["utility_verdict"]
    two_way = v.get("two_way") or {}
    rows.append(("utility verdict", fmt(v["verdict"])))
    if "skipped" not in two_way:
        rows += [
            ("utility verdict: mean 2-way TV, this table", fmt(two_way.get("mean_tv"))),
            ("utility verdict: mean 2-way TV, baseline", fmt(two_way.get("baseline_mean_tv"))),
        ]
    return rows
