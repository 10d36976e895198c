"""Progress of training and evaluation: library code reports (phase, step, total); the caller decides where it goes.

`pipelines` must not import Prefect and never prints, so a training loop calls `report(...)` (or `TrainingLog`,
or `Steps` for a phase made of unlike steps such as an evaluation's attacks) and the task that runs it
(tasks/train.py, tasks/evaluate.py) installs a sink with `reporting(sink)`: tasks/progress.py renders a bar with
an ETA on a terminal, plain lines elsewhere, and the run log and a Prefect progress artefact in a flow run;
nothing happens under plain library use. Reports are thinned to about `UPDATES` per phase.

A training loop's loss line (about `DETAILS` per phase, when `detail_due`) goes to `detail(message)`: an
INFO record on the `synthrelease.training` logger, which has no handler here; the caller attaches one
(tasks/progress.py: stderr while a stage trains).
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator, TypeVar

UPDATES = 20
DETAILS = 10
TRAINING_LOG = logging.getLogger("synthrelease.training")
Sink = Callable[[str, int, int], None]
T = TypeVar("T")
_sink: ContextVar[Sink | None] = ContextVar("synthrelease_progress_sink", default=None)


def report(phase: str, step: int, total: int) -> None:
    """Step `step` of `total` of training phase `phase` (e.g. 'ppem', 'dp_auto_gan:autoencoder') is done."""
    sink = _sink.get()
    if sink is not None and (step in (1, total) or step % max(1, total // UPDATES) == 0):
        sink(phase, step, total)


@contextmanager
def reporting(sink: Sink) -> Iterator[None]:
    """Send this context's progress reports to `sink(phase, step, total)`."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def detail_due(step: int, total: int) -> bool:
    """Whether step `step` of `total` gets a loss line: every max(1, total // DETAILS) steps and the last."""
    return step % max(1, total // DETAILS) == 0 or step == total


def detail(message: str) -> None:
    """One loss line of a training loop, to the `synthrelease.training` logger (the caller's handler decides
    where it goes). Lines that show statistics of real rows are written only for non-private runs."""
    TRAINING_LOG.info(message)


class TrainingLog:
    """One training phase's progress: every step to the sink (`report`) and, when `detail_due`, a loss line
    '<title> step <step>/<steps><message>  <elapsed>s' to `detail`. `title` defaults to `phase`."""

    def __init__(self, phase: str, steps: int, title: str | None = None) -> None:
        self.phase, self.steps, self.title = phase, steps, phase if title is None else title
        self.start = time.perf_counter()

    def step(self, step: int) -> bool:
        """Report `step` (1-based); True when its loss line is due (callers compute the message only then)."""
        report(self.phase, step, self.steps)
        return detail_due(step, self.steps)

    def line(self, step: int, message: str) -> None:
        """The loss line of `step`; `message` starts with its own separator."""
        detail(f"{self.title} step {step}/{self.steps}{message}  {time.perf_counter() - self.start:.1f}s")


class Steps:
    """A phase of `total` unlike steps (an evaluation's measurements, its attacks): `done(value)` reports the next
    step finished and returns `value`, so a step is counted where its result is used."""

    def __init__(self, phase: str, total: int) -> None:
        self.phase, self.total, self.count = phase, total, 0

    def done(self, value: T) -> T:
        self.count += 1
        report(self.phase, self.count, self.total)
        return value
