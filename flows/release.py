"""The release flow: validate -> prepare -> train@gen (concurrent) -> check@gen -> evaluate@gen -> release.

Same task functions as `dvc repro` (via flows/cli.py); generators train concurrently on the
flow's task runner (threads by default).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow
from prefect.context import get_run_context
from prefect.task_runners import ThreadPoolTaskRunner

from pipelines.config import load_params
from tasks.check import check
from tasks.evaluate import evaluate
from tasks.prepare import prepare
from tasks.release import release
from tasks.train import train
from tasks.validate import validate


@flow(name="private-synthetic-release", task_runner=ThreadPoolTaskRunner(max_workers=4), log_prints=True)
def release_flow(params_path: str = "params.yaml", root: str = ".") -> dict[str, Any]:
    """One release run of every configured generator; artefact paths are relative to `root`."""
    base = Path(root).resolve()
    params = load_params(base / params_path)
    run_id = f"prefect-{get_run_context().flow_run.id}"
    validated = validate.submit(params, base)
    prepared = prepare.submit(params, base, wait_for=[validated])
    evaluated = []
    for gen in params["generators"]:
        trained = train.submit(params, gen, run_id, base, wait_for=[prepared])
        checked = check.submit(params, gen, base, wait_for=[trained])
        evaluated.append(evaluate.submit(params, gen, base, wait_for=[checked]))
    return release.submit(params, base, wait_for=evaluated).result()
