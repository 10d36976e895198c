"""The comparison page of one release run: every generator of the run on one page, for two audiences.

- PUBLIC (`public_context`; releases/<ds>/runs/<run-id>/comparison.html and .md): built from the public manifests
  alone (ε, each gate's pass/fail bit, the utility verdict word, whether the weights were released), so it holds
  nothing computed from real rows beyond the declared bits. Its recommendation (PUBLIC_RULE) reads only those.
- STEWARD (`steward_context`; reports/<ds>/steward/runs/<run-id>/steward_comparison.html and .md, INTERNAL): the
  same rows with the real-row evaluation next to them (TSTR AUROC, marginal fidelity, membership-inference AUC,
  exact copies) and each refusal's evidence; its recommendation (STEWARD_RULE) is by utility.

An entry is {"generator", "released": bool, "manifest": the public manifest (tasks/release.manifest_of),
"report": link to the generator's report, relative to the page}; the steward's entries also carry "metrics"
(evaluate's metrics.json) and "checks" (check's gates with evidence).
"""

from __future__ import annotations

from statistics import mean
from typing import Any

from pipelines.reporting.report import INTERNAL, budget_figure, budget_rows, failed_table_gates
from pipelines.reporting.report_words import (
    METHODS,
    NA,
    VERDICTS,
    fmt,
    gate_sentence,
    generator_name,
    verdict_sentence,
    weights_sentence,
)

PUBLIC_RULE = (
    "Recommended: among the released tables whose utility verdict is fit, the one with the smallest ε (the "
    "strongest privacy guarantee); ties go to the generator listed first in params.yaml. The rule reads only "
    "published values: ε and the verdict word."
)
STEWARD_RULE = (
    "Recommended: among the released tables whose utility verdict is fit, the one with the highest mean "
    "TSTR AUROC (models trained on the synthetic table, tested on real rows); ties go to the smaller ε. "
    "The public page recommends by its own rule on published values only (the smallest ε among fit "
    "tables), so the two may differ."
)
NO_RECOMMENDATION = "No table is recommended: no released table has the utility verdict fit."
NO_PUBLIC_VERDICT = (
    "This page recommends nothing: the utility verdict reads real rows outside DP, so it is in the "
    "steward's comparison only (release.non_dp_gates: advise)."
)


def _epsilon(entry: dict[str, Any]) -> float:
    return float(entry["manifest"]["privacy"]["epsilon_generator"])


def _verdict(entry: dict[str, Any]) -> str | None:
    """The verdict word: the manifest's where it publishes one, else (steward entries) evaluate's."""
    return (entry["manifest"].get("utility_verdict") or {}).get("verdict") or (
        (entry.get("metrics") or {}).get("utility_verdict") or {}
    ).get("verdict")


def tstr(metrics: dict[str, Any]) -> float | None:
    """Mean TSTR AUROC over the utility models that produced one (None when utility was skipped)."""
    values = [
        m["tstr"]
        for m in ((metrics.get("utility") or {}).get("models") or {}).values()
        if isinstance(m.get("tstr"), (int, float))
    ]
    return mean(values) if values else None


def recommend(entries: list[dict[str, Any]], audience: str) -> int | None:
    """The index of the recommended entry (PUBLIC_RULE or STEWARD_RULE), None when no released table is fit."""
    fit = [(i, e) for i, e in enumerate(entries) if e["released"] and _verdict(e) == "fit"]
    if audience == "steward":
        fit = [(i, e) for i, e in fit if tstr(e["metrics"]) is not None] or fit
        key = lambda ie: (-(tstr(ie[1]["metrics"]) or 0.0), _epsilon(ie[1]), ie[0])
    else:
        key = lambda ie: (_epsilon(ie[1]), ie[0])
    return min(fit, key=key)[0] if fit else None


def sentences(entry: dict[str, Any], audience: str) -> list[str]:
    """What happened to one generator: published or refused (one sentence per failed gate, with its reason),
    the weights and the utility verdict."""
    m, gen = entry["manifest"], entry["generator"]
    gates = entry["checks"] if audience == "steward" else m["gates"]
    lines = (
        [gate_sentence(gen, g, audience) for g in failed_table_gates(gates, entry.get("deciding"))]
        if not entry["released"]
        else [f"{generator_name(gen)} published as release {m['release_id']} (ε = {fmt(_epsilon(entry))})."]
    )
    return lines + [
        s
        for s in (
            weights_sentence(gen, m.get("weights")) if entry["released"] else None,
            verdict_sentence(gen, m.get("utility_verdict") or ((entry.get("metrics") or {}).get("utility_verdict"))),
        )
        if s
    ]


def _gates_cell(gates: list[dict[str, Any]]) -> str:
    failed = [g["name"] for g in gates if not g["passed"]]
    return f"{len(gates) - len(failed)} of {len(gates)} passed" + (f"; failed: {', '.join(failed)}" if failed else "")


def _weights_cell(m: dict[str, Any]) -> str:
    w = m.get("weights")
    return "not configured" if not w else "released" if w.get("released", True) else "withheld"


def _bars(entries: list[dict[str, Any]], values: list[float | None], unit: str) -> dict[str, Any]:
    top = max((v for v in values if v is not None), default=0.0)
    return {
        "unit": unit,
        "items": [
            {"name": generator_name(e["generator"]), "value": v, "w": 0.0 if v is None or top <= 0 else v / top * 360}
            for e, v in zip(entries, values)
        ],
    }


def _common(dataset: str, run_id: str, entries: list[dict[str, Any]], audience: str) -> dict[str, Any]:
    privacy = entries[0]["manifest"]["privacy"] if entries else {}
    pick = recommend(entries, audience)
    return {
        "dataset": dataset,
        "run_id": run_id,
        "audience": audience,
        "recommended": pick,
        "recommendation": (
            NO_RECOMMENDATION
            if pick is None
            else f"{generator_name(entries[pick]['generator'])} is recommended. "
            + (STEWARD_RULE if audience == "steward" else PUBLIC_RULE)
        ),
        "headline": [line for e in entries for line in sentences(e, audience)],
        "budget": budget_figure(privacy),
        "budget_rows": budget_rows(privacy, generator=False),
        "epsilon_bars": _bars(entries, [_epsilon(e) for e in entries], "ε"),
        "methods": [{"name": generator_name(e["generator"]), "text": METHODS.get(e["generator"], NA)} for e in entries],
        "reports": [{"name": generator_name(e["generator"]), "href": e["report"]} for e in entries if e.get("report")],
    }


def public_context(dataset: str, run_id: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The public comparison page: published values of each generator's manifest only."""
    rows = [
        [
            generator_name(e["generator"]),
            ("RELEASED" if e["released"] else "REFUSED"),
            fmt(_epsilon(e)),
            VERDICTS.get(_verdict(e) or "", NA).split(":")[0],
            _gates_cell(e["manifest"]["gates"]),
            _weights_cell(e["manifest"]),
        ]
        for e in entries
    ]
    ctx = _common(dataset, run_id, entries, "public")
    if not any(_verdict(e) for e in entries):
        ctx["recommendation"] = NO_PUBLIC_VERDICT
    if ctx["recommended"] is not None:
        rows[ctx["recommended"]][1] += " (recommended)"
    return {
        **ctx,
        "title": f"Release run {run_id}: {dataset}",
        "banner": None,
        "table": {
            "headers": [
                "Generator",
                "Result",
                "ε",
                "Utility verdict",
                "Gates (data-dependent bits)",
                "Importance weights",
            ],
            "rows": rows,
        },
        "scope": "Every value on this page is public: ε from the privacy ledger, each published gate's pass/fail bit "
        "and, where a manifest publishes it, the utility verdict word (data-dependent bits declared in "
        "each manifest); refused generators are not listed. The evaluation on real rows is in the "
        "steward's internal comparison.",
    }


def _risk(metrics: dict[str, Any]) -> tuple[float | None, float | None]:
    risk = metrics.get("privacy_risk") or {}
    aucs = [
        a.get("auc")
        for a in ((risk.get("membership") or {}).get(k) or {} for k in ("domias", "dcr"))
        if isinstance(a.get("auc"), (int, float))
    ]
    return (max(aucs) if aucs else None), (risk.get("copies") or {}).get("exact_match_rate")


def steward_context(dataset: str, run_id: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The steward's comparison page: each generator's real-row evaluation next to its ε and gates (INTERNAL)."""
    rows = []
    for e in entries:
        metrics = e["metrics"]
        fid = metrics.get("fidelity_summary") or {}
        two_way = ((metrics.get("scorecard") or {}).get("marginal_2way") or {}).get("mean_tv")
        auc, copies = _risk(metrics)
        rows.append(
            [
                generator_name(e["generator"]),
                "RELEASED" if e["released"] else "REFUSED",
                fmt(_epsilon(e)),
                fmt(tstr(metrics)),
                fmt(fid.get("mean_tv")),
                fmt(fid.get("mean_w1")),
                fmt(two_way),
                fmt(auc),
                fmt(copies),
                VERDICTS.get(_verdict(e) or "", NA).split(":")[0],
            ]
        )
    ctx = _common(dataset, run_id, entries, "steward")
    if ctx["recommended"] is not None:
        rows[ctx["recommended"]][1] += " (recommended)"
    return {
        **ctx,
        "title": f"Steward comparison of release run {run_id}: {dataset}",
        "banner": INTERNAL,
        "table": {
            "headers": [
                "Generator",
                "Result",
                "ε",
                "TSTR AUROC (mean)",
                "1-way TV (mean, categorical)",
                "1-way W1 (mean, numeric, schema-scaled)",
                "2-way TV (mean)",
                "Membership AUC (strongest attack)",
                "Exact copies (share of rows)",
                "Utility verdict",
            ],
            "rows": rows,
        },
        "tstr_bars": _bars(entries, [tstr(e["metrics"]) for e in entries], "AUROC"),
        "scope": "Computed from real rows: TSTR AUROC on real test rows, marginal distances against real rows, "
        "the attacks on real training and holdout rows. AUROC 0.5 = chance; TV and W1 0 = identical; "
        "membership AUC 0.5 = the attack cannot tell training records from others.",
    }
