"""The ledger's populations: one lifetime budget per population, whatever tables it is released through; a
table's population and privacy unit are fixed by its first rows; rows carry both inside their hash."""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
from dataclasses import replace

import pytest

from pipelines.errors import BudgetExceededError, BudgetOverspentError, InputError, LedgerIntegrityError
from pipelines.privacy.events import LaplaceEvent
from pipelines.privacy.ledger import GENESIS_HASH, HASHED_FIELDS, HMAC, PLAIN, Ledger

DELTA = 1e-5
BUDGET = 1.0
KEY = bytes.fromhex("cd" * 32)
UNIT = "subject_id<=5"
# Laplace(b, Δ₁ = 1) is (1/b)-DP, and the PLD of a Laplace composition at δ = 1e-5 is the sum of the ε's
# less about 2e-5 per event, so every total below is known to within 1e-3.
EPS_A, EPS_B_SMALL, EPS_B_LARGE, EPS_TINY = 0.5, 0.25, 0.8, 0.1
A_EVENT, B_SMALL, B_LARGE = LaplaceEvent(2.0, 1.0), LaplaceEvent(4.0, 1.0), LaplaceEvent(1.25, 1.0)
TINY = LaplaceEvent(10.0, 1.0)


def _sha(prev: str, fields: dict) -> str:
    """The documented plain row hash: sha256(prev_hash + canonical JSON of the hashed fields)."""
    return hashlib.sha256((prev + json.dumps(fields, sort_keys=True, separators=(",", ":"))).encode()).hexdigest()


def _raw(path, sql: str, *args) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql, args)


def _declared(path, key: bytes | None = None, **tables: tuple[str, str]) -> Ledger:
    led = Ledger(str(path), key)
    for dataset, (population, unit) in tables.items():
        led.declare(dataset, population, unit)
    return led


@pytest.fixture
def path(tmp_path):
    return tmp_path / "ledger.sqlite"


def test_two_tables_of_one_population_share_its_lifetime_budget(path):
    led = _declared(path, A=("clinic", UNIT), B=("clinic", UNIT))
    spent_a = led.reserve("A", "run-1", "train", [A_EVENT], DELTA, BUDGET)
    led.record(spent_a, [A_EVENT])
    # B alone would fit (0.8 < 1): in a ledger where its population is empty the same reservation is granted.
    alone = _declared(path.with_name("alone.sqlite"), B=("clinic", UNIT))
    assert alone.check_budget("B", [B_LARGE], DELTA, BUDGET) == pytest.approx(EPS_B_LARGE, abs=1e-3)
    # Together with A's 0.5 it would reach 1.3 > 1: refused, nothing written.
    before = led.verify()
    with pytest.raises(BudgetExceededError) as info:
        led.reserve("B", "run-1", "train", [B_LARGE], DELTA, BUDGET)
    assert info.value.spent == pytest.approx(EPS_A, abs=1e-3)
    assert info.value.after == pytest.approx(EPS_A + EPS_B_LARGE, abs=1e-3)
    assert "population 'clinic'" in str(info.value) and "'A', 'B'" in str(info.value)
    with pytest.raises(BudgetExceededError):
        led.check_budget("B", [B_LARGE], DELTA, BUDGET)
    assert led.verify() == before
    # A smaller plan fits the shared remainder; both tables then read the population's total.
    led.reserve("B", "run-1", "train", [B_SMALL], DELTA, BUDGET)
    total = EPS_A + EPS_B_SMALL
    assert led.spent("A", DELTA) == pytest.approx(total, abs=1e-3)
    assert led.spent("B", DELTA) == led.spent("A", DELTA)
    assert led.spent_rdp("B", DELTA) >= led.spent("B", DELTA) - 1e-9
    assert led.effective_events("A") == led.effective_events("B") == [A_EVENT, B_SMALL]
    # rows() and row_hashes() stay per table.
    assert [r["dataset"] for r in led.rows("B")] == ["B"]
    assert [r["seq"] for r in led.rows("A")] == [1, 2]
    with pytest.raises(ValueError, match="no ledger rows"):
        led.row_hashes("B", [1])
    # Every new row carries the population and unit.
    assert {(r["population"], r["unit"]) for r in led.rows()} == {("clinic", UNIT)}
    # A handle that has not declared the tables reads them in the population their rows carry.
    assert Ledger(str(path)).spent("A", DELTA) == pytest.approx(total, abs=1e-3)


def test_record_rechecks_the_total_of_the_population(path):
    led = _declared(path, A=("clinic", UNIT), B=("clinic", UNIT))
    led.reserve("A", "run-1", "train", [A_EVENT], DELTA, BUDGET)
    plan_b = led.reserve("B", "run-1", "train", [B_SMALL], DELTA, BUDGET)
    with pytest.raises(BudgetOverspentError) as info:  # B's actuals (0.8) push A + B to 1.3
        led.record(plan_b, [B_LARGE])
    assert info.value.spent == pytest.approx(EPS_A, abs=1e-3)
    assert info.value.after == pytest.approx(EPS_A + EPS_B_LARGE, abs=1e-3)
    assert [r["status"] for r in led.rows("B")] == ["planned", "spent"]  # written all the same
    assert led.spent("A", DELTA) == pytest.approx(EPS_A + EPS_B_LARGE, abs=1e-3)
    # A reservation is named by its seq within its own table: B's seq on table A is unknown.
    with pytest.raises(ValueError, match="no reservation with seq 2 for data set 'A'"):
        led.record(replace(plan_b, dataset="A"), [A_EVENT])


def test_undeclared_tables_keep_separate_budgets_and_their_hashes(path):
    led = Ledger(str(path))
    for dataset in ("A", "B"):
        led.record(led.reserve(dataset, "run-1", "train", [B_LARGE], DELTA, BUDGET), [B_LARGE])
    assert led.spent("A", DELTA) == pytest.approx(EPS_B_LARGE, abs=1e-3)
    assert led.spent("B", DELTA) == pytest.approx(EPS_B_LARGE, abs=1e-3)
    assert led.population_tables("A") == ["A"] and led.population_tables("B") == ["B"]
    rows = led.rows()
    assert {(r["dataset"], r["population"], r["unit"]) for r in rows} == {("A", "A", "row"), ("B", "B", "row")}
    prev = GENESIS_HASH
    for row in rows:  # the defaults are not hashed: the hash of before the columns
        assert row["row_hash"] == _sha(prev, {k: row[k] for k in HASHED_FIELDS})
        prev = row["row_hash"]
    assert led.verify()["rows"] == 4


def test_a_declared_row_hashes_its_population_and_unit(path):
    led = _declared(path, A=("clinic", UNIT), B=("B", "row"))
    led.reserve("A", "run-1", "train", [A_EVENT], DELTA, BUDGET)
    led.reserve("B", "run-1", "train", [A_EVENT], DELTA, BUDGET)  # declared as the defaults: hashed without
    first, second = led.rows()
    assert first["row_hash"] == _sha(
        GENESIS_HASH, {**{k: first[k] for k in HASHED_FIELDS}, "population": "clinic", "unit": UNIT}
    )
    assert first["row_hash"] != _sha(GENESIS_HASH, {k: first[k] for k in HASHED_FIELDS})
    assert second["row_hash"] == _sha(first["row_hash"], {k: second[k] for k in HASHED_FIELDS})
    head = led.verify()["head"]
    _raw(path, "UPDATE privacy_events SET population = NULL WHERE seq = 2")  # reads the same: still valid
    assert led.verify()["head"] == head
    for seq, edit in (
        (1, "unit = 'row'"),
        (1, "population = NULL"),
        (2, "population = 'clinic'"),
        (2, "unit = 'subject_id<=2'"),
    ):
        _raw(path, f"UPDATE privacy_events SET {edit} WHERE seq = {seq}")
        with pytest.raises(LedgerIntegrityError, match=rf"seq {seq}: row_hash does not recompute"):
            led.verify()
        _raw(
            path,
            "UPDATE privacy_events SET population = ?, unit = ? WHERE seq = ?",
            *(("clinic", UNIT, 1) if seq == 1 else ("B", "row", 2)),
        )
        assert led.verify()["head"] == head


def test_a_tables_population_or_unit_cannot_change(path):
    led = _declared(path, A=("clinic", UNIT))
    plan = led.reserve("A", "run-1", "train", [A_EVENT], DELTA, BUDGET)
    before = led.verify()
    for population, unit in (("hospital", UNIT), ("clinic", "subject_id<=3"), ("clinic", "row")):
        other = _declared(path, A=(population, unit))
        for attempt in (
            lambda: other.reserve("A", "run-2", "train", [B_SMALL], DELTA, BUDGET),
            lambda: other.check_budget("A", [B_SMALL], DELTA, BUDGET),
            lambda: other.record(plan, [A_EVENT]),
        ):
            with pytest.raises(InputError) as info:
                attempt()
            message = str(info.value)
            assert "data set 'A'" in message
            assert f"population 'clinic', privacy unit '{UNIT}'" in message  # the earlier
            assert f"population '{population}', privacy unit '{unit}'" in message  # the new
            assert "same privacy_unit and population" in message and "new data set name" in message
        assert led.verify() == before  # nothing written
    # An undeclared handle writes under the defaults ('A', "row"): refused the same way.
    with pytest.raises(InputError, match="population 'A', privacy unit 'row'"):
        Ledger(str(path)).reserve("A", "run-2", "train", [B_SMALL], DELTA, BUDGET)
    # The fix it names works: a new data set name starts a new table in the population.
    renamed = _declared(path, A2=("clinic", UNIT))
    renamed.reserve("A2", "run-2", "train", [B_SMALL], DELTA, BUDGET)
    assert renamed.population_tables("clinic") == ["A", "A2"]
    # The original declaration still records its own reservation.
    assert led.record(plan, [A_EVENT]) == [3]
    assert led.verify()["rows"] == 3


def test_tables_of_one_population_all_declare_a_unit_or_none(path):
    led = _declared(path, A=("clinic", UNIT), B=("clinic", "row"))
    led.reserve("A", "run-1", "train", [A_EVENT], DELTA, BUDGET)
    before = led.verify()
    for attempt in (
        lambda: led.reserve("B", "run-1", "train", [B_SMALL], DELTA, BUDGET),
        lambda: led.check_budget("B", [B_SMALL], DELTA, BUDGET),
    ):
        with pytest.raises(
            InputError,
            match=r"population 'clinic' already has tables 'A' \(privacy unit "
            r"'subject_id<=5'\).*must all declare a privacy unit, or none",
        ):
            attempt()
    assert led.verify() == before
    # another declared unit (its own column and max_rows) protects the same person: it shares the budget
    other = _declared(path, E=("clinic", "patient<=20"))
    other.reserve("E", "run-1", "train", [B_SMALL], DELTA, BUDGET)
    assert other.population_tables("clinic") == ["A", "E"]
    # An undeclared table's name is its population: a declared table joining it must use its unit "row".
    Ledger(str(path)).reserve("C", "run-1", "train", [A_EVENT], DELTA, BUDGET)
    with pytest.raises(InputError, match="population 'C' already has tables 'C' \\(privacy unit 'row'\\)"):
        _declared(path, D=("C", UNIT)).reserve("D", "run-1", "train", [B_SMALL], DELTA, BUDGET)


def test_rows_from_before_the_columns_verify_and_are_their_own_population(path):
    old = Ledger(str(path))
    old.record(old.reserve("A", "run-1", "train", [A_EVENT], DELTA, BUDGET), [A_EVENT])
    old.reserve("B", "run-1", "train", [B_SMALL], DELTA, BUDGET)
    head = old.verify()["head"]
    for column in ("population", "unit"):  # a ledger from before the columns
        _raw(path, f"ALTER TABLE privacy_events DROP COLUMN {column}")
    led = _declared(path, N=("A", "row"))  # opening migrates it
    assert {(r["population"], r["unit"]) for r in led.rows()} == {(None, None)}
    assert led.verify() == {"rows": 3, "head": head, "chain": PLAIN, "hmac_from_seq": None}
    assert led.spent("A", DELTA) == pytest.approx(EPS_A, abs=1e-3)  # NULL: its own population
    assert led.spent("B", DELTA) == pytest.approx(EPS_B_SMALL, abs=1e-3)
    assert led.population_tables("A") == ["A"]
    # Old rows read as (their data set, "row"): an undeclared writer continues them, a changed declaration is
    # refused, and a new table declared in population "A" with unit "row" shares A's budget.
    old.reserve("A", "run-2", "train", [TINY], DELTA, BUDGET)
    with pytest.raises(InputError, match="population 'A', privacy unit 'row'"):
        _declared(path, A=("A", UNIT)).reserve("A", "run-3", "train", [B_SMALL], DELTA, BUDGET)
    with pytest.raises(BudgetExceededError):  # 0.5 + 0.1 + 0.8 > 1
        led.reserve("N", "run-3", "train", [B_LARGE], DELTA, BUDGET)
    led.reserve("N", "run-3", "train", [B_SMALL], DELTA, BUDGET)
    assert led.spent("N", DELTA) == pytest.approx(EPS_A + EPS_TINY + EPS_B_SMALL, abs=1e-3)
    assert led.spent("A", DELTA) == led.spent("N", DELTA)
    assert led.population_tables("A") == ["A", "N"]
    assert led.verify(expect_head={"seq": 3, "hash": head})["rows"] == 5


def test_hmac_chain_covers_the_population_and_unit(path):
    led = _declared(path, KEY, A=("clinic", UNIT), B=("clinic", UNIT))
    led.record(led.reserve("A", "run-1", "train", [A_EVENT], DELTA, BUDGET), [A_EVENT])
    led.reserve("B", "run-1", "train", [B_SMALL], DELTA, BUDGET)
    assert led.verify()["hmac_from_seq"] == 1 and led.verify()["chain"] == HMAC
    first = led.rows()[0]
    mac_key = hmac.new(KEY, b"ledger-chain", hashlib.sha256).digest()
    payload = GENESIS_HASH + json.dumps(
        {**{k: first[k] for k in HASHED_FIELDS}, "population": "clinic", "unit": UNIT, "chain": HMAC},
        sort_keys=True,
        separators=(",", ":"),
    )
    assert first["row_hash"] == hmac.new(mac_key, payload.encode(), hashlib.sha256).hexdigest()
    with pytest.raises(InputError, match="needs that key"):
        Ledger(str(path)).verify()
    _raw(path, "UPDATE privacy_events SET population = 'elsewhere' WHERE seq = 3")  # move B's plan out
    with pytest.raises(LedgerIntegrityError, match="seq 3: row_hash does not recompute"):
        led.verify()


def test_population_tables_lists_tables_in_the_order_of_their_first_row(path):
    led = _declared(path, Z=("clinic", UNIT), A=("clinic", UNIT), M=("other", "row"))
    assert led.population_tables("clinic") == []
    for dataset in ("Z", "M", "A", "Z"):
        led.reserve(dataset, "run-1", "train", [B_SMALL], DELTA, BUDGET)
    assert led.population_tables("clinic") == ["Z", "A"]
    assert led.population_tables("other") == ["M"]
    assert led.population_tables("Z") == []  # a declared table's name is not its population


def test_declare_needs_non_empty_names(path):
    led = Ledger(str(path))
    for args in (("", "p", "row"), ("A", "", "row"), ("A", "p", "")):
        with pytest.raises(ValueError, match="non-empty string"):
            led.declare(*args)
