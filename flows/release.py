"""The release flow: discover -> validate -> prepare -> train@gen (concurrent) -> evaluate@gen -> check@gen (its gates
read evaluate's privacy-risk attacks), and evaluate@gen -> weight@gen (generators in weights.generators);
then release.

Same task functions as `dvc repro` (via flows/cli.py); generators train concurrently, one task each,
on the task runner params.yaml's `orchestration` section picks (threads by default; Dask: flows/runners.py).
Before any training, the budget task divides privacy.release_epsilon across the generators and weights (the
allocation train@gen and weight@gen read) and the run's whole planned spend must fit the lifetime budget
(tasks/budget.py), as the `budget` stage of dvc.yaml does. The baseline task computes what every evaluate@gen
would recompute from real rows alone once, before them (tasks/baseline.py, the `baseline` stage).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import Flow, flow, task
from prefect.context import get_run_context
from prefect.task_runners import ThreadPoolTaskRunner

import tasks.baseline
import tasks.budget
import tasks.check
import tasks.discover
import tasks.evaluate
import tasks.prepare
import tasks.release
import tasks.train
import tasks.validate
import tasks.weight
from flows.runners import concurrent_tasks, task_runner, torch_resources
from pipelines.config import Paths, load_params
from pipelines.runtime import torch_threads
from pipelines.selection import selected

# The stages' plain functions (tasks/, which `dvc repro` calls through flows/cli.py without importing Prefect) as
# Prefect tasks of this flow.
baseline = task(tasks.baseline.baseline, name="baseline")
budget = task(tasks.budget.budget, name="budget")
check = task(tasks.check.check, name="check")
discover = task(tasks.discover.discover_stage, name="discover")
evaluate = task(tasks.evaluate.evaluate, name="evaluate")
prepare = task(tasks.prepare.prepare, name="prepare")
release = task(tasks.release.release, name="release")
train = task(tasks.train.train, name="train")
validate = task(tasks.validate.validate, name="validate")
weight = task(tasks.weight.weight, name="weight")


@flow(name="private-synthetic-release", task_runner=ThreadPoolTaskRunner(max_workers=4), log_prints=True)
def release_flow(params_path: str = "params.yaml", root: str = ".") -> dict[str, Any]:
    """One release run of the generators `release.select` chooses (the budget task selects them, as the budget
    stage does for `dvc repro`; pipelines/selection.py); artefact paths are relative to `root`."""
    base = Path(root).resolve()
    config = load_params(base / params_path)
    torch_threads(concurrent_tasks(config))  # the tasks share this process's cores (pipelines/runtime.py)
    run_id = f"prefect-{get_run_context().flow_run.id}"
    discovered = discover.submit(config, base)
    validated = validate.submit(config, base, wait_for=[discovered])
    prepared = prepare.submit(config, base, wait_for=[validated])
    budget.submit(config, base, wait_for=[prepared]).result()  # a run that cannot fit trains nothing
    chosen = selected(config.generators, Paths(config.dataset.name, base).allocation)  # the budget stage's selection
    trained = {}
    for gen in chosen:  # submitted first: training is the long pole, the workers take it first
        with torch_resources(config):
            trained[gen] = train.with_options(task_run_name=f"train@{gen}").submit(config, gen, run_id, base)
    real_side = baseline.submit(config, base, wait_for=[prepared])  # once, before every evaluate@gen
    evaluated = []
    for gen in chosen:
        with torch_resources(config):
            evaluated.append(
                evaluate.with_options(task_run_name=f"evaluate@{gen}").submit(
                    config, gen, base, wait_for=[trained[gen], real_side]
                )
            )
        checked = check.with_options(task_run_name=f"check@{gen}").submit(
            config, gen, base, run_id, wait_for=[evaluated[-1]]
        )
        if gen in config.weighted(chosen):  # importance weights (tasks/weight.py)
            evaluated.append(
                weight.with_options(task_run_name=f"weight@{gen}").submit(
                    config, gen, run_id, base, wait_for=[evaluated[-1]]
                )
            )
        evaluated.append(checked)
    return release.submit(config, base, wait_for=evaluated).result()


def configured_flow(params_path: str = "params.yaml", root: str = ".") -> Flow:
    """`release_flow` on the task runner that params.yaml's `orchestration` section asks for."""
    return release_flow.with_options(task_runner=task_runner(load_params(Path(root) / params_path)))
