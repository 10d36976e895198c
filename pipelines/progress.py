"""Training progress: generators report (phase, step, total); the caller decides where it goes.

`pipelines` must not import Prefect, so a training loop calls `report(...)` and the task that runs it
(tasks/train.py) installs a sink with `reporting(sink)`: a log line and a Prefect progress artefact
in a flow run, nothing under plain library use. Reports are thinned to about `UPDATES` per phase.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

UPDATES = 20
Sink = Callable[[str, int, int], None]
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
