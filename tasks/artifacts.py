"""Publish Prefect artefacts when running inside a flow; a no-op under the CLI/DVC."""

from __future__ import annotations

import sys
from typing import Any


def _in_prefect_run() -> bool:
    """Inside a Prefect flow or task run. A stage run by `dvc repro` never imports Prefect (flows/cli.py calls the
    task's plain function), and a process that has not imported it is in no run: it is not imported here for that."""
    if "prefect" not in sys.modules:
        return False
    from prefect.context import FlowRunContext, TaskRunContext

    return TaskRunContext.get() is not None or FlowRunContext.get() is not None


def _key(text: str) -> str:
    """Prefect artefact keys allow lowercase letters, digits and dashes only."""
    return "".join(c if c.isalnum() else "-" for c in text.lower())


def publish(
    key: str, markdown: str | None = None, table: list[dict[str, Any]] | None = None, description: str | None = None
) -> None:
    if not _in_prefect_run():
        return
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    if markdown is not None:
        create_markdown_artifact(markdown=markdown, key=_key(key), description=description)
    if table is not None:
        create_table_artifact(table=table, key=_key(key + "-table"), description=description)
