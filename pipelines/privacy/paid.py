"""One paid step: the privacy sequence every budget-spending stage follows, written once.

A stage that reads private rows under a DP mechanism (prepare's row-loss test and noisy row count, check@gen's
release test, train@gen, weight@gen) does, in this order (`paid`):

1. reuse: when the stage keeps a receipt of its result (`Receipt`: a file that is not a DVC output, so a re-run
   finds it) and that receipt was computed from the same inputs (a content hash of what the result is a function
   of) while its ledger rows still stand, the result is the one already paid for: it is returned and nothing is
   spent (`paid_before`). Budget is never spent twice for the same release;
2. open a ledger session for (data set, run, stage) at the release's δ and lifetime ε (`Account`);
3. reserve the planned events before any private row is read, so that a step over budget is refused first (a
   mechanism that takes the session, a generator's `fit`, reserves its own plan);
4. bind the DP noise to the step (`Binding`): with a steward key, HMAC-derived from the key, the step's inputs'
   hashes and its public facts, so two runs of one release draw the same noise and any other release independent
   noise (pipelines/privacy/noise.py); fresh OS entropy without a key;
5. compute: read the rows and draw the noise;
6. record the actual events in the ledger (or the mechanism records its own);
7. write the receipt, with the chained hashes of its ledger rows (`Ledger.row_hashes`: a seq alone does not name a
   row across ledgers), and return it.

An error before step 7 writes no receipt; the ledger keeps what was reserved or recorded, as it must.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pipelines.io import read_json, write_json
from pipelines.privacy.events import Event
from pipelines.privacy.ledger import Ledger, LedgerSession
from pipelines.privacy.noise import NoiseSource

R = TypeVar("R")


@dataclass(frozen=True)
class Account:
    """Where a step's spend is charged: the data set's ledger rows of one run and stage (e.g. "check@aim"), checked
    against `lifetime_epsilon` at `delta`; `internal`: an internal-only release (its non-private events are marked
    internal, pipelines/privacy/ledger.py)."""

    dataset: str
    run_id: str
    stage: str
    delta: float
    lifetime_epsilon: float
    internal: bool = False


@dataclass(frozen=True)
class Binding:
    """What the step's noise is bound to (`NoiseSource.keyed`): the steward `key` (None: OS entropy), the noise
    `stage` name, the inputs' hashes (called at the first draw) and the public `facts`; `noise_seed`: a params'
    fixed seed (tests and audits only, `NoiseSource.overridden`)."""

    key: bytes | None
    stage: str
    inputs: Callable[[], Mapping[str, str] | str]
    facts: Mapping[str, Any] = field(default_factory=dict)
    noise_seed: int | None = None

    def source(self) -> NoiseSource:
        return NoiseSource.keyed(self.key, self.inputs, self.stage, self.facts).overridden(self.noise_seed)


@dataclass(frozen=True)
class Receipt(Generic[R]):
    """The file a reusable step keeps of its result (`path`), keyed by `inputs` (the content hash of what the result
    is a function of) at its top or under key `within`, beside `ledger_row_ids`; `of(result, session)` is the
    receipt's content for a fresh result (with `inputs` and `ledger_row_ids` where `within` says)."""

    path: Path
    inputs: str
    of: Callable[[R, LedgerSession], dict[str, Any]]
    within: str | None = None


@dataclass(frozen=True)
class Paid(Generic[R]):
    """A paid step's outcome: `value` (compute's result; the receipt's content when the step keeps one, reused or
    fresh), whether it was `reused`, the ledger rows it spent (`spent`: the recorded rows; `row_ids`: the
    reservation's and the recorded rows, in order; none when reused)."""

    value: Any
    reused: bool
    spent: list[int]
    row_ids: list[int]


def paid_before(path: Path, inputs: str, led: Ledger, dataset: str, within: str | None = None) -> dict[str, Any] | None:
    """The result a stage paid for earlier (`path`, not a DVC output, so a re-run finds it; its `inputs` hash and
    `ledger_row_ids` at the top or under key `within`, and at its top `ledger_row_hashes`: `Ledger.row_hashes` of
    those rows, in order), when it was computed from the same `inputs` and its ledger rows still stand: every
    recorded (seq, row hash) pair is a row of `dataset` in `led`. Reusing it spends nothing, since it is the very
    release already paid for. A seq alone does not name a row (a new ledger numbers its own rows 1, 2, ... again), so
    a result that records no hashes is not reused: it is computed and paid for again. None otherwise."""
    prior = read_json(path) if path.exists() else None
    facts = prior.get(within, {}) if prior and within else prior
    if not prior or not facts or facts["inputs"] != inputs:
        return None
    ids, hashes = facts["ledger_row_ids"], prior.get("ledger_row_hashes")
    current = {r["seq"]: r["row_hash"] for r in led.rows(dataset)}
    if hashes is not None and len(hashes) == len(ids) and all(current.get(s) == h for s, h in zip(ids, hashes)):
        return prior
    return None


def paid(
    ledger: Ledger,
    account: Account,
    binding: Binding,
    compute: Callable[[LedgerSession, NoiseSource], R],
    *,
    planned: Sequence[Event] = (),
    actual: Callable[[R], Sequence[Event]] | None = None,
    receipt: Receipt[R] | None = None,
) -> Paid[R]:
    """Run one paid step (module docstring): reuse `receipt` when it still stands; else open `account`'s session,
    reserve `planned` (when given), bind the noise (`binding`), `compute(session, noise)`, record `actual(result)`
    (when given; else `compute` recorded its own events) and write the receipt (when given)."""
    if receipt is not None:
        prior = paid_before(receipt.path, receipt.inputs, ledger, account.dataset, receipt.within)
        if prior is not None:
            return Paid(prior, True, [], [])
    session = ledger.session(
        account.dataset,
        account.run_id,
        account.stage,
        account.delta,
        account.lifetime_epsilon,
        internal=account.internal,
    )
    if planned:
        session.reserve(list(planned))  # nothing is read before the budget is granted
    value: Any = compute(session, binding.source())
    if actual is not None:
        session.record(list(actual(value)))
    spent = list(session.row_ids)
    row_ids = [*(session.reservation.row_ids if session.reservation is not None else ()), *spent]
    if receipt is not None:
        content = receipt.of(value, session)
        facts = content[receipt.within] if receipt.within else content
        value = {**content, "ledger_row_hashes": ledger.row_hashes(account.dataset, facts["ledger_row_ids"])}
        write_json(receipt.path, value)
    return Paid(value, False, spent, row_ids)
