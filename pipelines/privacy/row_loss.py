"""Whether validation lost too many rows for a release: a differentially private stop/continue bit.

The rows a schema's policies drop or clip are rarely a random sample (a null cause of death marks the patients
alive), so a release of the rest may misdescribe the table, and `dataset.max_dropped_fraction` is the share the
steward tolerates. Whether the release then happens at all is published (a scheduled release that does not
appear is a bit), so the decision is a DP mechanism charged to the ledger, never an exact function of the rows:

    q = L − ⌈f · N⌉,      stop  ⇔  q + Z > t,      Z ~ Lap_ℤ(1/ε),      t = ln(1/FALSE_ALARM) / ε  (`tail_bound`)

with L the rows validation dropped or clipped, N the rows it read and f = `dataset.max_dropped_fraction`.
A table within the tolerated share (q ≤ 0) goes on with probability at least 1 − FALSE_ALARM; one that loses
more than the tolerated share by t rows or more stops with probability at least one half.

Sensitivity. Under add/remove one row, N moves by 1 and L by 1 or 0 (validation drops or clips a row by that
row's own values alone, and counts a row both dropped and clipped once, as dropped). For 0 ≤ f ≤ 1,
⌈f·N⌉ is non-decreasing in N and ⌈f·(N + 1)⌉ ≤ ⌈f·N⌉ + 1, so it moves by 0 or 1 in the same direction as N.
q therefore moves by (0 or 1) − (0 or 1) ∈ {−1, 0, 1}: Δ₁ = 1. ⌈f·N⌉ is computed exactly (f as the fraction
of the decimal the steward wrote), so the bound holds for the numbers the code computes. Discrete Laplace noise
of scale 1/ε on an integer query of Δ₁ = 1 is ε-DP (`mechanisms.discrete_laplace_mechanism`), and the bit is
post-processing.

With a declared privacy unit (pipelines/data/units.py) N and L count the bounded rows (each unit's at most k =
max_rows rows, bounded before validation counts anything). Adding or removing one unit moves N by j ≤ k and L
by some i ≤ j in the same direction; ⌈f·(N + j)⌉ − ⌈f·N⌉ ∈ [0, j] by the step above applied j times, so q moves
by at most k: Δ₁ = k, noise Lap_ℤ(k/ε) and margin t = k·ln(1/FALSE_ALARM)/ε.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pipelines.privacy.events import DiscreteLaplaceEvent
from pipelines.privacy.ledger import LedgerSession
from pipelines.privacy.mechanisms import discrete_laplace_mechanism
from pipelines.privacy.noise import NoiseSource
from pipelines.privacy.row_count import tail_bound

QUERY = "rows validation dropped or clipped beyond the tolerated share"


def loss_event(epsilon: float, max_rows: int = 1) -> DiscreteLaplaceEvent:
    """The test's event: Lap_ℤ(k/ε) on an integer query of Δ₁ = k = `max_rows` (module docstring)."""
    return DiscreteLaplaceEvent(scale=max_rows / float(epsilon), sensitivity=int(max_rows), query=QUERY)


def excess(lost: int, rows_in: int, max_fraction: float) -> int:
    """q = L − ⌈f·N⌉: the rows lost beyond the tolerated share, with ⌈f·N⌉ in exact arithmetic on f as written
    (0.02 is 1/50: 2 % of 1,000 rows tolerates 20)."""
    return int(lost) - math.ceil(Fraction(repr(float(max_fraction))) * int(rows_in))


@dataclass(frozen=True)
class RowLoss:
    """The test's outcome: the bit, the noisy excess it was read from, the margin, the event to record."""

    stop: bool
    noisy_excess: int
    margin: float
    event: DiscreteLaplaceEvent

    def to_dict(self) -> dict[str, Any]:
        return {
            "stop": self.stop,
            "noisy_excess": self.noisy_excess,
            "margin": self.margin,
            "epsilon": self.event.epsilon,
            "query": QUERY,
        }


def row_loss_test(
    session: LedgerSession,
    epsilon: float,
    counts: Callable[[], tuple[int, int]],
    max_fraction: float,
    noise: NoiseSource,
    max_rows: int = 1,
) -> RowLoss:
    """The stop bit of the module docstring: `loss_event` reserved in `session` before `counts()` reads the
    validation's (lost, read) row counts, recorded after; the noise from `noise` (keyed or OS entropy); k =
    `max_rows` rows per privacy unit."""
    planned = loss_event(epsilon, max_rows)
    session.reserve([planned])
    lost, rows_in = counts()
    noisy, event = discrete_laplace_mechanism(
        excess(lost, rows_in, max_fraction),
        planned.sensitivity,
        planned.scale,
        noise.streams(private=True, seed=0).numpy("prepare:row_loss"),
        query=QUERY,
    )
    session.record([event])
    t = tail_bound(epsilon, max_rows)  # P(Z > t) ≤ FALSE_ALARM: a table within the share goes on
    return RowLoss(bool(int(noisy) > t), int(noisy), t, event)
