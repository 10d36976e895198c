"""One neighbouring relation (add/remove one row) for the split and the row count.

The train/holdout side of a row is a keyed hash of that row (and its occurrence index among identical rows)
alone, so a neighbouring table gives a neighbouring training set; the training row count n is private, so every plan,
q = B/n and default synthetic
row count uses the public n̂ (the schema's documented count, else a noisy count recorded in the ledger).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.config import parse_params
from pipelines.data.schema import Schema
from pipelines.data.transform import train_holdout_split
from pipelines.errors import InputError
from pipelines.privacy.row_loss import QUERY as ROW_LOSS

PROJECT = Path(__file__).resolve().parents[1]
KEY = hashlib.sha256(b"test split key").digest()


def ids_of(df: pd.DataFrame) -> set[int]:
    return set(df["_id"].tolist())


def content(df: pd.DataFrame, schema: Schema) -> Counter:
    """The multiset of rows (their schema values): what a generator sees, whichever copy of a repeated row it is."""
    return Counter(map(tuple, df[schema.names].astype(str).to_numpy().tolist()))


@pytest.mark.slow
def test_adding_or_removing_a_row_moves_no_other_row(adult_raw: pd.DataFrame, adult_schema: Schema) -> None:
    df = adult_raw.assign(_id=np.arange(len(adult_raw)))  # _id is carried along, not hashed
    repeated = df.duplicated(subset=adult_schema.names, keep=False)
    assert repeated.sum() > 40  # Adult repeats some rows: the occurrence index matters here
    distinct = set(df.loc[~repeated, "_id"])
    train, holdout = train_holdout_split(df, 0.2, KEY, adult_schema.names)
    new = df.iloc[[7]].assign(age=77, fnlwgt=123_456.5, _id=-1)  # a row not in the table
    added = pd.concat([df.iloc[:1000], new, df.iloc[1000:]], ignore_index=True)
    train_a, holdout_a = train_holdout_split(added, 0.2, KEY, adult_schema.names)
    assert ids_of(train_a) - {-1} == ids_of(train) and ids_of(holdout_a) - {-1} == ids_of(holdout)
    assert (-1 in ids_of(train_a)) != (-1 in ids_of(holdout_a))
    removed = df.drop(index=[3, 20_000]).reset_index(drop=True)
    train_r, holdout_r = train_holdout_split(removed, 0.2, KEY, adult_schema.names)
    assert ids_of(train_r) == ids_of(train) - {3, 20_000} and ids_of(holdout_r) == ids_of(holdout) - {3, 20_000}
    # row order does not matter either: a distinct row's side is a function of its values and the key, and a
    # repeated row's copies keep their sides as a multiset (which copy gets which index is immaterial)
    shuffled = train_holdout_split(df.sample(frac=1.0, random_state=0), 0.2, KEY, adult_schema.names)
    assert ids_of(shuffled[1]) & distinct == ids_of(holdout) & distinct
    assert content(shuffled[0], adult_schema) == content(train, adult_schema)


def test_removing_one_copy_of_a_repeated_row_changes_the_training_multiset_by_at_most_that_row(
    bc_raw: pd.DataFrame, bc_schema: Schema
) -> None:
    """Ten copies of each of 40 rows: whichever copy is removed, the training multiset loses at most one copy of
    that row and nothing else (add/remove-one neighbours give neighbouring training sets)."""
    df = pd.concat([bc_raw.iloc[:40]] * 10, ignore_index=True)
    train, _ = train_holdout_split(df, 0.2, KEY, bc_schema.names)
    before = content(train, bc_schema)
    for drop in (0, 45, 399):
        after = content(train_holdout_split(df.drop(index=drop), 0.2, KEY, bc_schema.names)[0], bc_schema)
        diff = (before - after) + (after - before)
        assert sum(diff.values()) <= 1 and set(diff) <= set(content(df.loc[[drop]], bc_schema))


def test_repeated_rows_are_spread_over_both_sides_as_independent_rows(bc_raw: pd.DataFrame, bc_schema: Schema) -> None:
    """Exchangeable reference rows: 3,000 rows drawn with replacement from 300 distinct ones. The share
    of holdout rows equal to some training row is that of training rows equal to another training row, within
    binomial noise (measured 0.99-1.00 for both; one side per row content would make it 0 for the holdout)."""
    rng = np.random.default_rng(0)
    df = bc_raw.iloc[:300].iloc[rng.integers(0, 300, 3000)].reset_index(drop=True)
    train, holdout = train_holdout_split(df, 0.2, KEY, bc_schema.names)
    seen = content(train, bc_schema)
    rows = lambda t: list(map(tuple, t[bc_schema.names].astype(str).to_numpy().tolist()))  # noqa: E731
    holdout_rate = np.mean([seen[r] > 0 for r in rows(holdout)])
    train_rate = np.mean([seen[r] > 1 for r in rows(train)])
    margin = 4 * math.sqrt(train_rate * (1 - train_rate) / len(holdout) + 1e-4)
    assert holdout_rate > 0.9 and abs(holdout_rate - train_rate) <= margin, (holdout_rate, train_rate)
    assert abs(len(holdout) / len(df) - 0.2) <= 4 * math.sqrt(0.16 / len(df))


def test_same_key_same_split_other_key_other_split(bc_raw: pd.DataFrame, bc_schema: Schema) -> None:
    df = bc_raw.assign(_id=np.arange(len(bc_raw)))
    holdout = ids_of(train_holdout_split(df, 0.2, KEY, bc_schema.names)[1])
    assert ids_of(train_holdout_split(df.copy(), 0.2, bytes(KEY), bc_schema.names)[1]) == holdout
    other = ids_of(train_holdout_split(df, 0.2, hashlib.sha256(b"another key").digest(), bc_schema.names)[1])
    # independent keys: the overlap is ~0.2·|holdout| ≈ 23 rows; the same split would overlap in all ~114
    assert len(holdout & other) < 0.5 * len(holdout)


@pytest.mark.integration
def test_holdout_share_is_binomial_on_adult(adult_raw: pd.DataFrame, adult_schema: Schema) -> None:
    n = len(adult_raw)
    margin = 4 * math.sqrt(0.2 * 0.8 / n)  # 4 binomial standard deviations of the share (0.0072)
    for i in range(3):
        key = hashlib.sha256(f"key {i}".encode()).digest()
        train, holdout = train_holdout_split(adult_raw, 0.2, key, adult_schema.names)
        assert len(train) + len(holdout) == n
        assert abs(len(holdout) / n - 0.2) <= margin, (i, len(holdout))


# -- the split key and the public row count in the prepare stage ---------------------------------------------


def schema_text(with_rows: bool) -> str:
    text = (PROJECT / "schemas" / "breast_cancer.yaml").read_text()
    return text if with_rows else re.sub(r"(?m)^rows:\n(  .*\n)+", "", text)


def make_root(tmp_path: Path, bc_raw: pd.DataFrame, with_rows: bool) -> tuple[Path, dict]:
    """A root with the validated table, and the raw params mapping the tests edit (`parse_params` checks it)."""
    root = tmp_path / "repo"
    (root / "schemas").mkdir(parents=True)
    (root / "schemas" / "breast_cancer.yaml").write_text(schema_text(with_rows))
    (root / "data" / "raw" / "breast_cancer").mkdir(parents=True)
    bc_raw.to_parquet(root / "data" / "raw" / "breast_cancer" / "validated.parquet", index=False)
    (root / "reports" / "breast_cancer").mkdir(parents=True)  # validation's counts: every row kept as it was
    (root / "reports" / "breast_cancer" / "validation.json").write_text(
        json.dumps(
            {"rows_in": len(bc_raw), "rows_out": len(bc_raw), "rows_dropped": 0, "rows_clipped": 0, "columns": {}}
        )
    )
    params = {
        "dataset": {
            "name": "breast_cancer",
            "source": "bundled:breast_cancer",
            "holdout_fraction": 0.2,
            "max_dropped_fraction": 0.02,
        },
        "privacy": {
            "delta": 1e-5,
            "lifetime_epsilon": 10.0,
            "ledger": "ledger/privacy.sqlite",
            "row_count_epsilon": 0.05,
            "release_epsilon": 1.0,
        },
        "device": "cpu",
        "evaluate": {"n_samples": None},
        "generators": ["dpwgan"],
        "dpwgan": {"epsilon": 3.0, "steps": 10, "batch_size": 64},
    }
    return root, params


def ledger_rows(root: Path, row_loss: bool = False) -> list[tuple]:
    """(stage, status, event) of each ledger row; without `row_loss`, leaving out the rows of prepare's row-loss
    test (tests/test_row_loss.py), which runs before the count: these tests are about the count."""
    path = root / "ledger" / "privacy.sqlite"
    if not path.exists():
        return []
    with sqlite3.connect(path) as con:
        rows = con.execute("SELECT stage, status, event_json FROM privacy_events ORDER BY seq").fetchall()
    return [r for r in rows if row_loss or ROW_LOSS not in r[2]]


def test_split_key_salt_file_or_steward_key(tmp_path: Path, bc_raw: pd.DataFrame, monkeypatch) -> None:
    from tasks.common import salt_path, split_key

    monkeypatch.delenv("SYNTHRELEASE_NOISE_KEY", raising=False)
    root, params = make_root(tmp_path, bc_raw, True)
    path = salt_path(parse_params(params), root)
    assert path == root / "ledger" / "breast_cancer.split-salt"  # next to the ledger, outside data/prepared
    key, source = split_key(parse_params(params), root)
    assert path.exists() and len(path.read_text().strip()) == 64 and oct(path.stat().st_mode & 0o777) == "0o600"
    assert split_key(parse_params(params), root)[0] == key and str(path) in source  # created once, then reused
    path.unlink()
    assert split_key(parse_params(params), root)[0] != key  # deleting the salt re-randomises the split
    url = {**params, "privacy": {**params["privacy"], "ledger": "postgresql://host/db"}}
    assert salt_path(parse_params(url), root) == root / "data" / "secrets" / "breast_cancer.split-salt"
    steward = "ab" * 32
    monkeypatch.setenv("SYNTHRELEASE_NOISE_KEY", steward)
    derived, source = split_key(parse_params(params), root)
    assert derived != bytes.fromhex(steward) and "noise key" in source
    assert (
        derived
        == hmac.new(
            bytes.fromhex(steward), b"synthrelease/train-holdout-split/v1\x1fbreast_cancer", hashlib.sha256
        ).digest()
    )


def test_documented_rows_are_checked_against_a_noisy_count(tmp_path: Path, bc_raw: pd.DataFrame, monkeypatch) -> None:
    from tasks.prepare import prepare

    monkeypatch.setenv("SYNTHRELEASE_NOISE_KEY", "ab" * 32)  # keyed noise: the same count on every run
    root, params = make_root(tmp_path, bc_raw, True)
    summary = prepare(parse_params(params), root)
    assert summary["rows_public"] == 455 and "rows.count 569" in summary["rows_public_source"]
    assert "checked against a noisy count (ε = 0.05" in summary["rows_public_source"]
    rows = ledger_rows(root)  # the check's count is charged like the undocumented one
    assert [r[:2] for r in rows] == [("prepare", "planned"), ("prepare", "spent")]
    assert json.loads(rows[1][2])["scale"] == 20.0 and len(summary["ledger_row_ids"]) == 1
    assert summary["rows_train"] + summary["rows_holdout"] == 569
    layout = json.loads((root / "data/prepared/breast_cancer/layout.json").read_text())
    assert layout["rows_public"] == 455 and layout["rows_public_source"] == summary["rows_public_source"]
    again = prepare(parse_params(params), root)  # the salt survives a re-run of prepare: the same split
    assert (again["rows_train"], again["rows_holdout"]) == (summary["rows_train"], summary["rows_holdout"])
    # ... and the same rows, split and ε: the count already paid for, not a second spend
    assert ledger_rows(root) == rows and again["ledger_row_ids"] == summary["ledger_row_ids"]
    paid = json.loads((root / "data/row_counts/breast_cancer.json").read_text())
    assert paid["ledger_row_ids"] == summary["ledger_row_ids"] and isinstance(paid["noisy"], int)
    params["privacy"]["row_count_epsilon"] = 0.1  # another ε is another release: charged
    prepare(parse_params(params), root)
    assert [r[:2] for r in ledger_rows(root)] == [("prepare", "planned"), ("prepare", "spent")] * 2


def test_a_paid_count_is_reused_only_by_the_ledger_rows_it_was_paid_with(
    tmp_path: Path, bc_raw: pd.DataFrame, monkeypatch
) -> None:
    """A new ledger numbers its rows 1, 2, ... again: a count paid in the old one is not reused there because rows
    with its seqs exist, only where each row's chained hash is the one recorded with it."""
    from pipelines.privacy.events import PureEpsilonEvent
    from tasks.common import ledger
    from tasks.prepare import prepare

    monkeypatch.setenv("SYNTHRELEASE_NOISE_KEY", "ab" * 32)  # keyed noise: the same count on every run
    root, params = make_root(tmp_path, bc_raw, True)
    first = prepare(parse_params(params), root)
    stored = root / "data/row_counts/breast_cancer.json"
    paid, old = json.loads(stored.read_text()), ledger(parse_params(params), root)
    ids, by_seq = paid["ledger_row_ids"], {r["seq"]: r for r in old.rows("breast_cancer")}
    assert ids == first["ledger_row_ids"] and len(ids) == 1 and by_seq[ids[0]]["stage"] == "prepare"
    assert paid["ledger_row_hashes"] == [by_seq[ids[0]]["row_hash"]]

    params["privacy"]["ledger"] = "vault/privacy.sqlite"  # the steward moves to a new database
    new = ledger(parse_params(params), root)
    while len(new.rows("breast_cancer")) < max(by_seq):  # rows with the old numbers, other content
        other = new.session("breast_cancer", "elsewhere", "train@dpwgan", 1e-5, 10.0)
        other.reserve([PureEpsilonEvent(0.5)])
        other.record([PureEpsilonEvent(0.5)])
    before = len(new.rows("breast_cancer"))
    assert set(ids) <= {r["seq"] for r in new.rows("breast_cancer")}
    moved = prepare(parse_params(params), root)
    charged = {r["seq"]: r for r in new.rows("breast_cancer")[before:]}
    (count,) = moved["ledger_row_ids"]  # charged anew, in the new ledger
    assert count in charged and json.loads(charged[count]["event_json"])["query"] == "training row count"
    assert charged[count - 1]["status"] == "planned" and len(old.rows("breast_cancer")) == len(by_seq)
    after = len(new.rows("breast_cancer"))
    again = prepare(parse_params(params), root)  # the same ledger: reused, nothing charged
    assert again["ledger_row_ids"] == [count] and len(new.rows("breast_cancer")) == after

    stored.write_text(
        json.dumps({k: v for k, v in json.loads(stored.read_text()).items() if k != "ledger_row_hashes"})
    )  # a count stored before rows carried hashes
    unhashed = prepare(parse_params(params), root)
    assert unhashed["ledger_row_ids"] == [after + 2] and len(new.rows("breast_cancer")) == after + 2  # paid again


def test_documented_rows_trusted_unchecked_spend_nothing(tmp_path: Path, bc_raw: pd.DataFrame, monkeypatch) -> None:
    from tasks.prepare import prepare

    monkeypatch.delenv("SYNTHRELEASE_NOISE_KEY", raising=False)
    root, params = make_root(tmp_path, bc_raw, True)
    params["privacy"]["row_count_epsilon"] = None
    summary = prepare(parse_params(params), root)
    assert summary["rows_public"] == 455 and ledger_rows(root) == [] and summary["ledger_row_ids"] == []
    assert summary["rows_public_source"].endswith("documented: " + load_schema_rows_source())


def load_schema_rows_source() -> str:
    from pipelines.data.schema import load_schema

    return load_schema(PROJECT / "schemas" / "breast_cancer.yaml").rows.source


def test_an_extract_of_the_documented_table_stops_prepare(tmp_path: Path, bc_raw: pd.DataFrame) -> None:
    """The schema documents 569 rows, the table holds 60 of them (an extract, or rows
    dropped): about 48 training rows against the documented 455, 407 apart, beyond the 389-row slack. The
    noisy count's noise is fixed (an internal release's noise seed), so the test does not depend on a draw."""
    from tasks.prepare import prepare

    root, params = make_root(tmp_path, bc_raw.iloc[:60], True)
    params["privacy"]["internal_release"] = True
    params["dataset"]["noise_seed"] = 0
    with pytest.raises(
        InputError,
        match=r"breast_cancer\.yaml.*rows\.count 569 documents 455 training rows, but "
        r"the table prepare read has about \d+ .*spent and recorded.*\(389 rows\).*Fix: set 'rows: "
        r"\{count, source\}' to the documented size of the table you release",
    ):
        prepare(parse_params(params), root)
    assert not (root / "data" / "prepared").exists()  # nothing written
    assert [r[:2] for r in ledger_rows(root)] == [("prepare", "planned"), ("prepare", "spent")]  # the spend, recorded
    with pytest.raises(InputError, match=r"rows\.count 569 documents 455"):  # run again unchanged: refused again,
        prepare(parse_params(params), root)  # on the count already paid for
    assert [r[:2] for r in ledger_rows(root)] == [("prepare", "planned"), ("prepare", "spent")]


def test_the_documented_count_check_slack() -> None:
    from pipelines.privacy.row_count import contradiction_slack

    # ln(1e4)/0.05 + 5·√(569·0.2·0.8) + (0.02·569 + ln(1e4)/0.05)·0.8 + 1 = 184.21 + 47.71 + 9.10 + 147.37 + 1
    assert contradiction_slack(569, 0.2, 0.05, 0.02, 0.05) == pytest.approx(389.383, abs=1e-3)
    # Adult's documented 48,842 rows: 184.21 + 442.01 + 781.47 + 147.37 + 1; a 16,000-row extract is 26,274 rows short
    assert contradiction_slack(48842, 0.2, 0.05, 0.02, 0.05) == pytest.approx(1556.05, abs=0.01)


def test_no_row_count_at_all_is_a_configuration_error(tmp_path: Path) -> None:
    from pipelines.data.schema import load_schema
    from tasks.common import check_against_schema

    (tmp_path / "bc.yaml").write_text(schema_text(False))
    _, params = make_root(tmp_path, pd.DataFrame(), True)
    params["privacy"]["row_count_epsilon"] = None
    with pytest.raises(
        InputError,
        match=r"row_count_epsilon' is null, but the schema 'breast_cancer' declares no "
        r"public 'rows'.*Fix: set 'row_count_epsilon: 0.05'",
    ):
        check_against_schema(parse_params(params), load_schema(tmp_path / "bc.yaml"))


def test_noisy_count_is_reserved_before_the_rows_are_read(tmp_path: Path, bc_raw: pd.DataFrame, monkeypatch) -> None:
    import tasks.prepare as prep

    monkeypatch.setenv("SYNTHRELEASE_NOISE_KEY", "ab" * 32)  # keyed noise: the same count on every run
    root, params = make_root(tmp_path, bc_raw, False)
    real_read = pd.read_parquet

    def read_after_reserve(path, *a, **k):
        assert [r[:2] for r in ledger_rows(root)] == [("prepare", "planned")], "rows read before the reservation"
        return real_read(path, *a, **k)

    monkeypatch.setattr(prep.pd, "read_parquet", read_after_reserve)
    summary = prep.prepare(parse_params(params), root)
    rows = ledger_rows(root)
    assert [r[:2] for r in rows] == [("prepare", "planned"), ("prepare", "spent")]
    assert json.loads(rows[1][2]) == {
        "kind": "discrete_laplace",
        "scale": 20.0,
        "sensitivity": 1,
        "count": 1,
        "dims": 1,
        "query": "training row count",
    }  # exact Lap_ℤ(1/0.05)
    n, n_hat = summary["rows_train"], summary["rows_public"]
    assert n_hat != n and abs(n_hat - n) <= 20 * math.log(1e4)  # Laplace(20) noise (steward key), tail 1e-4
    assert "Laplace" in summary["rows_public_source"] and "row_count_epsilon = 0.05" in summary["rows_public_source"]
    assert len(summary["ledger_row_ids"]) == 1


def test_leftover_split_seed_is_a_clear_error(tmp_path: Path) -> None:
    from pipelines.config import load_params

    text = (
        (PROJECT / "params.yaml")
        .read_text()
        .replace("  holdout_fraction: 0.2", "  holdout_fraction: 0.2\n  split_seed: 0", 1)
    )
    (tmp_path / "params.yaml").write_text(text)
    with pytest.raises(InputError, match=r"params\.yaml.*split_seed' was removed.*Fix: delete 'split_seed:'"):
        load_params(tmp_path / "params.yaml")


@pytest.mark.slow
def test_generator_uses_public_count_not_the_rows_it_reads(tmp_path: Path, bc_raw: pd.DataFrame, monkeypatch) -> None:
    import tasks.evaluate as evaluate
    from tasks.prepare import prepare
    from pipelines.data.encoded import EncodedTable
    from tasks.train import train

    monkeypatch.delenv("SYNTHRELEASE_NOISE_KEY", raising=False)
    root, params = make_root(tmp_path, bc_raw, True)
    prepare(parse_params(params), root)
    prepared = root / "data/prepared/breast_cancer"
    layout = json.loads((prepared / "layout.json").read_text())
    layout["rows_public"] = 300  # n̂ far from the ≈455 rows actually in the file
    (prepared / "layout.json").write_text(json.dumps(layout))
    table = EncodedTable(prepared / "train_encoded.parquet")
    assert len(table) == 300 and table.n_actual == layout["rows_train"] != 300
    privacy = train(parse_params(params), "dpwgan", "test", root)
    event, calibration = privacy["events"]  # DP-SGD, then the calibration's Gaussian
    assert calibration["kind"] == "discrete_gaussian"  # exact noise on the counts
    assert event["sample_rate"] == pytest.approx(64 / 300) and event["steps"] == 10  # q = B/n̂
    assert privacy["n_rows"] == privacy["rows_public"] == 300 and "rows.count 569" in privacy["rows_public_source"]

    seen = {}

    def capture(params, generator, root, n, out, keep):
        seen["n"] = n
        raise StopIteration

    monkeypatch.setattr(evaluate, "synthetic_table", capture)
    with pytest.raises(StopIteration):
        evaluate.evaluate(parse_params(params), "dpwgan", root)
    assert seen["n"] == 300  # evaluate.n_samples: null -> n̂, not the file's row count

    from tasks.budget import release_parts, selection

    one = parse_params({**params, "generators": ["dpwgan"], "weights": {"generators": []}})
    (prepared, part, tested), _ = release_parts(one, root, selection(one, root))  # prepare, the generator, its test
    assert tested.name == "release_test" and tested.epsilon == 0.1 and prepared.name == "prepare"  # defaults
    assert part.planner(1.0)[0].sample_rate == pytest.approx(64 / 300)  # the pre-flight check plans with n̂ too
