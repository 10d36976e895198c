"""The declared privacy unit (`privacy_unit: {column, max_rows}` in the schema): contribution bounding and the split
of whole units.

Neighbouring relation: add/remove one unit, every row that carries one value of the unit column. A rule applied
to each unit's rows alone turns that into the relation every mechanism is accounted for
(pipelines/privacy/unit.py): add/remove at most k = max_rows rows.

Bounding (`bound`). Each unit keeps at most k of its rows, those with the k smallest keyed ranks

    r = HMAC-SHA256(key, pseudonym(u) | the row's canonical bytes | its occurrence index among the unit's
        identical rows),

a function of the unit's own rows and the steward's secret key alone. Adding or removing a unit u therefore
adds or removes the (at most k) kept rows of u and changes no other unit's kept rows: neighbouring tables give
tables that differ by at most k rows. Rows whose unit value is empty are each their own unit (their pseudonym
is keyed by the row's own bytes and occurrence), so they are never grouped with anyone. The kept set is not
biased towards any value of the row: the keyed rank is independent of the content for anyone without the key.

Pseudonyms. The unit value itself never leaves `validate`: the validated table carries `UNIT_COLUMN`, a keyed
pseudonym (HMAC-SHA256 of the value, 128 bits), used only to keep a unit's rows together in the split.

Split (`unit_holdout`). A unit goes to the holdout iff HMAC-SHA256(key, pseudonym) / 2^64 < holdout_fraction:
all of a unit's rows land on one side, so neighbouring tables give training sets (and holdouts) that differ by
at most k rows, as the accounting assumes.
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np
import pandas as pd

from pipelines.data.schema import PrivacyUnit
from pipelines.data.transform import keyed_uniforms, occurrence_bytes, row_bytes

UNIT_COLUMN = "__unit__"  # the validated table's pseudonym column
BOUND_CONTEXT = b"synthrelease/privacy-unit/bound/v1"
PSEUDONYM_CONTEXT = b"synthrelease/privacy-unit/pseudonym/v1"
SPLIT_CONTEXT = b"synthrelease/privacy-unit/split/v1"


def _subkey(key: bytes, context: bytes) -> bytes:
    return hmac.new(key, context, hashlib.sha256).digest()


def pseudonyms(values: pd.Series, rows: list[bytes], key: bytes) -> np.ndarray:
    """Each row's unit pseudonym (32 hex digits): HMAC of "unit" and the unit value; for an empty value, of "row",
    the row's bytes and its occurrence index among the empty-valued identical rows (each such row its own unit)."""
    sub = _subkey(key, PSEUDONYM_CONTEXT)
    text = values.astype("string").str.strip()
    empty = text.isna() | (text == "")
    lone = iter(occurrence_bytes([r for r, e in zip(rows, empty) if e]))
    out = []
    for value, is_empty in zip(text.tolist(), empty.tolist()):
        message = b"row\x1f" + next(lone) if is_empty else b"unit\x1f" + str(value).encode("utf-8")
        out.append(hmac.new(sub, message, hashlib.sha256).hexdigest()[:32])
    return np.asarray(out, dtype=object)


def bound(
    frame: pd.DataFrame, unit: PrivacyUnit, columns: list[str], key: bytes
) -> tuple[pd.DataFrame, np.ndarray, dict[str, int]]:
    """(the rows of `frame` each unit keeps, without the unit column and in table order; their pseudonyms; the
    steward-only counts {rows_read, units, rows_set_aside}): at most `unit.max_rows` rows per unit, chosen by the
    keyed rank of the module docstring over the row's values in `columns`."""
    rows = row_bytes(frame, columns)
    names = pseudonyms(frame[unit.column], rows, key)
    ranks = keyed_uniforms(
        _subkey(key, BOUND_CONTEXT), occurrence_bytes([n.encode() + b"\x1f" + r for n, r in zip(names, rows)])
    )
    order = np.lexsort((ranks, names))  # by unit, then by keyed rank within the unit
    position = pd.Series(names[order]).groupby(names[order], sort=False).cumcount().to_numpy()
    keep = np.zeros(len(frame), dtype=bool)
    keep[order[position < unit.max_rows]] = True
    kept = frame.drop(columns=[unit.column])[keep]
    counts = {"rows_read": int(len(frame)), "units": int(len(np.unique(names))), "rows_set_aside": int((~keep).sum())}
    return kept, names[keep], counts


def unit_holdout(names: np.ndarray, holdout_fraction: float, key: bytes) -> np.ndarray:
    """Whether each row (by its unit pseudonym) goes to the holdout: its unit's keyed uniform < holdout_fraction."""
    return keyed_uniforms(_subkey(key, SPLIT_CONTEXT), [str(n).encode() for n in names]) < holdout_fraction
