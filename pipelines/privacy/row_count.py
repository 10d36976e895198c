"""The public training row count n̂: the schema's documented count (checked against a noisy count), or a
discrete-Laplace-noised count in the ledger.

The training row count is private under add/remove-one, so every plan, sample rate q = B/n and divisor
downstream uses n̂ (tasks/prepare.py writes it to layout.json as `rows_public`, with its source). A documented
count that no longer describes the rows (an extract of the documented table, rows dropped by validation) would
make every generator plan for the wrong table, so prepare also releases a noisy count, charged, and stops when the
two disagree beyond what the noise, the keyed split and the tolerated drop explain (`contradiction_slack`).
"""

from __future__ import annotations

import math
from typing import Callable

from pipelines.config import PARAMS_FILE
from pipelines.data.schema import Schema
from pipelines.errors import InputError
from pipelines.privacy.events import DiscreteLaplaceEvent
from pipelines.privacy.ledger import LedgerSession
from pipelines.privacy.mechanisms import discrete_laplace_mechanism
from pipelines.privacy.noise import NoiseSource

FALSE_ALARM = 1e-4  # the check's chance of stopping a run whose documented count is right (each of noise, split)
SPLIT_SDS = 5.0  # the split's binomial spread allowed: P(|Z| > 5) < 1e-6


def count_event(epsilon: float, max_rows: int = 1) -> DiscreteLaplaceEvent:
    """The noisy training row count's event: discrete Laplace Lap_ℤ(k/ε) on a count, k = `max_rows`.

    Sensitivity: under add/remove one privacy unit, the unit's rows (at most k after bounding, one without a
    declared unit) land in the training set or in the holdout by the unit's own keyed hash alone
    (pipelines/data/units.py; a row's own hash without a unit), so the training count changes by 0 to k:
    Δ₁ = k. Discrete Laplace noise P(y) ∝ e^{−ε|y|/k} on ℤ, drawn exactly (`discrete_laplace_mechanism`), makes
    the released integer count ε-DP (the mass ratio of any output is ≤ e^{ε·k/k}); the floor at 1 and the
    documented count's check are post-processing. A float Laplace by inverse CDF would leak the count through
    its low-order bits.
    """
    return DiscreteLaplaceEvent(scale=max_rows / float(epsilon), sensitivity=int(max_rows), query="training row count")


def tail_bound(epsilon: float, max_rows: int = 1) -> float:
    """t = k·ln(1/FALSE_ALARM)/ε: one side's tail of Lap_ℤ(k/ε), P(Z ≥ t) ≤ e^{−εt/k} = FALSE_ALARM (184 at
    ε = 0.05, k = 1)."""
    return max_rows * math.log(1.0 / FALSE_ALARM) / float(epsilon)


def contradiction_slack(
    count: int, holdout_fraction: float, epsilon: float, max_dropped_fraction: float, loss_epsilon: float
) -> float:
    """How far the noisy training count may lie from the documented n̂ = round(count·(1 − h)) before the
    documented count is contradicted; public facts only, so the check is post-processing of the noisy count:
    - the noise: P(|Lap_ℤ(1/ε)| ≥ t) ≤ e^{−ε t}, so t = `tail_bound(ε)`;
    - the keyed split: each of the `count` rows is a training row with probability 1 − h independently, so the
      training count's standard deviation is √(count·h·(1 − h)); SPLIT_SDS of them;
    - validation's tolerated drop: `max_dropped_fraction` of the rows read plus the margin of the DP row-loss
      test at `loss_epsilon` (pipelines/privacy/row_loss.py, which goes on below it), in training rows, and the
      rounding of n̂ (1 row)."""
    split = SPLIT_SDS * math.sqrt(count * holdout_fraction * (1.0 - holdout_fraction))
    dropped = (max_dropped_fraction * count + tail_bound(loss_epsilon)) * (1.0 - holdout_fraction)
    return tail_bound(epsilon) + split + dropped + 1.0


def noisy_count(
    session: LedgerSession, epsilon: float, count_rows: Callable[[], int], noise: NoiseSource, max_rows: int = 1
) -> int:
    """The training row count + Lap_ℤ(k/ε) (`count_event`, k = `max_rows`), reserved in `session` before
    `count_rows()` reads the rows and recorded after; the noise drawn from `noise` (keyed or OS entropy; a
    `noise_seed` in it, from `dataset.noise_seed`, is for tests only)."""
    planned = count_event(epsilon, max_rows)
    session.reserve([planned])
    noisy, event = discrete_laplace_mechanism(
        int(count_rows()),
        planned.sensitivity,
        planned.scale,
        noise.streams(private=True, seed=0).numpy("prepare:row_count"),
        query=planned.query,
    )
    session.record([event])
    return int(noisy)


def public_row_count(
    sch: Schema,
    noisy: Callable[[], int],
    holdout_fraction: float,
    epsilon: float | None,
    max_dropped_fraction: float,
    loss_epsilon: float,
    schema_file: str = "",
) -> tuple[int, str]:
    """(n̂, its source). `noisy()` gives the training row count + Lap_ℤ(1/ε) (`noisy_count`, or the same count
    paid for by an earlier run on the same rows: tasks/prepare.py); it is called only when a count is released.
    `epsilon` is privacy.row_count_epsilon; `max_dropped_fraction` and `loss_epsilon` (privacy.row_loss_epsilon)
    are validation's tolerated drop (`contradiction_slack`).
    - With the schema's `rows`: n̂ = round(count·(1 − holdout_fraction)), data-independent. Unless
      `epsilon` is None, the noisy count checks it: an InputError when |noisy − n̂| >
      `contradiction_slack` (the spend is recorded; nothing is written).
    - Without, or with a declared privacy unit (bounding changes the rows the documented count describes):
      n̂ = max(1, noisy count)."""
    if sch.rows is None or sch.unit is not None:  # bounding a unit's rows changes the documented count
        if epsilon is None:
            raise ValueError("the schema declares no public rows: the noisy count needs ε")
        k = sch.max_rows
        return max(1, noisy()), (
            f"training row count + discrete Laplace({'' if k == 1 else k}/ε), ε = "
            f"privacy.row_count_epsilon = {epsilon:g} (ledger stage 'prepare')"
        )
    n_rows = sch.rows.train_count(holdout_fraction)
    source = (
        f"schema rows.count {sch.rows.count} × (1 − holdout_fraction {holdout_fraction:g}), "
        f"documented: {sch.rows.source}"
    )
    if epsilon is None:
        return n_rows, source
    count = noisy()
    slack = contradiction_slack(sch.rows.count, holdout_fraction, float(epsilon), max_dropped_fraction, loss_epsilon)
    if abs(count - n_rows) > slack:
        raise InputError(
            f"rows.count {sch.rows.count} documents {n_rows} training rows, but the table prepare read has about "
            f"{max(count, 0)} (a noisy count, privacy.row_count_epsilon = {epsilon:g} spent and recorded in the "
            f"ledger): more apart than the noise, the keyed split and the tolerated drop explain ({slack:.0f} rows). "
            "Every plan and divisor would use the documented count.",
            file=schema_file or None,
            fix="set 'rows: {count, source}' to the documented size of the table you release (an extract or a sample "
            "has its own size), or remove 'rows:' so that prepare releases a noisy count as n̂; to trust the "
            f"documented count without this check, set 'privacy.row_count_epsilon: null' in {PARAMS_FILE}.",
        )
    return n_rows, source + f"; checked against a noisy count (ε = {epsilon:g}, ledger stage 'prepare')"
