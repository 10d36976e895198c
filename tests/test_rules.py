"""Public rules between categorical columns (schema `rules`, pipelines/data/rules.py): refused when malformed before
anything runs, checked on every real row (dropped and counted, or fatal), and kept by every published row."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pandas as pd
import pytest

from pipelines.parameters import Calibration as CalibrationParams
from pipelines.data.rules import Rule, broken_rows, draw_within
from pipelines.data.schema import load_schema
from pipelines.data.validation import finish, merge_parts, row_loss_summary, validate_part, validate_table
from pipelines.errors import InputError, SchemaError

HOUSEHOLD = """name: household
on_invalid: {policy}
columns:
  relationship: {{kind: categorical, categories: [Husband, Wife, Child, Other]}}
  sex: {{kind: binary, categories: [Female, Male]}}
  married: {{kind: categorical, categories: ["yes", "no", widowed]}}
  age: {{kind: integer, lower: 0, upper: 99, on_invalid: clip}}
  code: {{kind: integer, lower: 1, upper: 4, derived: {{from: relationship, values: {{Husband: 1, Wife: 2, Child: 3,
                                                                                  Other: 4}}}}}}
  note: {{kind: categorical, categories: [a, b], missing: allowed}}
rules:
{rules}
"""
RULES = """  - {if: {relationship: [Husband, Wife]}, then: {married: ["yes"]}}
  - {if: {relationship: Husband}, then: {sex: [Male]}, on_invalid: fatal}"""


def schema(tmp_path, rules: str = RULES, policy: str = "drop"):
    path = tmp_path / "household.yaml"
    path.write_text(HOUSEHOLD.format(rules=rules, policy=policy))
    return load_schema(path)


def rows(*records) -> pd.DataFrame:
    code = {"Husband": 1, "Wife": 2, "Child": 3, "Other": 4}
    return pd.DataFrame(
        [
            {"relationship": r, "sex": s, "married": m, "age": 40, "code": code.get(r, 1), "note": "a"}
            for r, s, m in records
        ]
    )


def test_rules_are_parsed_described_and_hashed(tmp_path):
    s = schema(tmp_path)
    assert [r.describe() for r in s.rules] == [
        "relationship in ['Husband', 'Wife'] => married in ['yes']",
        "relationship in ['Husband'] => sex in ['Male']",
    ]
    assert [r.on_invalid for r in s.rules] == ["drop", "fatal"]  # the schema's policy unless the rule gives one
    assert s.to_dict()["rules"][1] == {
        "if": {"relationship": ["Husband"]},
        "then": {"sex": ["Male"]},
        "on_invalid": "fatal",
    }
    assert schema(tmp_path, policy="clip").rules[0].on_invalid == "drop"  # a schema-level clip is drop here
    other = schema(tmp_path, rules=RULES.splitlines()[0])
    assert other.hash() != s.hash() and dataclasses.replace(s, rules=()).to_dict().keys() == {
        "name",
        "description",
        "source",
        "target",
        "protected",
        "on_invalid",
        "columns",
    }
    adult = load_schema("schemas/adult.yaml")
    assert [r.columns for r in adult.rules] == [
        ["relationship", "marital_status"],
        ["relationship", "sex"],
        ["relationship", "sex"],
    ]


@pytest.mark.parametrize(
    "rules,message,fix",
    [
        ("  []", r"rules is \[\], not a non-empty list", "write rules:"),
        ("  - {if: {sex: [Male]}}", "not a mapping with 'if' and 'then'", "write each rule as in"),
        ("  - {if: {sex: [Male]}, then: {married: [no]}, when: 1}", "not a mapping with 'if' and 'then'", "write each"),
        ("  - {if: {sex: [Male]}, then: {married: [no]}, on_invalid: clip}", "no value to clip to", "drop or fatal"),
        ("  - {if: {sex: [Male]}, then: {}}", "'then' is {}, not a mapping", "write it as in"),
        (
            "  - {if: {age: [1]}, then: {sex: [Male]}}",
            "names 'age', which is not a modelled categorical",
            r"name only these columns: \['relationship', 'sex', 'married'\]",
        ),
        ("  - {if: {code: [1]}, then: {sex: [Male]}}", "names 'code'", "name only these columns"),
        ("  - {if: {note: [a]}, then: {sex: [Male]}}", "names 'note'", "name only these columns"),
        ("  - {if: {nope: [a]}, then: {sex: [Male]}}", "names 'nope'", "name only these columns"),
        ("  - {if: {sex: [Man]}, then: {married: [no]}}", r"\['Man'\] are not its categories", "list distinct categ"),
        ("  - {if: {sex: []}, then: {married: [no]}}", "empty or repeated values", "list distinct categories of 'sex'"),
        ("  - {if: {sex: [Male, Male]}, then: {married: [no]}}", "empty or repeated", "list distinct categories"),
        ("  - {if: {sex: [Male]}, then: {sex: [Male]}}", r"names \['sex'\] in both 'if' and 'then'", "one side"),
        (
            '  - {if: {sex: [Male]}, then: {married: ["yes", "no", widowed]}}',
            "lists every category of 'married'",
            "list only the values the documentation allows",
        ),
        (
            '  - {if: {sex: [Male]}, then: {married: ["no"]}}\n  - {if: {sex: [Male]}, then: {married: ["no"]}}',
            "rule 2 repeats an earlier rule",
            "list each rule once",
        ),
        (
            '  - {if: {sex: [Male]}, then: {married: ["no"]}}\n  - {if: {sex: [Male]}, then: {married: ["no"]}, '
            "on_invalid: fatal}",
            "rule 2 repeats an earlier rule",
            "list each rule once",
        ),
        (
            "  - {if: {sex: [Male]}, then: {married: [no]}}",
            r"lists \[False\] for 'married'",
            "quote values YAML reads as booleans or numbers",
        ),
    ],
)
def test_a_malformed_rule_is_refused_with_the_file_the_rule_and_the_fix(tmp_path, rules, message, fix):
    with pytest.raises(SchemaError, match=message) as e:
        schema(tmp_path, rules=rules)
    assert "household.yaml" in str(e.value) and "column 'rules" in str(e.value) and re.search(fix, e.value.fix)


@pytest.mark.integration
def test_validation_drops_and_counts_rows_that_break_a_rule_and_leaves_unknown_values_to_their_column(tmp_path):
    s = schema(tmp_path, rules=RULES.splitlines()[0])
    raw = rows(
        ("Husband", "Male", "yes"),
        ("Wife", "Female", "no"),
        ("Child", "Female", "no"),
        ("Wife", "Female", "maybe"),
        ("Husband", "Female", "yes"),
        ("Other", "Male", "widowed"),
    )
    clean, report = validate_table(raw, s, "household.csv")
    # row 2 breaks the rule; row 4's 'maybe' is not a category: its column drops it, the rule does not count it
    assert report["rules"] == {
        "relationship in ['Husband', 'Wife'] => married in ['yes']": {"policy": "drop", "broken": 1, "action": "drop"}
    }
    assert report["columns"]["married"]["unknown"] == 1 and report["rows_dropped"] == 2
    assert clean["relationship"].tolist() == ["Husband", "Child", "Husband", "Other"]
    assert not broken_rows(clean, s.rules).any()
    json.dumps(report)
    rule = "rule 'relationship in ['Husband', 'Wife'] => married in ['yes']' 1 broken (drop)"
    assert rule in row_loss_summary(report)
    parts = [validate_part(raw.iloc[:3], s)[1], validate_part(raw.iloc[3:], s)[1]]  # read in parts: the same
    merged = finish(merge_parts(parts, s), s, "household.csv")
    assert (merged["rules"], merged["rows_dropped"]) == (report["rules"], 2)


@pytest.mark.integration
def test_a_fatal_rule_names_the_rule_the_rows_and_the_fix(tmp_path):
    s = schema(tmp_path)
    raw = rows(("Husband", "Male", "yes"), ("Husband", "Female", "yes"), ("Husband", "Female", "yes"))
    with pytest.raises(InputError) as e:
        validate_table(raw, s, "household.csv")
    text = str(e.value)
    assert "2 rows break the schema's rule 'relationship in ['Husband'] => sex in ['Male']'" in text
    assert "row 2: relationship='Husband', sex='Female'" in text and "row 3:" in text and "household.csv" in text
    assert "set on_invalid: drop on this rule" in e.value.fix


class Draws:
    """A generator's decoded draws: rows of a seeded stream, a share `bad` of them Husband & Female."""

    def __init__(self, bad: float, seed: int = 0) -> None:
        self.rng, self.bad, self.asked = np.random.default_rng(seed), bad, []

    def __call__(self, m: int) -> pd.DataFrame:
        self.asked.append(m)
        female = self.rng.random(m) < self.bad
        return pd.DataFrame(
            {
                "relationship": "Husband",
                "sex": np.where(female, "Female", "Male"),
                "serial": self.rng.integers(0, 10**9, m),
            }
        )


RULE = Rule(when=(("relationship", ("Husband",)),), then=(("sex", ("Male",)),))


def test_published_rows_are_the_first_draws_that_keep_the_rules():
    draws = Draws(0.3)
    out, replaced = draw_within(draws, 500, [RULE])
    again = Draws(0.3)
    every = pd.concat([again(m) for m in draws.asked], ignore_index=True)
    good = every[every["sex"] == "Male"].reset_index(drop=True)
    pd.testing.assert_frame_equal(out, good.iloc[:500])  # rejection: the conditional draws, in order
    assert replaced == int((every["sex"].iloc[:500] == "Female").sum()) and 100 < replaced < 200
    assert len(draws.asked) >= 2 and draws.asked[0] == 500
    same, none = draw_within(Draws(0.3), 500, [])  # no rules: the draw as it is
    pd.testing.assert_frame_equal(same, Draws(0.3)(500))
    assert none == 0


def test_a_generator_whose_rows_almost_never_keep_the_rules_is_refused():
    with pytest.raises(
        RuntimeError,
        match=r"keep the schema's rules \(relationship in \['Husband'\] => sex in "
        r"\['Male'\]\): the generator does not describe this table",
    ):
        draw_within(Draws(0.995), 200, [RULE])
    out, replaced = draw_within(Draws(0.9), 200, [RULE])  # 10 % kept: slow, but a sample
    assert len(out) == 200 and (out["sex"] == "Male").all() and replaced > 150


@pytest.mark.slow
def test_the_published_table_keeps_the_rules(tmp_path, monkeypatch):
    import tasks.evaluate as evaluate
    from pipelines.data.transform import Encoder
    from tasks import common
    from support.project import make_root, run_stages
    from support.evaluation import RowsModel

    root = make_root(tmp_path, {})
    run_stages(root, "prepare")
    from pipelines.config import load_params

    params = load_params(root / "params.yaml")
    base = common.schema(params, root)
    # breast cancer has one categorical column: a rule on it alone (which the parser would refuse) that every
    # malignant row breaks, so the published rows must be the benign draws
    ruled = dataclasses.replace(base, rules=(Rule(when=(("target", (0,)),), then=(("target", (1,)),)),))
    monkeypatch.setattr(common, "schema", lambda config, root: ruled)
    encoder = Encoder(base)
    model = RowsModel(pd.read_parquet(root / "data/prepared/breast_cancer/train.parquet"), encoder)
    monkeypatch.setattr(evaluate, "load_generator", lambda name, path: model)
    table, conformance = evaluate.synthetic_table(params, "aim", root, 250, tmp_path / "out.parquet", None)
    first = encoder.decode(model.sample(250, params.evaluate.seed))
    assert (table["target"] == 1).all() and len(table) == 250
    assert conformance["rules_replaced"] == int((first["target"] == 0).sum()) > 50
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "out.parquet"), table)


@pytest.mark.integration
def test_the_steward_report_lists_each_rule_with_its_broken_rows(tmp_path):
    from pipelines.reporting.report_sections import validation_section

    s = schema(tmp_path, rules=RULES.splitlines()[0])
    _, report = validate_table(rows(("Wife", "Female", "no"), ("Child", "Male", "no")), s, "household.csv")
    [section] = validation_section(report)
    assert section["parts"][-1]["table"] == {
        "headers": ["Rule", "Policy", "Rows breaking it", "Action"],
        "rows": [["relationship in ['Husband', 'Wife'] => married in ['yes']", "drop", "1", "drop"]],
    }
    _, clean = validate_table(rows(("Child", "Male", "no")), dataclasses.replace(s, rules=()), "household.csv")
    assert all(part["table"]["headers"][0] != "Rule" for part in validation_section(clean)[0]["parts"])


# -- the rules inside a generator's calibration (the layout carries them on category positions) ---------------------
def ruled_layout():
    """support.generators' MIXED table with one rule: a row of region 2 does not smoke."""
    from support.generators import MIXED

    return dataclasses.replace(MIXED, rules=(Rule(when=(("region", (2,)),), then=(("smoker", (0,)),)),))


def test_the_layout_carries_its_rules_on_category_positions_and_finds_encoded_rows_that_break_them(adult_schema):
    from pipelines.data.layout import Layout
    from pipelines.data.transform import Encoder

    layout = Encoder(adult_schema).layout
    cats = {c.name: c.categories for c in adult_schema.columns}
    husband, male = cats["relationship"].index("Husband"), cats["sex"].index("Male")
    assert layout.rules[1] == Rule((("relationship", (husband,)),), (("sex", (male,)),))
    assert Layout.from_dict(json.loads(json.dumps(layout.to_dict()))) == layout
    plain = dataclasses.replace(layout, rules=())
    assert "rules" not in plain.to_dict() and Layout.from_dict(plain.to_dict()) == plain  # bytes as before
    rows = Encoder(adult_schema).encode(
        pd.DataFrame(
            [
                {
                    **{c.name: c.categories[0] if c.categories else c.lower for c in adult_schema.columns},
                    "relationship": "Husband",
                    "marital_status": "Married-civ-spouse",
                    "sex": s,
                }
                for s in ("Male", "Female")
            ]
        )
    )
    assert layout.broken(rows).tolist() == [False, True]


def test_calibration_targets_and_moves_keep_the_rules():
    from support.calibration import CLIQUES, real_table, tv_of, wrong_table
    from pipelines.marginal.calibrate import NoisyMarginals, public_discretizer
    from pipelines.marginal.calibration import Calibration
    from pipelines.privacy.events import GaussianEvent
    from pipelines.privacy.plan import CalibrationPlan

    layout = ruled_layout()
    real = real_table(20_000, 2)
    real[real[:, 5] == 1, 2] = 0.0  # the real rows keep the rule
    cliques = (*CLIQUES[:5], ("region", "smoker"), *CLIQUES[5:])  # matched before the target pairs, whose
    # moves must then keep the rule themselves
    plan = CalibrationPlan(
        share=0.2, sigma=5.0, marginals=cliques, method_epsilon=0.8, epsilon=1.0, event=GaussianEvent(5.0, 3.0)
    )
    noisy, _ = NoisyMarginals.measure(public_discretizer(layout), plan, real, np.random.default_rng(3))
    assert noisy.counts[5][2, 1] != 0  # the noise put counts in the ruled-out cell
    table = noisy.targets()[5]
    assert table[2, 1] == 0 and table.sum() == pytest.approx(1.0)  # the target keeps the rule
    wrong = wrong_table(50_000, 8)
    assert layout.broken(wrong).mean() > 0.15  # the generator breaks it often
    truth = [
        c / len(real)
        for c in NoisyMarginals.measure(public_discretizer(layout), exact_plan(cliques), real, None)[0].counts
    ]
    out = noisy.calibrate(wrong, 10_000, np.random.default_rng(10), 50, 1e-6)
    assert not layout.broken(out).any()  # raking, then moves that keep the rule
    assert tv_of(out, [t for q, t in zip(cliques, truth) if q in CLIQUES], public_discretizer(layout)) < 0.05
    settings = CalibrationParams(pairs="target", share=0.2, oversample=2, sweeps=50, tolerance=1e-6)
    part = Calibration(layout, settings, "dpwgan", None, set(), lambda: None)
    part.noisy, raked, rake = noisy, [], noisy.calibrate
    noisy.calibrate = lambda rows, *args: raked.append(rows) or rake(rows, *args)
    sample = part.sample(lambda m: wrong[:m], 3_000, np.random.default_rng(1))
    assert len(sample) == 3_000 and not layout.broken(sample).any()
    valid = wrong[:6_000][~layout.broken(wrong[:6_000])]  # oversample 2: only the rows keeping the rule
    assert np.array_equal(raked[0], valid) and len(valid) < 5_500  # are raked


def exact_plan(cliques):
    import math
    from pipelines.privacy.events import NonPrivateEvent
    from pipelines.privacy.plan import CalibrationPlan

    return CalibrationPlan(
        share=0.2,
        sigma=0.0,
        marginals=tuple(cliques),
        method_epsilon=math.inf,
        epsilon=math.inf,
        event=NonPrivateEvent("epsilon: inf"),
    )
