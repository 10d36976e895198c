"""Release report for a privacy officer, as Markdown (Prefect artefacts) or self-contained HTML.

Both renderers walk the same list of blocks, so the two formats always say the same thing.

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
     "hashes": {"schema": str, "params": str}}
"""
from __future__ import annotations

import html
from numbers import Integral, Real
from typing import Any

import numpy as np

NA = "not available"
WORST_COLUMNS = 10
UNCOVERED = ("The figures listed below were computed from real data and are not covered by the DP guarantee: "
             "they can themselves reveal information about real records. Share this report only with "
             "people allowed to see the real data.")

Block = tuple  # ("h", text) | ("p", text) | ("table", headers, rows) | ("notice", title, text, items)


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
    rows = [["ε spent by this generator", privacy.get("epsilon_generator")],
            ["Total ε spent on this data set (all releases, PLD/PRV accountant)", total],
            ["Total ε, RDP accountant cross-check", privacy.get("epsilon_dataset_total_rdp")],
            ["Lifetime ε budget of this data set", budget],
            ["Remaining ε budget", remaining],
            ["δ", privacy.get("delta")]]
    blocks += [("table", ["Quantity", "Value"], [[q, _fmt(v, 6)] for q, v in rows]),
               ("p", "The RDP figure composes the same ledger events with an independent accountant; it is "
                     "a looser upper bound and should not be below the primary figure.")]
    ledger = privacy.get("ledger_rows")
    if not ledger:
        return blocks + [("p", f"Ledger rows: {NA}")]
    keys = list(dict.fromkeys(k for row in ledger for k in row))
    return blocks + [("p", "Ledger rows for this data set:"),
                     ("table", keys, [[_fmt(row.get(k), 6) for k in keys] for row in ledger])]


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
    text = UNCOVERED if items else "No figure in this report was computed from real data."
    return ("notice", "Not covered by the DP guarantee", text, items)


def _document(summary: dict) -> tuple[str, list[Block]]:
    title = f"Release report: {_fmt(summary.get('dataset'))} / {_fmt(summary.get('generator'))}"
    hashes = summary.get("hashes") or {}
    blocks: list[Block] = [
        ("p", f"Release id: {_fmt(summary.get('release_id'))}. Data set: {_fmt(summary.get('dataset'))}. "
              f"Generator: {_fmt(summary.get('generator'))}."),
        _notice(summary),
        *_privacy_blocks(summary.get("privacy")),
        *_gate_blocks(summary.get("gates")),
        *_fidelity_blocks(summary.get("fidelity"), summary.get("fidelity_summary")),
        *_utility_blocks(summary.get("utility")),
        ("h", "Provenance"),
        ("table", ["Hash", "Value"], [["schema", _fmt(hashes.get("schema"))], ["params", _fmt(hashes.get("params"))]]),
    ]
    return title, blocks


def _md(text: Any) -> str:
    """Markdown-safe inline text: HTML-escaped (renderers pass raw HTML through), no pipes or newlines."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def render_markdown(summary: dict) -> str:
    """The release report as Markdown; see the module docstring for `summary`'s keys."""
    title, blocks = _document(summary)
    lines = [f"# {_md(title)}", ""]
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
        else:
            _, head, text, items = block
            lines += [f"> **{_md(head)}**", ">", f"> {_md(text)}"] + [f"> - {_md(i)}" for i in items] + [""]
    return "\n".join(lines)


_CSS = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1rem}th,td{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}
th{background:#f3f3f3}td.pass{color:#0a6b2d;font-weight:bold}td.fail{color:#b00020;font-weight:bold}
.notice{border:2px solid #b26a00;background:#fff6e5;padding:.5rem 1rem;margin:1rem 0}"""


def render_html(summary: dict) -> str:
    """The release report as one self-contained HTML page (inline CSS, no external assets, all text escaped)."""
    title, blocks = _document(summary)
    esc = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>", f"<h1>{esc(title)}</h1>"]
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
        else:
            _, head, text, items = block
            lis = "".join(f"<li>{esc(i)}</li>" for i in items)
            parts.append(f'<div class="notice"><h2>{esc(head)}</h2><p>{esc(text)}</p>'
                         + (f"<ul>{lis}</ul>" if lis else "") + "</div>")
    parts.append("</body></html>")
    return "\n".join(parts)
