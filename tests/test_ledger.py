"""The privacy ledger: budget refusal, the effective-events rule, the hash chain and concurrency."""

from __future__ import annotations

import hashlib
import hmac
import json
import multiprocessing
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

import pipelines.privacy.ledger as ledger_module
from pipelines.errors import BudgetExceededError, BudgetOverspentError, InputError, LedgerIntegrityError
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.events import GaussianEvent, LaplaceEvent, NonPrivateEvent, PureEpsilonEvent
from pipelines.privacy.ledger import GENESIS_HASH, HMAC, PLAIN, Ledger, row_hash

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
    assert ledger.verify() == before  # nothing written
    assert len(ledger.rows()) == 2
    # Another data set's budget is independent.
    ledger.reserve("census", "run-2", "train", [PureEpsilonEvent(0.5)], DELTA, 1.0)


def test_effective_events_planned_until_spent_recorded(ledger):
    planned, actual = [GaussianEvent(2.0, 1.0), PureEpsilonEvent(0.5)], [GaussianEvent(4.0, 1.0)]
    reservation = ledger.reserve("adult", "run-1", "train", planned, DELTA, 20.0)
    assert reservation.row_ids == (1, 2) and reservation.seq == 1
    assert reservation.epsilon_planned == pytest.approx(epsilon_pld(planned, DELTA))
    assert ledger.effective_events("adult") == planned  # a crashed run may have touched data
    assert ledger.spent("adult", DELTA) == pytest.approx(epsilon_pld(planned, DELTA))

    second = ledger.reserve("adult", "run-2", "train", [LaplaceEvent(10.0, 1.0)], DELTA, 20.0)
    assert ledger.record(reservation, actual) == [4]
    assert ledger.effective_events("adult") == actual + [LaplaceEvent(10.0, 1.0)]
    assert second.epsilon_after == pytest.approx(epsilon_pld(planned + [LaplaceEvent(10.0, 1.0)], DELTA))
    assert ledger.spent("adult", DELTA) == pytest.approx(epsilon_pld(actual + [LaplaceEvent(10.0, 1.0)], DELTA))
    assert ledger.spent_rdp("adult", DELTA) >= ledger.spent("adult", DELTA)
    rows = ledger.rows("adult")
    assert [(r["seq"], r["status"], r["reservation_seq"]) for r in rows] == [
        (1, "planned", 1),
        (2, "planned", 1),
        (3, "planned", 3),
        (4, "spent", 1),
    ]
    assert ledger.effective_events("other") == [] and ledger.spent("other", DELTA) == 0.0


def test_record_refuses_double_recording_and_unknown_reservations(ledger):
    reservation = ledger.reserve("adult", "run-1", "train", [GaussianEvent(4.0, 1.0)], DELTA, 10.0)
    with pytest.raises(ValueError, match="no reservation"):
        ledger.record(replace(reservation, seq=7), [GaussianEvent(4.0, 1.0)])
    with pytest.raises(ValueError):
        ledger.record(reservation, [])
    assert len(ledger.rows()) == 1  # failed appends wrote nothing
    ledger.record(reservation, [GaussianEvent(4.0, 1.0)])
    with pytest.raises(ValueError, match="already"):
        ledger.record(reservation, [GaussianEvent(8.0, 1.0)])
    assert len(ledger.rows()) == 2


def _overspending_fit(session, planned: list, actual: list) -> None:
    """What a generator with a wrong plan does: reserve `planned`, read the data, record `actual`."""
    session.reserve(planned)
    session.record(actual)


def test_record_rechecks_the_data_sets_total_with_the_actual_events(ledger):
    ledger.session("adult", "run-1", "train@a", DELTA, 1.0).reserve(
        [PureEpsilonEvent(0.5)]
    )  # a crashed run: plan counts
    # Actual above plan but the total within budget: recorded, nothing raised (not actual vs planned alone).
    fine = ledger.session("adult", "run-2", "train@b", DELTA, 1.0)
    _overspending_fit(fine, [PureEpsilonEvent(0.05)], [PureEpsilonEvent(0.1)])
    assert len(fine.row_ids) == 1
    spent_before = ledger.spent("adult", DELTA)  # ≈ 0.6
    # Planned 0.2 fits (total ≈ 0.8); actual 3 x 0.2 = 0.6 is under the budget on its own, and so is every
    # other reservation, but the total is ≈ 0.6 + 0.6 = 1.2 > 1.0.
    session = ledger.session("adult", "run-3", "train@c", DELTA, 1.0)
    with pytest.raises(BudgetExceededError) as info:
        _overspending_fit(session, [PureEpsilonEvent(0.2)], [PureEpsilonEvent(0.2)] * 3)
    err, message = info.value, str(info.value)
    assert isinstance(err, BudgetOverspentError)
    spent_rows = [r for r in ledger.rows("adult") if r["stage"] == "train@c" and r["status"] == "spent"]
    assert len(spent_rows) == 3 and err.row_ids == [r["seq"] for r in spent_rows]  # written: never lose a record
    assert err.spent == pytest.approx(spent_before)
    assert err.planned == pytest.approx(epsilon_pld([PureEpsilonEvent(0.2)], DELTA))
    assert err.after == pytest.approx(ledger.spent("adult", DELTA)) and err.after > 1.15
    for text in (f"{err.spent:.4g}", f"{err.planned:.4g}", f"{err.after:.4g}", "remaining ε=0", "recorded", "adult"):
        assert text in message
    ledger.verify()
    with pytest.raises(BudgetExceededError):  # the budget is gone for later stages
        ledger.reserve("adult", "run-4", "train@d", [PureEpsilonEvent(0.01)], DELTA, 1.0)


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
    with pytest.raises(BudgetExceededError):  # the data set's finite budget is gone for good
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
    assert ledger.verify() == {"rows": 0, "head": GENESIS_HASH, "chain": PLAIN, "hmac_from_seq": None}
    _fill(ledger)
    rows = ledger.rows()
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5]
    first = rows[0]
    fields = {
        k: first[k]
        for k in ("seq", "dataset", "run_id", "stage", "status", "reservation_seq", "event_json", "created_at")
    }
    payload = "0" * 64 + json.dumps(fields, sort_keys=True, separators=(",", ":"))
    assert first["prev_hash"] == GENESIS_HASH
    assert first["row_hash"] == hashlib.sha256(payload.encode()).hexdigest()
    assert json.loads(first["event_json"]) == {"kind": "pure_epsilon", "epsilon": 0.4, "mechanism": "exponential"}
    assert all(b["prev_hash"] == a["row_hash"] for a, b in zip(rows, rows[1:]))
    assert ledger.verify() == {"rows": 5, "head": rows[-1]["row_hash"], "chain": PLAIN, "hmac_from_seq": None}
    assert ledger.verify(expect_head=rows[-1]["row_hash"])["rows"] == 5


def _raw(path, sql: str, *args) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql, args)


def test_edited_row_is_detected(ledger, ledger_path):
    _fill(ledger)
    _raw(
        ledger_path,
        "UPDATE privacy_events SET event_json = ? WHERE seq = 2",
        json.dumps({"kind": "pure_epsilon", "epsilon": 0.01, "mechanism": "exponential"}),
    )
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
    assert ledger.verify()["rows"] == 4  # a shorter chain is still a valid chain
    with pytest.raises(LedgerIntegrityError, match="expected"):
        ledger.verify(expect_head=head)


def test_sqlalchemy_url(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'by_url.db'}")
    _fill(ledger)
    assert ledger.verify()["rows"] == 5
    reopened = Ledger(str(tmp_path / "by_url.db"))  # same file as a plain path
    assert reopened.verify() == ledger.verify()
    assert reopened.spent("adult", DELTA) == pytest.approx(
        epsilon_pld([PureEpsilonEvent(0.3), PureEpsilonEvent(0.2)], DELTA)
    )


def _worker(path: str, worker: int, n: int) -> None:
    ledger = Ledger(path)
    for i in range(n):
        reservation = ledger.reserve("shared", f"w{worker}", f"stage-{i}", [GaussianEvent(100.0, 1.0)], DELTA, 1e6)
        ledger.record(reservation, [GaussianEvent(100.0, 1.0)])


@pytest.mark.slow
def test_concurrent_writers_never_lose_double_count_or_fork(ledger_path):
    """4 spawned processes x 25 reserve+record on one SQLite file (slow: each child imports scipy
    and dp_accounting before it writes)."""
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
    from pipelines.gates.ledger import ledger_gate

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


KEY = bytes.fromhex("ab" * 32)


def test_gate_catches_rows_deleted_up_to_the_head_a_release_recorded(ledger, ledger_path, tmp_path):
    from pipelines.gates.ledger import ledger_gate
    from pipelines.config import Paths
    from tasks.common import released_head

    _fill(ledger)
    head = ledger.head()  # what the release stage writes into latest.json
    assert head == {"seq": 5, "hash": ledger.rows()[-1]["row_hash"], "chain": PLAIN}
    index = tmp_path / "releases" / "adult" / "latest.json"
    index.parent.mkdir(parents=True)
    index.write_text(json.dumps({"released": [], "ledger_head": head}))
    expect, source = released_head(Paths("adult", tmp_path))
    assert (expect, source) == (head, "releases/adult/latest.json")
    assert released_head(Paths("census", tmp_path))[0] is None  # no release yet
    # A later run appends rows: the recorded head is still in the chain, the gate passes.
    later = ledger.session("adult", "run-3", "train@dpwgan", DELTA, 10.0)
    later.reserve([PureEpsilonEvent(0.1)])
    later.record([PureEpsilonEvent(0.1)])
    model_rows = [later.reservation.seq, *later.row_ids]
    assert ledger_gate(ledger, "adult", DELTA, 10.0, model_rows, expect_head=expect, head_source=source).passed
    # Deleting the trailing rows (the recorded head and everything after it) leaves a valid shorter chain
    # that only the recorded head exposes.
    _raw(ledger_path, "DELETE FROM privacy_events WHERE seq >= 5")
    assert ledger.verify()["rows"] == 4
    assert ledger_gate(ledger, "adult", DELTA, 10.0, [1, 2], expect_head=None).passed
    gate = ledger_gate(ledger, "adult", DELTA, 10.0, [1, 2], expect_head=expect, head_source=source)
    assert not gate.passed and not gate.evidence["chain_ok"]
    assert "4 rows" in gate.evidence["error"] and "seq 5" in gate.evidence["error"]
    assert "deleted" in gate.evidence["error"] and "releases/adult/latest.json" in gate.evidence["error"]
    # Rewriting a row below the recorded head (with a recomputed chain) is caught too.
    with pytest.raises(LedgerIntegrityError, match="rows 5..5"):
        ledger.verify(expect_head=expect)


def _rewrite_plain(path, from_seq: int, edit: dict, chain: str | None = None) -> None:
    """An attacker without the key: edit a row, then recompute every hash from `from_seq` on with the
    documented plain formula (optionally relabelling the rows' chain)."""
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute("SELECT * FROM privacy_events ORDER BY seq")]
        prev = rows[from_seq - 2]["row_hash"] if from_seq > 1 else GENESIS_HASH
        for row in rows[from_seq - 1 :]:
            row.update(edit if row["seq"] == from_seq else {})
            row["chain"] = chain or row["chain"]
            plain = hashlib.sha256(
                (
                    prev
                    + json.dumps(
                        {k: row[k] for k in ledger_module.HASHED_FIELDS}, sort_keys=True, separators=(",", ":")
                    )
                ).encode()
            ).hexdigest()
            conn.execute(
                "UPDATE privacy_events SET event_json = ?, chain = ?, prev_hash = ?, row_hash = ? WHERE seq = ?",
                (row["event_json"], row["chain"], prev, plain, row["seq"]),
            )
            prev = plain


def test_hmac_chain_catches_a_ledger_rewritten_with_recomputed_plain_hashes(ledger_path, capsys, monkeypatch):
    keyed = Ledger(str(ledger_path), KEY)
    _fill(keyed)
    report = keyed.verify()  # untampered: passes with the key
    assert report["rows"] == 5 and report["chain"] == HMAC and report["hmac_from_seq"] == 1
    first = keyed.rows()[0]
    mac_key = hmac.new(KEY, b"ledger-chain", hashlib.sha256).digest()
    payload = GENESIS_HASH + json.dumps(
        {**{k: first[k] for k in ledger_module.HASHED_FIELDS}, "chain": HMAC}, sort_keys=True, separators=(",", ":")
    )
    assert first["row_hash"] == hmac.new(mac_key, payload.encode(), hashlib.sha256).hexdigest()
    assert first["row_hash"] != row_hash(GENESIS_HASH, {**first, "chain": PLAIN})
    cheaper = json.dumps({"kind": "pure_epsilon", "epsilon": 0.01, "mechanism": "exponential"})
    _rewrite_plain(ledger_path, 3, {"event_json": cheaper})
    with pytest.raises(LedgerIntegrityError, match=r"seq 3\b.*without the key"):
        keyed.verify()
    _rewrite_plain(ledger_path, 3, {"event_json": cheaper}, chain=PLAIN)  # relabelled plain: a downgrade
    with pytest.raises(LedgerIntegrityError, match=r"seq 3\b.*never goes back"):
        keyed.verify()
    # and through the command line a steward runs
    assert _cli_verify(ledger_path, KEY.hex(), monkeypatch) == 2
    assert "seq 3: chain 'sha256' after HMAC rows" in capsys.readouterr().err


def _cli_verify(ledger_path, key_hex: str | None, monkeypatch) -> int:
    """`synthrelease ledger verify` on the project's params.yaml pointed at `ledger_path`."""
    import yaml

    from flows import cli

    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    params["privacy"] = {**params["privacy"], "ledger": str(ledger_path)}
    params["privacy"].pop("noise_key_file", None)
    path = ledger_path.parent / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    monkeypatch.chdir(ledger_path.parent)
    if key_hex:
        monkeypatch.setenv("SYNTHRELEASE_NOISE_KEY", key_hex)
    else:
        monkeypatch.delenv("SYNTHRELEASE_NOISE_KEY", raising=False)
    return cli.main(["--params", str(path), "ledger", "verify"])


def test_hmac_ledger_needs_the_key_and_old_plain_ledgers_migrate(ledger_path, capsys, monkeypatch):
    plain = Ledger(str(ledger_path))
    _fill(plain)
    _raw(ledger_path, "ALTER TABLE privacy_events DROP COLUMN chain")  # a ledger from before the column
    old = Ledger(str(ledger_path))  # opening migrates it
    assert old.verify()["rows"] == 5 and {r["chain"] for r in old.rows()} == {PLAIN}
    head = old.verify()["head"]
    # A steward adds a key: the old rows stay as they are, HMAC from the next row on (recorded per row).
    keyed = Ledger(str(ledger_path), KEY)
    assert keyed.verify() == {"rows": 5, "head": head, "chain": PLAIN, "hmac_from_seq": None}
    keyed.reserve("adult", "run-3", "train@ppem", [PureEpsilonEvent(0.1)], DELTA, 10.0)
    assert [r["chain"] for r in keyed.rows()] == [PLAIN] * 5 + [HMAC]
    assert keyed.verify()["hmac_from_seq"] == 6 and keyed.verify(expect_head={"seq": 5, "hash": head})["rows"] == 6
    # Without the key: verify and appends say the key is needed; nothing is written.
    with pytest.raises(InputError, match="seq 6 is chained with HMAC-SHA256.*SYNTHRELEASE_NOISE_KEY"):
        old.verify()
    with pytest.raises(InputError, match="appending needs that key"):
        old.reserve("adult", "run-4", "train", [PureEpsilonEvent(0.1)], DELTA, 10.0)
    assert len(old.rows()) == 6 and old.spent("adult", DELTA) > 0  # reading rows needs no key
    assert _cli_verify(ledger_path, None, monkeypatch) == 2
    assert "needs that key" in capsys.readouterr().err
    assert _cli_verify(ledger_path, KEY.hex(), monkeypatch) == 0
    assert json.loads(capsys.readouterr().out)["hmac_from_seq"] == 6


def test_a_paid_release_test_bit_is_reused_only_in_the_ledger_that_holds_its_rows(tmp_path):
    """tasks/check.py's stored release test (`ledger_row_ids` under "evidence", their `ledger_row_hashes` beside it):
    reused where every (seq, row hash) pair is a row of the data set, not in a new ledger whose rows merely carry
    the same numbers, nor when it records no hashes (a result stored before they were: computed and paid again)."""
    from pipelines.privacy.paid import paid_before

    paid = Ledger(str(tmp_path / "old.sqlite"))
    session = paid.session("adult", "run-1", "check@dpwgan", DELTA, 10.0)
    session.reserve([PureEpsilonEvent(0.1)])
    ids = [*session.reservation.row_ids, *session.record([PureEpsilonEvent(0.1)])]
    assert ids == [1, 2] and paid.row_hashes("adult", ids) == [r["row_hash"] for r in paid.rows("adult")]
    stored = tmp_path / "release_test.json"
    gate = {"name": "release_test", "passed": True, "evidence": {"inputs": "abc", "ledger_row_ids": ids}}
    stored.write_text(json.dumps({**gate, "ledger_row_hashes": paid.row_hashes("adult", ids)}))
    assert paid_before(stored, "abc", paid, "adult", within="evidence")["passed"] is True
    assert paid_before(stored, "another table", paid, "adult", within="evidence") is None
    assert paid_before(stored, "abc", paid, "census", within="evidence") is None  # another data set's rows

    fresh = Ledger(str(tmp_path / "new.sqlite"))  # the same numbers, other content
    other = fresh.session("adult", "run-9", "train@aim", DELTA, 10.0)
    other.reserve([PureEpsilonEvent(0.1)])
    other.record([PureEpsilonEvent(0.1)])
    assert [r["seq"] for r in fresh.rows("adult")] == ids
    assert paid_before(stored, "abc", fresh, "adult", within="evidence") is None

    stored.write_text(json.dumps(gate))  # no hashes recorded
    assert paid_before(stored, "abc", paid, "adult", within="evidence") is None
    with pytest.raises(ValueError, match=r"no ledger rows \[3\]"):
        paid.row_hashes("adult", [1, 3])
