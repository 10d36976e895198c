"""How many further releases a lifetime budget allows: what a steward plans a schedule against.

A scheduled release on rows that change each period spends its whole plan again each run (a rerun on unchanged
rows reuses what was paid and spends nothing). The number of further runs that fit is

    k* = max {k ≥ 0 : ε_PLD(spent ∪ k × run) ≤ lifetime},

composed by the ledger's own accountant (`accountant.epsilon_pld`, the number `Ledger.reserve` enforces), so a
schedule stops being able to run exactly when this count says. ε_PLD grows with k (each added run is a further
mechanism on the same rows), so doubling then bisection finds k*; public facts only (the ledger's events and the
run's plan), no row is read.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import Event

MOST = 20  # the count is searched up to this many further runs ("at least MOST" above it): its cost grows with it


def releases_left(spent: Sequence[Event], run: Sequence[Event], delta: float, lifetime: float, most: int = MOST) -> int:
    """k* of the module docstring, at most `most`: how many more runs of `run` fit the `lifetime` ε after `spent`."""

    def fits(k: int) -> bool:
        return epsilon_pld([*spent, *(e for _ in range(k) for e in run)], delta) <= lifetime

    if not run or not fits(1):
        return most if not run else 0
    low, high = 1, 2
    while high <= most and fits(high):
        low, high = high, 2 * high
    if high > most:
        if fits(most):
            return most
        high = most
    while high - low > 1:  # fits(low), not fits(high)
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low
