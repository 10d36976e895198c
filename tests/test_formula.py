"""A numeric column declared as a documented formula of other columns (`derived: {formula: ...}`): parsed into a
small arithmetic grammar, checked on the real rows within its tolerance, never modelled, published as the formula
of each synthetic row's sources."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.data.declared import to_published
from pipelines.data.formula import FormulaError, parse_formula
from pipelines.data.schema import load_schema
from pipelines.data.validation import row_loss_summary, validate_table
from pipelines.errors import InputError, SchemaError

LOANS = """
name: loans
description: fixed-rate loans
source: {documentation: "test fixture"}
target: term
on_invalid: drop
columns:
  amount: {kind: integer, lower: 1000, upper: 40000}
  rate: {kind: continuous, lower: 5, upper: 31}
  term: {kind: categorical, categories: [36, 60]}
  fee: {kind: continuous, lower: 0, upper: 100, missing: allowed}
  installment:
    kind: continuous
    derived: {formula: "amount * (rate / 1200) / (1 - (1 + rate / 1200) ** -term)", tolerance: 0.01}
    step: 0.01
  total_fee: {kind: integer, derived: {formula: "fee * 2 + 1"}}
"""


def annuity(amount, rate, term):
    r = np.asarray(rate, dtype=float) / 1200
    return np.asarray(amount, dtype=float) * r / (1 - (1 + r) ** -np.asarray(term, dtype=float))


def loans(n: int, seed: int = 0) -> pd.DataFrame:
    """Loans whose installment is the annuity in cents (as a lender's system rounds it) and whose total fee is
    2·fee + 1, null where the fee is (a fifth of the rows)."""
    rng = np.random.default_rng(seed)
    amount = rng.integers(40, 1601, n) * 25
    rate = np.round(rng.uniform(5, 31, n), 2)
    term = rng.choice([36, 60], n)
    fee = np.where(rng.random(n) < 0.2, np.nan, rng.integers(0, 50, n).astype(float))
    return pd.DataFrame(
        {
            "amount": amount,
            "rate": rate,
            "term": term,
            "fee": fee,
            "installment": np.round(annuity(amount, rate, term), 2),
            "total_fee": pd.array(np.where(np.isnan(fee), pd.NA, fee * 2 + 1), dtype="Int64"),
        }
    )


def schema_of(tmp_path: Path, text: str = LOANS):
    (tmp_path / "loans.yaml").write_text(text)
    return load_schema(tmp_path / "loans.yaml")


def test_a_formula_is_parsed_into_its_grammar_and_evaluated_on_columns_with_known_answers() -> None:
    f = parse_formula("amount * (rate / 1200) / (1 - (1 + rate / 1200) ** -term)", 0.01)
    assert f.names == ("amount", "rate", "term") and f.tolerance == 0.01
    frame = pd.DataFrame({"amount": [10000, 24000, 5000], "rate": [12.0, 6.0, np.nan], "term": [36, 60, 36]})
    # 10,000 at 12 % a year over 36 months: 332.1431...; 24,000 at 6 % over 60: 463.9872...
    np.testing.assert_allclose(f.evaluate(frame)[:2], [332.1430981, 463.9872367], atol=1e-6)
    assert np.isnan(f.evaluate(frame)[2])  # a null source: a null value
    g = parse_formula("max(a, 2) + sqrt(abs(-b)) - log(exp(1)) / a")
    assert g.names == ("a", "b")
    np.testing.assert_allclose(g.evaluate(pd.DataFrame({"a": [1.0, 4.0], "b": [9.0, 16.0]})), [4.0, 7.75])
    assert np.isnan(parse_formula("1 / a").evaluate(pd.DataFrame({"a": [0.0]}))).all()  # no finite value: null
    value, expected = np.array([1.0, 1.02, np.nan, 3.0]), np.array([1.011, 1.0, np.nan, np.nan])
    assert f.agrees(value, expected).tolist() == [False, False, True, False]
    assert parse_formula("a", 0.011).agrees(value, expected).tolist() == [True, False, True, False]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("__import__('os').system('x')", "not in the formula grammar"),
        ("a.real", "not in the formula grammar"),
        ("a if b else c", "not in the formula grammar"),
        ("a < b", "not in the formula grammar"),
        ("'a' * 2", "not in the formula grammar"),
        ("a // 2", "not in the formula grammar"),
        ("max(a)", r"max\(\) takes 2 argument"),
        ("sqrt(a, b)", r"sqrt\(\) takes 1 argument"),
        ("a +", "not an arithmetic expression"),
        ("2 * 3", "reads no column"),
    ],
)
def test_a_formula_outside_the_grammar_is_refused_saying_what(text: str, problem: str) -> None:
    with pytest.raises(FormulaError, match=problem):
        parse_formula(text)


@pytest.mark.integration
def test_a_formula_column_is_checked_within_its_tolerance_never_modelled_and_published_exact(tmp_path: Path) -> None:
    """Real rows further than the tolerance from the formula are dropped and counted (or refused when fatal); the
    column is not modelled; the published value is the formula of the row's own sources in its step (cents), null
    where a source is null."""
    schema = schema_of(tmp_path)
    assert [c.name for c in schema.derived] == ["installment", "total_fee"]
    assert "installment" not in schema.names and "total_fee" not in schema.names
    assert schema.to_dict()["columns"]["installment"] == {
        "kind": "continuous",
        "on_invalid": "drop",
        "derived": {"formula": "amount * (rate / 1200) / (1 - (1 + rate / 1200) ** -term)", "tolerance": 0.01},
        "step": 0.01,
    }
    raw = loans(400)
    broken = raw.copy()
    broken.loc[[0, 1], "installment"] += 0.5  # two installments off by 50 cents
    broken.loc[2, "installment"] += 0.009  # within the tolerance
    has_fee = np.flatnonzero(raw["fee"].notna().to_numpy())
    broken.loc[has_fee[has_fee > 3][0], "total_fee"] = pd.NA  # null where the formula has a value
    broken.loc[3, "rate"] = 40.0  # a source out of its domain: the source's policy, counted once
    clean, report = validate_table(broken, schema, "loans.csv")
    assert report["columns"]["installment"] == {
        "policy": "drop",
        "out_of_domain": 2,
        "nulls": 0,
        "off_formula": 2,
        "action": "drop",
    }
    assert report["columns"]["total_fee"]["off_formula"] == 1 and report["columns"]["rate"]["above"] == 1
    assert report["rows_dropped"] == 4 and len(clean) == 396 and list(clean.columns) == schema.names
    assert "'installment' 2 further than its tolerance from the documented formula" in row_loss_summary(report)

    synthetic = clean.sample(frac=1.0, random_state=1).reset_index(drop=True)  # rows a generator could draw
    synthetic["rate"] = np.round(synthetic["rate"] + 0.37, 2)  # unlike any real row's
    published = to_published(synthetic, schema)
    assert list(published.columns) == schema.declared_names
    expected = np.round(annuity(published["amount"], published["rate"], published["term"]), 2)
    np.testing.assert_allclose(published["installment"].to_numpy(), expected, atol=1e-9)
    assert published["total_fee"].dtype == "Int64"
    assert (published["total_fee"].isna() == published["fee"].isna()).all()
    fees = published["fee"].dropna()
    assert (published["total_fee"].dropna().to_numpy() == (fees * 2 + 1).to_numpy()).all()

    fatal = schema_of(tmp_path, LOANS.replace("    step: 0.01\n", "    step: 0.01\n    on_invalid: fatal\n"))
    with pytest.raises(
        InputError,
        match=r"loans\.csv.*column 'installment': 2 values outside the public domain \(2 further than its "
        r"tolerance from the documented formula of their row; e\.g\. row 1: ",
    ):
        validate_table(broken, fatal, "loans.csv")


@pytest.mark.parametrize(
    "edit, column, problem",
    [
        (("/ 1200) ** -term", "/ 1200) ** -terms"), "installment", "formula reads 'terms', which is not another"),
        (("fee * 2 + 1", "installment * 2"), "total_fee", "formula reads 'installment', which is not another"),
        (("fee * 2 + 1", "total_fee + 1"), "total_fee", "formula reads 'total_fee', which is not another"),
        (
            ("categories: [36, 60]", "categories: [short, long]"),
            "installment",
            "formula reads 'term', which is not another modelled column holding numbers",
        ),
        (("kind: continuous\n    derived", "kind: categorical\n    derived"), "installment", "a categorical kind"),
        (("    step: 0.01\n", "    step: 0.01\n    upper: 2000\n"), "installment", r"the keys \['upper'\]"),
        (("    step: 0.01\n", "    step: 0.01\n    missing: allowed\n"), "installment", r"the keys \['missing'\]"),
        (("    step: 0.01\n", "    step: 0.01\n    on_invalid: clip\n"), "installment", "on_invalid: clip"),
        (("tolerance: 0.01}", "tolerance: 0.01, round: 2}"), "installment", r"the derived keys \['round'\]"),
        (("tolerance: 0.01}", "tolerance: -1}"), "installment", "not a formula text and a tolerance ≥ 0"),
        (("    step: 0.01\n", "    step: -0.01\n"), "installment", "step -0.01 is not a positive number"),
        (("** -term)", "** -term) +"), "installment", "not an arithmetic expression"),
        (("target: term", "target: installment"), "installment", "cannot be the target or a protected column"),
        (("on_invalid: drop\n", "on_invalid: drop\nrelated: [[amount, installment]]\n"), "installment", "is derived"),
    ],
)
def test_a_formula_column_the_schema_gets_wrong_is_refused_by_name(tmp_path: Path, edit, column, problem) -> None:
    text = LOANS.replace(*edit)
    assert text != LOANS
    with pytest.raises(SchemaError, match=rf"loans\.yaml, column '{column}': .*{problem}.*Fix: "):
        schema_of(tmp_path, text)


def test_discovering_a_formula_columns_domain_is_refused(tmp_path: Path) -> None:
    text = LOANS.replace("    step: 0.01\n", "    step: 0.01\n    upper: discover\n")
    with pytest.raises(SchemaError, match=r"column 'installment': 'upper: discover' on a continuous column with "):
        schema_of(tmp_path, text)
