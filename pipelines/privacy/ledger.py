"""The append-only privacy ledger: every privacy cost ever paid on a data set, hash-chained.

One table, `privacy_events`, one row per event. A stage first *reserves* its planned events
(status 'planned'; refused with BudgetExceededError if the data set's composed ε would pass its
lifetime budget) and, after training, *records* the actual events (status 'spent'), linked to the
reservation by `reservation_seq` (the seq of the reservation's first planned row).

Effective events of a data set: for every reservation, its spent events if they were recorded,
otherwise its planned events (a run that crashed after reserving may have touched the data, so its
plan counts until actuals arrive). ε is always recomputed from them with the PLD accountant. Non-private
events of an internal-only release (`NonPrivateEvent.internal`) are recorded but not composed into the
budget for external releases (`external`).

Integrity: seq runs 1, 2, 3, … without gaps; row_hash = sha256(prev_hash + canonical JSON of all
other columns), prev_hash = the previous row's row_hash (64 zeros for row 1). Every write happens
in one transaction holding the database's write lock (SQLite: BEGIN IMMEDIATE; PostgreSQL: an
exclusive table lock); the primary key on seq makes two writers that saw the same head collide
rather than fork the chain on any other backend, and such collisions are retried.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from sqlalchemy import (Column, Connection, Integer, MetaData, String, Table, Text, create_engine, event, exc,
                        select)

from pipelines.errors import BudgetExceededError, LedgerIntegrityError
from pipelines.io import canonical_json
from pipelines.privacy.accountant import epsilon_pld, epsilon_rdp
from pipelines.privacy.events import Event, NonPrivateEvent, event_from_dict, event_to_dict

GENESIS_HASH = "0" * 64
HASHED_FIELDS = ("seq", "dataset", "run_id", "stage", "status", "reservation_seq", "event_json", "created_at")
BUSY_TIMEOUT_S = 30.0
_WRITE = "ledger_write"
T = TypeVar("T")

_metadata = MetaData()
privacy_events = Table(
    "privacy_events", _metadata,
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("dataset", String(255), nullable=False, index=True),
    Column("run_id", String(255), nullable=False),
    Column("stage", String(255), nullable=False),
    Column("status", String(16), nullable=False),
    Column("reservation_seq", Integer, nullable=False),
    Column("event_json", Text, nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("row_hash", String(64), nullable=False),
)


def row_hash(prev_hash: str, row: dict) -> str:
    """sha256(prev_hash + canonical JSON of the row's other columns)."""
    payload = prev_hash + canonical_json({k: row[k] for k in HASHED_FIELDS})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Reservation:
    """A granted reservation: its planned rows and what they cost at the time of granting."""
    dataset: str
    run_id: str
    stage: str
    seq: int                      # seq of the first planned row = reservation_seq of all its rows
    row_ids: tuple[int, ...]
    events: tuple[Event, ...]
    delta: float
    epsilon_planned: float        # ε of the planned events alone
    epsilon_after: float          # the data set's ε once they are added


class Ledger:
    """Append-only, hash-chained privacy ledger on SQLite (a plain path) or any SQLAlchemy URL."""

    def __init__(self, url_or_path: str) -> None:
        url_or_path = str(url_or_path)
        if "://" in url_or_path:
            url = url_or_path
        else:
            path = Path(url_or_path).expanduser().resolve()
            path.parent.mkdir(parents=True, exist_ok=True)
            url = f"sqlite:///{path}"
        self.url = url
        if url.startswith("sqlite"):
            self._engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})
            event.listen(self._engine, "connect", _sqlite_manual_transactions)
            event.listen(self._engine, "begin", _sqlite_begin)
        else:
            self._engine = create_engine(url)
        self._transact(lambda conn: _metadata.create_all(conn, checkfirst=True), lock_table=False)

    # -- writing -------------------------------------------------------------------------------

    def reserve(self, dataset: str, run_id: str, stage: str, events: Sequence[Event], delta: float,
                budget_epsilon: float) -> Reservation:
        """Atomically check the data set's budget and append `events` as 'planned' rows.

        Raises BudgetExceededError (nothing written) if ε(effective events + `events`) at `delta`
        exceeds `budget_epsilon`. Internal non-private events are recorded but not composed (`external`).
        """
        events = tuple(events)
        if not events:
            raise ValueError("reserve needs at least one planned event")
        planned = epsilon_pld(events, delta)        # validates the events; needs no lock
        if not (budget_epsilon > 0):
            raise ValueError(f"budget_epsilon must be positive, got {budget_epsilon}")

        def write(conn: Connection) -> Reservation:
            head_seq, head_hash = _head(conn)
            after = _refuse_over_budget(_dataset_rows(conn, dataset), dataset, events, delta, budget_epsilon)
            ids = _append(conn, head_seq, head_hash, dataset, run_id, stage, "planned", head_seq + 1, events)
            return Reservation(dataset, run_id, stage, ids[0], tuple(ids), events, delta, planned, after)

        return self._transact(write)

    def check_budget(self, dataset: str, events: Sequence[Event], delta: float, budget_epsilon: float) -> float:
        """What `reserve` would decide, without writing or locking: ε after `events`, or BudgetExceededError.

        A pre-flight check (a run's whole plan before any stage trains); only `reserve` is atomic.
        """
        return _refuse_over_budget(self.rows(dataset), dataset, tuple(events), delta, budget_epsilon)

    def record(self, reservation: Reservation, events: Sequence[Event]) -> list[int]:
        """Append the actual `events` of `reservation` as 'spent' rows; returns their seqs.

        Raises ValueError if the reservation is unknown, already has spent rows, or if the actual
        events alone cost more than the planned ones alone (by more than 1e-9).
        """
        events = tuple(events)
        if not events:
            raise ValueError("record needs at least one actual event (the plan stays in force otherwise)")
        eps_actual = epsilon_pld(events, reservation.delta)   # validates the events; needs no lock

        def write(conn: Connection) -> list[int]:
            head_seq, head_hash = _head(conn)
            rows = _select(conn, (privacy_events.c.dataset == reservation.dataset)
                           & (privacy_events.c.reservation_seq == reservation.seq))
            planned = [_event(r) for r in rows if r["status"] == "planned"]
            if not planned:
                raise ValueError(f"no reservation with seq {reservation.seq} for data set '{reservation.dataset}'")
            if any(r["status"] == "spent" for r in rows):
                raise ValueError(f"reservation {reservation.seq} of data set '{reservation.dataset}' "
                                 "already has its actual events recorded")
            eps_planned = epsilon_pld(planned, reservation.delta)
            if eps_actual > eps_planned + 1e-9:
                raise ValueError(f"actual events cost ε={eps_actual:.6g} > planned ε={eps_planned:.6g} at "
                                 f"δ={reservation.delta:g} for reservation {reservation.seq}; reserve the real "
                                 "spend before touching data")
            return _append(conn, head_seq, head_hash, reservation.dataset, reservation.run_id, reservation.stage,
                           "spent", reservation.seq, events)

        return self._transact(write)

    def session(self, dataset: str, run_id: str, stage: str, delta: float, budget_epsilon: float,
                internal: bool = False) -> LedgerSession:
        """A `pipelines.generators.base.LedgerSession` bound to one (data set, run, stage); `internal`:
        the stage serves an internal-only release, so its non-private events are marked internal."""
        return LedgerSession(self, dataset, run_id, stage, delta, budget_epsilon, internal)

    # -- reading -------------------------------------------------------------------------------

    def rows(self, dataset: str | None = None) -> list[dict]:
        """All rows (of one data set, if given) in seq order, as dicts of the table's columns."""
        with self._engine.connect() as conn:
            return _dataset_rows(conn, dataset) if dataset is not None else _select(conn)

    def effective_events(self, dataset: str) -> list[Event]:
        """Per reservation: its spent events if recorded, else its planned events; in seq order."""
        return _effective(self.rows(dataset))

    def spent(self, dataset: str, delta: float) -> float:
        """ε at `delta` of the data set's effective events for external releases (PLD accountant)."""
        return epsilon_pld(external(self.effective_events(dataset)), delta)

    def spent_rdp(self, dataset: str, delta: float) -> float:
        """ε at `delta` of the data set's effective events by RDP (cross-check; ≥ `spent`)."""
        return epsilon_rdp(external(self.effective_events(dataset)), delta)

    def verify(self, expect_head: str | None = None) -> dict:
        """Check the whole chain; returns {'rows': n, 'head': last row_hash (64 zeros if empty)}.

        Raises LedgerIntegrityError naming the first bad seq if seqs are not 1..n, a prev_hash does
        not match the previous row_hash (a row was deleted or inserted) or a row_hash does not
        recompute (a row was edited). Deleting the *last* rows leaves a valid shorter chain; only a
        head remembered elsewhere (a release manifest, `expect_head`) detects that.
        """
        prev = GENESIS_HASH
        rows = self.rows()
        for i, row in enumerate(rows, start=1):
            if row["seq"] != i:
                raise LedgerIntegrityError(f"ledger row {i}: expected seq {i}, found seq {row['seq']} "
                                           "(rows deleted or inserted)")
            if row["prev_hash"] != prev:
                raise LedgerIntegrityError(f"ledger row seq {i}: prev_hash does not match row {i - 1}'s row_hash "
                                           "(the chain is broken: a row was deleted, inserted or rewritten)")
            if row_hash(prev, row) != row["row_hash"]:
                raise LedgerIntegrityError(f"ledger row seq {i}: row_hash does not recompute (the row was edited)")
            prev = row["row_hash"]
        if expect_head is not None and prev != expect_head:
            raise LedgerIntegrityError(f"ledger head is {prev} after {len(rows)} rows, expected {expect_head} "
                                       "(rows at the end were deleted, or rows were appended since)")
        return {"rows": len(rows), "head": prev}

    # -- transactions --------------------------------------------------------------------------

    def _transact(self, fn: Callable[[Connection], T], lock_table: bool = True, attempts: int = 5) -> T:
        """Run fn(conn) in one write transaction holding the write lock; retry on lock/seq collisions.

        Any exception rolls the whole transaction back, so a failing append leaves the ledger as it was.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        attempt = 0
        while True:
            try:
                with self._engine.connect() as conn:
                    conn.execution_options(**{_WRITE: True})
                    with conn.begin():
                        if lock_table and self._engine.dialect.name == "postgresql":
                            conn.exec_driver_sql("LOCK TABLE privacy_events IN EXCLUSIVE MODE")
                        return fn(conn)
            except (exc.IntegrityError, exc.OperationalError) as err:
                attempt += 1
                retryable = isinstance(err, exc.IntegrityError) or "locked" in str(err) or "busy" in str(err)
                if not retryable or attempt >= attempts or time.monotonic() > deadline:
                    raise
                time.sleep(0.05 * attempt)


class LedgerSession:
    """What a generator sees of the ledger (the protocol in pipelines.generators.base)."""

    def __init__(self, ledger: Ledger, dataset: str, run_id: str, stage: str, delta: float,
                 budget_epsilon: float, internal: bool = False) -> None:
        self.ledger, self.dataset, self.run_id, self.stage = ledger, dataset, run_id, stage
        self.delta, self.budget_epsilon, self.internal = delta, budget_epsilon, internal
        self.reservation: Reservation | None = None
        self.row_ids: list[int] = []

    def reserve(self, events: list[Event]) -> None:
        """Reserve the stage's planned events (once); raises BudgetExceededError before any data is read."""
        if self.reservation is not None:
            raise ValueError(f"session {self.dataset}/{self.run_id}/{self.stage} already holds reservation "
                             f"{self.reservation.seq}")
        self.reservation = self.ledger.reserve(self.dataset, self.run_id, self.stage, self._mark(events),
                                               self.delta, self.budget_epsilon)

    def record(self, events: list[Event]) -> list[int]:
        """Record the actual events of this session's reservation; returns (and keeps) their row ids."""
        if self.reservation is None:
            raise ValueError("record called before reserve: planned spend must be reserved before data is read")
        self.row_ids = self.ledger.record(self.reservation, self._mark(events))
        return self.row_ids

    def check(self, events: list[Event]) -> float:
        """Dry run of `reserve(events)` (nothing written): ε after them, or BudgetExceededError."""
        return self.ledger.check_budget(self.dataset, self._mark(events), self.delta, self.budget_epsilon)

    def _mark(self, events: Sequence[Event]) -> list[Event]:
        """In an internal session, non-private events become internal ones."""
        if not self.internal:
            return list(events)
        return [replace(e, internal=True) if isinstance(e, NonPrivateEvent) else e for e in events]


# -- helpers ---------------------------------------------------------------------------------------

def _sqlite_manual_transactions(dbapi_connection, _record) -> None:
    # Stop the sqlite3 driver from issuing its own (deferred) BEGIN; `_sqlite_begin` emits ours.
    dbapi_connection.isolation_level = None


def _sqlite_begin(conn: Connection) -> None:
    # Writers take the database write lock up front, so the budget check and the append see and
    # produce one serial history; readers use a deferred transaction (a consistent snapshot).
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")


def _head(conn: Connection) -> tuple[int, str]:
    row = conn.execute(select(privacy_events.c.seq, privacy_events.c.row_hash)
                       .order_by(privacy_events.c.seq.desc()).limit(1)).first()
    return (0, GENESIS_HASH) if row is None else (row.seq, row.row_hash)


def _select(conn: Connection, where=None) -> list[dict]:
    stmt = select(privacy_events).order_by(privacy_events.c.seq)
    if where is not None:
        stmt = stmt.where(where)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def _dataset_rows(conn: Connection, dataset: str) -> list[dict]:
    return _select(conn, privacy_events.c.dataset == dataset)


def _event(row: dict) -> Event:
    return event_from_dict(json.loads(row["event_json"]))


def external(events: Sequence[Event]) -> list[Event]:
    """The events that count against the budget for external releases: all but internal non-private ones."""
    return [e for e in events if not (isinstance(e, NonPrivateEvent) and e.internal)]


def _refuse_over_budget(rows: list[dict], dataset: str, events: Sequence[Event], delta: float,
                        budget_epsilon: float) -> float:
    """ε of the data set's effective `rows` plus `events`; BudgetExceededError if above `budget_epsilon`."""
    current = external(_effective(rows))
    after = epsilon_pld(current + external(events), delta)
    if after > budget_epsilon:
        planned = epsilon_pld(events, delta)
        fix = None if math.isfinite(planned) else (
            "a non-private (epsilon: inf) stage can only serve an internal release: train with a finite "
            "epsilon, or set privacy.internal_release: true in params.yaml if nothing it produces will "
            "leave your organisation")
        raise BudgetExceededError(dataset, epsilon_pld(current, delta), planned, after, budget_epsilon, fix)
    return after


def _effective(rows: list[dict]) -> list[Event]:
    by_reservation: dict[int, dict[str, list[Event]]] = defaultdict(lambda: {"planned": [], "spent": []})
    for row in rows:
        by_reservation[row["reservation_seq"]][row["status"]].append(_event(row))
    return [e for res in sorted(by_reservation) for e in (by_reservation[res]["spent"] or by_reservation[res]["planned"])]


def _append(conn: Connection, head_seq: int, head_hash: str, dataset: str, run_id: str, stage: str, status: str,
            reservation_seq: int, events: Sequence[Event]) -> list[int]:
    created_at = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    rows, prev = [], head_hash
    for i, e in enumerate(events, start=1):
        row = {"seq": head_seq + i, "dataset": dataset, "run_id": run_id, "stage": stage, "status": status,
               "reservation_seq": reservation_seq, "event_json": canonical_json(event_to_dict(e)),
               "created_at": created_at}
        row["prev_hash"], row["row_hash"] = prev, row_hash(prev, row)
        prev = row["row_hash"]
        rows.append(row)
    conn.execute(privacy_events.insert(), rows)
    return [r["seq"] for r in rows]
