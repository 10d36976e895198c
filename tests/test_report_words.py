"""The reports' words and their rendering: every gate constructed in pipelines/ has a sentence; known inputs give
known sentences, in the verdict at the top of both reports; the comparison page's recommendation rules; the
templates escape what they are given (HTML and Markdown)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipelines.reporting import comparison
from pipelines.gates.risk import risk_gates
from pipelines.reporting.report import (
    comparison_html,
    comparison_markdown,
    public_html,
    public_markdown,
    render_html,
    render_markdown,
)
from pipelines.reporting.report_words import GATES, gate_sentence, verdict_sentence, weights_sentence
from support.report import summary  # noqa: F401  (the fixture: a real, small evaluation)
from sections import thresholds

PIPELINES = Path(__file__).resolve().parents[1] / "pipelines"
LITERAL = re.compile(r"GateResult\(\s*\"(\w+)\"")
FORMATTED = re.compile(r"GateResult\(\s*f\"")


@pytest.mark.slow
def test_every_gate_constructed_in_pipelines_has_a_sentence(summary):
    literal, formatted = set(), []
    for path in PIPELINES.rglob("*.py"):
        text = path.read_text()
        literal |= set(LITERAL.findall(text))
        formatted += [path.relative_to(PIPELINES).as_posix()] * len(FORMATTED.findall(text))
    assert {
        "ledger",
        "alpha_lmdp",
        "mh_convergence",
        "membership_inference",
        "exact_copies",
        "utility",
        "importance_weights",
    } <= literal
    # the one formatted name (`<attack>_risk`) is built by risk_gates: its names come from running it on real attacks
    assert formatted == ["gates/risk.py"]
    names = literal | {g.name for g in risk_gates(summary["metrics"]["privacy_risk"], thresholds(None))}
    assert {"singling_out_risk", "linkability_risk", "inference_risk"} <= names
    assert names - set(GATES) == set(), "write a GateWords entry in pipelines/reporting/report_words.py"
    for name in names:
        for passed in (True, False):
            sentence = gate_sentence("ppem", {"name": name, "passed": passed, "evidence": {}}, "public")
            assert sentence.startswith("PPEM") and sentence.endswith(".") and "{" not in sentence


LMDP = {
    "name": "alpha_lmdp",
    "passed": False,
    "evidence": {"alpha": 0.05, "ksd": {"p_value": 0.003}, "mmd": {"p_value": 0.4375}},
}


def test_known_gates_give_known_sentences():
    assert gate_sentence("ppem", LMDP, "public") == (
        "PPEM refused: the α-LMDP tests could not reject, so the protected marginals may be reproduced."
    )
    assert gate_sentence("ppem", LMDP, "steward") == (
        "PPEM refused: the α-LMDP tests could not reject, so the protected marginals may be reproduced "
        "(α = 0.05; KSD p = 0.003, MMD p = 0.4375)."
    )
    # evidence without the detail's fields: the steward sentence drops the bracket rather than print a hole
    assert gate_sentence("ppem", {**LMDP, "evidence": {"alpha": 0.05}}, "steward").endswith("reproduced.")
    assert gate_sentence("dpwgan", {"name": "membership_inference", "passed": True}, "public") == (
        "DP-WGAN passed the Membership inference gate: membership-inference attacks did no clearly better than chance."
    )
    assert verdict_sentence("mst", {"verdict": "inverted", "action": "refuse"}) == (
        "Utility of MST: INVERTED: models trained on it predict the opposite of the truth. The policy refuses such "
        "tables."
    )
    assert verdict_sentence("mst", None) is None
    assert weights_sentence("dpwgan", {"released": False, "withheld_because": ["PSIS k̂ = 0.9 > 0.7: unreliable"]}) == (
        "DP-WGAN's importance weights withheld: PSIS k̂ = 0.9 > 0.7: unreliable; the table is released without its "
        "`weight` column."
    )
    assert weights_sentence("dpwgan", {"released": True, "epsilon": 0.25, "khat": 0.31}) == (
        "DP-WGAN's importance weights published as the `weight` column (ε = 0.25, PSIS k̂ = 0.31)."
    )


def refused_summary() -> dict:
    return {
        "dataset": "toy",
        "generator": "ppem",
        "release_id": "ppem-0123",
        "rows": 10,
        "privacy": {
            "epsilon_generator": 0.5,
            "epsilon_dataset_total": 1.0,
            "lifetime_budget": 10.0,
            "release_epsilon": 1.0,
            "epsilon_allocated": {"ppem": 0.5, "dpwgan": 0.5},
            "epsilon_lifetime_spent": 1.0,
            "epsilon_lifetime_remaining": 9.0,
            "delta": 1e-5,
        },
        "gates": [{"name": "ledger", "passed": True, "evidence": {}, "data_dependent": False}, LMDP],
        "utility_verdict": {"verdict": "weak", "action": "label", "data_dependent": True},
    }


@pytest.mark.parametrize("render", [render_markdown, render_html, public_markdown, public_html])
def test_the_verdict_comes_first_then_the_budget(render):
    page = render(refused_summary())
    steward = render in (render_markdown, render_html)
    refusal = gate_sentence("ppem", LMDP, "steward" if steward else "public")
    verdict = verdict_sentence("ppem", refused_summary()["utility_verdict"])
    heads = [
        page.index(h)
        for h in ("Verdict", "The refused table", "Privacy budget", "Method and guarantee: PPEM", "Release gates")
    ]
    assert heads == sorted(heads)
    assert heads[0] < page.index(refusal) < heads[1] and heads[0] < page.index(verdict) < heads[1]
    assert ("KSD p = 0.003" in page) == steward  # the evidence is the steward's
    if render in (render_html, public_html):  # the budget figure: an inline SVG, the spent bar at 1/10 of 640 px
        assert '<svg class="budget"' in page and '<rect x="0" y="8" width="64.0"' in page and "<script" not in page


def entry(generator: str, epsilon: float, verdict: str | None, released: bool, tstr: float | None) -> dict:
    gates = [
        {"name": "ledger", "passed": True, "data_dependent": False},
        {"name": "utility", "passed": released, "data_dependent": True},
    ]
    return {
        "generator": generator,
        "released": released,
        "report": None,
        "manifest": {
            "release_id": f"{generator}-abc",
            "privacy": {"epsilon_generator": epsilon, "delta": 1e-5},
            "gates": gates,
            "utility_verdict": verdict and {"verdict": verdict, "action": "label"},
        },
        "checks": [{**g, "evidence": {}} for g in gates],
        "metrics": {"utility": {"models": {} if tstr is None else {"lr": {"tstr": tstr}, "rf": {"tstr": tstr}}}},
    }


def test_recommendation_rules():
    entries = [
        entry("dpwgan", 0.5, "fit", True, 0.70),
        entry("mst", 0.3, "fit", True, 0.65),
        entry("aim", 0.2, "fit", False, 0.99),
        entry("pearl", 0.1, "weak", True, 0.95),
    ]
    assert comparison.recommend(entries, "public") == 1  # smallest ε among released + fit (aim is refused)
    assert comparison.recommend(entries, "steward") == 0  # highest TSTR among released + fit
    assert comparison.recommend([entries[3]], "public") is None
    public = comparison.public_context("toy", "run-x", entries)
    assert public["recommendation"].startswith("MST is recommended. " + comparison.PUBLIC_RULE[:30])
    assert public["table"]["rows"][1][1] == "RELEASED (recommended)"
    assert (
        "AIM refused: the utility policy (params.yaml utility_gate) refuses tables with its utility verdict."
        in public["headline"]
    )
    html = comparison_html(public)
    assert '<tr class="recommended"><td>MST</td>' in html and "0.95" not in html  # no TSTR on the public page
    steward = comparison.steward_context("toy", "run-x", entries)
    assert steward["table"]["rows"][0][:4] == ["DP-WGAN", "RELEASED (recommended)", "0.5", "0.7"]
    md = comparison_markdown(steward)
    assert md.count("INTERNAL — computed from real rows") == 2 and "| MST | RELEASED | 0.3 | 0.65 |" in md
    assert comparison.NO_RECOMMENDATION in comparison_markdown(comparison.public_context("toy", "r", [entries[3]]))


def test_templates_escape_html_and_markdown():
    hostile = {**refused_summary(), "dataset": "a|b <i>x</i>", "release_id": "r\nid"}
    md, page = render_markdown(hostile), render_html(hostile)
    assert "| Data set | a\\|b &lt;i&gt;x&lt;/i&gt; |" in md and "| Release id | r id |" in md
    assert "<i>x</i>" not in page and "a|b &lt;i&gt;x&lt;/i&gt;" in page
