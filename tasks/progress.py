"""Where training and evaluation progress shows up; pipelines.progress only reports (phase, step, total).

- In a Prefect flow or task run: an INFO line on the run logger at each report ('train@dpwgan: dpwgan step
  20/40 (50%, ETA 0:00:12)': the Prefect UI's logs and Prefect's console) and one progress artefact per stage,
  moved to the current phase's fraction, its description naming the phase and the ETA. No bar: Prefect's
  console handler writes to the same terminal, and a live display under its lines would tear.
- Outside Prefect (`synthrelease stage`, what DVC runs) on a terminal: a rich bar per phase on stderr (steps,
  elapsed time, ETA), the training loops' loss lines printed above the bars.
- Outside Prefect, not on a terminal (DVC under CI, a pipe, a log file): no bar and no ANSI codes; one plain
  line as each quarter of a phase completes, beside the loss lines.

The ETA of a phase is linear in its steps: the time since the phase began (the previous report, or the start of
the stage for its first phase) times the steps left over the steps done.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from pipelines.progress import TRAINING_LOG, reporting
from tasks.artifacts import _in_prefect_run, _key

_now = time.monotonic
QUARTERS = 4  # plain lines per phase off a terminal


def clock(seconds: float | None) -> str:
    """h:mm:ss, or '-:--:--' while unknown (rich's notation)."""
    if seconds is None:
        return "-:--:--"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class StageProgress:
    """Sink for pipelines.progress for one stage (e.g. 'train@dpwgan'): renders each report as the module
    docstring says. `bars` is the rich Progress on a terminal outside Prefect, else None."""

    def __init__(self, key: str, stage: str, console: Console, bars: Progress | None) -> None:
        self.key, self.stage, self.console, self.bars = key, stage, console, bars
        self.in_prefect = _in_prefect_run()
        self.logger = run_logger()
        self.artifact_id = None
        self.phase: str | None = None
        self.phase_start = self.last = _now()
        self.step = 0
        self.tasks: dict[str, TaskID] = {}

    def eta(self, phase: str, step: int, total: int) -> float | None:
        """Seconds left in `phase` after `step` of `total` (linear in steps); None before the first step."""
        now = _now()
        if phase != self.phase:
            self.phase, self.phase_start = phase, self.last
        self.last = now
        return (now - self.phase_start) / step * (total - step) if step > 0 else None

    def __call__(self, phase: str, step: int, total: int) -> None:
        previous = self.step if phase == self.phase else 0
        eta = self.eta(phase, step, total)
        self.step = step
        status = f"{self.stage}: {phase} step {step}/{total} ({100 * step / total:.0f}%, ETA {clock(eta)})"
        if self.in_prefect:
            self.logger.info(status)
            self.publish(phase, step, total, status)
        elif self.bars is not None:
            if phase not in self.tasks:
                self.tasks[phase] = self.bars.add_task(f"{self.stage} {phase}", total=total, eta=clock(eta))
            self.bars.update(self.tasks[phase], completed=step, total=total, eta=clock(eta))
        elif QUARTERS * step // total > QUARTERS * previous // total:
            self.console.print(status, markup=False, highlight=False, soft_wrap=True)

    def publish(self, phase: str, step: int, total: int, status: str) -> None:
        """The stage's progress artefact at the phase's fraction, `status` as its description."""
        from prefect.artifacts import create_progress_artifact, update_progress_artifact

        percent = 100.0 * step / total
        if self.artifact_id is None:
            self.artifact_id = create_progress_artifact(percent, key=_key(self.key), description=status)
        else:
            update_progress_artifact(self.artifact_id, percent, description=status)


class ConsoleLines(logging.Handler):
    """The training loops' loss lines on `console`: above the live bars on a terminal, plain lines elsewhere."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        self.console.print(self.format(record), markup=False, highlight=False, soft_wrap=True)


def progress_bars(console: Console) -> Progress:
    """One bar per phase: description, bar, steps done/total, elapsed, ETA (StageProgress's, in the task's
    `eta` field: rich's own estimate needs two reports within 30 s, which slow phases never give)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        TextColumn("ETA {task.fields[eta]}"),
        console=console,
        redirect_stdout=False,
        redirect_stderr=False,
    )


@contextmanager
def stage_progress(key: str, stage: str, console: Console | None = None) -> Iterator[StageProgress]:
    """Route the progress reports of this block (pipelines.progress) and the training loops' loss lines
    (pipelines.progress.detail) as the module docstring says; `console` defaults to stderr's."""
    console = console or Console(stderr=True)
    bars = progress_bars(console) if console.is_terminal and not _in_prefect_run() else None
    sink = StageProgress(key, stage, console, bars)
    handler = ConsoleLines(console)
    level, propagate = TRAINING_LOG.level, TRAINING_LOG.propagate
    TRAINING_LOG.addHandler(handler)
    TRAINING_LOG.setLevel(logging.INFO)
    TRAINING_LOG.propagate = False  # one line each, not repeated by a root handler (Prefect's console)
    try:
        if bars is not None:
            bars.start()
        with reporting(sink):
            yield sink
    finally:
        if bars is not None:
            bars.stop()
        TRAINING_LOG.removeHandler(handler)
        TRAINING_LOG.setLevel(level)
        TRAINING_LOG.propagate = propagate


def run_logger() -> logging.Logger | logging.LoggerAdapter:
    if _in_prefect_run():
        from prefect import get_run_logger

        return get_run_logger()
    return logging.getLogger("synthrelease.progress")
