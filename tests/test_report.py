"""The two release reports: the steward's (internal) report with every section filled from real evaluation
outputs (tables, embedded plots, the guarantee notes, the INTERNAL label), the public report with only DP or
public values; and (slow) that a real headless Chromium renders each with every image decoded."""

from __future__ import annotations

import base64
import re
import subprocess

import pytest

from pipelines.reporting.report import (
    INTERNAL,
    PLOT_CAPTIONS,
    PUBLIC_PLOTS,
    public_html,
    public_markdown,
    render_html,
    render_markdown,
)

from support.report import CHROMIUM_FLAGS, PNG, chromium_binary, steward
from support.report import summary  # noqa: F401  (the fixture: a real, small evaluation)


@pytest.mark.slow
def test_full_report_has_every_section_and_embeds_the_plots(summary):
    summary = steward(summary)
    page = render_html(summary)
    assert page.count(INTERNAL) == 3 and render_markdown(summary).count(INTERNAL) == 2  # head, foot (and print)
    assert "not available" not in page
    for heading in (
        "Verdict",
        "What was released",
        "Privacy budget",
        "Method and guarantee: DP-WGAN",
        "Release gates",
        "Privacy risk: attacks on the released table",
        "Fidelity and utility scorecard",
        "Plots",
        "What the guarantees cover",
    ):
        assert f"<h2>{heading}</h2>" in page, heading
    risk = summary["metrics"]["privacy_risk"]
    assert f"{risk['membership']['domias']['auc']:.3g}" in page
    assert f"{risk['anonymeter']['linkability']['risk']:.3g}" in page
    for name in (
        "membership_inference",
        "exact_copies",
        "singling_out_risk",
        "linkability_risk",
        "inference_risk",
        "bernoulli_nb",
        "mlp",
        "α-LMDP",
        "outside the DP mechanism",
    ):
        assert name in page, name
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert [base64.b64decode(i) for i in images] == list(summary["plots"].values())
    md = render_markdown(summary)
    assert "![" + PLOT_CAPTIONS["membership_roc"] + "](membership_roc.png)" in md
    assert md.count("\n| ") > 40 and "not available" not in md


@pytest.mark.integration
def test_public_report_shows_only_dp_and_public_values(summary):
    page, md = public_html(summary), public_markdown(summary, bundled=PUBLIC_PLOTS)
    for heading in (
        "Verdict",
        "What was released",
        "Privacy budget",
        "Mechanisms",
        "Release gates",
        "Importance weights",
        "The synthetic table",
        "Plots",
        "What the guarantees cover",
        "Provenance",
    ):
        assert f"<h2>{heading}</h2>" in page and f"## {heading}" in md, heading
    for absent in ("Privacy risk", "scorecard", "TSTR", "Holdout", INTERNAL, "Share this report only"):
        assert absent not in page and absent not in md, absent
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert [base64.b64decode(i) for i in images] == [summary["plots"]["synthetic_marginals"]]
    assert re.findall(r"\]\(([^)]+)\)", md) == ["synthetic_marginals.png"]
    assert ".png)" not in public_markdown(summary)  # no figure bundled: none linked
    stats = summary["synthetic_summary"]["numeric"]["x1"]
    assert f"{stats['median']:.4g}" in page and "120.5" in page and "torch" in page
    gate_rows = re.findall(r"<tr><td>[^<]+</td><td>(\w+)</td><td class=\"(?:pass|fail)\">", page)
    assert gate_rows == [g["name"] for g in summary["gates"]]
    assert "yes: pass/fail bit only" in page


# After `load`: images decoded, tables, and the layout check: cells whose content overflows them, and tables, figures
# or SVGs wider than the page's column (the body's content box) or the window.
HARNESS = (
    "<script>window.addEventListener('load',()=>{const im=[...document.images];"
    "document.body.dataset.images=im.length;"
    "document.body.dataset.decoded=im.filter(i=>i.complete&&i.naturalWidth>0).length;"
    "document.body.dataset.tables=document.querySelectorAll('table').length;"
    "const b=document.body,cs=getComputedStyle(b),"
    "right=b.getBoundingClientRect().right-parseFloat(cs.paddingRight)+1;"
    "document.body.dataset.overflowing=[...document.querySelectorAll('td,th')]"
    ".filter(c=>c.scrollWidth>c.clientWidth+1).length+[...document.querySelectorAll('table,figure,svg')]"
    ".filter(t=>t.getBoundingClientRect().right>right).length"
    "+(document.documentElement.scrollWidth>window.innerWidth?1:0);});</script>"
)


def comparison_entries(summary: dict) -> list[dict]:
    """The run of the fixture: its generator released, a PPEM refused by the α-LMDP gate (comparison.py's entries)."""
    manifest = {
        **{k: summary[k] for k in ("release_id", "privacy", "weights")},
        "gates": [
            {"name": g["name"], "passed": g["passed"], "data_dependent": g["name"] != "ledger"}
            for g in summary["gates"]
        ],
        "utility_verdict": {"verdict": "fit", "action": "none"},
    }
    lmdp = {
        "name": "alpha_lmdp",
        "passed": False,
        "evidence": {"alpha": 0.05, "ksd": {"p_value": 0.01}, "mmd": {"p_value": 0.5}},
    }
    refused = {
        **manifest,
        "release_id": "ppem-0123456789ab",
        "gates": manifest["gates"][:1] + [{"name": "alpha_lmdp", "passed": False, "data_dependent": True}],
        "weights": None,
    }
    return [
        {
            "generator": summary["generator"],
            "released": True,
            "manifest": manifest,
            "report": "a/report.html",
            "metrics": summary["metrics"]
            | {"utility": summary["utility"], "fidelity_summary": summary["fidelity_summary"]},
            "checks": summary["gates"],
        },
        {
            "generator": "ppem",
            "released": False,
            "manifest": refused,
            "report": "b/steward_report.html",
            "metrics": {"utility": {"skipped": "no target"}},
            "checks": [summary["gates"][0], lmdp],
        },
    ]


def page_of(summary: dict, audience: str) -> tuple[str, int]:
    """The page of one audience (report or the run's comparison) and how many images it embeds."""
    from pipelines.reporting import comparison
    from pipelines.reporting.report import comparison_html

    if audience.startswith("comparison"):
        build = comparison.steward_context if audience.endswith("steward") else comparison.public_context
        return comparison_html(build("toy", "run-0123456789ab", comparison_entries(summary))), 0
    summary = (
        steward(summary)
        if audience == "steward"
        else {**summary, "plots": {k: v for k, v in summary["plots"].items() if k in PUBLIC_PLOTS}}
    )
    return (render_html if audience == "steward" else public_html)(summary), len(summary["plots"])


@pytest.mark.slow
@pytest.mark.parametrize("audience", ["steward", "public", "comparison_public", "comparison_steward"])
def test_report_renders_in_headless_chromium(summary, tmp_path, audience):
    """A test-only copy of the page gets a script that counts decoded images, tables and overflowing cells or
    tables after `load`; Chromium's --dump-dom returns the DOM after it ran, and --screenshot renders the page.
    The layout check is shown to bite: the same page with one unbreakable 400-character cell overflows."""
    chromium = chromium_binary()
    page, images = page_of(summary, audience)
    (tmp_path / "report.html").write_text(page)
    (tmp_path / "harness.html").write_text(page.replace("</body>", HARNESS + "</body>"))
    (tmp_path / "broken.html").write_text(
        page.replace("</body>", f"<table><tr><td>{'x' * 400}</td></tr></table>" + HARNESS + "</body>")
    )

    def run(*args: str) -> subprocess.CompletedProcess:
        profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
        return subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1280,2000", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )

    def layout(name: str) -> dict[str, str]:
        return dict(
            re.findall(
                r'data-(images|decoded|tables|overflowing)="(\d+)"',
                run("--dump-dom", (tmp_path / name).as_uri()).stdout,
            )
        )

    found = layout("harness.html")
    assert found["images"] == found["decoded"] == str(images), found
    assert int(found["tables"]) == len(re.findall(r"<table[ >]", page)) >= (2 if "comparison" in audience else 7)
    assert found["overflowing"] == "0", found
    assert int(layout("broken.html")["overflowing"]) >= 1
    shot = tmp_path / "report.png"
    run(f"--screenshot={shot}", "--window-size=1280,4000", (tmp_path / "report.html").as_uri())
    assert shot.read_bytes()[:8] == PNG and shot.stat().st_size > 50_000


def test_evaluation_artefacts_carry_the_same_tables(summary):
    from pipelines.reporting.report import evaluation_markdown, key_figures

    md = evaluation_markdown("dpwgan", summary["metrics"])
    assert "Privacy risk: attacks on the released table" in md and "Fidelity and utility scorecard" in md
    rows = key_figures(summary["metrics"])
    domias = next(r for r in rows if r["row"] == "DOMIAS (density ratio)")
    assert domias["AUC"] == f"{summary['metrics']['privacy_risk']['membership']['domias']['auc']:.3g}"
    assert {r["table"] for r in rows} >= {"Attack", "Measure", "Metric", "Classifier"}
