"""The two release reports and the run's comparison page, rendered from jinja2 templates (templates/ next to this
module; autoescape on: HTML-escaped in the .html templates, Markdown-escaped in the .md ones).

- The PUBLIC report (`public_html`, `public_markdown`; report.html / report.md of the bundle in
  releases/<ds>/<id>/) shows only what is DP or public. `public_view` keeps a whitelist of the summary's keys
  (see its docstring) and drops everything else, so a real-data metric handed to it by mistake is not
  rendered: ε/δ and the ledger, the mechanisms, each gate's pass/fail bit (data-dependent ones declared),
  the utility verdict word, the DP importance weights' k̂/ESS, statistics and plots of the synthetic table,
  hashes and versions.
- The STEWARD report (`render_html`, `render_markdown`; reports/<ds>/steward/<release-id>/) is everything,
  real-data evaluation, attacks and gate evidence included, labelled INTERNAL at its head and foot.

Both open with the verdict (what was published or refused and why, one sentence each: report_words), then the
budget (a figure and its numbers), the method and its guarantee, then the evidence as tables
(report_sections). The comparison page of a release run (`comparison_html`, `comparison_markdown`) renders a
context from pipelines/reporting/comparison.py.

Expected summary dict (every key optional; a missing section or value reads "not available"):

    {"dataset": str, "generator": str, "drawn_by": str, "release_id": str,   # drawn_by: a selection's winner
     "privacy": {"epsilon_generator": float,          # ε spent by this generator's stages
                 "epsilon_dataset_total": float,      # ε over every event ever recorded for the data set (PLD/PRV)
                 "epsilon_dataset_total_rdp": float,  # the same composition, RDP accountant cross-check
                 "delta": float, "lifetime_budget": float,
                 "release_epsilon": float, "epsilon_allocated": {part: float},   # the release budget (manifest)
                 "epsilon_lifetime_spent": float, "epsilon_lifetime_remaining": float,
                 "events": [{...}], "ledger_rows": [{...}, ...]},   # ledger events and rows, as tables
     "gates": [{"name": str, "passed": bool, "evidence": str | dict}, ...],
     "utility_verdict": {"verdict", "action", ...}, "weights": {"released", "withheld_because", ...},
     "fidelity": {column: {"metric": "tv" | "w1", "value": float}},   # fidelity.marginal_distances
     "fidelity_summary": {"mean_tv", "max_tv", "mean_w1", "max_w1"},  # fidelity.summarise
     "utility": {...},                                                 # utility.tstr_auroc
     "hashes": {"schema": str, "params": str},
     "audience": str, "guarantee": str, "rows": int,   # what was released (manifest)
     "metrics": {...},        # evaluate's metrics.json: "scorecard", "privacy_risk", DP-auto-GAN's metrics
     "plots": {name: bytes}}  # PNGs: embedded (base64) in the HTML; in the Markdown, links to <name>.png
                              # (the public Markdown: only those of `bundled`, the files written next to it)

The steward summary may also carry "validation" (validate's report) and "weights_analysis" (the weighted
analyses of weights.json); the public summary "synthetic_summary" (synthetic_summary.summarise_synthetic)
and "libraries".
"""

from __future__ import annotations

import base64
import html
from collections.abc import Collection
from numbers import Real
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from pipelines.reporting import report_sections as sec
from pipelines.evaluation.outside_dp import UNAVAILABLE
from pipelines.reporting.report_words import (
    METHODS,
    NA,
    calibration_sentence,
    fmt,
    gate_sentence,
    generator_name,
    part_name,
    publication_words,
    verdict_sentence,
    verdict_words,
    weights_sentence,
)

INTERNAL = "INTERNAL — computed from real rows, not for publication"
UNCOVERED = (
    "The figures listed below were computed from real data and are not covered by the DP guarantee: "
    "they can themselves reveal information about real records. Share this report only with "
    "people allowed to see the real data."
)
PUBLIC_SCOPE = (
    "Every figure in this report is differentially private or public: it is computed from the released "
    "synthetic table, from the DP importance weights, or from the privacy ledger and the public schema "
    "(post-processing of DP outputs, or metadata about the mechanisms). The only values that depend on "
    "real rows outside the DP mechanisms are the pass/fail bits of the gates marked data-dependent and "
    "the utility verdict word."
)
PUBLIC_SCOPE_DP = (
    "Every value in this report and its bundle is differentially private or public: it is computed "
    "from the released synthetic table, from the DP importance weights, from the privacy ledger and the "
    "public schema, or is the bit of the DP release test, a mechanism charged to the ledger. No value "
    "here was computed from real rows outside a DP mechanism: the gates and the utility verdict that "
    "read real rows are in the steward report only."
)
PUBLIC_PLOTS = {
    "synthetic_marginals": "1-way marginals of the released synthetic table: share of synthetic rows per "
    "cell, one bar per cell (numeric: the schema's public bins, else equal-width bins over its public bounds)"
}
PLOT_CAPTIONS = {
    "marginals_1way": "1-way marginals: share of real training and synthetic rows per cell",
    "dimwise_probability": "Dimension-wise probability: share of 1s per binary column, real vs synthetic",
    "dimwise_prediction": "Dimension-wise prediction: each column predicted from the others, real vs synthetic",
    "pca_2way": "Real training and synthetic rows on the real data's first two principal components",
    "membership_roc": "Membership-inference ROC curves of the two attacks (log FPR; the diagonal is chance)",
}
CAPTIONS = {**PLOT_CAPTIONS, **PUBLIC_PLOTS}
GUARANTEES = [
    "Differential privacy (DP): the generator's training is (ε, δ)-DP with respect to adding or removing one "
    "record, with ε and δ as in the Privacy budget section. Whatever is computed from the released table alone "
    "(including these synthetic rows and any analysis of them) keeps that guarantee, however it is used.",
    "α-LMDP (PPEM only) is a different, weaker-in-kind promise: the released generator's marginal over the "
    "protected columns is statistically distinguishable (at level α) from the real one. It limits one "
    "inference about a group of columns; it is not a bound on what can be learnt about an individual.",
    "A NON-PRIVATE generator (ε = ∞) has no guarantee at all; such releases are for internal use only. A release "
    'whose guarantee reads "heuristic" (private support points) has no proven one: its ε is that of the exact '
    "mechanism its finite MCMC chain approximates.",
    "Not covered: the release gates, the evaluation metrics, the attacks and the plots below read real rows "
    "outside the DP mechanism. They are evidence for the privacy officer, not part of the release, and "
    "this report itself must be handled like the real data.",
    "The attacks are empirical: a passed attack gate shows that these attackers, on these samples, did not "
    "find clear risk. It is a lower bound on risk, not a proof of privacy; the DP guarantee is the proof.",
]
PUBLIC_GUARANTEES = GUARANTEES[:3] + [
    "Data-dependent bits: a gate marked data-dependent (the privacy-risk attacks, PPEM's α-LMDP tests, the "
    "support points' MCMC convergence, the utility verdict) reads real rows outside the DP mechanism. This report "
    "publishes only its pass/fail bit (the verdict: its word), and whether this table was released at all is the "
    "conjunction of those bits; none of the gates' evidence is published.",
    "The importance weights' k̂ and effective sample size are functions of the weights alone, which a DP "
    "estimator computed from the synthetic rows: post-processing of DP outputs, like the weight column itself.",
    GUARANTEES[4],
]
PUBLIC_GUARANTEES_DP = GUARANTEES[:3] + [
    "The release decision: this table was published because the DP release test passed (ε in the ledger rows "
    "below): the count of training rows near the synthetic table, less the holdout's share of them, plus discrete "
    "Laplace noise, was under a public threshold. On a few hundred rows it refuses wholesale copying only; the "
    "steward report holds the row-reading attacks and tests, which do not decide publication.",
    PUBLIC_GUARANTEES[4],
    GUARANTEES[4],
]
PUBLIC_KEYS = ("dataset", "generator", "drawn_by", "release_id", "rows", "guarantee", "audience", "libraries")
PUBLIC_PRIVACY = (
    "epsilon_generator",
    "epsilon_generator_rdp",
    "epsilon_dataset_total",
    "epsilon_dataset_total_rdp",
    "delta",
    "lifetime_budget",
    "ledger_head",
    "events",
    "run_id",
    "release_epsilon",
    "epsilon_release_planned",
    "epsilon_allocated",
    "epsilon_lifetime_spent",
    "epsilon_lifetime_remaining",
    "calibration",
    "unit",
    "unit_statement",
)
PUBLIC_LEDGER = ("seq", "run_id", "stage", "status", "event_json")
PUBLIC_WEIGHTS = (
    "released",
    "withheld_because",
    "estimator",
    "label",
    "epsilon",
    "delta",
    "n_released",
    "khat",
    "khat_bound",
    "ess",
    "tempering",
    "psis",
)
PUBLIC_VERDICT = ("verdict", "action", "data_dependent")
BAR_WIDTH = 640  # px of the budget figure's bars


def public_view(summary: dict) -> dict:
    """The whitelist of `summary` the public report may show; every other key is dropped.

    Kept: the release's identity (a selection's winner, `drawn_by`, included) and row count, the guarantee label
    and audience, ε/δ (generator, data set total, budget), the ledger rows' public columns and head, the
    mechanisms' events, each gate's name, pass/fail bit and whether it read real rows ("data_dependent"), the
    utility verdict word and its policy action (PUBLIC_VERDICT, data-dependent), the importance weights'
    estimator, ε, k̂ and ESS and whether the weight column was released (or why not), "synthetic_summary"
    (statistics of the synthetic table alone), the hashes, the library versions,
    and of "plots" only the synthetic-only figures of PUBLIC_PLOTS. Dropped, whatever the caller passes:
    gate evidence, metrics, fidelity, utility, validation counts, weighted analyses, real-data plots.
    """
    privacy = summary.get("privacy") or {}
    weights = summary.get("weights") or None
    verdict = summary.get("utility_verdict") or None
    return {
        **{k: summary[k] for k in PUBLIC_KEYS if k in summary},
        "privacy": {
            **{k: privacy[k] for k in PUBLIC_PRIVACY if k in privacy},
            "ledger_rows": [
                {k: row[k] for k in PUBLIC_LEDGER if k in row}
                for row in privacy.get("ledger_rows") or []
                if isinstance(row, dict)
            ],
        },
        "gates": [
            {"name": g.get("name"), "passed": g.get("passed"), "data_dependent": g.get("data_dependent", True)}
            for g in summary.get("gates") or []
        ],
        "weights": None if weights is None else {k: weights[k] for k in PUBLIC_WEIGHTS if k in weights},
        "utility_verdict": None if verdict is None else {k: verdict[k] for k in PUBLIC_VERDICT if k in verdict},
        "synthetic_summary": summary.get("synthetic_summary"),
        "hashes": {k: v for k, v in (summary.get("hashes") or {}).items() if isinstance(v, str)},
        "plots": {k: v for k, v in (summary.get("plots") or {}).items() if k in PUBLIC_PLOTS},
    }


def _markdown_text(value: Any) -> Markup:
    """Markdown autoescape: HTML-escaped (renderers pass raw HTML through), no pipes or newlines in a cell."""
    return Markup(html.escape(str(value), quote=False).replace("|", "\\|").replace("\n", " "))


_HTML = Environment(
    loader=PackageLoader("pipelines.reporting", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_MD = Environment(
    loader=PackageLoader("pipelines.reporting", "templates"),
    autoescape=True,
    finalize=lambda v: v if isinstance(v, Markup) else _markdown_text(v),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
for _env in (_HTML, _MD):
    _env.filters.update(fmt=fmt, b64=lambda png: base64.b64encode(png).decode("ascii"))
    _env.globals.update(CAPTIONS=CAPTIONS, NA=NA)
_MD.filters["mdrow"] = lambda cells: Markup("| " + " | ".join(_markdown_text(c) for c in cells) + " |")


def render(template: str, **context: Any) -> str:
    """Render templates/<template>.html.j2 or .md.j2 (the extension of `template` picks the environment)."""
    env = _HTML if template.endswith(".html") else _MD
    return env.get_template(template + ".j2").render(**context)


def budget_figure(privacy: dict[str, Any]) -> dict[str, Any] | None:
    """The geometry of the budget figure (an inline SVG bar, templates/macros): the lifetime budget as the full
    bar, the data set's lifetime spend (every release, this one included, PLD) filled, this release's ε marked at
    its end; below, one bar per part of the release's allocation. ε composes sub-additively, so the parts do
    not add up to the release ε exactly (the ledger's accountant composes them). None without a lifetime budget."""
    lifetime = privacy.get("lifetime_budget")
    spent = privacy.get("epsilon_lifetime_spent", privacy.get("epsilon_dataset_total"))
    if not isinstance(lifetime, Real) or not isinstance(spent, Real) or lifetime <= 0:
        return None
    release = privacy.get("release_epsilon", privacy.get("epsilon_generator"))
    scale = BAR_WIDTH / max(lifetime, spent)
    this = min(float(release), spent) if isinstance(release, Real) else 0.0
    parts = privacy.get("epsilon_allocated") or {}
    top = max(parts.values(), default=0.0)
    return {
        "width": BAR_WIDTH,
        "spent": spent * scale,
        "this_x": (spent - this) * scale,
        "this_w": this * scale,
        "lifetime": lifetime,
        "spent_value": spent,
        "release": release,
        "remaining": privacy.get("epsilon_lifetime_remaining", max(lifetime - spent, 0.0)),
        "over": spent > lifetime,
        "parts": [
            {"name": part_name(n), "epsilon": e, "w": e / top * BAR_WIDTH / 2 if top > 0 else 0.0}
            for n, e in parts.items()
        ],
    }


def budget_rows(privacy: dict[str, Any], generator: bool = True) -> list[list[str]]:
    """The budget's numbers as [quantity, value, unit] rows; the release's ε and its allocation where the manifest
    has them, and (`generator`) the ε of the report's own generator."""
    total, budget = privacy.get("epsilon_dataset_total"), privacy.get("lifetime_budget")
    remaining = privacy.get(
        "epsilon_lifetime_remaining", budget - total if isinstance(total, Real) and isinstance(budget, Real) else None
    )
    rows = [
        *(
            [["ε of this release run (all its generators and weights, composed)", privacy["release_epsilon"], "ε"]]
            if "release_epsilon" in privacy
            else []
        ),
        *([["ε spent by this generator", privacy.get("epsilon_generator"), "ε"]] if generator else []),
        *[[f"ε allocated to {part_name(n)}", e, "ε"] for n, e in (privacy.get("epsilon_allocated") or {}).items()],
        ["Total ε spent on this data set (all releases, PLD/PRV accountant)", total, "ε"],
        ["Total ε, RDP accountant cross-check", privacy.get("epsilon_dataset_total_rdp"), "ε"],
        ["Lifetime ε budget of this data set", budget, "ε"],
        ["Remaining ε budget", remaining, "ε"],
        ["δ", privacy.get("delta"), "probability"],
    ]
    return [[q, fmt(v, 6), u] for q, v, u in rows]


def failed_table_gates(gates: list[dict[str, Any]], deciding: list[str] | None = None) -> list[dict[str, Any]]:
    """The failed gates that refuse the table: those of `deciding` (checks.json `deciding_gates`; None: every gate),
    never importance_weights (a failed weights gate withholds only the weight column)."""
    return [
        g
        for g in gates
        if g.get("passed") is False
        and g.get("name") != "importance_weights"
        and (deciding is None or g.get("name") in deciding)
    ]


def findings(gates: list[dict[str, Any]], deciding: list[str] | None) -> list[dict[str, Any]]:
    """Failed gates that did not decide publication (release.non_dp_gates: advise): the steward's findings."""
    return (
        []
        if deciding is None
        else [
            g
            for g in gates
            if g.get("passed") is False and g.get("name") not in deciding and g.get("name") != "importance_weights"
        ]
    )


def table_published(summary: dict[str, Any]) -> bool | None:
    """Whether the table was released: no failed gate that decides publication (`failed_table_gates`); None
    without gate results."""
    gates = summary.get("gates") or []
    return None if not gates else not failed_table_gates(gates, summary.get("deciding_gates"))


def verdict_evidence(summary: dict[str, Any], audience: str) -> dict[str, Any] | None:
    """The utility verdict's evidence (evaluate's metrics.json `utility_verdict`): the steward's only."""
    return (summary.get("metrics") or {}).get("utility_verdict") if audience == "steward" else None


def headline(summary: dict[str, Any], audience: str) -> list[str]:
    """The verdict: what was published and what was refused, one sentence each with the reason; the steward's
    utility verdict names what made it weak (evaluate's metrics.json `utility_verdict`, `verdict_sentence`)."""
    gen, gates, deciding = summary.get("generator") or "", summary.get("gates") or [], summary.get("deciding_gates")
    name = generator_name(gen)
    failed = failed_table_gates(gates, deciding)
    if failed:
        lines = [gate_sentence(gen, g, audience) for g in failed]
    elif gates:
        lines = [
            f"{name} published as release {fmt(summary.get('release_id'))}: {fmt(summary.get('rows'))} synthetic "
            f"rows, {fmt(summary.get('guarantee'))}, "
            f"ε = {fmt((summary.get('privacy') or {}).get('epsilon_generator'))}."
        ]
    else:
        lines = []
    lines += [
        f"Finding for the steward, not a release decision (release.non_dp_gates: advise): "
        f"{gate_sentence(gen, g, audience)}"
        for g in findings(gates, deciding)
    ]
    lines += [
        s
        for s in (
            weights_sentence(gen, summary.get("weights")),
            verdict_sentence(
                gen, summary.get("utility_verdict"), verdict_evidence(summary, audience), table_published(summary)
            ),
        )
        if s
    ]
    return lines or [f"{name}: {NA} (no gate results)."]


def release_rows(summary: dict[str, Any], audience: str) -> list[list[str]]:
    """What was released, as a [item, value] table under the verdict's sentences; the utility verdict in the
    steward's words where its evidence is there (`verdict_words`, without the features it names)."""
    verdict = summary.get("utility_verdict")
    evidence, published = verdict_evidence(summary, audience), table_published(summary)
    action = (verdict or {}).get("action")
    policy = "" if action in (None, "advise") else f"policy: {fmt(action)}; "
    drawn = summary.get("drawn_by")
    return [
        ["Data set", fmt(summary.get("dataset"))],
        ["Generator", fmt(summary.get("generator"))],
        *([["Drawn by (the selected candidate)", fmt(drawn)]] if drawn not in (None, summary.get("generator")) else []),
        ["Release id", fmt(summary.get("release_id"))],
        ["Synthetic rows", fmt(summary.get("rows"))],
        ["Guarantee", fmt(summary.get("guarantee"))],
        *([["Privacy unit", fmt(unit)]] if (unit := (summary.get("privacy") or {}).get("unit_statement")) else []),
        ["Audience", fmt(summary.get("audience"))],
        *(
            [
                [
                    "Utility verdict",
                    " ".join(
                        s
                        for s in (
                            f"{verdict_words(verdict, evidence, detail=False)} ({policy}data-dependent: it reads "
                            "real rows).",
                            publication_words(verdict, published),
                        )
                        if s
                    ),
                ]
            ]
            if verdict
            else []
        ),
    ]


def _common(summary: dict[str, Any], audience: str) -> dict[str, Any]:
    privacy = summary.get("privacy") or {}
    return {
        "s": summary,
        "audience": audience,
        "headline": headline(summary, audience),
        "released": release_rows(summary, audience),
        "refused": bool(failed_table_gates(summary.get("gates") or [], summary.get("deciding_gates"))),
        "generator_name": generator_name(summary.get("generator")),
        "method": " ".join(
            t
            for t in (METHODS.get(summary.get("generator") or ""), calibration_sentence(privacy.get("calibration")))
            if t
        ),
        "budget": budget_figure(privacy),
        "budget_rows": budget_rows(privacy),
        "mechanisms": sec.mechanisms_section(privacy.get("events")),
        "ledger": sec.ledger_section(privacy.get("ledger_rows")),
        "gates": sec.gates_section(
            summary.get("generator"),
            summary.get("gates"),
            audience,
            summary.get("deciding_gates"),
            summary.get("utility_verdict"),
        ),
        "plots": summary.get("plots") or {},
    }


def public_context(summary: dict[str, Any]) -> dict[str, Any]:
    """The public report's context: built from `public_view(summary)` alone."""
    s = public_view(summary)
    private = s["utility_verdict"] is None and not any(g["data_dependent"] for g in s["gates"])
    return {
        **_common(s, "public"),
        "title": f"Release report: {fmt(s.get('dataset'))} / {fmt(s.get('generator'))}",
        "banner": None,
        "scope": PUBLIC_SCOPE_DP if private else PUBLIC_SCOPE,
        "guarantees": PUBLIC_GUARANTEES_DP if private else PUBLIC_GUARANTEES,
        "weights": sec.weights_section(s["weights"]),
        "synthetic": sec.synthetic_section(s["synthetic_summary"]),
        "hashes": s["hashes"],
        "libraries": s.get("libraries") or {},
    }


def notice(summary: dict[str, Any]) -> dict[str, Any]:
    """What in the steward report is not covered by the DP guarantee."""
    items = []
    if summary.get("gates"):
        names = ", ".join(fmt(g.get("name")) for g in summary["gates"])
        items.append(f"Gate evidence ({names}): computed by the release gates, which may read real records.")
    if summary.get("fidelity") or summary.get("fidelity_summary"):
        items.append("Marginal distances and their summary: computed on the real holdout.")
    if summary.get("utility") and "skipped" not in summary["utility"]:
        items.append("TSTR/TRTR AUROC: models fitted on real training rows and evaluated on real test rows.")
    if summary.get("metrics"):
        items.append("Scorecard, privacy-risk attacks and plots: computed on real training and holdout rows.")
    return {
        "title": "Not covered by the DP guarantee",
        "text": UNCOVERED if items else "No figure in this report was computed from real data.",
        "items": items,
    }


def _evaluation(summary: dict[str, Any]) -> list[dict[str, Any]]:
    metrics = summary.get("metrics") or {}
    if metrics.get(UNAVAILABLE):
        return sec.unavailable_section(metrics[UNAVAILABLE])
    return [
        *sec.utility_verdict_section(metrics.get("utility_verdict")),
        sec.risk_section(metrics.get("privacy_risk")),
        sec.fidelity_section(summary.get("fidelity"), summary.get("fidelity_summary")),
        sec.scorecard_section(summary.get("metrics")),
        sec.utility_section(summary.get("utility")),
    ]


def steward_context(summary: dict[str, Any]) -> dict[str, Any]:
    """The steward report's context: everything in `summary`, real-row evidence included."""
    return {
        **_common(summary, "steward"),
        "title": f"Steward report: {fmt(summary.get('dataset'))} / {fmt(summary.get('generator'))}",
        "banner": INTERNAL,
        "notice": notice(summary),
        "guarantees": GUARANTEES,
        "weights": sec.weights_section(summary.get("weights")),
        # validate's row counts first: what the release was trained on, before how good it is
        "evaluation": [
            *sec.validation_section(summary.get("validation")),
            *_evaluation(summary),
            *sec.weights_analysis_section(summary.get("weights_analysis")),
        ],
        "hashes": {k: v for k, v in (summary.get("hashes") or {}).items() if isinstance(v, str)},
    }


def public_markdown(summary: dict, bundled: Collection[str] = ()) -> str:
    """The public report as Markdown (a bundle's report.md): only `public_view(summary)` is rendered.

    `bundled`: the plots written as <name>.png next to the Markdown. It links those only, so every figure link of
    report.md names a file of the bundle; a plot that is not a file there is left out of the Markdown (report.html
    embeds every plot)."""
    context = public_context(summary)
    return render(
        "public_report.md", **{**context, "plots": {k: v for k, v in context["plots"].items() if k in bundled}}
    )


def public_html(summary: dict) -> str:
    """The public report as one self-contained HTML page: only `public_view(summary)` is rendered."""
    return render("public_report.html", **public_context(summary))


def render_markdown(summary: dict) -> str:
    """The steward's (internal) report as Markdown; see the module docstring for `summary`'s keys."""
    return render("steward_report.md", **steward_context(summary))


def render_html(summary: dict) -> str:
    """The steward's (internal) report as one self-contained HTML page (inline CSS and SVG, PNGs as data: URIs,
    no script, all text escaped), labelled INTERNAL at its head and foot and, when printed, on every page."""
    return render("steward_report.html", **steward_context(summary))


def comparison_html(context: dict) -> str:
    """A release run's comparison page (pipelines/reporting/comparison.py builds `context`)."""
    return render("comparison.html", **context)


def comparison_markdown(context: dict) -> str:
    return render("comparison.md", **context)


def evaluation_markdown(generator: str, metrics: dict) -> str:
    """The evaluation part of the report (privacy risk, fidelity, scorecard, utility) for evaluate@gen's
    Prefect artefact, before any gate has run; `metrics` is evaluate's metrics.json."""
    summary = {
        "fidelity": metrics.get("fidelity"),
        "fidelity_summary": metrics.get("fidelity_summary"),
        "utility": metrics.get("utility"),
        "metrics": metrics,
    }
    return render(
        "evaluation.md",
        title=f"INTERNAL evaluation of {generator} (computed from real rows)",
        banner=INTERNAL,
        notice=notice(summary),
        evaluation=_evaluation(summary),
    )


def key_figures(metrics: dict) -> list[dict[str, str]]:
    """Every row of the privacy-risk and scorecard tables as {"table", "row", <column>: value} dicts, for a
    Prefect table artefact."""
    out = []
    for part in (*sec.risk_section(metrics.get("privacy_risk"))["parts"], *sec.scorecard_section(metrics)["parts"]):
        if "table" in part:
            headers, rows = part["table"]["headers"], part["table"]["rows"]
            out += [{"table": headers[0], **dict(zip(["row", *headers[1:]], map(str, row)))} for row in rows]
    return out
