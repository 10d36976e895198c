"""The releases a lifetime budget still allows (pipelines/privacy/runway.py) and when a schedule runs the last of
them (pipelines/schedules.py), stated by the budget stage before any row is read."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import pytest

from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import GaussianEvent, LaplaceEvent
from pipelines.privacy.runway import releases_left
from pipelines.schedules import run_dates, runway, runway_sentence

DELTA = 1e-5
LAPLACE = LaplaceEvent(
    scale=1.0, l1_sensitivity=1.0
)  # ε = 1 each; k of them compose to k·ε within 10⁻³ under PLD at small k


@pytest.mark.parametrize(
    "lifetime, spent, expected", [(0.5, 0, 0), (1.0, 0, 1), (2.5, 0, 2), (2.5, 1, 1), (10.0, 0, 10)]
)
def test_pure_epsilon_runs_fit_as_their_sum(lifetime, spent, expected):
    """k runs of one ε = 1 Laplace step fit lifetime L when k ≤ L (PLD of k such steps is k within 10⁻³ here)."""
    assert epsilon_pld([LAPLACE] * 3, DELTA) == pytest.approx(3.0, abs=1e-3)
    assert releases_left([LAPLACE] * spent, [LAPLACE], DELTA, lifetime) == expected


@pytest.mark.slow
def test_the_count_is_the_largest_that_fits_and_stops_at_its_cap():
    """Gaussian runs compose sub-additively: the count is exactly the k at which the ledger's own composition passes
    the lifetime, found by doubling and bisection; beyond `most` the count is `most`."""
    run = [GaussianEvent(sigma=3.0, l2_sensitivity=1.0)]
    k = releases_left([], run, DELTA, 10.0, most=200)
    assert epsilon_pld(run * k, DELTA) <= 10.0 < epsilon_pld(run * (k + 1), DELTA)
    assert k > 10.0 / epsilon_pld(run, DELTA)  # more than the plain sum allows
    assert releases_left([], run, DELTA, 10.0, most=5) == 5 and releases_left([], [], DELTA, 1.0, most=7) == 7


def test_a_cron_schedule_states_when_its_last_possible_release_runs():
    now = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
    nightly = {"name": "bc-nightly", "params": "params.yaml", "cron": "0 2 * * *", "timezone": "UTC"}
    assert run_dates(nightly, 3, now)[-1] == datetime(2026, 12, 4, 2, 0, tzinfo=timezone.utc)
    assert run_dates({"name": "i", "params": "p", "interval": 3600}, 2, now)[-1] == datetime(
        2026, 12, 1, 14, 0, tzinfo=timezone.utc
    )
    plan = runway(3, 20, nightly, now)
    assert plan == {
        "releases_left": 3,
        "at_least": False,
        "deployment": "bc-nightly",
        "last_release": "2026-12-04T02:00:00+00:00",
    }
    assert "allows 3 further releases" in runway_sentence("bc", plan) and "2026-12-04T02:00" in runway_sentence(
        "bc", plan
    )
    assert runway(20, 20, nightly, now)["last_release"] is None and "at least 20" in runway_sentence(
        "bc", runway(20, 20, None, now)
    )


@pytest.mark.slow
def test_the_budget_stage_states_the_runway_and_warns_when_it_is_short(tmp_path, caplog):
    """Before any row is read: the budget summary holds the count (the largest k whose k further runs fit after
    this one, under the ledger's composition), the deployment of schedules.yaml that releases the data set and the
    date of its last possible run; below privacy.warn_releases_left the run's log says so."""
    from pipelines.config import load_params
    from tasks import common
    from tasks.budget import allocation, budget
    from support.project import make_root, run_stages

    root = make_root(
        tmp_path,
        {
            "generators": ["aim"],
            "weights": {"generators": []},
            "release": {"select": "auto"},
            "privacy": {"lifetime_epsilon": 2.0},
        },
    )
    (root / "schedules.yaml").write_text(
        "deployments:\n  - {name: bc-nightly, params: params.yaml, cron: '0 2 * * *', timezone: UTC}\n"
    )
    run_stages(root, "prepare")
    params = load_params(root / "params.yaml")
    with caplog.at_level(logging.WARNING):
        summary = budget(params, root)
    k = summary["releases_left"]
    alloc, _ = allocation(params, root)
    spent = common.ledger(params, root).effective_events("breast_cancer")
    this_run = [e for name, part in alloc.parts.items() if name != "prepare" for e in part.events]
    assert epsilon_pld([*spent, *this_run, *alloc.events * k], DELTA) <= 2.0
    assert epsilon_pld([*spent, *this_run, *alloc.events * (k + 1)], DELTA) > 2.0
    assert 1 <= k < 3 and not summary["at_least"] and summary["deployment"] == "bc-nightly"
    assert datetime.fromisoformat(summary["last_release"]).hour == 2
    assert any(
        f"allows {k} further releases" in r.getMessage() and "warn_releases_left = 3" in r.getMessage()
        for r in caplog.records
    )
