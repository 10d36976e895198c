"""The one in-memory ledger session of the unit tests: a stand-in for `pipelines.privacy.ledger`'s budget session
that a generator's `fit`, a DP count or the row-loss test reserves in and records to, so that a test can check
what was reserved, what was recorded, and in which order the ledger calls and the data reads came."""

from __future__ import annotations

from collections.abc import Iterable

from pipelines.privacy.events import Event


class Refused(Exception):
    """The ledger's refusal of a reservation (a session made with refuse=True)."""


class FakeSession:
    """Records the order of ledger calls (and, through GuardedData-like tables, data reads) in `calls`, the last
    reservation in `reserved` and every recorded event in `recorded`; with refuse=True it refuses every
    reservation, as the ledger does when the budget is spent."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.calls: list[str] = []
        self.reserved: list[Event] = []
        self.recorded: list[Event] = []

    def reserve(self, events: Iterable[Event]) -> None:
        self.calls.append("reserve")
        if self.refuse:
            raise Refused("budget exceeded")
        self.reserved = list(events)

    def record(self, events: Iterable[Event]) -> list[int]:
        """Append `events` to `recorded`; the ledger row ids it returns are one per event, counted from 0."""
        self.calls.append("record")
        events = list(events)
        self.recorded.extend(events)
        return list(range(len(events)))
