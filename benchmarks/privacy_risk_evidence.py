"""Privacy-risk and fidelity evidence for docs/privacy-risk.md: DP-WGAN at ε ∈ {1, 8, ∞}, a memorising
non-private generator (exact support points, n = N/2, KDE bandwidth 0.01) next to the same generator at ε = 1,
and the copy-the-data reference (a "generator" that releases its training rows), on breast cancer and Adult.

    python -m benchmarks.privacy_risk_evidence --dataset breast_cancer   # ≈ 2 min on 1 core
    python -m benchmarks.privacy_risk_evidence --dataset adult           # ≈ 20 min on 1 core (reduced, below)

Each run writes benchmarks/results/privacy_risk_<dataset>.json and rewrites the evidence section of
docs/privacy-risk.md from every results file present. Uses the project's own stages: schema validation, the
seeded split, schema-only encoding, DP-WGAN under a throwaway ledger, decoding, then exactly the evaluate
stage's scorecard and attack suite (params.yaml defaults) and check@gen's risk gates. DP noise comes from OS
entropy (as in a release), so the private rows vary from run to run; the public seed fixes everything else.

Adult is reduced to stay near 20 minutes on one core: DP-WGAN runs ADULT_STEPS critic steps (the default
60 epochs would be ≈ 18,000), the 10 classifiers train on at most ADULT_CLASSIFIER_ROWS rows, and the support
points see MEMORISING_ROWS training rows.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import tempfile
import time
from pathlib import Path

import torch

from pipelines.config import Config, Scorecard, load_params
from pipelines.data.readers import read_table
from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder, train_holdout_split
from pipelines.data.validation import validate_table
from pipelines.evaluation import scorecard
from pipelines.evaluation.attacks import suite
from pipelines.gates.risk import risk_gates
from pipelines.evaluation.fidelity import marginal_distances, summarise
from pipelines.evaluation.marginals import kway_marginal_tv
from pipelines.generators.base import Budget
from pipelines.generators.registry import make_generator
from pipelines.privacy.ledger import Ledger

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "privacy-risk.md"
EPSILONS = (1.0, 8.0, math.inf)
ADULT_STEPS, ADULT_CLASSIFIER_ROWS = 1000, 2000
# Memorising non-private reference: exact support points, n = N/2, KDE bandwidth 0.01, next to the same generator
# at ε = 1. Exact support points need N·n·d distances per Adam step, so on Adult they are fitted to (and attacked
# as members of) a seeded subsample of MEMORISING_ROWS training rows.
MEMORISING_BANDWIDTH, MEMORISING_ROWS = 0.01, {"breast_cancer": None, "adult": 1000}
BEGIN, END = "<!-- evidence:begin (benchmarks/privacy_risk_evidence.py) -->", "<!-- evidence:end -->"


def evaluate(train, synth, holdout, schema, config: Config, seed: int, classifier_rows: int | None) -> dict:
    """The evaluate stage's scorecard and attacks, and check@gen's risk gates, on one synthetic table."""
    ev = config.evaluate
    k = ev.model_dump(include={*Scorecard.model_fields, "ot_max_rows", "kway_bins"})
    if classifier_rows:
        k["classifier_max_rows"] = classifier_rows
    start = time.perf_counter()
    risk = suite.privacy_risk(train, synth, holdout, schema, suite.settings(ev.attacks, schema), seed)
    card = scorecard.scorecard(train, synth, holdout, schema, seed, k)
    card["kway_marginal"] = kway_marginal_tv(
        train, synth, holdout, schema.columns, ev.kway, ev.kway_subsets, ev.kway_bins, seed
    )
    card["fidelity_summary"] = summarise(marginal_distances(holdout, synth, schema.columns))
    gates = risk_gates(risk, config.risk_gates.model_dump())
    return {
        "risk": risk,
        "card": card,
        "gates": {g.name: g.passed for g in gates},
        "evaluate_seconds": round(time.perf_counter() - start, 1),
    }


def fit(name: str, overrides: dict, eps: float, encoder: Encoder, train, dataset: str, delta: float) -> tuple:
    """`name` fitted at ε under a throwaway ledger (internal release when ε = ∞); the generator and seconds."""
    gen = make_generator(name, encoder.layout, overrides, "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        session = Ledger(str(Path(tmp) / "ledger.sqlite")).session(
            dataset, "evidence", f"train@{name}", delta, math.inf, internal=not math.isfinite(eps)
        )
        start = time.perf_counter()
        gen.fit(encoder.encode(train), session, Budget(eps, delta))
    return gen, round(time.perf_counter() - start, 1)


def run(dataset: str, seed: int) -> dict:
    config = load_params(ROOT / "params.yaml")
    schema = load_schema(ROOT / "schemas" / f"{dataset}.yaml")
    raw, label = read_table(f"bundled:{dataset}", schema)
    clean, _ = validate_table(raw, schema, label)
    train, holdout = train_holdout_split(clean, config.dataset.holdout_fraction, seed)
    encoder, delta = Encoder(schema), config.privacy.delta
    overrides = {"seed": seed, **({"steps": ADULT_STEPS} if dataset == "adult" else {})}
    classifier_rows = ADULT_CLASSIFIER_ROWS if dataset == "adult" else None
    rows = MEMORISING_ROWS[dataset]
    subsample = train if rows is None else train.sample(n=rows, random_state=seed)
    memorise = {"seed": seed, "n_points": len(subsample) // 2, "bandwidth": MEMORISING_BANDWIDTH}
    runs = [
        *((f"ε = {eps:g}", "dpwgan", overrides, eps, train) for eps in EPSILONS),
        *((f"support points ε = {eps:g}", "support_points", memorise, eps, subsample) for eps in (1.0, math.inf)),
    ]
    out = {
        "dataset": dataset,
        "rows": {"train": len(train), "holdout": len(holdout)},
        "dpwgan": overrides,
        "support_points": {**memorise, "training_rows": len(subsample)},
        "results": {},
    }
    for column, name, section, eps, members in runs:
        gen, seconds = fit(name, section, eps, encoder, members, dataset, delta)
        synth = encoder.decode(gen.sample(len(members), seed))
        out["results"][column] = {
            **evaluate(members, synth, holdout, schema, config, seed, classifier_rows),
            "fit_seconds": seconds,
        }
        print(dataset, column, out["results"][column]["gates"], flush=True)
    out["results"]["copy of the data"] = evaluate(
        train, train.reset_index(drop=True), holdout, schema, config, seed, classifier_rows
    )
    return out


ROWS = [  # (section, label, getter on one result)
    ("Membership", "DOMIAS AUC [95 % CI]", lambda r: _auc(r["risk"]["membership"]["domias"])),
    ("Membership", "DOMIAS TPR at 1 % FPR", lambda r: r["risk"]["membership"]["domias"]["tpr_at_1pct_fpr"]),
    ("Membership", "DCR AUC [95 % CI]", lambda r: _auc(r["risk"]["membership"]["dcr"])),
    ("Membership", "DCR TPR at 1 % FPR", lambda r: r["risk"]["membership"]["dcr"]["tpr_at_1pct_fpr"]),
    *[
        (
            "Anonymeter",
            f"{name.replace('_', ' ')} risk [95 % CI]",
            (lambda n: lambda r: _risk(r["risk"]["anonymeter"][n]))(name),
        )
        for name in ("singling_out_univariate", "singling_out_multivariate", "linkability", "inference")
    ],
    (
        "Attribute inference",
        "accuracy on training rows",
        lambda r: r["risk"]["attribute_inference"]["accuracy_members"],
    ),
    (
        "Attribute inference",
        "baseline (holdout-trained model)",
        lambda r: r["risk"]["attribute_inference"]["baseline_accuracy_members"],
    ),
    (
        "Disclosure",
        "presence sensitivity (holdout baseline)",
        lambda r: (
            f"{_f(r['risk']['disclosure']['presence']['sensitivity'])} "
            f"({_f(r['risk']['disclosure']['presence_baseline']['sensitivity'])})"
        ),
    ),
    (
        "Disclosure",
        "attribute sensitivity (holdout baseline)",
        lambda r: (
            f"{_f(r['risk']['disclosure']['attribute']['members']['sensitivity'])} "
            f"({_f(r['risk']['disclosure']['attribute']['baseline_members']['sensitivity'])})"
        ),
    ),
    ("Copies", "exact-match rate", lambda r: r["risk"]["copies"]["exact_match_rate"]),
    (
        "Copies",
        "near-duplicate rate (holdout)",
        lambda r: (
            f"{_f(r['risk']['copies']['near_duplicate_rate'])} "
            f"({_f(r['risk']['copies']['holdout_near_duplicate_rate'])})"
        ),
    ),
    (
        "Copies",
        "median DCR (holdout)",
        lambda r: (
            f"{_f(r['risk']['copies']['dcr_quantiles']['synthetic']['q50'])} "
            f"({_f(r['risk']['copies']['dcr_quantiles']['holdout']['q50'])})"
        ),
    ),
    ("Gates", "risk gates failed", lambda r: ", ".join(n for n, ok in r["gates"].items() if not ok) or "none"),
    (
        "Fidelity",
        "mean 1-way TV / W1",
        lambda r: f"{_f(r['card']['fidelity_summary']['mean_tv'])} / {_f(r['card']['fidelity_summary']['mean_w1'])}",
    ),
    (
        "Fidelity",
        "2-way TV (holdout ref.)",
        lambda r: _ref(r["card"]["marginal_2way"], "mean_tv", "holdout_reference_mean_tv"),
    ),
    (
        "Fidelity",
        "3-way TV (holdout ref.)",
        lambda r: _ref(r["card"]["kway_marginal"], "mean_tv", "holdout_reference_mean_tv"),
    ),
    (
        "Fidelity",
        "correlation |Δ| (holdout ref.)",
        lambda r: _ref(r["card"]["correlation"], "mean_abs_diff", "holdout_reference_mean_abs_diff"),
    ),
    ("Fidelity", "MMD² (p-value)", lambda r: f"{_f(r['card']['mmd']['mmd2_u'])} ({_f(r['card']['mmd']['p_value'])})"),
    ("Fidelity", "W1 tables (holdout ref.)", lambda r: _ref(r["card"]["wasserstein1"], "w1", "holdout_reference")),
    ("Fidelity", "detection AUC", lambda r: r["card"]["detection"]["auc"]),
    (
        "Utility",
        "range-query error (holdout ref.)",
        lambda r: _ref(r["card"]["range_queries"], "mean_error", "holdout_reference_mean_error"),
    ),
    (
        "Utility",
        "10 classifiers, mean ROC TSTR (TRTR)",
        lambda r: (
            f"{_f(r['card']['classifiers']['average']['tstr']['roc'])} "
            f"({_f(r['card']['classifiers']['average']['trtr']['roc'])})"
        ),
    ),
    (
        "Utility",
        "10 classifiers, mean PRC TSTR (TRTR)",
        lambda r: (
            f"{_f(r['card']['classifiers']['average']['tstr']['prc'])} "
            f"({_f(r['card']['classifiers']['average']['trtr']['prc'])})"
        ),
    ),
    ("Time", "fit / evaluate seconds", lambda r: f"{r.get('fit_seconds', '–')} / {r['evaluate_seconds']}"),
]


def _f(x) -> str:
    return "–" if x is None else f"{x:.3g}" if isinstance(x, float) else str(x)


def _auc(a: dict) -> str:
    return f"{_f(a['auc'])} [{_f(a['auc_ci95'][0])}, {_f(a['auc_ci95'][1])}]"


def _risk(a: dict) -> str:
    return (
        f"skipped ({a['skipped']})"
        if "skipped" in a
        else f"{_f(a['risk'])} [{_f(a['risk_ci95'][0])}, {_f(a['risk_ci95'][1])}]"
    )


def _ref(d: dict, key: str, ref: str) -> str:
    return f"{_f(d[key])} ({_f(d[ref])})"


def table(out: dict) -> str:
    cols = list(out["results"])
    sp = f"; support points settings {json.dumps(out['support_points'])}" if out.get("support_points") else ""
    lines = [
        f"### {out['dataset']} ({out['rows']['train']} training rows, {out['rows']['holdout']} holdout rows; "
        f"DP-WGAN settings {json.dumps(out['dpwgan'])}{sp})",
        "",
        "| | | " + " | ".join(cols) + " |",
        "|---|---|" + "---|" * len(cols),
    ]
    for section, label, get in ROWS:
        cells = [
            _f(get(out["results"][c])) if not isinstance(get(out["results"][c]), str) else get(out["results"][c])
            for c in cols
        ]
        lines.append(f"| {section} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_doc() -> None:
    body = "\n".join(table(json.loads(f.read_text())) for f in sorted(RESULTS.glob("privacy_risk_*.json")))
    text = DOC.read_text()
    text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: f"{BEGIN}\n\n{body}\n{END}", text, flags=re.S)
    DOC.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", choices=["breast_cancer", "adult"], required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = run(args.dataset, args.seed)
    for result in out["results"].values():  # the ROC curves are for plots, not for the evidence tables
        for attack in ("domias", "dcr"):
            result["risk"]["membership"][attack].pop("roc")
    (RESULTS / f"privacy_risk_{args.dataset}.json").write_text(json.dumps(out, indent=1, default=str))
    write_doc()


if __name__ == "__main__":
    main()
