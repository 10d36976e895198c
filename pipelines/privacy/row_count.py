"""The public training row count n̂: the schema's documented count, or a discrete-Laplace-noised count in the ledger.

The training row count is private under add/remove-one, so every plan, sample rate q = B/n and divisor
downstream uses n̂ (tasks/prepare.py writes it to layout.json as `rows_public`, with its source).
"""
from __future__ import annotations

from typing import Any, Callable

from pipelines.data.schema import Schema
from pipelines.privacy.events import DiscreteLaplaceEvent
from pipelines.privacy.ledger import LedgerSession
from pipelines.privacy.mechanisms import discrete_laplace_mechanism
from pipelines.privacy.noise import NoiseSource


def count_event(epsilon: float) -> DiscreteLaplaceEvent:
    """The noisy training row count's event: discrete Laplace Lap_ℤ(1/ε) on a count.

    Sensitivity: under add/remove-one, a record added to (removed from) the table lands in the training set
    or in the holdout by its own keyed hash alone, so the training count changes by 0 or 1: Δ₁ = 1. Discrete
    Laplace noise P(y) ∝ e^{−ε|y|} on ℤ, drawn exactly (`discrete_laplace_mechanism`), makes the released integer
    count ε-DP (the mass ratio of any output is ≤ e^{ε·1}); the floor at 1 is post-processing. A float Laplace
    by inverse CDF would leak the count through its low-order bits (issue 28, item 4).
    """
    return DiscreteLaplaceEvent(scale=1.0 / float(epsilon), sensitivity=1, query="training row count")


def public_row_count(sch: Schema, params: dict[str, Any], session: LedgerSession | None,
                     count_rows: Callable[[], int], noise: NoiseSource) -> tuple[int, str]:
    """(n̂, its source). With the schema's `rows`: round(count·(1 − holdout_fraction)), data-independent, no
    ledger event (`session` may be None). Without: reserve `count_event` in `session` before `count_rows()`
    reads the count, release max(1, count + Lap_ℤ(1/ε)) and record the event, the noise drawn
    from `noise` (keyed or OS entropy; a `noise_seed` in it, from `dataset.noise_seed`, is for tests only)."""
    holdout_fraction = float(params["dataset"]["holdout_fraction"])
    if sch.rows is not None:
        n_rows = sch.rows.train_count(holdout_fraction)
        return n_rows, (f"schema rows.count {sch.rows.count} × (1 − holdout_fraction {holdout_fraction:g}), "
                       f"documented: {sch.rows.source}")
    if session is None:
        raise ValueError("the schema declares no public rows: the noisy count needs a ledger session")
    epsilon = float(params["privacy"]["row_count_epsilon"])
    planned = count_event(epsilon)
    session.reserve([planned])
    noisy, event = discrete_laplace_mechanism(int(count_rows()), planned.sensitivity, planned.scale,
                                              noise.streams(private=True, seed=0).numpy("prepare:row_count"),
                                              query=planned.query)
    session.record([event])
    n_rows = max(1, int(noisy))
    return n_rows, (f"training row count + discrete Laplace(1/ε), ε = privacy.row_count_epsilon = {epsilon:g} "
                   f"(ledger stage 'prepare', run {session.run_id})")
