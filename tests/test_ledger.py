"""The privacy ledger: budget refusal, the effective-events rule, the hash chain and concurrency."""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import sqlite3

import pytest

import pipelines.privacy.ledger as ledger_module
from pipelines.errors import BudgetExceededError, LedgerIntegrityError
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import GaussianEvent, LaplaceEvent, NonPrivateEvent, PureEpsilonEvent
from pipelines.privacy.ledger import GENESIS_HASH, Ledger

DELTA = 1e-5


@pytest.fixture
def ledger_path(tmp_path):
    return tmp_path / "nested" / "ledger.sqlite"


@pytest.fixture
def ledger(ledger_path):
    return Ledger(str(ledger_path))


def _fill(ledger: Ledger) -> None:
    """Three reservations on two data sets, the first two with recorded actuals: 5 rows."""
    r1 = ledger.reserve("adult", "run-1", "train@dpwgan", [PureEpsilonEvent(0.4)], DELTA, 10.0)
    ledger.record(r1, [PureEpsilonEvent(0.3)])
    r2 = ledger.reserve("census", "run-1", "train@ppem", [LaplaceEvent(2.0, 1.0)], DELTA, 10.0)
    ledger.record(r2, [LaplaceEvent(4.0, 1.0)])
    ledger.reserve("adult", "run-2", "train@dpwgan", [PureEpsilonEvent(0.2)], DELTA, 10.0)


def test_budget_refusal_reports_numbers_and_writes_nothing(ledger):
    first = ledger.reserve("adult", "run-1", "train", [PureEpsilonEvent(0.6)], DELTA, 1.0)
    ledger.record(first, [PureEpsilonEvent(0.6)])
    before = ledger.verify()
    spent = ledger.spent("adult", DELTA)
    planned = epsilon_pld([PureEpsilonEvent(0.5)], DELTA)
    with pytest.raises(BudgetExceededError) as info:
        ledger.reserve("adult", "run-2", "train", [PureEpsilonEvent(0.5)], DELTA, 1.0)
    err, message = info.value, str(info.value)
    assert (err.spent, err.planned, err.budget) == (pytest.approx(spent), pytest.approx(planned), 1.0)
    assert err.after > 1.0
    for number in (spent, planned, 1.0 - spent, 1.0):
        assert f"{number:.4g}" in message
    assert "adult" in message
    assert ledger.verify() == before                      # nothing written
    assert len(ledger.rows()) == 2
    # Another data set's budget is independent.
    ledger.reserve("census", "run-2", "train", [PureEpsilonEvent(0.5)], DELTA, 1.0)


def test_effective_events_planned_until_spent_recorded(ledger):
    planned, actual = [GaussianEvent(2.0, 1.0), PureEpsilonEvent(0.5)], [GaussianEvent(4.0, 1.0)]
    reservation = ledger.reserve("adult", "run-1", "train", planned, DELTA, 20.0)
    assert reservation.row_ids == (1, 2) and reservation.seq == 1
    assert reservation.epsilon_planned == pytest.approx(epsilon_pld(planned, DELTA))
    assert ledger.effective_events("adult") == planned          # a crashed run may have touched data
    assert ledger.spent("adult", DELTA) == pytest.approx(epsilon_pld(planned, DELTA))

    second = ledger.reserve("adult", "run-2", "train", [LaplaceEvent(10.0, 1.0)], DELTA, 20.0)
    assert ledger.record(reservation, actual) == [4]
    assert ledger.effective_events("adult") == actual + [LaplaceEvent(10.0, 1.0)]
    assert second.epsilon_after == pytest.approx(epsilon_pld(planned + [LaplaceEvent(10.0, 1.0)], DELTA))
    assert ledger.spent("adult", DELTA) == pytest.approx(epsilon_pld(actual + [LaplaceEvent(10.0, 1.0)], DELTA))
    assert ledger.spent_rdp("adult", DELTA) >= ledger.spent("adult", DELTA)
    rows = ledger.rows("adult")
    assert [(r["seq"], r["status"], r["reservation_seq"]) for r in rows] == [
        (1, "planned", 1), (2, "planned", 1), (3, "planned", 3), (4, "spent", 1)]
    assert ledger.effective_events("other") == [] and ledger.spent("other", DELTA) == 0.0


def test_record_refuses_double_recording_and_overspend(ledger):
    reservation = ledger.reserve("adult", "run-1", "train", [GaussianEvent(4.0, 1.0)], DELTA, 10.0)
    with pytest.raises(ValueError, match="planned"):
        ledger.record(reservation, [GaussianEvent(3.0, 1.0)])          # costs more than planned
    with pytest.raises(ValueError):
        ledger.record(reservation, [NonPrivateEvent("oops")])
    assert len(ledger.rows()) == 1                                      # failed appends wrote nothing
    ledger.record(reservation, [GaussianEvent(4.0, 1.0)])
    with pytest.raises(ValueError, match="already"):
        ledger.record(reservation, [GaussianEvent(8.0, 1.0)])
    assert len(ledger.rows()) == 2


def test_append_failing_midway_rolls_back(ledger, monkeypatch):
    _fill(ledger)
    before = ledger.verify()
    original = ledger_module._append

    def append_then_crash(*args, **kwargs):
        original(*args, **kwargs)
        raise RuntimeError("disk full")

    monkeypatch.setattr(ledger_module, "_append", append_then_crash)
    with pytest.raises(RuntimeError):
        ledger.reserve("adult", "run-3", "train", [PureEpsilonEvent(0.1)] * 3, DELTA, 10.0)
    assert ledger.verify() == before


def test_non_private_spend_needs_an_infinite_budget(ledger):
    with pytest.raises(BudgetExceededError):
        ledger.reserve("adult", "run-1", "train@reference", [NonPrivateEvent("epsilon: inf")], DELTA, 5.0)
    ledger.reserve("adult", "run-1", "train@reference", [NonPrivateEvent("epsilon: inf")], DELTA, float("inf"))
    assert ledger.spent("adult", DELTA) == float("inf")
    with pytest.raises(BudgetExceededError):     # the data set's finite budget is gone for good
        ledger.reserve("adult", "run-2", "train", [PureEpsilonEvent(0.1)], DELTA, 5.0)


def test_session_follows_the_generator_protocol(ledger):
    session = ledger.session("adult", "run-1", "train@dpwgan", DELTA, 3.0)
    with pytest.raises(ValueError, match="reserve"):
        session.record([PureEpsilonEvent(0.1)])
    assert session.reserve([PureEpsilonEvent(1.0)]) is None
    with pytest.raises(ValueError):
        session.reserve([PureEpsilonEvent(1.0)])
    ids = session.record([PureEpsilonEvent(0.9)])
    assert ids == session.row_ids == [2]
    assert session.reservation.seq == 1
    refused = ledger.session("adult", "run-2", "train@dpwgan", DELTA, 3.0)
    with pytest.raises(BudgetExceededError):
        refused.reserve([PureEpsilonEvent(2.5)])
    assert refused.reservation is None


def test_hash_chain_verifies_and_follows_its_definition(ledger):
    assert ledger.verify() == {"rows": 0, "head": GENESIS_HASH}
    _fill(ledger)
    rows = ledger.rows()
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5]
    first = rows[0]
    fields = {k: first[k] for k in ("seq", "dataset", "run_id", "stage", "status", "reservation_seq",
                                    "event_json", "created_at")}
    payload = "0" * 64 + json.dumps(fields, sort_keys=True, separators=(",", ":"))
    assert first["prev_hash"] == GENESIS_HASH
    assert first["row_hash"] == hashlib.sha256(payload.encode()).hexdigest()
    assert json.loads(first["event_json"]) == {"kind": "pure_epsilon", "epsilon": 0.4, "mechanism": "exponential"}
    assert all(b["prev_hash"] == a["row_hash"] for a, b in zip(rows, rows[1:]))
    assert ledger.verify() == {"rows": 5, "head": rows[-1]["row_hash"]}
    assert ledger.verify(expect_head=rows[-1]["row_hash"])["rows"] == 5


def _raw(path, sql: str, *args) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql, args)


def test_edited_row_is_detected(ledger, ledger_path):
    _fill(ledger)
    _raw(ledger_path, "UPDATE privacy_events SET event_json = ? WHERE seq = 2",
         json.dumps({"kind": "pure_epsilon", "epsilon": 0.01, "mechanism": "exponential"}))
    with pytest.raises(LedgerIntegrityError, match=r"seq 2\b.*edited"):
        ledger.verify()


def test_deleted_middle_row_is_detected(ledger, ledger_path):
    _fill(ledger)
    _raw(ledger_path, "DELETE FROM privacy_events WHERE seq = 3")
    with pytest.raises(LedgerIntegrityError, match="expected seq 3"):
        ledger.verify()


def test_deleted_last_row_needs_expect_head(ledger, ledger_path):
    _fill(ledger)
    head = ledger.verify()["head"]
    _raw(ledger_path, "DELETE FROM privacy_events WHERE seq = 5")
    assert ledger.verify()["rows"] == 4                  # a shorter chain is still a valid chain
    with pytest.raises(LedgerIntegrityError, match="expected"):
        ledger.verify(expect_head=head)


def test_sqlalchemy_url(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'by_url.db'}")
    _fill(ledger)
    assert ledger.verify()["rows"] == 5
    reopened = Ledger(str(tmp_path / "by_url.db"))            # same file as a plain path
    assert reopened.verify() == ledger.verify()
    assert reopened.spent("adult", DELTA) == pytest.approx(epsilon_pld([PureEpsilonEvent(0.3),
                                                                         PureEpsilonEvent(0.2)], DELTA))


def _worker(path: str, worker: int, n: int) -> None:
    ledger = Ledger(path)
    for i in range(n):
        reservation = ledger.reserve("shared", f"w{worker}", f"stage-{i}", [GaussianEvent(100.0, 1.0)], DELTA, 1e6)
        ledger.record(reservation, [GaussianEvent(100.0, 1.0)])


@pytest.mark.slow
def test_concurrent_writers_never_lose_double_count_or_fork(ledger_path):
    """4 spawned processes x 25 reserve+record on one SQLite file (slow: each child imports scipy
    and dp_accounting, ~4 s; the writes themselves take a few seconds)."""
    Ledger(str(ledger_path))
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(str(ledger_path), w, 25)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    ledger = Ledger(str(ledger_path))
    assert ledger.verify()["rows"] == 200
    rows = ledger.rows()
    assert [r["seq"] for r in rows] == list(range(1, 201))
    # Every reservation got exactly one planned and one spent row.
    pairs = {}
    for r in rows:
        pairs.setdefault((r["run_id"], r["stage"]), []).append(r["status"])
    assert len(pairs) == 100 and all(sorted(s) == ["planned", "spent"] for s in pairs.values())
    assert ledger.spent("shared", DELTA) == pytest.approx(epsilon_pld([GaussianEvent(100.0, 1.0)] * 100, DELTA))


def test_non_private_stage_is_refused_unless_the_release_is_internal(ledger):
    ledger.reserve("adult", "run-1", "train@dpwgan", [PureEpsilonEvent(1.0)], DELTA, 10.0)
    public = ledger.session("adult", "run-2", "train@iw", DELTA, 10.0)
    with pytest.raises(BudgetExceededError, match="privacy.internal_release: true"):
        public.reserve([NonPrivateEvent("epsilon: inf")])
    assert len(ledger.rows("adult")) == 1

    internal = ledger.session("adult", "run-3", "train@iw", DELTA, 10.0, internal=True)
    internal.reserve([NonPrivateEvent("epsilon: inf")])
    internal.record([NonPrivateEvent("epsilon: inf")])
    kinds = [json.loads(r["event_json"]) for r in ledger.rows("adult")[1:]]
    assert kinds == [{"kind": "non_private", "reason": "epsilon: inf", "internal": True}] * 2
    # recorded, but not charged to the budget for external releases: still ε = 1 of pure DP
    assert ledger.spent("adult", DELTA) == pytest.approx(1.0, abs=1e-3)
    assert ledger.spent_rdp("adult", DELTA) == pytest.approx(1.0, abs=0.01)
    ledger.verify()


def test_ledger_gate_labels_and_refuses_non_private_models(ledger):
    from pipelines.privacy.gates import ledger_gate
    private = ledger.session("adult", "run-1", "train@dpwgan", DELTA, 10.0)
    private.reserve([PureEpsilonEvent(1.0)])
    private.record([PureEpsilonEvent(1.0)])
    internal = ledger.session("adult", "run-2", "train@iw", DELTA, 10.0, internal=True)
    internal.reserve([NonPrivateEvent("epsilon: inf")])
    internal.record([NonPrivateEvent("epsilon: inf")])
    dp_rows = [private.reservation.seq, *private.row_ids]
    np_rows = [internal.reservation.seq, *internal.row_ids]
    assert ledger_gate(ledger, "adult", DELTA, 10.0, dp_rows).passed
    assert ledger_gate(ledger, "adult", DELTA, 10.0, dp_rows).evidence["label"] == "differentially private"
    refused = ledger_gate(ledger, "adult", DELTA, 10.0, np_rows)
    assert not refused.passed and refused.evidence["non_private"] and "refused" in refused.evidence["label"]
    allowed = ledger_gate(ledger, "adult", DELTA, 10.0, np_rows, internal_release=True)
    assert allowed.passed and allowed.evidence["label"] == "NON-PRIVATE (internal release only)"
    assert allowed.evidence["epsilon_total_pld"] == pytest.approx(1.0, abs=1e-3)
