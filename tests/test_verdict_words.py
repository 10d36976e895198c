"""The utility verdict in the reports' words: a weak verdict names the conditions that failed, the distorted
features with their real and synthetic associations and one thing to try for each; no PASS beside a WEAK; what is
published of the verdict under each `release.non_dp_gates`; the positive class and how it was chosen."""

from __future__ import annotations

import html
import re

import pytest
from markupsafe import escape

from pipelines.evaluation.verdict import CLAIMS
from pipelines.reporting.report import render_html, render_markdown
from pipelines.reporting.report_sections import utility_section
from pipelines.reporting.report_words import (
    claim_advice,
    claim_words,
    gate_sentence,
    positive_class_words,
    verdict_sentence,
)

TASK = {
    "models": {
        "logistic_regression": {"auroc": 0.61, "auroc_lower_bound": 0.55},
        "random_forest": {"auroc": 0.52, "auroc_lower_bound": 0.47},
    }
}


def evidence(claims: list[str], distorted: int = 1) -> dict:
    """metrics.json's `utility_verdict` of a weak table whose `claims` failed, with `distorted` features."""
    return {
        "verdict": "weak",
        "failed_claims": claims,
        "task": TASK,
        "two_way": {"pairs": 3},
        "associations": {
            "features": 121,
            "features_worse_than_baseline": distorted,
            "distorted": [
                {
                    "feature": f"f{i} = yes",
                    "real": 0.3 - i / 100,
                    "synthetic": -0.2,
                    "improvement": -0.5,
                    "upper_bound": -0.25,
                }
                for i in range(distorted)
            ],
        },
    }


ADVISE = (
    "A finding for the steward only: under release.non_dp_gates: advise the verdict neither decides publication "
    "nor appears in the public manifest or report."
)
PUBLISHED = "Under release.non_dp_gates: refuse the public manifest and report show this word, none of its evidence."
BASELINE = (
    "not measurably better than independent columns drawn from the real 1-way marginals on the target task, the "
    "features' associations with the target or 2-way fidelity"
)


def test_a_distorted_feature_is_named_with_its_associations_and_what_to_try():
    assert verdict_sentence("dpwgan", {"verdict": "weak", "action": "advise"}, evidence(["distorted"]), True) == (
        "Utility of DP-WGAN: WEAK: 1 of 121 features' associations with the target distorted: 'f0 = yes' (real "
        "+0.30, synthetic -0.20). To try: raise `dpwgan.calibration.share` so that DP-WGAN's samples are raked to "
        "noisy marginals of each column with the target. " + ADVISE
    )


def test_only_the_failed_conditions_are_named():
    sentence = verdict_sentence("aim", {"verdict": "weak", "action": "label"}, evidence(["baseline", "chance"]), True)
    assert sentence == (
        f"Utility of AIM: WEAK: {BASELINE}; models trained on it not measurably better than chance on real rows "
        "(random_forest AUROC 0.52, lower bound 0.47). To try: give AIM more ε (`aim.epsilon` or "
        "`privacy.release_epsilon`); check that the schema's `target:` and `target_positive:` name the class to "
        "predict. The policy releases such tables with this label. " + PUBLISHED
    )
    assert "distorted" not in sentence and " or models" not in sentence
    # chance alone: its advice carries the more-ε step itself
    assert verdict_sentence("mst", {"verdict": "weak", "action": "label"}, evidence(["chance"], 0), True) == (
        "Utility of MST: WEAK: models trained on it not measurably better than chance on real rows (random_forest "
        "AUROC 0.52, lower bound 0.47). To try: check that the schema's `target:` and `target_positive:` name the "
        "class to predict, or give MST more ε (`mst.epsilon` or `privacy.release_epsilon`). The policy releases "
        "such tables with this label. " + PUBLISHED
    )


def test_five_distorted_features_are_named_then_counted():
    assert verdict_sentence(
        "pearl", {"verdict": "weak", "action": "refuse"}, evidence(["baseline", "distorted"], 7), False
    ) == (
        f"Utility of PEARL: WEAK: {BASELINE}; 7 of 121 features' associations with the target distorted: 'f0 = yes' "
        "(real +0.30, synthetic -0.20), 'f1 = yes' (real +0.29, synthetic -0.20), 'f2 = yes' (real +0.28, synthetic "
        "-0.20), 'f3 = yes' (real +0.27, synthetic -0.20), 'f4 = yes' (real +0.26, synthetic -0.20) and 2 more. To "
        "try: give PEARL more ε (`pearl.epsilon` or `privacy.release_epsilon`), or try a marginal generator such as "
        "AIM; raise `pearl.calibration.share` so that PEARL's samples are raked to noisy marginals of each column "
        "with the target. The policy refuses such tables. The table is refused: the run's refusal record "
        "(latest.json under releases/) names the utility gate with this word as its reason, none of its evidence."
    )


@pytest.mark.parametrize(
    ("action", "published", "tail"),
    [
        ("advise", True, ADVISE),  # non_dp_gates: advise (tasks/release.py steward_verdict): nothing is published
        ("advise", False, ADVISE),
        ("label", True, "The policy releases such tables with this label. " + PUBLISHED),
        (
            "label",
            False,
            "The policy releases such tables with this label. The table is refused by another gate, so nothing of "
            "this verdict is published.",
        ),
        ("label", None, "The policy releases such tables with this label."),
    ],
)
def test_what_is_published_of_the_verdict_under_each_setting(action, published, tail):
    assert verdict_sentence("mst", {"verdict": "weak", "action": action}, None, published) == (
        "Utility of MST: WEAK: not measurably better than independent columns drawn from the real 1-way marginals, "
        "or models trained on it not measurably better than chance, or a relationship with the target distorted. "
        + tail
    )


def summary(non_dp_gates: str, utility_passed: bool = True) -> dict:
    """A steward summary (tasks/release.py `steward_report`) of a weak table whose policy labels it."""
    gates = [
        {"name": "ledger", "passed": True, "evidence": {}},
        {"name": "utility", "passed": utility_passed, "evidence": {"verdict": "weak", "action": "label"}},
    ]
    return {
        "generator": "dpwgan",
        "release_id": "dpwgan-1",
        "rows": 10,
        "gates": gates,
        "deciding_gates": ["ledger"] if non_dp_gates == "advise" else ["ledger", "utility"],
        "utility_verdict": {
            "verdict": "weak",
            "action": "advise" if non_dp_gates == "advise" else "label",
            "data_dependent": True,
        },
        "metrics": {"utility_verdict": evidence(["distorted"])},
    }


@pytest.mark.parametrize("render", [render_markdown, render_html])
@pytest.mark.parametrize("non_dp_gates", ["advise", "refuse"])
def test_no_pass_beside_a_weak_verdict(render, non_dp_gates):
    page = render(summary(non_dp_gates))

    def shown(text: str) -> bool:  # HTML-escaped as each template escapes (report._MD: quotes kept)
        return (html.escape(text, quote=False) if render is render_markdown else str(escape(text))) in page

    result = "advisory: not enforced" if non_dp_gates == "advise" else "labelled WEAK"
    assert f"1 of 2 gates passed; Utility: {result}." in page
    for line in page.splitlines():
        assert "PASS" not in line or ("WEAK" not in line and "weak" not in line and "utility" not in line), line
    assert "passed the Utility gate" not in page
    assert shown("DP-WGAN's utility verdict is WEAK: the utility policy (params.yaml utility_gate) labels such tables")
    assert ("only this word is published" in page) is False
    row = (
        "WEAK: 1 of 121 features' associations with the target distorted (data-dependent: it reads real rows). "
        + ADVISE
        if non_dp_gates == "advise"
        else "WEAK: 1 of 121 features' associations with the target distorted (policy: label; data-dependent: it "
        "reads real rows). " + PUBLISHED
    )
    assert shown(row)


def test_a_refused_table_says_nothing_of_it_is_published():
    s = summary("refuse", utility_passed=False)
    s["utility_verdict"]["action"] = "refuse"
    md = render_markdown(s)
    assert "The table is refused: the run's refusal record (latest.json under releases/) names the utility" in md
    assert re.search(r"\| Utility \| utility \| FAIL \|", md)


def test_a_utility_gate_with_a_fit_verdict_passes():
    assert gate_sentence("mst", {"name": "utility", "passed": True, "evidence": {"verdict": "fit"}}, "public") == (
        "MST passed the Utility gate: the utility policy accepts this verdict."
    )
    page = render_markdown({**summary("refuse"), "utility_verdict": {"verdict": "fit", "action": "none"}})
    assert "| Utility | utility | PASS |" in page and "All 2 gates passed." in page


def test_the_positive_class_and_how_it_was_chosen():
    default = {"positive_class": "B", "positive_class_rule": "second_category"}
    assert positive_class_words(default) == (
        "positive class 'B': the schema's second category; set target_positive: to choose"
    )
    assert positive_class_words({"positive_class": "D", "positive_class_rule": "target_positive"}) == (
        "positive class 'D': the schema's target_positive"
    )
    utility = {"target": "grade", **default, "target_categories": 4, "n_train_real": 5, "n_synth": 6, "n_test": 7}
    assert utility_section(utility)["parts"][0]["p"].startswith(
        "Target grade, 4 categories: each score is one class against the rest (positive class 'B': the schema's "
        "second category; set target_positive: to choose); real training rows 5, synthetic rows 6, real test rows 7."
    )
    binary = {**utility, "target": "income", "positive_class": ">50K", "target_categories": 2}
    assert utility_section(binary)["parts"][0]["p"].startswith(
        "Target income (positive class '>50K': the schema's second category; set target_positive: to choose);"
    )


def test_every_condition_of_a_weak_verdict_has_words_and_advice():
    for claim in CLAIMS:
        words, advice = claim_words(claim, evidence([claim])), claim_advice(claim, "dpwgan", [claim])
        assert words != claim and "not available" not in words and advice.startswith(("give", "check", "raise"))
