"""Progress rendering (tasks/progress.py): a bar with an ETA on a terminal, plain lines without ANSI codes
elsewhere, the run log and one progress artefact in a Prefect run; library code only reports."""

from __future__ import annotations

import itertools
import logging
from io import StringIO

import pytest
from rich.console import Console

import tasks.progress as rendering
from pipelines.progress import Steps, TrainingLog


@pytest.fixture
def clock(monkeypatch):
    """Every reading of the clock is 1 s after the previous one."""
    ticks = itertools.count(100.0, 1.0)
    monkeypatch.setattr(rendering, "_now", lambda: next(ticks))


def train(steps: int = 40, then=lambda step: None) -> None:
    log = TrainingLog("dpwgan", steps)
    for step in range(1, steps + 1):
        if log.step(step):
            log.line(step, f"  loss {step / 10:.1f}")
        then(step)


def test_terminal_shows_a_bar_with_an_eta(clock):
    out, halfway = StringIO(), []
    console = Console(force_terminal=True, file=out, width=120, color_system="standard")
    with rendering.stage_progress("bc-dpwgan-train-progress", "train@dpwgan", console=console) as sink:

        def snapshot(step: int) -> None:
            if step == 20:
                sink.bars.refresh()
                halfway.append(out.getvalue().rsplit("train@dpwgan dpwgan", 1)[1])

        train(then=snapshot)
    text = out.getvalue()
    assert "\x1b[" in text and "━" in text  # a live bar, in colour
    # 11 clock readings since the stage began (1 s each) for 20 of 40 steps: 11 s left, linear in steps
    assert "20/40" in halfway[0] and "50%" in halfway[0] and "ETA 0:00:11" in halfway[0]
    final = text.rsplit("train@dpwgan dpwgan", 1)[1]
    assert "40/40" in final and "100%" in final and "ETA 0:00:00" in final
    assert "dpwgan step 40/40  loss 4.0" in text  # loss lines printed above the bars


def test_no_terminal_gets_plain_quarter_lines_without_ansi(clock):
    out = StringIO()
    console = Console(file=out, width=80)  # a pipe / log file (DVC under CI)
    with rendering.stage_progress("bc-dpwgan-train-progress", "train@dpwgan", console=console):
        train()
        steps = Steps("attacks", 8)
        for _ in range(8):
            steps.done(None)
    text = out.getvalue()
    assert "\x1b" not in text and "━" not in text
    lines = text.splitlines()
    progress = [line for line in lines if line.startswith("train@dpwgan:")]
    assert [line.split(" (")[0] for line in progress] == [
        "train@dpwgan: dpwgan step 10/40",
        "train@dpwgan: dpwgan step 20/40",
        "train@dpwgan: dpwgan step 30/40",
        "train@dpwgan: dpwgan step 40/40",
        "train@dpwgan: attacks step 2/8",
        "train@dpwgan: attacks step 4/8",
        "train@dpwgan: attacks step 6/8",
        "train@dpwgan: attacks step 8/8",
    ]
    assert progress[1].endswith("(50%, ETA 0:00:11)")  # 11 s for 20 of 40 steps: 11 s left
    assert sum("loss" in line for line in lines) == 10  # the loss lines, one per line (no wrapping)


def test_prefect_run_logs_and_moves_one_progress_artefact(clock, monkeypatch, caplog):
    import prefect.artifacts

    calls = []
    monkeypatch.setattr(rendering, "_in_prefect_run", lambda: True)
    monkeypatch.setattr(rendering, "run_logger", lambda: logging.getLogger("test.run"))
    monkeypatch.setattr(
        prefect.artifacts,
        "create_progress_artifact",
        lambda progress, key, description: calls.append(("create", key, progress, description)) or "a1",
    )
    monkeypatch.setattr(
        prefect.artifacts,
        "update_progress_artifact",
        lambda artifact_id, progress, description: calls.append((artifact_id, progress, description)),
    )
    out = StringIO()
    caplog.set_level(logging.INFO, logger="test.run")
    with rendering.stage_progress(
        "bc-dpwgan-train-progress", "train@dpwgan", console=Console(force_terminal=True, file=out, width=120)
    ):
        train()
    assert calls[0][:3] == ("create", "bc-dpwgan-train-progress", 2.5)
    assert [c[0] for c in calls[1:]] == ["a1"] * (len(calls) - 1) and calls[-1][1] == 100.0
    assert [c[-2] for c in calls] == sorted(c[-2] for c in calls)  # the fraction only grows
    assert calls[10][2] == "train@dpwgan: dpwgan step 20/40 (50%, ETA 0:00:11)"  # reports: 1, 2, 4, ..., 40
    assert [r.getMessage() for r in caplog.records][0] == "train@dpwgan: dpwgan step 1/40 (2%, ETA 0:00:39)"
    assert "━" not in out.getvalue()  # no bar under Prefect's console lines
