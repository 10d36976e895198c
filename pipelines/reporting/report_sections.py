"""The evidence sections of the release reports, as data for the templates (pipelines/reporting/templates/).

A section is {"title": str, "parts": [part, ...]}; a part is {"p": text} or {"table": {"headers": [...],
"rows": [[...], ...]}}. Every table has human column names and units (report_words); no raw key/value dump.
Which sections a report shows, and in which order, is the templates' business.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from pipelines.reporting.report_words import (
    EVENT_PARAMS,
    EVENTS,
    GATES,
    NA,
    claim_words,
    evidence_rows,
    fmt,
    gate_sentence,
    label,
    positive_class_words,
)

WORST_COLUMNS = 10
Section = dict[str, Any]


def p(text: str) -> dict[str, str]:
    return {"p": text}


def table(headers: list[str], rows: list[list[Any]]) -> dict[str, Any]:
    return {"table": {"headers": headers, "rows": [[c if isinstance(c, str) else fmt(c) for c in r] for r in rows]}}


def section(title: str, *parts: dict[str, Any]) -> Section:
    return {"title": title, "parts": list(parts)}


ADVISORY = "advisory: not enforced"


def result(passed: bool | None) -> str:
    return NA if passed is None else "PASS" if passed else "FAIL"


def gate_result(gate: dict[str, Any], deciding: list[str] | None, verdict: dict[str, Any] | None) -> str:
    """A gate's result cell: PASS, FAIL or not available; except that a passed utility gate whose verdict is not
    fit (the steward's or public `utility_verdict`, else the gate's evidence) reads what let it pass, never PASS
    beside a WEAK or INVERTED verdict: ADVISORY where it does not decide publication (`deciding`, checks.json
    `deciding_gates`; the verdict's action "advise"), "labelled <WORD>" where its policy labels the verdict, "not
    assessed" where no verdict was reached."""
    evidence = gate.get("evidence")
    word = (verdict or {}).get("verdict") or (evidence.get("verdict") if isinstance(evidence, dict) else None)
    if gate.get("name") != "utility" or not gate.get("passed") or word in (None, "fit"):
        return result(gate.get("passed"))
    if (verdict or {}).get("action") == "advise" or (deciding is not None and "utility" not in deciding):
        return ADVISORY
    return "not assessed" if word == "not_assessed" else f"labelled {str(word).upper()}"


def gate_title(name: str) -> str:
    return GATES[name].title if name in GATES else name


def gates_section(
    generator: str | None,
    gates: list[dict] | None,
    audience: str,
    deciding: list[str] | None = None,
    verdict: dict[str, Any] | None = None,
) -> Section:
    """The gates' table: human name, the name in the manifest, result (`gate_result`) and (public) whether it read
    real rows; the steward's version adds one evidence table per gate. `deciding`: the gates that decide
    publication (checks.json `deciding_gates`; None: all); `verdict`: the summary's `utility_verdict`."""
    if not gates:
        return section("Release gates", p(NA))
    results = [gate_result(g, deciding, verdict) for g in gates]
    failed = [g["name"] for g in gates if not g.get("passed")]
    neither = "".join(
        f" {gate_title(str(g.get('name')))}: {r}." for g, r in zip(gates, results) if r not in ("PASS", "FAIL", NA)
    )
    rule = (
        "The table is refused when any gate but importance_weights fails"
        if deciding is None
        else f"Publication is decided by {', '.join(deciding)} (release.non_dp_gates); the other gates are findings "
        "for the steward"
    )
    if failed:
        intro = (
            f"FAILED gates: {', '.join(map(str, failed))}. {rule}; a failed importance_weights gate withholds only "
            f"the weight column.{neither}"
        )
    else:
        intro = (
            f"{results.count('PASS')} of {len(gates)} gates passed;{neither}"
            if neither
            else f"All {len(gates)} gates passed."
        )
    if audience == "public":
        rows = [
            [
                gate_title(g["name"]),
                g["name"],
                r,
                "yes: pass/fail bit only"
                if g.get("data_dependent", True)
                else "no: reads only DP outputs or the ledger",
            ]
            for g, r in zip(gates, results)
        ]
        tail = (
            " A data-dependent gate read real rows outside the DP mechanism: only its pass/fail bit is "
            "published, declared in the manifest."
            if any(g.get("data_dependent", True) for g in gates)
            else " Every bit here is public metadata or the output of a DP mechanism."
        )
        return section(
            "Release gates", p(intro + tail), table(["Gate", "Name in the manifest", "Result", "Data-dependent"], rows)
        )
    parts = [
        p(intro),
        table(
            ["Gate", "Name in the manifest", "Result"],
            [[gate_title(str(g.get("name"))), str(g.get("name")), r] for g, r in zip(gates, results)],
        ),
    ]
    for g in gates:
        ev = g.get("evidence")
        parts.append(
            p(gate_sentence(generator or "", {**g, "evidence": ev if isinstance(ev, dict) else {}}, "steward"))
        )
        rows = evidence_rows(ev) if isinstance(ev, dict) else [["Evidence", fmt(ev), ""]]
        if rows:
            parts.append(table([f"Evidence: {gate_title(str(g.get('name')))}", "Value", "Unit"], rows))
    return section("Release gates", *parts)


def event_text(event: dict[str, Any] | str) -> tuple[str, str]:
    """A ledger event (dict or its JSON) as (mechanism name, its parameters in words)."""
    if isinstance(event, str):
        try:
            event = json.loads(event)
        except ValueError:
            return event, ""
    kind = event.get("kind", "")
    if kind == "repeat_and_select":  # each candidate's trial as its mechanisms counted (the ledger has them all)
        trials = [
            ", ".join(f"{n}× {EVENTS.get(k, k)}" for k, n in Counter(e.get("kind") for e in c).items())
            for c in event.get("candidates", [])
        ]
        return EVENTS[kind], "; ".join(
            [f"{EVENT_PARAMS['mean']} {fmt(event.get('mean'), 6)}"]
            + [f"candidate {i + 1}: {t}" for i, t in enumerate(trials)]
        )
    params = "; ".join(
        f"{EVENT_PARAMS.get(k, label(k))} {fmt(v, 6)}" for k, v in event.items() if k != "kind" and v not in ("", None)
    )
    return EVENTS.get(kind, fmt(kind)), params


def mechanisms_section(events: list[dict] | None) -> Section:
    if not events:
        return section("Mechanisms", p(NA))
    return section(
        "Mechanisms",
        p(
            "The privacy events of this generator, with their parameters, as recorded in the "
            "ledger (the accountant composes exactly these):"
        ),
        table(["Mechanism", "Parameters"], [list(event_text(e)) for e in events if isinstance(e, dict)]),
    )


LEDGER = {"seq": "Row", "run_id": "Run", "stage": "Stage", "status": "Status"}


def ledger_section(rows: list[dict] | None) -> Section:
    """The ledger rows of this release: row, run, stage, status, and the event as mechanism and parameters."""
    if not rows:
        return section("Ledger rows", p(NA))
    keys = list(dict.fromkeys(k for r in rows for k in r if k != "event_json"))
    with_event = any("event_json" in r for r in rows)
    body = [
        [fmt(r.get(k), 6) for k in keys]
        + (list(event_text(r["event_json"])) if "event_json" in r else ["", ""] if with_event else [])
        for r in rows
    ]
    return section(
        "Ledger rows",
        p("The rows of the privacy ledger that this release wrote (planned, then spent):"),
        table([LEDGER.get(k, label(k)) for k in keys] + (["Mechanism", "Parameters"] if with_event else []), body),
    )


WEIGHTS = {
    "released": ("Weight column released", ""),
    "withheld_because": ("Withheld because", ""),
    "estimator": ("Estimator", ""),
    "label": ("Guarantee", ""),
    "epsilon": ("ε of the weights", "ε"),
    "delta": ("δ", "probability"),
    "n_released": ("Weighted synthetic rows", "rows"),
    "khat": ("PSIS k̂", ""),
    "khat_bound": ("Largest accepted k̂", ""),
    "ess": ("Effective sample size", "rows"),
    "tempering": ("Tempering", ""),
    "psis": ("PSIS smoothing", ""),
}


def weights_section(weights: dict | None) -> list[Section]:
    if not weights:
        return []
    intro = (
        "The `weight` column of the synthetic table: a DP estimate of p_real / p_synthetic at each synthetic row."
        if weights.get("released", True)
        else "The importance weights were REFUSED, so the table is released "
        "without its `weight` column; the ε they cost is still spent."
    )
    return [
        section(
            "Importance weights",
            p(intro + " k̂ and the effective sample size are computed from these weights alone (post-processing)."),
            table(
                ["Quantity", "Value", "Unit"],
                [[WEIGHTS[k][0], fmt(v), WEIGHTS[k][1]] for k, v in weights.items() if k in WEIGHTS],
            ),
        )
    ]


STATS = {
    "mean": "Mean",
    "std": "Std. dev.",
    "min": "Min",
    "q25": "25 %",
    "median": "Median",
    "q75": "75 %",
    "max": "Max",
}


def synthetic_section(stats: dict | None) -> Section:
    if not stats:
        return section("The synthetic table", p(NA))
    parts = [
        p(
            f"Statistics of the {fmt(stats.get('rows'))} released synthetic rows alone (no real row is read), in "
            "each column's own unit; then the share of each category."
        )
    ]
    if stats.get("numeric"):
        parts.append(
            table(["Column", *STATS.values()], [[c, *(v.get(k) for k in STATS)] for c, v in stats["numeric"].items()])
        )
    if stats.get("categorical"):
        parts.append(
            table(
                ["Column", "Category shares (share of rows)"],
                [[c, ", ".join(f"{k} {fmt(s, 3)}" for k, s in v.items())] for c, v in stats["categorical"].items()],
            )
        )
    return section("The synthetic table", *parts)


def utility_verdict_section(verdict: dict | None) -> list[Section]:
    """Steward only: the utility verdict's numbers (evaluate's metrics.json `utility_verdict`)."""
    if not verdict:
        return []
    task, pairs = verdict.get("task") or {}, verdict.get("two_way") or {}
    assoc = verdict.get("associations") or {}
    on_task = (
        fmt(task["skipped"])
        if "skipped" in task
        else f"inverted {fmt(task.get('inverted'))}, beats chance {fmt(task.get('beats_chance'))}, beats the "
        f"baseline {fmt(task.get('beats_baseline'))}"
    )
    rows = [
        [
            name,
            m.get("auroc"),
            m.get("auroc_lower_bound"),
            m.get("auroc_upper_bound"),
            m.get("baseline_auroc"),
            m.get("baseline_auroc_sd"),
            m.get("excess_lower_bound"),
        ]
        for name, m in (task.get("models") or {}).items()
    ]
    failed = verdict.get("failed_claims") or []
    distorted = assoc.get("distorted") or []
    return [
        section(
            f"Utility verdict: {fmt(verdict.get('verdict'))}",
            p(
                f"Baseline: {fmt(verdict.get('baseline'))}. Confidence {fmt(verdict.get('confidence'))} "
                f"(family-wise over {fmt(verdict.get('family_claims'))} 'fit' claims). Target task: {on_task}."
                + (
                    f" Weak because: {'; '.join(claim_words(c, verdict, detail=False) for c in failed)}."
                    if failed
                    else ""
                )
            ),
            table(
                ["2-way fidelity against the real holdout", "Value", "Unit"],
                [
                    ["Mean 2-way TV, this table", pairs.get("mean_tv"), "TV (0 = identical)"],
                    ["Mean 2-way TV, baseline", pairs.get("baseline_mean_tv"), "TV (0 = identical)"],
                    ["Improvement over the baseline, lower bound", pairs.get("improvement_lower_bound"), "TV"],
                    ["Beats the baseline", pairs.get("beats_baseline"), ""],
                ],
            ),
            table(
                ["Associations with the target against the real holdout", "Value", "Unit"],
                [
                    [
                        "Features whose association beats the baseline",
                        assoc.get("features_beating_baseline"),
                        f"of {fmt(assoc.get('features'))} features",
                    ],
                    [
                        "Features whose association is distorted (measurably worse than the baseline, by more "
                        f"than {fmt(assoc.get('tolerance'))})",
                        assoc.get("features_worse_than_baseline"),
                        f"of {fmt(assoc.get('features'))} features",
                    ],
                    [
                        "Feature closest to distorted"
                        + (f" ({assoc['worst_feature_name']})" if "worst_feature_name" in assoc else "")
                        + ": its improvement and upper bound",
                        f"{fmt(assoc.get('worst_improvement'))} / {fmt(assoc.get('worst_upper_bound'))}",
                        "correlation",
                    ],
                    ["Best feature's improvement, lower bound", assoc.get("improvement_lower_bound"), "correlation"],
                    ["RMS distance of the correlations, this table", assoc.get("distance"), "correlation"],
                    ["RMS distance of the correlations, baseline", assoc.get("baseline_distance"), "correlation"],
                    ["Beats the baseline", assoc.get("beats_baseline"), ""],
                ],
            ),
            *(
                [
                    table(
                        [
                            "Distorted feature",
                            "Association, real holdout",
                            "Association, this table",
                            "Improvement over the baseline",
                            "Its upper bound",
                        ],
                        [
                            [f["feature"], f["real"], f["synthetic"], f["improvement"], f["upper_bound"]]
                            for f in distorted
                        ],
                    )
                ]
                if distorted
                else []
            ),
            *(
                [
                    table(
                        [
                            "Model",
                            "AUROC",
                            "Lower bound",
                            "Upper bound",
                            "Baseline AUROC (mean)",
                            "Baseline SD",
                            "Excess lower bound",
                        ],
                        rows,
                    )
                ]
                if rows
                else []
            ),
        )
    ]


def _ci(interval: list | None) -> str:
    return NA if not interval else f"[{fmt(interval[0], 3)}, {fmt(interval[1], 3)}]"


def risk_section(risk: dict | None) -> Section:
    title = "Privacy risk: attacks on the released table"
    if not risk:
        return section(title, p(NA))
    m = risk.get("membership") or {}
    parts = [
        p(
            f"Membership inference: {fmt(m.get('n_members'))} training rows (members) against "
            f"{fmt(m.get('n_non_members'))} holdout rows (non-members); DOMIAS's reference density uses "
            f"{fmt(m.get('n_reference'))} other holdout rows. AUC 0.5 = chance; the interval is a 95 % bootstrap."
        ),
        table(
            ["Attack", "AUC", "95 % interval", "TPR at 1 % FPR"],
            [
                [name, fmt(a.get("auc"), 3), _ci(a.get("auc_ci95")), fmt(a.get("tpr_at_1pct_fpr"), 3)]
                for name, a in (
                    ("DOMIAS (density ratio)", m.get("domias") or {}),
                    ("Distance to closest record", m.get("dcr") or {}),
                )
            ],
        ),
    ]
    anon = risk.get("anonymeter") or {}
    rows = [
        [
            name,
            *(
                ["skipped: " + a["skipped"], "", "", "", ""]
                if "skipped" in a
                else [
                    fmt(a.get("risk"), 3),
                    _ci(a.get("risk_ci95")),
                    fmt(a.get("train_rate"), 3),
                    fmt(a.get("control_rate"), 3),
                    fmt(a.get("baseline_rate"), 3),
                ]
            ),
        ]
        for name, a in anon.items()
    ]
    parts += [
        p(
            "Singling out, linkability and inference (Giomi et al. 2023): risk = (success on training rows − "
            "success on control rows) / (1 − success on control rows); 0 = the table tells the attacker no more "
            "about its training records than about anyone else."
        ),
        table(["Attack", "Risk", "95 % interval", "Success (train)", "Success (control)", "Success (baseline)"], rows),
    ]
    ai = risk.get("attribute_inference") or {}
    parts += [
        p(
            f"Attribute inference of '{fmt(ai.get('secret'))}' from {len(ai.get('known_columns') or [])} known "
            f"columns: a model fitted on the synthetic table, against one fitted on real holdout rows "
            f"({fmt(ai.get('baseline'))})."
        ),
        table(
            ["Accuracy on training rows", "on holdout rows", "baseline on training rows", "Advantage"],
            [
                [
                    fmt(ai.get(k), 3)
                    for k in ("accuracy_members", "accuracy_non_members", "baseline_accuracy_members", "advantage")
                ]
            ],
        ),
    ]
    d = risk.get("disclosure") or {}
    pres, base = d.get("presence") or {}, d.get("presence_baseline") or {}
    att = d.get("attribute") or {}
    parts += [
        p(
            f"Presence and attribute disclosure (Diesendruck, §4.3) on sets of {fmt(d.get('set_size'))} rows; "
            "the baseline releases a fresh real holdout sample instead of the synthetic rows."
        ),
        table(
            ["Measure", "Released table", "Holdout baseline"],
            [
                [
                    "Presence: largest ε with precision > 55 %",
                    *(
                        "none" if "epsilon" in q and q["epsilon"] is None else fmt(q.get("epsilon"), 3)
                        for q in (pres, base)
                    ),
                ],
                ["Presence: sensitivity at that ε", fmt(pres.get("sensitivity"), 3), fmt(base.get("sensitivity"), 3)],
                [
                    "Attribute: sensitivity (training rows)",
                    fmt((att.get("members") or {}).get("sensitivity"), 3),
                    fmt((att.get("baseline_members") or {}).get("sensitivity"), 3),
                ],
                [
                    "Attribute: precision (training rows)",
                    fmt((att.get("members") or {}).get("precision"), 3),
                    fmt((att.get("baseline_members") or {}).get("precision"), 3),
                ],
            ],
        ),
    ]
    c = risk.get("copies") or {}
    q = c.get("dcr_quantiles") or {}
    parts += [
        p(
            "Copies: exact and near-duplicate training rows (Gower distance ≤ "
            f"{fmt(c.get('near_duplicate_distance'))}); distance to closest record (DCR, Gower distance) is "
            "reported, never gated on alone."
        ),
        table(
            ["Measure", "Synthetic rows", "Holdout rows (baseline)"],
            [
                [
                    "Exact copies of a training row (share)",
                    c.get("exact_match_rate"),
                    c.get("holdout_exact_match_rate"),
                ],
                ["Near duplicates (share)", c.get("near_duplicate_rate"), c.get("holdout_near_duplicate_rate")],
                ["DCR, 5th percentile", (q.get("synthetic") or {}).get("q05"), (q.get("holdout") or {}).get("q05")],
                ["DCR, median", (q.get("synthetic") or {}).get("q50"), (q.get("holdout") or {}).get("q50")],
            ],
        ),
    ]
    return section(title, *parts)


def scorecard_section(metrics: dict | None) -> Section:
    title = "Fidelity and utility scorecard"
    if not metrics:
        return section(title, p(NA))
    card = metrics.get("scorecard") or {}

    def g(sec: str, key: str) -> Any:  # the scorecard's sections, then DP-auto-GAN's (top level of metrics)
        return (card.get(sec) or metrics.get(sec) or {}).get(key)

    rows = [
        [
            "2-way marginals, mean TV (all pairs)",
            g("marginal_2way", "mean_tv"),
            g("marginal_2way", "holdout_reference_mean_tv"),
        ],
        ["2-way marginal error, mean L1 (PEARL)", g("marginal_2way", "pearl_mean_l1"), "—"],
        [
            "3-way marginals, mean TV (sampled)",
            g("kway_marginal", "mean_tv"),
            g("kway_marginal", "holdout_reference_mean_tv"),
        ],
        [
            "Correlation difference, mean |Δ|",
            g("correlation", "mean_abs_diff"),
            g("correlation", "holdout_reference_mean_abs_diff"),
        ],
        [
            "Range queries (3 attributes), mean error",
            g("range_queries", "mean_error"),
            g("range_queries", "holdout_reference_mean_error"),
        ],
        ["MMD² (Gaussian kernel)", g("mmd", "mmd2_u"), "—"],
        ["MMD permutation p-value", g("mmd", "p_value"), "—"],
        ["W1 between the tables", g("wasserstein1", "w1"), g("wasserstein1", "holdout_reference")],
        ["Detection AUC (real vs synthetic)", g("detection", "auc"), "—"],
        [
            "Wasserstein score (1 = identical)",
            g("wasserstein_score", "score"),
            g("wasserstein_score", "holdout_reference_score"),
        ],
        ["2-way PCA marginal score", g("pca_marginal", "score"), g("pca_marginal", "holdout_reference_score")],
    ]
    parts = [
        p(
            "Synthetic rows against the real training rows; the reference column is the same number for the real "
            "holdout, the value a perfect generator would get from sampling noise alone (— where the metric has "
            "none). TV and L1 are shares of probability mass (0 = identical); W1 is in schema-scaled units."
        ),
        table(["Metric", "Synthetic", "Holdout reference"], rows),
    ]
    cls = card.get("classifiers") or {}
    if "skipped" in cls or not cls:
        return section(title, *parts, p(f"Classifiers: {cls.get('skipped', NA)}"))
    body = [
        [
            name,
            *(fmt((m.get(key) or {}).get(metric), 3) for key in ("tstr", "trtr") for metric in ("roc", "prc")),
            m.get("note", ""),
        ]
        for name, m in {**cls.get("models", {}), "average": cls.get("average", {})}.items()
    ]
    return section(
        title,
        *parts,
        p(
            f"Ten classifiers (PEARL Table 2) predicting '{fmt(cls.get('target'))}', tested on the real "
            "holdout: trained on synthetic rows (TSTR) or on real training rows (TRTR); areas under the "
            "ROC and precision-recall curves."
        ),
        table(["Classifier", "TSTR ROC", "TSTR PRC", "TRTR ROC", "TRTR PRC", "Note"], body),
    )


def fidelity_section(distances: dict | None, summary: dict | None) -> Section:
    parts = []
    if summary:
        labels = {
            "mean_tv": ("Mean TV (categorical)", "TV"),
            "max_tv": ("Max TV (categorical)", "TV"),
            "mean_w1": ("Mean W1 (numeric)", "W1, schema-scaled"),
            "max_w1": ("Max W1 (numeric)", "W1, schema-scaled"),
        }
        parts.append(
            table(
                ["Summary", "Value", "Unit"],
                [[*labels.get(k, (label(k), ""))[:1], v, labels.get(k, ("", ""))[1]] for k, v in summary.items()],
            )
        )
    if not distances:
        return section("Fidelity: marginal distances", *parts, p(f"Per-column distances: {NA}"))
    worst = sorted(distances.items(), key=lambda kv: kv[1].get("value", 0.0), reverse=True)[:WORST_COLUMNS]
    return section(
        "Fidelity: marginal distances",
        *parts,
        p(
            f"The {len(worst)} most distant of {len(distances)} columns. TV: total variation over the "
            "schema's categories; W1: Wasserstein-1 after scaling by the schema bounds. 0 = identical "
            "marginals, 1 = disjoint."
        ),
        table(
            ["Column", "Metric", "Distance"],
            [[str(c), fmt(d.get("metric")).upper(), fmt(d.get("value"))] for c, d in worst],
        ),
    )


def utility_section(utility: dict | None) -> Section:
    title = "Utility: train on synthetic, test on real (AUROC)"
    if not utility:
        return section(title, p(NA))
    if "skipped" in utility:
        return section(title, p(f"Skipped: {utility['skipped']}"))
    categories = utility.get("target_categories")
    against = f", {categories} categories: each score is one class against the rest" if (categories or 2) > 2 else ""
    counts = ", ".join(
        f"{words} {fmt(utility.get(k))}"
        for words, k in (
            ("real training rows", "n_train_real"),
            ("synthetic rows", "n_synth"),
            ("real test rows", "n_test"),
        )
    )
    return section(
        title,
        p(
            f"Target {fmt(utility.get('target'))}{against} ({positive_class_words(utility)}); "
            f"{counts}. TSTR: fitted on synthetic rows; TRTR: fitted on real training rows; gap = TRTR − "
            "TSTR. AUROC: 0.5 = chance, 1 = perfect."
        ),
        table(
            ["Model", "TSTR AUROC", "TRTR AUROC", "Gap", "Note"],
            [
                [name, fmt(m.get("tstr")), fmt(m.get("trtr")), fmt(m.get("gap")), m.get("note", "")]
                for name, m in (utility.get("models") or {}).items()
            ],
        ),
    )


VALIDATION = {
    "rows_in": "Rows read",
    "rows_out": "Rows kept",
    "rows_dropped": "Rows dropped",
    "rows_clipped": "Rows kept with a value clipped to its bounds",
}


def unavailable_section(reason: str | None) -> list[Section]:
    """Steward only: why the evaluation against the real rows could not run (metrics.json `evaluation_unavailable`);
    the table was still published if the DP gates passed, since the real-side evaluation decides nothing public."""
    if not reason:
        return []
    return [
        section(
            "Evaluation against the real rows: not run",
            p(
                f"The real rows do not allow the evaluation ({reason}). No fidelity, utility or privacy-risk "
                "figure was computed, and every gate that reads them failed with this reason. Whether the table "
                "was published was decided by the DP gates alone. A holdout with one target class or none is "
                "the usual cause on a small table: a larger holdout_fraction or more rows give the evaluation "
                "what it needs."
            ),
        )
    ]


def validation_section(validation: dict | None) -> list[Section]:
    """Steward only: validate's row counts, per-column drop/clip counts, the offending values in summary (a
    numeric column's smallest and largest, a categorical column's most frequent unknown values as short text,
    `validation.unknown_text`) and per-rule broken rows (the schema's `rules`), computed on the raw real table.
    A column's other lists and mappings are not rendered."""
    from pipelines.data.validation import unknown_text

    if not validation:
        return []
    columns = [
        {
            "column": c,
            **{k: v for k, v in r.items() if not isinstance(v, (list, dict))},
            **(
                {"unknown_values": unknown_text(r["unknown_values"], r.get("unknown", 0))}
                if r.get("unknown_values")
                else {}
            ),
        }
        for c, r in (validation.get("columns") or {}).items()
    ]
    keys = list(dict.fromkeys(k for r in columns for k in r))
    headers = {
        "observed_min": "Smallest value out of domain",
        "observed_max": "Largest value out of domain",
        "unknown_values": "Most frequent unknown values (×rows)",
    }
    exact = ("observed_min", "observed_max")  # as the report gives them, not to fmt's 4 significant digits
    rules = validation.get("rules") or {}
    unit = validation.get("privacy_unit")
    bounded = (
        []
        if not unit
        else [
            ["Rows in the source table", unit["rows_read"]],
            [f"Units ({unit['column']} values)", unit["units"]],
            [
                f"Rows set aside: more than max_rows = {unit['max_rows']} for one {unit['column']}",
                unit["rows_set_aside"],
            ],
        ]
    )
    return [
        section(
            "Validation of the raw table",
            table(["Count", "Rows"], bounded + [[VALIDATION[k], validation[k]] for k in VALIDATION if k in validation]),
            *(
                [
                    table(
                        [headers.get(k) or label(k) for k in keys],
                        [
                            [str(r[k]) if k in exact and r.get(k) is not None else fmt(r.get(k)) for k in keys]
                            for r in columns
                        ],
                    )
                ]
                if columns
                else []
            ),
            *(
                [
                    table(
                        ["Rule", "Policy", "Rows breaking it", "Action"],
                        [[rule, r["policy"], fmt(r["broken"]), r["action"]] for rule, r in rules.items()],
                    )
                ]
                if rules
                else []
            ),
        )
    ]


def weights_analysis_section(analysis: dict | None) -> list[Section]:
    """Steward only: the weighted analyses of weights.json (against real train/holdout rows)."""
    if not analysis:
        return []
    return [
        section(
            "Importance weights: weighted analyses on real rows",
            table(["Analysis", "Result"], [[label(k), fmt(v)] for k, v in analysis.items() if k != "outside_dp"]),
        )
    ]
