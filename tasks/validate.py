"""Stage 1: read the raw table and validate it against the public schema (Great Expectations)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task

from pipelines.data.readers import read_table
from pipelines.data.validation import validate_table
from pipelines.io import write_json, write_parquet
from tasks import common
from tasks.artifacts import publish


@task(name="validate")
def validate(params: dict[str, Any], root: Path = Path(".")) -> dict[str, Any]:
    p, sch = common.paths(params, root), common.schema(params, root)
    source = str(params["dataset"]["source"])
    if not source.startswith("bundled:") and not Path(source).is_absolute():
        source = str(Path(root) / source)
    raw, label = read_table(source, sch)
    clean, report = validate_table(raw, sch, label)
    report["hashes"] = common.hashes(params, "validate", sch)
    write_parquet(p.validated, clean)
    write_json(p.validation_report, report)
    rows = [{"column": c, **{k: v for k, v in r.items() if not isinstance(v, (list, dict))}}
            for c, r in report.get("columns", {}).items()]
    publish(f"{p.dataset}-validation", markdown=(
        f"## Validation of `{label}`\n\nrows in: {report['rows_in']}, rows out: {report['rows_out']}, "
        f"dropped: {report['rows_dropped']}; Great Expectations success: {report['gx']['success']}"),
        table=rows)
    return report
