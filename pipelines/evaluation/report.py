"""The two release reports, each as Markdown or self-contained HTML (both formats walk the same blocks).

- The PUBLIC report (`public_html`, `public_markdown`; report.html / report.md of the bundle in
  releases/<ds>/<id>/) shows only what is DP or public. `public_view` keeps a whitelist of the summary's keys
  (see its docstring) and drops everything else, so a real-data metric handed to it by mistake is not
  rendered: ε/δ and the ledger, the mechanisms, each gate's pass/fail bit (data-dependent ones declared),
  the DP importance weights' k̂/ESS, statistics and plots of the synthetic table, hashes and versions.
- The STEWARD report (`render_html`, `render_markdown`; reports/<ds>/steward/<release-id>/) is everything,
  real-data evaluation, attacks and gate evidence included, labelled INTERNAL at its head and foot.

Expected summary dict (every key optional; a missing section or value reads "not available"):

    {"dataset": str, "generator": str, "release_id": str,
     "privacy": {"epsilon_generator": float,          # ε spent by this generator's stages
                 "epsilon_dataset_total": float,      # ε over every event ever recorded for the data set (PLD/PRV)
                 "epsilon_dataset_total_rdp": float,  # the same composition, RDP accountant cross-check
                 "delta": float, "lifetime_budget": float,
                 "ledger_rows": [{...}, ...]},        # one dict per ledger row, rendered as a table
     "gates": [{"name": str, "passed": bool, "evidence": str | dict}, ...],
     "fidelity": {column: {"metric": "tv" | "w1", "value": float}},   # fidelity.marginal_distances
     "fidelity_summary": {"mean_tv", "max_tv", "mean_w1", "max_w1"},  # fidelity.summarise
     "utility": {...},                                                 # utility.tstr_auroc
     "hashes": {"schema": str, "params": str},
     "audience": str, "guarantee": str, "rows": int,   # what was released (manifest)
     "metrics": {...},        # evaluate's metrics.json: "scorecard", "privacy_risk", DP-auto-GAN's metrics
     "plots": {name: bytes}}  # PNGs: embedded (base64) in the HTML; in the Markdown, links to <name>.png

The steward summary may also carry "validation" (validate's report) and "weights_analysis" (the weighted
analyses of weights.json); the public summary "synthetic_summary" (synthetic_summary.summarise_synthetic),
"weights" (the manifest's entry) and "libraries".

Every block builder takes its part of `summary` and returns blocks; the HTML renderer embeds ("img", ...)
blocks as data: URIs, so report.html is one self-contained file.
"""
from __future__ import annotations

import base64
import html
from numbers import Integral, Real
from typing import Any

import numpy as np

NA = "not available"
WORST_COLUMNS = 10
UNCOVERED = ("The figures listed below were computed from real data and are not covered by the DP guarantee: "
             "they can themselves reveal information about real records. Share this report only with "
             "people allowed to see the real data.")

INTERNAL = "INTERNAL — computed from real rows, not for publication"
PUBLIC_SCOPE = ("Every figure in this report is differentially private or public: it is computed from the released "
                "synthetic table, from the DP importance weights, or from the privacy ledger and the public schema "
                "(post-processing of DP outputs, or metadata about the mechanisms). The only values that depend on "
                "real rows outside the DP mechanisms are the pass/fail bits of the gates marked data-dependent.")
PUBLIC_PLOTS = {"synthetic_marginals": "1-way marginals of the released synthetic table: share of synthetic rows per "
                                       "cell (numeric: 20 bins over the public schema bounds)"}
Block = tuple  # ("h", text) | ("p", text) | ("table", headers, rows) | ("notice", title, text, items) | ("img", name, png)
PLOT_CAPTIONS = {
    "marginals_1way": "1-way marginals: share of real training and synthetic rows per cell",
    "dimwise_probability": "Dimension-wise probability: share of 1s per binary column, real vs synthetic",
    "dimwise_prediction": "Dimension-wise prediction: each column predicted from the others, real vs synthetic",
    "pca_2way": "Real training and synthetic rows on the real data's first two principal components",
    "membership_roc": "Membership-inference ROC curves of the two attacks (log FPR; the diagonal is chance)",
}
GUARANTEES = [
    "Differential privacy (DP): the generator's training is (ε, δ)-DP with respect to adding or removing one "
    "record, with ε and δ as in the Privacy table. Whatever is computed from the released table alone "
    "(including these synthetic rows and any analysis of them) keeps that guarantee, however it is used.",
    "α-LMDP (PPEM only) is a different, weaker-in-kind promise: the released generator's marginal over the "
    "protected columns is statistically distinguishable (at level α) from the real one. It limits one "
    "inference about a group of columns; it is not a bound on what can be learnt about an individual.",
    "A NON-PRIVATE generator (ε = ∞) has no guarantee at all; such releases are for internal use only.",
    "Not covered: the release gates, the evaluation metrics, the attacks and the plots below read real rows "
    "outside the DP mechanism. They are evidence for the privacy officer, not part of the release, and "
    "this report itself must be handled like the real data.",
    "The attacks are empirical: a passed attack gate shows that these attackers, on these samples, did not "
    "find clear risk. It is a lower bound on risk, not a proof of privacy; the DP guarantee is the proof.",
]
PUBLIC_GUARANTEES = GUARANTEES[:3] + [
    "Data-dependent bits: a gate marked data-dependent (the privacy-risk attacks, PPEM's α-LMDP tests, the "
    "support points' MCMC convergence) reads real rows outside the DP mechanism. This report publishes only its "
    "pass/fail bit, and whether this table was released at all is the conjunction of those bits; none of the "
    "gates' evidence is published.",
    "The importance weights' k̂ and effective sample size are functions of the weights alone, which a DP "
    "estimator computed from the synthetic rows: post-processing of DP outputs, like the weight column itself.",
    "The attacks are empirical: a passed attack gate shows that these attackers, on these samples, did not "
    "find clear risk. It is a lower bound on risk, not a proof of privacy; the DP guarantee is the proof.",
]
CAPTIONS = {**PLOT_CAPTIONS, **PUBLIC_PLOTS}
PUBLIC_KEYS = ("dataset", "generator", "release_id", "rows", "guarantee", "audience", "libraries")
PUBLIC_PRIVACY = ("epsilon_generator", "epsilon_generator_rdp", "epsilon_dataset_total", "epsilon_dataset_total_rdp",
                  "delta", "lifetime_budget", "ledger_head", "events", "run_id", "release_epsilon",
                  "epsilon_release_planned", "epsilon_allocated", "epsilon_lifetime_spent", "epsilon_lifetime_remaining")
PUBLIC_LEDGER = ("seq", "run_id", "stage", "status", "event_json")
PUBLIC_WEIGHTS = ("released", "withheld_because", "estimator", "label", "epsilon", "delta", "n_released", "khat",
                  "khat_bound", "ess", "tempering", "psis")
PUBLIC_VERDICT = ("verdict", "action", "data_dependent")
VERDICT_WORDS = {"fit": "fit: beats an independent-marginals baseline", "weak": "WEAK: not measurably better than "
                 "independent columns drawn from the real 1-way marginals", "inverted": "INVERTED: models fitted on "
                 "this table predict the opposite of the truth", "not_assessed": "not assessed"}


def _fmt(value: Any, digits: int = 4) -> str:
    """Readable text for a value: numbers to `digits` significant digits, dicts as 'k: v; ...'."""
    if value is None:
        return NA
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, Real):
        return f"{float(value):.{digits}g}"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_fmt(v, digits)}" for k, v in value.items()) or NA
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v, digits) for v in value) or NA
    return str(value)


def _privacy_blocks(privacy: dict | None) -> list[Block]:
    blocks: list[Block] = [("h", "Privacy")]
    if not privacy:
        return blocks + [("p", NA)]
    total, budget = privacy.get("epsilon_dataset_total"), privacy.get("lifetime_budget")
    remaining = budget - total if isinstance(total, Real) and isinstance(budget, Real) else None
    rows = [*([["ε of this release run (all its generators and weights, composed)", privacy["release_epsilon"]]]
              if "release_epsilon" in privacy else []),
            ["ε spent by this generator", privacy.get("epsilon_generator")],
            ["Total ε spent on this data set (all releases, PLD/PRV accountant)", total],
            ["Total ε, RDP accountant cross-check", privacy.get("epsilon_dataset_total_rdp")],
            ["Lifetime ε budget of this data set", budget],
            ["Remaining ε budget", remaining],
            ["δ", privacy.get("delta")],
            *([["Ledger head (hash of its last row)", privacy["ledger_head"]]] if privacy.get("ledger_head") else [])]
    blocks += [("table", ["Quantity", "Value"], [[q, _fmt(v, 6)] for q, v in rows]),
               ("p", "The RDP figure composes the same ledger events with an independent accountant; it is "
                     "a looser upper bound and should not be below the primary figure.")]
    ledger = privacy.get("ledger_rows")
    if not ledger:
        return blocks + [("p", f"Ledger rows: {NA}")]
    return blocks + [("p", "Ledger rows for this data set:"), _dict_table(ledger)]


def _dict_table(rows: list[dict]) -> Block:
    """One table row per dict, one column per key seen in any of them."""
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return ("table", keys, [[_fmt(row.get(k), 6) for k in keys] for row in rows])


def _gate_blocks(gates: list[dict] | None) -> list[Block]:
    if not gates:
        return [("h", "Release gates"), ("p", NA)]
    failed = [_fmt(g.get("name")) for g in gates if not g.get("passed")]
    verdict = (f"All {len(gates)} gates passed." if not failed else
               f"FAILED gates: {', '.join(failed)}. This generator must not be released.")
    rows = [[_fmt(g.get("name")), NA if g.get("passed") is None else "PASS" if g["passed"] else "FAIL",
             _fmt(g.get("evidence"))] for g in gates]
    return [("h", "Release gates"), ("p", verdict), ("table", ["Gate", "Result", "Evidence"], rows)]


def _fidelity_blocks(distances: dict | None, summary: dict | None) -> list[Block]:
    blocks: list[Block] = [("h", "Fidelity: marginal distances")]
    if summary:
        labels = {"mean_tv": "Mean TV (categorical)", "max_tv": "Max TV (categorical)",
                  "mean_w1": "Mean W1 (numeric)", "max_w1": "Max W1 (numeric)"}
        blocks.append(("table", ["Summary", "Value"], [[labels.get(k, k), _fmt(v)] for k, v in summary.items()]))
    if not distances:
        return blocks + [("p", f"Per-column distances: {NA}")]
    worst = sorted(distances.items(), key=lambda kv: kv[1].get("value", 0.0), reverse=True)[:WORST_COLUMNS]
    return blocks + [
        ("p", f"The {len(worst)} most distant of {len(distances)} columns. TV: total variation over the "
              "schema's categories; W1: Wasserstein-1 after scaling by the schema bounds. 0 = identical "
              "marginals, 1 = disjoint."),
        ("table", ["Column", "Metric", "Distance"],
         [[str(c), _fmt(d.get("metric")).upper(), _fmt(d.get("value"))] for c, d in worst])]


def _utility_blocks(utility: dict | None) -> list[Block]:
    blocks: list[Block] = [("h", "Utility: train on synthetic, test on real (AUROC)")]
    if not utility:
        return blocks + [("p", NA)]
    if "skipped" in utility:
        return blocks + [("p", f"Skipped: {utility['skipped']}")]
    counts = ", ".join(f"{label} {_fmt(utility.get(k))}" for label, k in
                       (("real training rows", "n_train_real"), ("synthetic rows", "n_synth"),
                        ("real test rows", "n_test")))
    rows = [[name, _fmt(m.get("tstr")), _fmt(m.get("trtr")), _fmt(m.get("gap")), m.get("note", "")]
            for name, m in (utility.get("models") or {}).items()]
    return blocks + [
        ("p", f"Target {_fmt(utility.get('target'))} (positive class {_fmt(utility.get('positive_class'))}); "
              f"{counts}. TSTR: fitted on synthetic rows; TRTR: fitted on real training rows; "
              "gap = TRTR − TSTR."),
        ("table", ["Model", "TSTR AUROC", "TRTR AUROC", "Gap", "Note"], rows)]


def _notice(summary: dict) -> Block:
    items = []
    if summary.get("gates"):
        names = ", ".join(_fmt(g.get("name")) for g in summary["gates"])
        items.append(f"Gate evidence ({names}): computed by the release gates, which may read real records.")
    if summary.get("fidelity") or summary.get("fidelity_summary"):
        items.append("Marginal distances and their summary: computed on the real holdout.")
    if summary.get("utility") and "skipped" not in summary["utility"]:
        items.append("TSTR/TRTR AUROC: models fitted on real training rows and evaluated on real test rows.")
    if summary.get("metrics"):
        items.append("Scorecard, privacy-risk attacks and plots: computed on real training and holdout rows.")
    text = UNCOVERED if items else "No figure in this report was computed from real data."
    return ("notice", "Not covered by the DP guarantee", text, items)


def _verdict_text(verdict: dict) -> str:
    """The utility verdict word as a steward or analyst reads it (manifest `utility_verdict`)."""
    return (f"{VERDICT_WORDS.get(verdict.get('verdict'), _fmt(verdict.get('verdict')))} (policy: "
            f"{_fmt(verdict.get('action'))}; data-dependent: it reads real rows, only this word is published)")


def _release_blocks(summary: dict) -> list[Block]:
    rows = [["Data set", summary.get("dataset")], ["Generator", summary.get("generator")],
            ["Release id", summary.get("release_id")], ["Synthetic rows", summary.get("rows")],
            ["Guarantee", summary.get("guarantee")], ["Audience", summary.get("audience")],
            *([["Utility verdict", _verdict_text(summary["utility_verdict"])]]
              if summary.get("utility_verdict") else [])]
    return [("h", "What was released"), ("table", ["Item", "Value"], [[k, _fmt(v)] for k, v in rows])]


def _verdict_blocks(verdict: dict | None) -> list[Block]:
    """Steward only: the utility verdict's numbers (evaluate's metrics.json `utility_verdict`)."""
    if not verdict:
        return []
    task, pairs = verdict.get("task") or {}, verdict.get("two_way") or {}
    on_task = (_fmt(task["skipped"]) if "skipped" in task else
               f"inverted {_fmt(task.get('inverted'))}, beats the baseline {_fmt(task.get('beats_baseline'))}")
    rows = [[name, _fmt(m.get("auroc")), _fmt(m.get("auroc_upper_bound")), _fmt(m.get("baseline_auroc")),
             _fmt(m.get("baseline_auroc_sd")), _fmt(m.get("excess_lower_bound"))]
            for name, m in (task.get("models") or {}).items()]
    return [("h", f"Utility verdict: {_fmt(verdict.get('verdict'))}"),
            ("p", f"Baseline: {_fmt(verdict.get('baseline'))}. Confidence {_fmt(verdict.get('confidence'))} "
                  f"(family-wise over {_fmt(verdict.get('family_claims'))} 'fit' claims). Target task: "
                  f"{on_task}. "
                  f"2-way TV against the holdout: table {_fmt(pairs.get('mean_tv'))}, baseline "
                  f"{_fmt(pairs.get('baseline_mean_tv'))}, improvement lower bound "
                  f"{_fmt(pairs.get('improvement_lower_bound'))} (beats baseline {_fmt(pairs.get('beats_baseline'))})."),
            *([("table", ["Model", "AUROC", "Upper bound", "Baseline AUROC (mean)", "Baseline SD",
                          "Excess lower bound"], rows)] if rows else [])]


def _ci(interval: list | None) -> str:
    return NA if not interval else f"[{_fmt(interval[0], 3)}, {_fmt(interval[1], 3)}]"


def _risk_blocks(risk: dict | None) -> list[Block]:
    blocks: list[Block] = [("h", "Privacy risk: attacks on the released table")]
    if not risk:
        return blocks + [("p", NA)]
    m = risk.get("membership") or {}
    blocks += [
        ("p", f"Membership inference: {_fmt(m.get('n_members'))} training rows (members) against "
              f"{_fmt(m.get('n_non_members'))} holdout rows (non-members); DOMIAS's reference density uses "
              f"{_fmt(m.get('n_reference'))} other holdout rows. AUC 0.5 = chance; the interval is a 95 % bootstrap."),
        ("table", ["Attack", "AUC", "95 % interval", "TPR at 1 % FPR"],
         [[name, _fmt(a.get("auc"), 3), _ci(a.get("auc_ci95")), _fmt(a.get("tpr_at_1pct_fpr"), 3)]
          for name, a in (("DOMIAS (density ratio)", m.get("domias") or {}),
                          ("Distance to closest record", m.get("dcr") or {}))])]
    anon = risk.get("anonymeter") or {}
    rows = [[name, *(["skipped: " + a["skipped"], "", "", "", ""] if "skipped" in a else
                     [_fmt(a.get("risk"), 3), _ci(a.get("risk_ci95")), _fmt(a.get("train_rate"), 3),
                      _fmt(a.get("control_rate"), 3), _fmt(a.get("baseline_rate"), 3)])]
            for name, a in anon.items()]
    blocks += [("p", "Singling out, linkability and inference (Giomi et al. 2023): risk = (success on training "
                     "rows − success on control rows) / (1 − success on control rows); 0 = the table tells the "
                     "attacker no more about its training records than about anyone else."),
               ("table", ["Attack", "Risk", "95 % interval", "Success (train)", "Success (control)",
                          "Success (baseline)"], rows)]
    ai = risk.get("attribute_inference") or {}
    blocks += [("p", f"Attribute inference of '{_fmt(ai.get('secret'))}' from {len(ai.get('known_columns') or [])} "
                     f"known columns: a model fitted on the synthetic table, against one fitted on real holdout "
                     f"rows ({_fmt(ai.get('baseline'))})."),
               ("table", ["Accuracy on training rows", "on holdout rows", "baseline on training rows", "Advantage"],
                [[_fmt(ai.get(k), 3) for k in ("accuracy_members", "accuracy_non_members",
                                               "baseline_accuracy_members", "advantage")]])]
    d = risk.get("disclosure") or {}
    pres, base = d.get("presence") or {}, d.get("presence_baseline") or {}
    att = d.get("attribute") or {}
    blocks += [("p", f"Presence and attribute disclosure (Diesendruck, §4.3) on sets of {_fmt(d.get('set_size'))} "
                     "rows; the baseline releases a fresh real holdout sample instead of the synthetic rows."),
               ("table", ["Measure", "Released table", "Holdout baseline"],
                [["Presence: largest ε with precision > 55 %", *(
                    "none" if "epsilon" in p and p["epsilon"] is None else _fmt(p.get("epsilon"), 3) for p in (pres, base))],
                 ["Presence: sensitivity at that ε", _fmt(pres.get("sensitivity"), 3), _fmt(base.get("sensitivity"), 3)],
                 ["Attribute: sensitivity (training rows)", _fmt((att.get("members") or {}).get("sensitivity"), 3),
                  _fmt((att.get("baseline_members") or {}).get("sensitivity"), 3)],
                 ["Attribute: precision (training rows)", _fmt((att.get("members") or {}).get("precision"), 3),
                  _fmt((att.get("baseline_members") or {}).get("precision"), 3)]])]
    c = risk.get("copies") or {}
    q = (c.get("dcr_quantiles") or {})
    blocks += [("p", "Copies: exact and near-duplicate training rows (Gower distance ≤ "
                     f"{_fmt(c.get('near_duplicate_distance'))}); distance to closest record (DCR) is reported, "
                     "never gated on alone."),
               ("table", ["Measure", "Synthetic rows", "Holdout rows (baseline)"],
                [["Exact copies of a training row", _fmt(c.get("exact_match_rate")), _fmt(c.get("holdout_exact_match_rate"))],
                 ["Near duplicates", _fmt(c.get("near_duplicate_rate")), _fmt(c.get("holdout_near_duplicate_rate"))],
                 ["DCR, 5th percentile", _fmt((q.get("synthetic") or {}).get("q05")), _fmt((q.get("holdout") or {}).get("q05"))],
                 ["DCR, median", _fmt((q.get("synthetic") or {}).get("q50")), _fmt((q.get("holdout") or {}).get("q50"))]])]
    return blocks


def _scorecard_blocks(metrics: dict | None) -> list[Block]:
    blocks: list[Block] = [("h", "Fidelity and utility scorecard")]
    if not metrics:
        return blocks + [("p", NA)]
    card = metrics.get("scorecard") or {}

    def g(section: str, key: str) -> Any:  # the scorecard's sections, then DP-auto-GAN's (top level of metrics)
        return (card.get(section) or metrics.get(section) or {}).get(key)

    rows = [
        ["2-way marginals, mean TV (all pairs)", g("marginal_2way", "mean_tv"), g("marginal_2way", "holdout_reference_mean_tv")],
        ["2-way marginal error, mean L1 (PEARL)", g("marginal_2way", "pearl_mean_l1"), "—"],
        ["3-way marginals, mean TV (sampled)", g("kway_marginal", "mean_tv"), g("kway_marginal", "holdout_reference_mean_tv")],
        ["Correlation difference, mean |Δ|", g("correlation", "mean_abs_diff"), g("correlation", "holdout_reference_mean_abs_diff")],
        ["Range queries (3 attributes), mean error", g("range_queries", "mean_error"), g("range_queries", "holdout_reference_mean_error")],
        ["MMD² (Gaussian kernel)", g("mmd", "mmd2_u"), "—"],
        ["MMD permutation p-value", g("mmd", "p_value"), "—"],
        ["W1 between the tables", g("wasserstein1", "w1"), g("wasserstein1", "holdout_reference")],
        ["Detection AUC (real vs synthetic)", g("detection", "auc"), "—"],
        ["Wasserstein score (1 = identical)", g("wasserstein_score", "score"), g("wasserstein_score", "holdout_reference_score")],
        ["2-way PCA marginal score", g("pca_marginal", "score"), g("pca_marginal", "holdout_reference_score")],
    ]
    blocks += [("p", "Synthetic rows against the real training rows; the reference column is the same number for "
                     "the real holdout, the value a perfect generator would get from sampling noise alone "
                     "(— where the metric has none)."),
               ("table", ["Metric", "Synthetic", "Holdout reference"], [[m, _fmt(v), _fmt(r)] for m, v, r in rows])]
    cls = card.get("classifiers") or {}
    if "skipped" in cls or not cls:
        return blocks + [("p", f"Classifiers: {cls.get('skipped', NA)}")]
    body = [[name, *(_fmt((m.get(key) or {}).get(metric), 3) for key in ("tstr", "trtr") for metric in ("roc", "prc")),
             m.get("note", "")] for name, m in {**cls.get("models", {}), "average": cls.get("average", {})}.items()]
    return blocks + [
        ("p", f"Ten classifiers (PEARL Table 2) predicting '{_fmt(cls.get('target'))}', tested on the real holdout: "
              "trained on synthetic rows (TSTR) or on real training rows (TRTR)."),
        ("table", ["Classifier", "TSTR ROC", "TSTR PRC", "TRTR ROC", "TRTR PRC", "Note"], body)]


def _validation_blocks(validation: dict | None) -> list[Block]:
    """Steward only: validate's row counts and per-column drop/clip counts, computed on the raw real table."""
    if not validation:
        return []
    counts = [[k, _fmt(validation.get(k))] for k in ("rows_in", "rows_out", "rows_dropped") if k in validation]
    columns = [{"column": c, **{k: v for k, v in r.items() if not isinstance(v, (list, dict))}}
               for c, r in (validation.get("columns") or {}).items()]
    return [("h", "Validation of the raw table"), ("table", ["Count", "Value"], counts),
            *([_dict_table(columns)] if columns else [])]


def _weights_analysis_blocks(analysis: dict | None) -> list[Block]:
    """Steward only: the weighted analyses of weights.json (against real train/holdout rows)."""
    if not analysis:
        return []
    rows = [[k, _fmt(v)] for k, v in analysis.items() if k != "outside_dp"]
    return [("h", "Importance weights: weighted analyses on real rows"), ("table", ["Analysis", "Result"], rows)]


def public_view(summary: dict) -> dict:
    """The whitelist of `summary` the public report may show; every other key is dropped.

    Kept: the release's identity and row count, the guarantee label and audience, ε/δ (generator, data set
    total, budget), the ledger rows' public columns and head, the mechanisms' events, each gate's name,
    pass/fail bit and whether it read real rows ("data_dependent"), the utility verdict word and its policy
    action (PUBLIC_VERDICT, data-dependent), the importance weights' estimator, ε, k̂ and ESS and whether the
    weight column was released (or why not), "synthetic_summary" (statistics of the synthetic table alone), the hashes, the library versions,
    and of "plots" only the synthetic-only figures of PUBLIC_PLOTS. Dropped, whatever the caller passes:
    gate evidence, metrics, fidelity, utility, validation counts, weighted analyses, real-data plots.
    """
    privacy = summary.get("privacy") or {}
    weights = summary.get("weights") or None
    verdict = summary.get("utility_verdict") or None
    return {
        **{k: summary[k] for k in PUBLIC_KEYS if k in summary},
        "privacy": {**{k: privacy[k] for k in PUBLIC_PRIVACY if k in privacy},
                    "ledger_rows": [{k: row[k] for k in PUBLIC_LEDGER if k in row}
                                    for row in privacy.get("ledger_rows") or [] if isinstance(row, dict)]},
        "gates": [{"name": g.get("name"), "passed": g.get("passed"),
                   "data_dependent": g.get("data_dependent", True)} for g in summary.get("gates") or []],
        "weights": None if weights is None else {k: weights[k] for k in PUBLIC_WEIGHTS if k in weights},
        "utility_verdict": None if verdict is None else {k: verdict[k] for k in PUBLIC_VERDICT if k in verdict},
        "synthetic_summary": summary.get("synthetic_summary"),
        "hashes": {k: v for k, v in (summary.get("hashes") or {}).items() if isinstance(v, str)},
        "plots": {k: v for k, v in (summary.get("plots") or {}).items() if k in PUBLIC_PLOTS},
    }


def _public_gate_blocks(gates: list[dict]) -> list[Block]:
    if not gates:
        return [("h", "Release gates"), ("p", NA)]
    rows = [[_fmt(g["name"]), NA if g["passed"] is None else "PASS" if g["passed"] else "FAIL",
             "yes: pass/fail bit only" if g["data_dependent"] else "no: reads only DP outputs or the ledger"]
            for g in gates]
    return [("h", "Release gates"),
            ("p", "Every gate passed, so the table was released. A data-dependent gate read real rows outside the "
                  "DP mechanism: only its pass/fail bit is published, declared in the manifest."
                  if all(g["passed"] for g in gates) else
                  f"Failed: {', '.join(_fmt(g['name']) for g in gates if not g['passed'])}. The importance_weights "
                  "gate judges only the weights: when it fails, the table is released without its `weight` column "
                  "(see Importance weights)."),
            ("table", ["Gate", "Result", "Data-dependent"], rows)]


def _public_weights_blocks(weights: dict | None) -> list[Block]:
    if not weights:
        return []
    labels = {"released": "Weight column released", "withheld_because": "Withheld because",
              "estimator": "Estimator", "label": "Guarantee", "epsilon": "ε of the weights", "delta": "δ",
              "n_released": "Weighted synthetic rows", "khat": "PSIS k̂", "khat_bound": "k̂ bound",
              "ess": "Effective sample size", "tempering": "Tempering", "psis": "PSIS smoothing"}
    return [("h", "Importance weights"),
            ("p", ("The `weight` column of the synthetic table: a DP estimate of p_real / p_synthetic at each "
                   "synthetic row." if weights.get("released", True) else "The importance weights were REFUSED, "
                   "so the table is released without its `weight` column; the ε they cost is still spent.")
                  + " k̂ and the effective sample size are computed from these weights alone (post-processing)."),
            ("table", ["Quantity", "Value"], [[labels[k], _fmt(v)] for k, v in weights.items()])]


def _synthetic_blocks(stats: dict | None) -> list[Block]:
    blocks: list[Block] = [("h", "The synthetic table")]
    if not stats:
        return blocks + [("p", NA)]
    keys = ("mean", "std", "min", "q25", "median", "q75", "max")
    blocks.append(("p", f"Statistics of the {_fmt(stats.get('rows'))} released synthetic rows alone (no real row is "
                        "read); numeric columns, then the share of each category."))
    if stats.get("numeric"):
        blocks.append(("table", ["Column", *keys],
                       [[c, *(_fmt(v.get(k)) for k in keys)] for c, v in stats["numeric"].items()]))
    if stats.get("categorical"):
        blocks.append(("table", ["Column", "Category shares"],
                       [[c, _fmt(v)] for c, v in stats["categorical"].items()]))
    return blocks


def _public_document(summary: dict) -> tuple[str, list[Block]]:
    s = public_view(summary)
    privacy, hashes = s["privacy"], s["hashes"]
    title = f"Release report: {_fmt(s.get('dataset'))} / {_fmt(s.get('generator'))}"
    events = privacy.get("events") or []
    blocks: list[Block] = [
        ("p", f"Release id: {_fmt(s.get('release_id'))}. Data set: {_fmt(s.get('dataset'))}. "
              f"Generator: {_fmt(s.get('generator'))}."),
        ("p", PUBLIC_SCOPE),
        *_release_blocks(s),
        *_privacy_blocks(privacy),
        ("h", "Mechanisms"),
        *([("p", "The privacy events of this generator, with their parameters, as recorded in the ledger:"),
           _dict_table([e for e in events if isinstance(e, dict)])] if events else [("p", NA)]),
        *_public_gate_blocks(s["gates"]),
        *_public_weights_blocks(s["weights"]),
        *_synthetic_blocks(s["synthetic_summary"]),
        *_plot_blocks(s["plots"]),
        ("h", "What the guarantees cover"),
        *[("p", text) for text in PUBLIC_GUARANTEES],
        ("h", "Provenance"),
        ("table", ["Hash", "Value"], [[k, _fmt(v)] for k, v in hashes.items()] or [["hashes", NA]]),
        *([("table", ["Library", "Version"], [[k, _fmt(v)] for k, v in s["libraries"].items()])]
          if s.get("libraries") else []),
    ]
    return title, blocks


def public_markdown(summary: dict) -> str:
    """The public report as Markdown: only `public_view(summary)` is rendered."""
    return _markdown(*_public_document(summary))


def public_html(summary: dict) -> str:
    """The public report as one self-contained HTML page: only `public_view(summary)` is rendered."""
    return _html(*_public_document(summary))


def _plot_blocks(plots: dict | None) -> list[Block]:
    if not plots:
        return []
    return [("h", "Plots")] + [("img", name, png) for name, png in plots.items()]


def _document(summary: dict) -> tuple[str, list[Block]]:
    title = f"Steward report: {_fmt(summary.get('dataset'))} / {_fmt(summary.get('generator'))}"
    hashes = summary.get("hashes") or {}
    blocks: list[Block] = [
        ("p", f"Release id: {_fmt(summary.get('release_id'))}. Data set: {_fmt(summary.get('dataset'))}. "
              f"Generator: {_fmt(summary.get('generator'))}. This report is internal: it is never copied into "
              "releases/; the public bundle carries its own report.html."),
        _notice(summary),
        *_release_blocks(summary),
        *_verdict_blocks((summary.get("metrics") or {}).get("utility_verdict")),
        *_privacy_blocks(summary.get("privacy")),
        *_gate_blocks(summary.get("gates")),
        *_risk_blocks((summary.get("metrics") or {}).get("privacy_risk")),
        *_fidelity_blocks(summary.get("fidelity"), summary.get("fidelity_summary")),
        *_scorecard_blocks(summary.get("metrics")),
        *_utility_blocks(summary.get("utility")),
        *_validation_blocks(summary.get("validation")),
        *_weights_analysis_blocks(summary.get("weights_analysis")),
        *_plot_blocks(summary.get("plots")),
        ("h", "What the guarantees cover"),
        *[("p", text) for text in GUARANTEES],
        ("h", "Provenance"),
        ("table", ["Hash", "Value"], [["schema", _fmt(hashes.get("schema"))], ["params", _fmt(hashes.get("params"))]]),
    ]
    return title, blocks


def _md(text: Any) -> str:
    """Markdown-safe inline text: HTML-escaped (renderers pass raw HTML through), no pipes or newlines."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def render_markdown(summary: dict) -> str:
    """The steward's (internal) report as Markdown; see the module docstring for `summary`'s keys."""
    return _markdown(*_document(summary), banner=INTERNAL)


def evaluation_markdown(generator: str, metrics: dict) -> str:
    """The evaluation part of the report (privacy risk, fidelity, scorecard, utility) for evaluate@gen's
    Prefect artefact, before any gate has run; `metrics` is evaluate's metrics.json."""
    summary = {"fidelity": metrics.get("fidelity"), "fidelity_summary": metrics.get("fidelity_summary"),
               "utility": metrics.get("utility"), "metrics": metrics}
    return _markdown(f"INTERNAL evaluation of {generator} (computed from real rows)", [
        _notice(summary), *_risk_blocks(metrics.get("privacy_risk")),
        *_fidelity_blocks(summary["fidelity"], summary["fidelity_summary"]), *_scorecard_blocks(metrics),
        *_utility_blocks(summary["utility"])], banner=INTERNAL)


def key_figures(metrics: dict) -> list[dict[str, str]]:
    """Every row of the privacy-risk and scorecard tables as {"table", "row", <column>: value} dicts, for a
    Prefect table artefact."""
    out = []
    for block in _risk_blocks(metrics.get("privacy_risk")) + _scorecard_blocks(metrics):
        if block[0] == "table":
            headers, rows = block[1], block[2]
            out += [{"table": headers[0], **dict(zip(["row", *headers[1:]], map(str, row)))} for row in rows]
    return out


def _markdown(title: str, blocks: list[Block], banner: str | None = None) -> str:
    """`banner` (the steward's INTERNAL label) opens and closes the document."""
    lines = [f"# {_md(title)}", ""] + ([f"> **{_md(banner)}**", ""] if banner else [])
    for block in blocks:
        if block[0] == "h":
            lines += [f"## {_md(block[1])}", ""]
        elif block[0] == "p":
            lines += [_md(block[1]), ""]
        elif block[0] == "table":
            headers, rows = block[1], block[2]
            lines.append("| " + " | ".join(_md(h) for h in headers) + " |")
            lines.append("|" + "---|" * len(headers))
            lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
            lines.append("")
        elif block[0] == "img":
            lines += [f"![{_md(CAPTIONS.get(block[1], block[1]))}]({_md(block[1])}.png)", ""]
        else:
            _, head, text, items = block
            lines += [f"> **{_md(head)}**", ">", f"> {_md(text)}"] + [f"> - {_md(i)}" for i in items] + [""]
    return "\n".join(lines + ([f"> **{_md(banner)}**", ""] if banner else []))


_CSS = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1rem}th,td{border:1px solid #ccc;padding:.3rem .6rem;text-align:left;overflow-wrap:anywhere}
th{background:#f3f3f3;white-space:nowrap}td:first-child{white-space:nowrap}td.pass,td.fail{font-weight:bold;white-space:nowrap}td.pass{color:#0a6b2d}td.fail{color:#b00020}
.notice{border:2px solid #b26a00;background:#fff6e5;padding:.5rem 1rem;margin:1rem 0}
img.plot{max-width:100%;border:1px solid #ddd}figure{margin:1rem 0}figcaption{font-size:.9rem;color:#555}
.internal{border:3px solid #b00020;background:#fde8eb;color:#b00020;font-weight:bold;padding:.4rem 1rem;margin:1rem 0;text-align:center}
.internal.print{display:none}
@media print{.internal.print{display:block;position:fixed;top:0;left:0;right:0;margin:0}body{margin-top:3rem}}"""


def render_html(summary: dict) -> str:
    """The steward's (internal) report as one self-contained HTML page (inline CSS, no external assets, all
    text escaped), labelled INTERNAL at its head and foot and, when printed, at the top of every page."""
    return _html(*_document(summary), banner=INTERNAL)


def _html(title: str, blocks: list[Block], banner: str | None = None) -> str:
    esc = html.escape
    label = [f'<div class="internal" role="note">{esc(banner)}</div>'] if banner else []
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
             *([f'<div class="internal print" aria-hidden="true">{esc(banner)}</div>'] if banner else []),
             *label, f"<h1>{esc(title)}</h1>"]
    for block in blocks:
        if block[0] == "h":
            parts.append(f"<h2>{esc(block[1])}</h2>")
        elif block[0] == "p":
            parts.append(f"<p>{esc(block[1])}</p>")
        elif block[0] == "table":
            headers, rows = block[1], block[2]
            parts.append("<table><thead><tr>" + "".join(f"<th>{esc(str(h))}</th>" for h in headers)
                         + "</tr></thead><tbody>")
            for row in rows:
                cells = "".join(f'<td class="{str(c).lower()}">{esc(str(c))}</td>' if c in ("PASS", "FAIL")
                                else f"<td>{esc(str(c))}</td>" for c in row)
                parts.append(f"<tr>{cells}</tr>")
            parts.append("</tbody></table>")
        elif block[0] == "img":
            data = base64.b64encode(block[2]).decode("ascii")
            caption = esc(CAPTIONS.get(block[1], block[1]))
            parts.append(f'<figure><img class="plot" alt="{caption}" src="data:image/png;base64,{data}">'
                         f"<figcaption>{caption}</figcaption></figure>")
        else:
            _, head, text, items = block
            lis = "".join(f"<li>{esc(i)}</li>" for i in items)
            parts.append(f'<div class="notice"><h2>{esc(head)}</h2><p>{esc(text)}</p>'
                         + (f"<ul>{lis}</ul>" if lis else "") + "</div>")
    parts += [*label, "</body></html>"]
    return "\n".join(parts)
