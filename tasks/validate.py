"""Stage 1: read the raw table and validate it against the public schema (Great Expectations): in this process, or
in parts on a Dask cluster with `orchestration.task_runner: dask` (pipelines/data/out_of_core.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


from pipelines.config import Config
from pipelines.data import units
from pipelines.data.readers import read_source
from pipelines.data.validation import row_loss_summary, validate_table
from pipelines.io import atomic_path, write_json, write_parquet
from tasks import common
from tasks.artifacts import publish
from tasks.progress import run_logger


def validate(config: Config, root: Path = Path(".")) -> dict[str, Any]:
    """The validate stage (module docstring); writes the validated table and validation.json and returns its content."""
    return run(common.StageContext(config, root))


def run(ctx: common.StageContext, generator: str | None = None) -> dict[str, Any]:
    """`validate` in its stage context (`generator` unused: one validate stage per data set)."""
    config, root, p, sch = ctx.config, ctx.root, ctx.paths, ctx.schema
    common.check_against_schema(config, sch)  # the columns the configuration names, before any budget is spent
    source = ctx.source
    if config.orchestration.task_runner == "dask":  # in parts on a Dask cluster: the same rows, report and bytes
        from pipelines.data import out_of_core

        with atomic_path(p.validated) as tmp:
            report, label, ignored = out_of_core.validate(
                source, sch, config.dataset.columns, config.orchestration, tmp
            )
    else:
        table = read_source(source, sch, config.dataset.columns)
        label, ignored, frame, carry, bounded = table.label, table.ignored, table.frame, None, None
        if sch.unit is not None:  # at most max_rows rows per unit, before any policy counts a row
            frame, names, bounded = units.bound(
                frame, sch.unit, [c.name for c in sch.read], common.split_key(config, root)[0]
            )
            carry = {units.UNIT_COLUMN: names}
        clean, report = validate_table(frame, sch, label, carry)
        if bounded is not None:
            report["privacy_unit"] = {**sch.unit.to_dict(), **bounded}
            if bounded["rows_set_aside"]:
                run_logger().warning(
                    "validate: %d of %d rows set aside: %s keeps at most %d rows per %s, chosen by a keyed rule "
                    "(steward-only count; nothing public depends on it).",
                    bounded["rows_set_aside"],
                    bounded["rows_read"],
                    "privacy_unit",
                    sch.unit.max_rows,
                    sch.unit.column,
                )
        write_parquet(p.validated, clean)
    report["ignored_columns"] = list(ignored)  # names only, never their values
    report["identifier_columns"] = sch.ids  # kind: id, never read (released as fresh surrogate keys)
    if ignored:
        run_logger().warning(
            "validate: ignored %d columns of %s that schema '%s' does not declare "
            "(dataset.columns: schema; their values were not kept): %s",
            len(ignored),
            label,
            sch.name,
            ", ".join(ignored),
        )
    lost = row_loss_summary(report)
    if lost:  # the steward's console, however few: whether the release goes on is prepare's DP row-loss test
        run_logger().warning(
            "validate: %s. Steward-only counts; prepare's DP row-loss test decides whether the "
            "release goes on (dataset.max_dropped_fraction = %g).",
            lost,
            config.dataset.max_dropped_fraction,
        )
    report["hashes"] = ctx.hashes("validate")
    write_json(p.validation_report, report)
    rows = [
        {"column": c, **{k: v for k, v in r.items() if not isinstance(v, (list, dict))}}
        for c, r in report.get("columns", {}).items()
    ]
    note = f"\n\nignored columns (not in the schema; values not kept): {', '.join(ignored)}"
    publish(
        f"{p.dataset}-validation",
        markdown=(
            f"## Validation of `{label}`\n\nrows in: {report['rows_in']}, rows out: {report['rows_out']}, "
            f"dropped: {report['rows_dropped']}, clipped: {report['rows_clipped']}; "
            f"Great Expectations success: {report['gx']['success']}" + (note if ignored else "")
        ),
        table=rows,
        description="INTERNAL: validation's counts and offending values from real rows, not for publication",
    )
    return report
