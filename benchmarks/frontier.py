"""Issue 21's frontier table: every generator on Adult at ε = 1, δ = 1e-5, default params, one run.

    python -m benchmarks.frontier                                   # all generators, 16,000 training rows
    python -m benchmarks.frontier --quick                           # smoke run: 2,000 rows
    python -m benchmarks.frontier --generators pearl,mst --rows 5000 --set pearl.steps=2000
    python -m benchmarks.frontier --params params/adult-paper.yaml  # per-generator overrides from a file
    python -m benchmarks.frontier --dataset breast_cancer --generators pearl --set pearl.numeric_encoding=bins

Rows: a seeded subsample of `--rows` training rows of validated Adult, or of the bundled table `--dataset` (every
training row by default; the project's reader, `schemas/<dataset>.yaml` and keyed split, `generator_runs.py`),
and the whole disjoint holdout. Each generator is fitted at ε = `--epsilon` in
total (its own calibration included, when it has one) under a throwaway ledger, with a fixed noise seed, then
samples as many rows as it was trained on. Per generator:
- fit seconds and sample seconds (sampling and decoding);
- k-way marginal score = 500 × (2 − mean L1) for k = 1, 2, 3 (the L1 distance between the real and synthetic
  k-way marginal distributions, averaged over every column k-subset; k = 3 over all (455 on Adult), or
  `--subsets3 N` seeded ones), numerics in 10 quantile bins of the real training rows (1000 = identical);
- TSTR AUROC of logistic regression / random forest / gradient boosting (`pipelines.evaluation.utility`)
  trained on the synthetic table, tested on the real holdout (target: the schema's, income on Adult);
- detection AUC: gradient boosting telling real from synthetic rows (balanced, 5-fold out-of-fold scores,
  seeded; `pipelines.evaluation.joint.detection_auc`);
- the 1-way total variation distance of the 5 worst columns (same bins);
- for a generator that keeps columns apart from the real marginals on purpose (PPEM's α-LMDP x′, whose
  generated marginal must differ from the real one: a level-α test must reject it), the marginal scores and
  detection AUC again without those columns ("x* only");
- with `--paper`, the papers' own evaluations as the release computes them: DP-auto-GAN's (§4, Tables 1-3:
  dimension-wise probability and prediction, 3-way marginal TV, Wasserstein score, target accuracy;
  `pipelines.evaluation.unsupervised`) and PEARL's 10 classifiers (Table 2, mean ROC / PRC AUC trained on
  the synthetic table; `pipelines.evaluation.classifiers`), e.g. before/after calibration:
      python -m benchmarks.frontier --generators dp_auto_gan,pearl --paper
      python -m benchmarks.frontier --generators dp_auto_gan,pearl --paper \
          --set "dp_auto_gan.calibration={share: 0}" --set "pearl.calibration={share: 0}"

This is a benchmark, not a release artefact: the bins and every metric read the real rows, and the fixed
noise seed voids the DP guarantee. Nothing here may be published as a release's evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import replace
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from benchmarks.generator_runs import ROOT, bundled, fit_and_sample, generator_params, overrides, sub_schema, subsample
from pipelines.config import Metrics
from pipelines.data.readers import BUNDLED
from pipelines.data.declared import derived_values
from pipelines.data.schema import Schema, indicator
from pipelines.evaluation import unsupervised
from pipelines.evaluation.classifiers import tstr_classifiers
from pipelines.evaluation.joint import detection_auc
from pipelines.evaluation.marginals import column_subsets, joint_tv
from pipelines.evaluation.utility import MODELS, tstr_auroc
from pipelines.generators.names import GENERATORS

DETECTOR = ("gradient boosting (scikit-learn HistGradientBoostingClassifier)", MODELS["gradient_boosting"])
TSTR = ("logistic_regression", "random_forest", "gradient_boosting")


def scoring_schema(schema: Schema, ref: pd.DataFrame | None = None) -> Schema:
    """The modelled columns with each derived column, as a plain column, in its declared place. A formula column
    (whose range is its formula's) is bounded by its values in `ref`, the `scored` real training rows (a benchmark
    reads real rows); without `ref` it has no bounds (for its names)."""
    if not schema.derived:
        return schema
    modelled, columns = list(schema.columns), []
    for c in schema.declared:
        if c.is_derived:
            plain = replace(c, derived_from=None, derived=None, formula=None)
            if c.formula is not None and ref is not None:
                plain = replace(plain, lower=float(ref[c.name].min()), upper=float(ref[c.name].max()))
            columns.append(plain)
        while modelled and modelled[0].name in (c.name, indicator(c.name)):
            columns.append(modelled.pop(0))
    return replace(schema, columns=tuple(columns), declared=tuple(columns))


def scored(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Modelled rows with the derived columns added (`scoring_schema`'s columns)."""
    derived = {c.name: derived_values(frame, c) for c in schema.derived}
    return frame.assign(**derived)[scoring_schema(schema).names] if derived else frame


def binned(df: pd.DataFrame, ref: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Columns as cell codes: numerics in 10 quantile bins of `ref` (the real training table), categories by their
    place in the schema (one more cell for a value outside it)."""
    out = {}
    for c in schema.columns:
        if c.is_numeric:
            edges = np.unique(np.quantile(ref[c.name].to_numpy(float), np.linspace(0, 1, 11)[1:-1]))
            out[c.name] = np.searchsorted(edges, df[c.name].to_numpy(float), side="right")
        else:
            cats = {v: i for i, v in enumerate(c.categories)}
            out[c.name] = df[c.name].map(cats).fillna(len(cats)).to_numpy().astype(np.int64)
    return pd.DataFrame(out)


def marginal_tv(real: pd.DataFrame, synth: pd.DataFrame, cols: Sequence[str]) -> float:
    """TV between the joint distributions of `cols` in two `binned` tables (the evaluation's `joint_tv`)."""
    dims = [int(max(real[c].max(), synth[c].max())) + 1 for c in cols]
    return joint_tv([real[c].to_numpy(np.int64) for c in cols], [synth[c].to_numpy(np.int64) for c in cols], dims)


def kway_score(
    real: pd.DataFrame, synth: pd.DataFrame, k: int, subsets: Sequence[Sequence[str]] | None = None
) -> float:
    """NIST's k-way marginal score, 500 × (2 − mean L1) = 1000 × (1 − mean TV), over `subsets` (default: every
    column k-subset) of two `binned` tables."""
    subsets = subsets if subsets is not None else list(combinations(real.columns, k))
    return 1000.0 * (1.0 - float(np.mean([marginal_tv(real, synth, cols) for cols in subsets])))


def measure(
    train: pd.DataFrame,
    holdout: pd.DataFrame,
    synth: pd.DataFrame,
    schema: Schema,
    subsets3: list[tuple[str, ...]],
    seed: int,
) -> dict[str, Any]:
    """The table's metrics of one synthetic table (module docstring): modelled rows, each derived column scored in
    its declared place (`scoring_schema`), as the published table holds it."""
    if schema.derived:
        train, holdout, synth = (scored(frame, schema) for frame in (train, holdout, synth))
        schema = scoring_schema(schema, train)
    real_b, synth_b = binned(train, train, schema), binned(synth, train, schema)
    one_way = {c: marginal_tv(real_b, synth_b, [c]) for c in real_b.columns}
    tstr = tstr_auroc(train, synth, holdout, schema.columns, schema.target, seed)
    detection = detection_auc(train, synth, schema.columns, None, seed, classifier=DETECTOR)
    return {
        "1-way": round(kway_score(real_b, synth_b, 1), 1),
        "2-way": round(kway_score(real_b, synth_b, 2), 1),
        "3-way": round(kway_score(real_b, synth_b, 3, subsets3), 1),
        "tstr_auroc": {m: round(tstr["models"][m]["tstr"], 3) for m in TSTR},
        "trtr_auroc": {m: round(tstr["models"][m]["trtr"], 3) for m in TSTR},
        "detection_auc": round(detection["auc"], 3),
        "worst_1way_tv": dict(sorted(((c, round(v, 3)) for c, v in one_way.items()), key=lambda t: -t[1])[:5]),
    }


def paper(train: pd.DataFrame, holdout: pd.DataFrame, synth: pd.DataFrame, schema: Schema, seed: int) -> dict:
    """The papers' own numbers of one synthetic table (module docstring, `--paper`), with the release's knobs."""
    m, _ = unsupervised.paper_metrics(train, synth, holdout, schema, seed, Metrics().model_dump())
    pred, acc = m["dimension_wise"]["prediction"]["summary"], m["target_accuracy"]
    ten = tstr_classifiers(train, synth, holdout, schema.columns, schema.target, seed)["average"]
    return {
        "dimwise_probability_mean_abs_diff": _round(m["dimension_wise"]["probability"].get("mean_abs_diff")),
        "dimwise_prediction_mean_gap": _round(pred["mean_gap"]),
        "dimwise_prediction_rms_gap": _round(pred["rms_gap"]),
        "kway_marginal_mean_tv": _round(m["kway_marginal"].get("mean_tv")),
        "wasserstein_score": _round(m["wasserstein_score"].get("score")),
        "target_accuracy": {k: _round(acc.get(k)) for k in ("real", "synthetic")},
        "ten_classifiers": {k: {s: _round(ten[k][s]) for s in ("roc", "prc")} for k in ("tstr", "trtr")},
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def paper_markdown(rows: list[dict[str, Any]]) -> str:
    """The `--paper` numbers, one row per generator (real-data references in the last row)."""
    lines = [
        "| generator (settings) | dim-wise prob. mean abs diff | dim-wise pred. mean / rms gap | 3-way mean TV "
        "| W score | target acc. (RF) | 10 classifiers ROC / PRC |",
        "|---|---|---|---|---|---|---|",
    ]
    ok = [r for r in rows if "paper" in r]
    for r in ok:
        q = r["paper"]
        lines.append(
            f"| {r['generator']} ({r['settings']}) | {q['dimwise_probability_mean_abs_diff']} "
            f"| {q['dimwise_prediction_mean_gap']} / {q['dimwise_prediction_rms_gap']} "
            f"| {q['kway_marginal_mean_tv']} | {q['wasserstein_score']} | {q['target_accuracy']['synthetic']} "
            f"| {q['ten_classifiers']['tstr']['roc']} / {q['ten_classifiers']['tstr']['prc']} |"
        )
    if ok:
        q = ok[0]["paper"]
        lines.append(
            f"| train on real (reference) | 0 | 0 / 0 | – | – | {q['target_accuracy']['real']} "
            f"| {q['ten_classifiers']['trtr']['roc']} / {q['ten_classifiers']['trtr']['prc']} |"
        )
    return "\n".join(lines)


def markdown(rows: list[dict[str, Any]]) -> str:
    """The issue's table (with seconds), a train-on-real reference row and the worst columns per generator."""
    lines = [
        "| generator (settings) | 1-way | 2-way | 3-way | TSTR AUROC LR / RF / GBM | detection AUC "
        "| fit s | sample s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        label = f"{r['generator']} ({r['settings']})"
        if "error" in r:
            lines.append(f"| {label} | failed: {r['error']} | | | | | {r.get('fit_s', '–')} | |")
            continue
        auc = " / ".join(f"{r['tstr_auroc'][m]:.3f}" for m in TSTR)
        lines.append(
            f"| {label} | {r['1-way']} | {r['2-way']} | {r['3-way']} | {auc} | {r['detection_auc']:.2f} "
            f"| {r['fit_s']:.1f} | {r['sample_s']:.1f} |"
        )
        if "x*_only" in r:
            x = r["x*_only"]
            lines.append(
                f"| {r['generator']}, x* only (without {', '.join(x['without'])}) | {x['1-way']} "
                f"| {x['2-way']} | {x['3-way']} | | {x['detection_auc']:.2f} | | |"
            )
    ok = [r for r in rows if "error" not in r]
    if ok:
        auc = " / ".join(f"{ok[0]['trtr_auroc'][m]:.3f}" for m in TSTR)
        lines.append(f"| train on real (reference) | 1000 | 1000 | 1000 | {auc} | – | – | – |")
        lines += ["", "Worst 1-way total variation distance (10 quantile bins for numerics):", ""]
        lines += [
            f"- {r['generator']}: " + ", ".join(f"`{c}` {v:.2f}" for c, v in r["worst_1way_tv"].items()) for r in ok
        ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generators", default=",".join(GENERATORS), help="comma-separated (default: the registry)")
    ap.add_argument("--dataset", choices=BUNDLED, default="adult", help="bundled table (default: adult)")
    ap.add_argument(
        "--rows",
        type=int,
        help="training rows, a seeded subsample (default: 16,000 on Adult, every training row otherwise)",
    )
    ap.add_argument("--quick", action="store_true", help="smoke run: 2,000 training rows")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=0, help="split, subsample, public and noise seeds, metrics")
    ap.add_argument("--subsets3", type=int, default=0, help="3-way: N seeded column subsets (0: all)")
    ap.add_argument("--params", type=Path, help="YAML of per-generator sections {generator: {key: value}}")
    ap.add_argument("--set", action="append", default=[], metavar="GEN.KEY=VALUE", help="one override (repeatable)")
    ap.add_argument("--paper", action="store_true", help="add DP-auto-GAN's and PEARL's own evaluations")
    ap.add_argument("--json", type=Path, help="default: benchmarks/results/frontier[-<dataset>]-<rows>.json")
    args = ap.parse_args()
    generators = [g.strip() for g in args.generators.split(",") if g.strip()]
    unknown = sorted(set(generators) - set(GENERATORS))
    if unknown:
        ap.error(f"--generators: unknown {unknown}; the registry has {', '.join(GENERATORS)}")
    adult = args.dataset == "adult"
    try:
        extra = overrides(args.params, args.set, generators, None if adult else {})
    except (OSError, ValueError) as exc:
        ap.error(str(exc))
    started, load = time.perf_counter(), os.getloadavg()[0]
    schema, train, holdout = bundled(args.dataset, args.seed)
    rows = 2000 if args.quick else args.rows or (16000 if adult else len(train))
    out = args.json or ROOT / "benchmarks" / "results" / f"frontier{'' if adult else '-' + args.dataset}-{rows}.json"
    try:
        train = subsample(train, rows, args.seed)
    except ValueError as exc:
        ap.error(str(exc))
    names = [c.name for c in schema.columns]
    k3 = [
        tuple(names[i] for i in s)
        for s in column_subsets(len(names), 3, args.subsets3 or 10**9, np.random.default_rng(args.seed))
    ]
    results = []
    for name in generators:
        row: dict[str, Any] = {
            "generator": name,
            "settings": ", ".join(f"{k}={v}" for k, v in extra[name].items()) or "defaults",
        }
        try:
            run = fit_and_sample(
                name, schema, train, generator_params(name, extra[name], args.seed), args.epsilon, args.delta, args.seed
            )
            row.update(
                fit_s=round(run.fit_s, 1),
                sample_s=round(run.sample_s, 1),
                privacy=run.privacy,
                **measure(train, holdout, run.synth, schema, k3, args.seed),
            )
            if run.uncalibrated:
                rest = [n for n in names if n not in run.uncalibrated]
                k3_rest = [s for s in k3 if not set(s) & set(run.uncalibrated)]
                row["x*_only"] = {
                    "without": list(run.uncalibrated),
                    **{
                        k: v
                        for k, v in measure(
                            train[rest], holdout[rest], run.synth[rest], sub_schema(schema, rest), k3_rest, args.seed
                        ).items()
                        if k in ("1-way", "2-way", "3-way", "detection_auc")
                    },
                }
            if args.paper:
                row["paper"] = paper(train, holdout, run.synth, schema, args.seed)
        except Exception as exc:  # one generator's failure is a row of the table, not the end of the run
            traceback.print_exc()
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        results.append(row)
        print(json.dumps(row, default=str), flush=True)
    wall = time.perf_counter() - started
    meta = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "dataset": args.dataset,
        "training_rows": len(train),
        "holdout_rows": len(holdout),
        "epsilon": args.epsilon,
        "delta": args.delta,
        "seed": args.seed,
        "subsets3": len(k3),
        "cpus": len(os.sched_getaffinity(0)),
        "load_average_start": round(load, 2),
        "load_average_end": round(os.getloadavg()[0], 2),
        "wall_s": round(wall, 1),
    }
    print(
        f"\n{'Adult' if adult else args.dataset}, {len(train)} training rows, {len(holdout)} holdout rows, "
        f"ε = {args.epsilon:g}, "
        f"δ = {args.delta:g}; {meta['cpus']} CPUs, load {meta['load_average_start']} → "
        f"{meta['load_average_end']}; wall {wall:.0f} s\n"
    )
    print(markdown(results))
    if args.paper:
        print("\nThe papers' evaluations (DP-auto-GAN §4 Tables 1-3; PEARL Table 2):\n")
        print(paper_markdown(results))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "rows": results}, indent=2, default=str) + "\n")
    print(f"\nwrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    if any("error" in r for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
