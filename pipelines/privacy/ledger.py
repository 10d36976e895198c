"""The append-only privacy ledger: every privacy cost ever paid on a data set, hash-chained.

One table, `privacy_events`, one row per event. A stage first *reserves* its planned events
(status 'planned'; refused with BudgetExceededError if the data set's composed ε would pass its
lifetime budget) and, after training, *records* the actual events (status 'spent'), linked to the
reservation by `reservation_seq` (the seq of the reservation's first planned row).

Populations: one lifetime budget per population of people, whatever tables it is released through.
Every row carries the `population` and the privacy `unit` (the neighbouring relation its events are
accounted at: "row", or "<column><=<max_rows>", pipelines.data.schema.Schema.unit_name) of its table
(`dataset`). A handle learns them by `declare(dataset, population, unit)`; an undeclared table is its
own population with unit "row". A NULL population or unit (rows from before the columns) reads as the
row's own data set and "row". The budget of a table is its population's: reserve, check_budget,
record, effective_events, spent and spent_rdp compose the rows of every table of the population.
A write is refused (InputError, nothing written) when the table's earlier rows carry another
population or unit (the earlier releases were accounted there; a new name starts a new table), or
when the population mixes tables with a declared unit and tables at one row (one budget composes at one
neighbouring relation: a person; tables may differ in their unit's column and max_rows). A handle that has not
declared a table *reads* it in the population its rows were written
under (a new table: its own), so an undeclared report never leaves a table's population out.

Effective events of a population: for every reservation, its spent events if they were recorded,
otherwise its planned events (a run that crashed after reserving may have touched the data, so its
plan counts until actuals arrive). ε is always recomputed from them with the PLD accountant. Non-private
events of an internal-only release (`NonPrivateEvent.internal`) are recorded but not composed into the
budget for external releases (`external`).

`record` re-checks the population's *total*: its effective events with this reservation's planned
events replaced by the actual ones, composed by PLD against the lifetime budget. Actual events that
push the total over the budget are still written (the data was read; a record is never lost), and
then BudgetOverspentError is raised.

Integrity: seq runs 1, 2, 3, … without gaps; prev_hash = the previous row's row_hash (64 zeros for
row 1); each row's `chain` column says how its row_hash is computed from its *hashed fields*: the
HASHED_FIELDS columns, plus `population` and `unit` as they read (NULL: the data set, "row") when
they are not those defaults. A row of an undeclared table, or from before the columns, therefore keeps
exactly the hash it had without them, and any edit of what a row's population or unit reads as changes
its hash (setting a default back to NULL, which reads the same, does not):
- "sha256": row_hash = sha256(prev_hash + canonical JSON of the hashed fields). Anyone can
  recompute it, so it detects accidents and partial edits, not a rewrite with recomputed hashes.
- "hmac-sha256": row_hash = HMAC-SHA256(ledger key, prev_hash + canonical JSON of the hashed fields
  and `chain`), the ledger key = HMAC-SHA256(steward key, "ledger-chain") (steward key:
  pipelines.privacy.noise.load_noise_key). Without the key no one can recompute it.
A ledger opened with the steward key writes HMAC rows; adding a key to an existing plain ledger
continues with HMAC from the next row on (that row's `chain` records the switch; earlier rows stay
valid as they are). A chain never goes back: a "sha256" row after an "hmac-sha256" row fails
`verify`, and a writer without the key is refused on a ledger whose last row is HMAC. Verifying an
HMAC row needs the key (a clear InputError says so). Rows that were rewritten back to plain hashes
*from the first HMAC row on* form a valid plain chain; a head recorded elsewhere (each release writes
`ledger_head` into releases/<ds>/latest.json, and the ledger gate checks it) catches that for every
row up to that head. Ledgers created before the `chain` column existed get it on opening (every old
row "sha256"; their hashes are unchanged), and ledgers from before `population` and `unit` get those
(NULL: the defaults; their hashes are unchanged too).

Every write happens
in one transaction holding the database's write lock (SQLite: BEGIN IMMEDIATE; PostgreSQL: an
exclusive table lock); the primary key on seq makes two writers that saw the same head collide
rather than fork the chain on any other backend, and such collisions are retried.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable, Sequence, TypeVar

from sqlalchemy import (
    Column,
    Connection,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    create_engine,
    event,
    exc,
    inspect,
    or_,
    select,
)

from pipelines.data.schema import ROW_UNIT_NAME
from pipelines.errors import BudgetExceededError, BudgetOverspentError, InputError, LedgerIntegrityError
from pipelines.io import canonical_json
from pipelines.privacy.accountant import epsilon_pld, epsilon_rdp
from pipelines.privacy.events import Event, NonPrivateEvent, event_from_dict, event_to_dict

GENESIS_HASH = "0" * 64
PLAIN, HMAC = "sha256", "hmac-sha256"  # the two values of the `chain` column
LEDGER_KEY_CONTEXT = b"ledger-chain"
HASHED_FIELDS = ("seq", "dataset", "run_id", "stage", "status", "reservation_seq", "event_json", "created_at")
IDENTITY_FIELDS = ("population", "unit")  # hashed too where not the defaults (the data set, ROW_UNIT_NAME)
BUSY_TIMEOUT_S = 30.0
_WRITE = "ledger_write"
T = TypeVar("T")

_metadata = MetaData()
privacy_events = Table(
    "privacy_events",
    _metadata,
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
    Column("chain", String(16), nullable=False, server_default=PLAIN),
    Column("population", String(255), nullable=True),  # NULL: the row's data set
    Column("unit", String(255), nullable=True),  # NULL: ROW_UNIT_NAME
)


def ledger_key(steward_key: bytes) -> bytes:
    """The key that chains ledger rows: HMAC-SHA256(steward key, "ledger-chain"), so the noise key
    itself never meets ledger content."""
    return hmac.new(steward_key, LEDGER_KEY_CONTEXT, hashlib.sha256).digest()


def row_identity(row: Mapping[str, Any]) -> tuple[str, str]:
    """(population, unit) a ledger row reads as: NULL or absent population is the row's data set, unit "row"."""
    return row.get("population") or row["dataset"], row.get("unit") or ROW_UNIT_NAME


def hashed_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """What a row's hash covers besides prev_hash and `chain`: the HASHED_FIELDS columns, and the row's
    population and unit (as `row_identity` reads them) unless they are the defaults (its data set, "row")."""
    fields = {k: row[k] for k in HASHED_FIELDS}
    population, unit = row_identity(row)
    if (population, unit) != (row["dataset"], ROW_UNIT_NAME):
        fields.update(population=population, unit=unit)
    return fields


def row_hash(prev_hash: str, row: dict, key: bytes | None = None) -> str:
    """The row's hash by its `chain` (absent: "sha256"): sha256(prev_hash + canonical JSON of its
    `hashed_fields`), or for "hmac-sha256" HMAC-SHA256(`key`, prev_hash + canonical JSON of those
    fields and `chain`); `key` is the ledger key (`ledger_key`)."""
    chain = row.get("chain") or PLAIN
    if chain == PLAIN:
        payload = prev_hash + canonical_json(hashed_fields(row))
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()
    if chain != HMAC:
        raise LedgerIntegrityError(
            f"ledger row seq {row['seq']}: unknown chain '{chain}' (expected '{PLAIN}' or '{HMAC}')"
        )
    if key is None:
        raise InputError(
            f"ledger row seq {row['seq']} is chained with HMAC-SHA256 under the steward key; reading its chain "
            "or appending to it needs that key.",
            file="params.yaml (privacy.noise_key_file)",
            fix="set the environment variable SYNTHRELEASE_NOISE_KEY or privacy.noise_key_file to the steward "
            "key this ledger was written with.",
        )
    payload = prev_hash + canonical_json({**hashed_fields(row), "chain": chain})
    return hmac.new(key, payload.encode("utf-8"), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Reservation:
    """A granted reservation: its planned rows and what they cost at the time of granting."""

    dataset: str
    run_id: str
    stage: str
    seq: int  # seq of the first planned row = reservation_seq of all its rows
    row_ids: tuple[int, ...]
    events: tuple[Event, ...]
    delta: float
    epsilon_planned: float  # ε of the planned events alone
    epsilon_after: float  # the data set's ε once they are added
    budget_epsilon: float = math.inf  # the lifetime budget `record` re-checks the total against


class Ledger:
    """Append-only, hash-chained privacy ledger on SQLite (a plain path) or any SQLAlchemy URL.

    `steward_key` (pipelines.privacy.noise.load_noise_key): when given, new rows are chained with
    HMAC-SHA256 under a key derived from it, and HMAC rows can be verified; None: plain sha256 rows.
    `declare` tells the handle each table's population and privacy unit (module docstring, "Populations").
    """

    def __init__(self, url_or_path: str, steward_key: bytes | None = None) -> None:
        self._key = None if steward_key is None else ledger_key(steward_key)
        self._declared: dict[str, tuple[str, str]] = {}
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
        self._transact(_create_or_migrate, lock_table=False)

    @property
    def chain(self) -> str:
        """How this handle chains the rows it appends: "hmac-sha256" with a steward key, else "sha256"."""
        return PLAIN if self._key is None else HMAC

    def declare(self, dataset: str, population: str, unit: str) -> None:
        """Declare that this handle's rows of table `dataset` carry `population` (whose lifetime budget the table
        shares) and privacy `unit` (Schema.unit_name: "row" or "<column><=<max_rows>"). In memory only; the
        rows written from now on carry them, and writes refuse a table or population whose rows carry others."""
        for name, value in (("dataset", dataset), ("population", population), ("unit", unit)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"declare needs a non-empty string {name}, got {value!r}")
        self._declared[dataset] = (population, unit)

    # -- writing -------------------------------------------------------------------------------

    def reserve(
        self, dataset: str, run_id: str, stage: str, events: Sequence[Event], delta: float, budget_epsilon: float
    ) -> Reservation:
        """Atomically check the budget of the data set's population and append `events` as 'planned' rows.

        Raises BudgetExceededError (nothing written) if ε(the population's effective events + `events`) at
        `delta` exceeds `budget_epsilon`; InputError (nothing written) if the data set's declared population or
        unit differs from its earlier rows' or the unit from the population's other tables'. Internal non-private
        events are recorded but not composed (`external`).
        """
        events = tuple(events)
        if not events:
            raise ValueError("reserve needs at least one planned event")
        planned = epsilon_pld(events, delta)  # validates the events; needs no lock
        if not (budget_epsilon > 0):
            raise ValueError(f"budget_epsilon must be positive, got {budget_epsilon}")

        def write(conn: Connection) -> Reservation:
            head = self._writable_head(conn)
            identity, rows = self._writable_population(conn, dataset)
            after = _refuse_over_budget(rows, dataset, identity[0], events, delta, budget_epsilon)
            ids = self._append(conn, head, dataset, identity, run_id, stage, "planned", head[0] + 1, events)
            return Reservation(
                dataset, run_id, stage, ids[0], tuple(ids), events, delta, planned, after, float(budget_epsilon)
            )

        return self._transact(write)

    def check_budget(self, dataset: str, events: Sequence[Event], delta: float, budget_epsilon: float) -> float:
        """What `reserve` would decide, without writing or locking: ε after `events`, or BudgetExceededError
        (or InputError for a population or unit that differs from the table's or population's rows).

        A pre-flight check (a run's whole plan before any stage trains); only `reserve` is atomic.
        """
        with self._engine.connect() as conn:
            (population, _), rows = self._writable_population(conn, dataset)
        return _refuse_over_budget(rows, dataset, population, tuple(events), delta, budget_epsilon)

    def record(self, reservation: Reservation, events: Sequence[Event]) -> list[int]:
        """Append the actual `events` of `reservation` as 'spent' rows; returns their seqs.

        The budget check is on the *total* of the data set's population: all its effective events, with
        this reservation's planned events replaced by `events`, composed by PLD at the reservation's δ
        against its lifetime budget (`reservation.budget_epsilon`). Actual events can cost more than
        planned ones only through a bug in a generator's plan; they describe what was done to the
        data, so they are always written, and if the total then exceeds the budget
        BudgetOverspentError is raised *after* the write (naming spent, planned, actual, remaining).
        Raises ValueError (nothing written) if the reservation is unknown or already has spent rows;
        InputError (nothing written) as `reserve` does, e.g. when the data set's declaration changed since it.
        """
        events = tuple(events)
        if not events:
            raise ValueError("record needs at least one actual event (the plan stays in force otherwise)")
        epsilon_pld(events, reservation.delta)  # validates the events; needs no lock

        def write(conn: Connection) -> tuple[list[int], BudgetOverspentError | None]:
            head = self._writable_head(conn)
            identity, rows = self._writable_population(conn, reservation.dataset)
            own = [r for r in rows if r["reservation_seq"] == reservation.seq and r["dataset"] == reservation.dataset]
            planned = [_event(r) for r in own if r["status"] == "planned"]
            if not planned:
                raise ValueError(f"no reservation with seq {reservation.seq} for data set '{reservation.dataset}'")
            if any(r["status"] == "spent" for r in own):
                raise ValueError(
                    f"reservation {reservation.seq} of data set '{reservation.dataset}' "
                    "already has its actual events recorded"
                )
            others = external(_effective([r for r in rows if r["reservation_seq"] != reservation.seq]))
            after = epsilon_pld(others + external(events), reservation.delta)
            ids = self._append(
                conn,
                head,
                reservation.dataset,
                identity,
                reservation.run_id,
                reservation.stage,
                "spent",
                reservation.seq,
                events,
            )
            over = None
            if not after <= reservation.budget_epsilon:
                over = BudgetOverspentError(
                    reservation.dataset,
                    reservation.seq,
                    reservation.stage,
                    epsilon_pld(others, reservation.delta),
                    epsilon_pld(planned, reservation.delta),
                    epsilon_pld(events, reservation.delta),
                    after,
                    reservation.budget_epsilon,
                    ids,
                )
            return ids, over

        ids, over = self._transact(write)
        if over is not None:  # raised only once the rows are committed
            raise over
        return ids

    def session(
        self, dataset: str, run_id: str, stage: str, delta: float, budget_epsilon: float, internal: bool = False
    ) -> LedgerSession:
        """A `pipelines.generators.base.BudgetSession` bound to one (data set, run, stage); `internal`:
        the stage serves an internal-only release, so its non-private events are marked internal."""
        return LedgerSession(self, dataset, run_id, stage, delta, budget_epsilon, internal)

    # -- reading -------------------------------------------------------------------------------

    def rows(self, dataset: str | None = None) -> list[dict]:
        """All rows (of one data set, if given) in seq order, as dicts of the table's columns."""
        with self._engine.connect() as conn:
            return _dataset_rows(conn, dataset) if dataset is not None else _select(conn)

    def row_hashes(self, dataset: str, seqs: Sequence[int]) -> list[str]:
        """The chained `row_hash` of each of the data set's rows `seqs`, in their order: what names a row across
        ledgers, where a seq alone does not (a new ledger numbers its own rows 1, 2, ... again). ValueError for a seq
        the data set does not have."""
        hashes = {r["seq"]: r["row_hash"] for r in self.rows(dataset)}
        missing = [s for s in seqs if s not in hashes]
        if missing:
            raise ValueError(f"data set '{dataset}' has no ledger rows {missing}")
        return [hashes[s] for s in seqs]

    def population_tables(self, population: str) -> list[str]:
        """The tables (data sets) with rows in `population`, in the order of their first row."""
        with self._engine.connect() as conn:
            rows = _population_rows(conn, population)
        return list(dict.fromkeys(r["dataset"] for r in rows))

    def effective_events(self, dataset: str) -> list[Event]:
        """The effective events of the data set's population (every table of it): per reservation, its spent
        events if recorded, else its planned events; in seq order."""
        with self._engine.connect() as conn:
            return _effective(_population_rows(conn, self._read_population(conn, dataset)))

    def spent(self, dataset: str, delta: float) -> float:
        """ε at `delta` of the effective events of the data set's population for external releases (PLD)."""
        return epsilon_pld(external(self.effective_events(dataset)), delta)

    def spent_rdp(self, dataset: str, delta: float) -> float:
        """ε at `delta` of the effective events of the data set's population by RDP (cross-check; ≥ `spent`)."""
        return epsilon_rdp(external(self.effective_events(dataset)), delta)

    def verify(self, expect_head: str | Mapping[str, Any] | None = None) -> dict:
        """Check the whole chain; returns {'rows': n, 'head': last row_hash (64 zeros if empty),
        'chain': the last row's chain ("sha256" if empty), 'hmac_from_seq': first HMAC row or None}.

        Raises LedgerIntegrityError naming the first bad seq if seqs are not 1..n, a prev_hash does
        not match the previous row_hash (a row was deleted or inserted), a row_hash does not
        recompute (a row was edited, or rewritten with plain hashes where the chain is HMAC), or a
        plain row follows an HMAC row; InputError if HMAC rows are present and this handle has no key.
        Deleting the *last* rows leaves a valid shorter chain; only a head remembered elsewhere detects
        that, as `expect_head`: a hash string must be the current head (nothing appended since), a
        mapping {"seq": s, "hash": h} (what a release records) must still be row s's hash, rows
        appended after it being allowed.
        """
        prev, hmac_from = GENESIS_HASH, None
        rows = self.rows()
        for i, row in enumerate(rows, start=1):
            if row["seq"] != i:
                raise LedgerIntegrityError(
                    f"ledger row {i}: expected seq {i}, found seq {row['seq']} (rows deleted or inserted)"
                )
            if row["prev_hash"] != prev:
                raise LedgerIntegrityError(
                    f"ledger row seq {i}: prev_hash does not match row {i - 1}'s row_hash "
                    "(the chain is broken: a row was deleted, inserted or rewritten)"
                )
            if hmac_from is not None and row["chain"] != HMAC:
                raise LedgerIntegrityError(
                    f"ledger row seq {i}: chain '{row['chain']}' after HMAC rows from seq "
                    f"{hmac_from} (an HMAC chain never goes back to plain hashes: rows were "
                    "rewritten)"
                )
            if row_hash(prev, row, self._key) != row["row_hash"]:
                raise LedgerIntegrityError(
                    f"ledger row seq {i}: row_hash does not recompute under its chain "
                    f"'{row['chain']}' (the row was edited, or rewritten without the key)"
                )
            if row["chain"] == HMAC and hmac_from is None:
                hmac_from = i
            prev = row["row_hash"]
        if isinstance(expect_head, Mapping):
            seq, expected = int(expect_head["seq"]), str(expect_head["hash"])
            found = rows[seq - 1]["row_hash"] if 0 < seq <= len(rows) else (GENESIS_HASH if seq == 0 else None)
            if found != expected:
                raise LedgerIntegrityError(
                    f"the ledger has {len(rows)} rows, but the recorded head is row seq {seq} with hash {expected}; "
                    + (
                        f"rows {len(rows) + 1}..{seq} (and any after) were deleted"
                        if found is None
                        else f"row {seq} now has hash {found} (rows up to it were rewritten)"
                    )
                )
        elif expect_head is not None and prev != expect_head:
            raise LedgerIntegrityError(
                f"ledger head is {prev} after {len(rows)} rows, expected {expect_head} "
                "(rows at the end were deleted, or rows were appended since)"
            )
        return {
            "rows": len(rows),
            "head": prev,
            "chain": rows[-1]["chain"] if rows else PLAIN,
            "hmac_from_seq": hmac_from,
        }

    def head(self) -> dict[str, Any]:
        """The verified chain's head as a release records it: {"seq", "hash", "chain"}."""
        chain = self.verify()
        return {"seq": chain["rows"], "hash": chain["head"], "chain": chain["chain"]}

    # -- populations ---------------------------------------------------------------------------

    def _read_population(self, conn: Connection, dataset: str) -> str:
        """The population the data set is read in: the declared one, else its rows' (a new table: its own)."""
        if dataset in self._declared:
            return self._declared[dataset][0]
        first = _select(conn, privacy_events.c.dataset == dataset, limit=1)
        return row_identity(first[0])[0] if first else dataset

    def _writable_population(self, conn: Connection, dataset: str) -> tuple[tuple[str, str], list[dict]]:
        """((population, unit) the data set's new rows carry, every row of that population); InputError if the
        table's earlier rows carry another population or unit, or the population's other tables another unit."""
        population, unit = self._declared.get(dataset, (dataset, ROW_UNIT_NAME))
        earlier = list(dict.fromkeys(row_identity(r) for r in _dataset_rows(conn, dataset)))
        changed = [(p, u) for p, u in earlier if (p, u) != (population, unit)]
        if changed:
            was = "; ".join(f"population '{p}', privacy unit '{u}'" for p, u in changed)
            raise InputError(
                f"data set '{dataset}' was released before under {was}, and this release declares population "
                f"'{population}', privacy unit '{unit}'. A table's earlier releases were accounted in the lifetime "
                "budget of their population at their unit, so they cannot be moved to another.",
                fix=f"declare the same privacy_unit and population in the schema as earlier releases of "
                f"'{dataset}', or release under a new data set name, which starts a new table in the "
                "population.",
            )
        rows = _population_rows(conn, population)
        per_row = unit == ROW_UNIT_NAME  # a declared unit (any column, any max_rows) protects a person; a row does not
        others = list(
            dict.fromkeys(
                (r["dataset"], row_identity(r)[1]) for r in rows if (row_identity(r)[1] == ROW_UNIT_NAME) != per_row
            )
        )
        if others:
            tables = ", ".join(f"'{d}' (privacy unit '{u}')" for d, u in others)
            raise InputError(
                f"population '{population}' already has tables {tables}, and data set '{dataset}' declares privacy "
                f"unit '{unit}': the tables of one population must all declare a privacy unit, or none (its one "
                "lifetime budget composes their events at one neighbouring relation; a row-level event does not "
                "protect a person with several rows).",
                fix=f"declare a privacy_unit in every schema of population '{population}' (each table its own "
                "max_rows), or give this table another population.",
            )
        return (population, unit), rows

    # -- appending -----------------------------------------------------------------------------

    def _writable_head(self, conn: Connection) -> tuple[int, str]:
        """(seq, row_hash) of the last row; refuses (InputError) to append plain rows after HMAC ones."""
        row = conn.execute(
            select(privacy_events.c.seq, privacy_events.c.row_hash, privacy_events.c.chain)
            .order_by(privacy_events.c.seq.desc())
            .limit(1)
        ).first()
        if row is None:
            return 0, GENESIS_HASH
        if row.chain == HMAC and self._key is None:
            raise InputError(
                f"the ledger's last row (seq {row.seq}) is chained with HMAC-SHA256 under the steward "
                "key; appending needs that key (a plain row after it would break the chain).",
                file="params.yaml (privacy.noise_key_file)",
                fix="set the environment variable SYNTHRELEASE_NOISE_KEY or privacy.noise_key_file.",
            )
        return row.seq, row.row_hash

    def _append(
        self,
        conn: Connection,
        head: tuple[int, str],
        dataset: str,
        identity: tuple[str, str],
        run_id: str,
        stage: str,
        status: str,
        reservation_seq: int,
        events: Sequence[Event],
    ) -> list[int]:
        return _append(
            conn,
            head[0],
            head[1],
            dataset,
            identity,
            run_id,
            stage,
            status,
            reservation_seq,
            events,
            self.chain,
            self._key,
        )

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

    def __init__(
        self,
        ledger: Ledger,
        dataset: str,
        run_id: str,
        stage: str,
        delta: float,
        budget_epsilon: float,
        internal: bool = False,
    ) -> None:
        self.ledger, self.dataset, self.run_id, self.stage = ledger, dataset, run_id, stage
        self.delta, self.budget_epsilon, self.internal = delta, budget_epsilon, internal
        self.reservation: Reservation | None = None
        self.row_ids: list[int] = []

    def reserve(self, events: list[Event]) -> None:
        """Reserve the stage's planned events (once); raises BudgetExceededError before any data is read."""
        if self.reservation is not None:
            raise ValueError(
                f"session {self.dataset}/{self.run_id}/{self.stage} already holds reservation {self.reservation.seq}"
            )
        self.reservation = self.ledger.reserve(
            self.dataset, self.run_id, self.stage, self._mark(events), self.delta, self.budget_epsilon
        )

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


def _create_or_migrate(conn: Connection) -> None:
    """Create the table; give a ledger from before the `chain` column that column (old rows: "sha256"), and one
    from before `population` and `unit` those (old rows: NULL, read as the defaults)."""
    _metadata.create_all(conn, checkfirst=True)
    have = {c["name"] for c in inspect(conn).get_columns("privacy_events")}
    # PostgreSQL: two processes opening an old ledger at once must not both fail (SQLite serialises them)
    guard = "IF NOT EXISTS " if conn.dialect.name == "postgresql" else ""
    if "chain" not in have:
        conn.exec_driver_sql(
            f"ALTER TABLE privacy_events ADD COLUMN {guard}chain VARCHAR(16) NOT NULL DEFAULT '{PLAIN}'"
        )
    for name in IDENTITY_FIELDS:
        if name not in have:
            conn.exec_driver_sql(f"ALTER TABLE privacy_events ADD COLUMN {guard}{name} VARCHAR(255)")


def _select(conn: Connection, where=None, limit: int | None = None) -> list[dict]:
    stmt = select(privacy_events).order_by(privacy_events.c.seq)
    if where is not None:
        stmt = stmt.where(where)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def _dataset_rows(conn: Connection, dataset: str) -> list[dict]:
    return _select(conn, privacy_events.c.dataset == dataset)


def _population_rows(conn: Connection, population: str) -> list[dict]:
    """Every row that `row_identity` reads as of `population` (a NULL population: the row's data set)."""
    c = privacy_events.c
    return _select(conn, or_(c.population == population, and_(c.population.is_(None), c.dataset == population)))


def _event(row: dict) -> Event:
    return event_from_dict(json.loads(row["event_json"]))


def external(events: Sequence[Event]) -> list[Event]:
    """The events that count against the budget for external releases: all but internal non-private ones."""
    return [e for e in events if not (isinstance(e, NonPrivateEvent) and e.internal)]


def _refuse_over_budget(
    rows: list[dict], dataset: str, population: str, events: Sequence[Event], delta: float, budget_epsilon: float
) -> float:
    """ε of the population's effective `rows` plus `events`; BudgetExceededError if above `budget_epsilon`."""
    current = external(_effective(rows))
    after = epsilon_pld(current + external(events), delta)
    if after > budget_epsilon:
        planned = epsilon_pld(events, delta)
        tables = list(dict.fromkeys([*(r["dataset"] for r in rows), dataset]))
        shared = (
            ""
            if tables == [population]
            else (
                f"the spent ε is that of population '{population}', whose lifetime budget tables "
                f"{', '.join(repr(t) for t in tables)} share; "
            )
        )
        fix: str | None
        if not math.isfinite(planned):
            fix = shared + (
                "a non-private (epsilon: inf) stage can only serve an internal release: train with a "
                "finite epsilon, or set privacy.internal_release: true in params.yaml if nothing it "
                "produces will leave your organisation"
            )
        else:  # a table that is its own population keeps BudgetExceededError's own fix
            fix = (
                (
                    shared + "lower the stage's epsilon, or raise the population's lifetime budget only if your "
                    "privacy officer approves"
                )
                if shared
                else None
            )
        raise BudgetExceededError(dataset, epsilon_pld(current, delta), planned, after, budget_epsilon, fix)
    return after


def _effective(rows: list[dict]) -> list[Event]:
    by_reservation: dict[int, dict[str, list[Event]]] = defaultdict(lambda: {"planned": [], "spent": []})
    for row in rows:
        by_reservation[row["reservation_seq"]][row["status"]].append(_event(row))
    return [
        e for res in sorted(by_reservation) for e in (by_reservation[res]["spent"] or by_reservation[res]["planned"])
    ]


def _append(
    conn: Connection,
    head_seq: int,
    head_hash: str,
    dataset: str,
    identity: tuple[str, str],
    run_id: str,
    stage: str,
    status: str,
    reservation_seq: int,
    events: Sequence[Event],
    chain: str = PLAIN,
    key: bytes | None = None,
) -> list[int]:
    created_at = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    rows: list[dict[str, Any]] = []
    prev = head_hash
    for i, e in enumerate(events, start=1):
        row: dict[str, Any] = {
            "seq": head_seq + i,
            "dataset": dataset,
            "run_id": run_id,
            "stage": stage,
            "status": status,
            "reservation_seq": reservation_seq,
            "event_json": canonical_json(event_to_dict(e)),
            "created_at": created_at,
            "chain": chain,
            "population": identity[0],
            "unit": identity[1],
        }
        row["prev_hash"], row["row_hash"] = prev, row_hash(prev, row, key)
        prev = row["row_hash"]
        rows.append(row)
    conn.execute(privacy_events.insert(), rows)
    return [r["seq"] for r in rows]
