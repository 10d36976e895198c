"""Where a training's progress shows up in Prefect: the run log and one progress artefact per stage."""
from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from typing import Iterator

from pipelines.progress import TRAINING_LOG, reporting
from tasks.artifacts import _in_prefect_run, _key


class StageProgress:
    """Sink for pipelines.progress: logs `stage: phase step/total` and moves one progress artefact to
    the current phase's step fraction (its description names the phase)."""

    def __init__(self, key: str, stage: str) -> None:
        self.key, self.stage = key, stage
        self.artifact_id = None
        self.logger = run_logger()

    def __call__(self, phase: str, step: int, total: int) -> None:
        self.logger.info("%s: %s step %d/%d", self.stage, phase, step, total)
        if not _in_prefect_run():
            return
        from prefect.artifacts import create_progress_artifact, update_progress_artifact
        percent = 100.0 * step / total
        description = f"{self.stage}: {phase} step {step}/{total}"
        if self.artifact_id is None:
            self.artifact_id = create_progress_artifact(percent, key=_key(self.key), description=description)
        else:
            update_progress_artifact(self.artifact_id, percent, description=description)


@contextmanager
def stage_progress(key: str, stage: str) -> Iterator[StageProgress]:
    """Route the training loops' progress reports of this block to the run log and a progress artefact, and
    their loss lines (pipelines.progress.detail) to stderr."""
    sink = StageProgress(key, stage)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level, propagate = TRAINING_LOG.level, TRAINING_LOG.propagate
    TRAINING_LOG.addHandler(handler)
    TRAINING_LOG.setLevel(logging.INFO)
    TRAINING_LOG.propagate = False  # one line each, not repeated by a root handler (Prefect's console)
    try:
        with reporting(sink):
            yield sink
    finally:
        TRAINING_LOG.removeHandler(handler)
        TRAINING_LOG.setLevel(level)
        TRAINING_LOG.propagate = propagate


def run_logger() -> logging.Logger | logging.LoggerAdapter:
    if _in_prefect_run():
        from prefect import get_run_logger
        return get_run_logger()
    return logging.getLogger("synthrelease.progress")
