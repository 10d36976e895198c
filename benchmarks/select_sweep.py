"""The sweep behind `release.select: auto`'s rule (docs/selection.md): generators × ε × settings × noise draws,
each fitted on a project's prepared training rows and scored train-on-synthetic, test-on-real (the holdout), and by
its k-way marginal scores against the training rows (k = 1, 2, 3; `frontier.kway_score`, 100 seeded 3-subsets).

    python -m benchmarks.select_sweep --root . --generators aim --epsilons 0.95 \
        --settings '{"max_rounds": 16, "n_bins": 16}' '{"max_rounds": 40, "n_bins": 32}' --draws 3
    python -m benchmarks.select_sweep --root <a product.py --keep project> --rows 6000 ...   # the first 6,000 rows

The sweep of docs/selection.md "The sweep" (every generator at three ε on four tables of different shapes; its
rows in benchmarks/results/select_sweep.json):

    python -m benchmarks.product --data <csv> --schema <yaml> [--rows N] --until prepare --keep <dir>
    python -m benchmarks.select_sweep --root <dir>/seed-0 --generators aim mst pearl dpwgan dp_auto_gan ppem \
        iw_mmd_gan support_points --epsilons 0.3 0.9 3 --draws 2 --json <out.json>

`--root` is a project after `dvc repro prepare` (data/prepared/<ds>/ and schemas/<ds>.yaml of params.yaml's
data set). Each fit uses the public n̂ as the pipeline does, noise seeds 100, 101, ... (a fixed noise seed: not a
release), n̂ synthetic rows sampled with seed 0, and the project's TSTR classifiers
(`pipelines.evaluation.utility.target_scores`: LR / RF / GBM AUROC on the holdout). `--rows N` fits on the first N
prepared training rows with n̂ = N (a smaller table of the same shape). It prints one line per fit and the mean
per configuration. `--verdict` adds each table's utility verdict as the evaluate stage computes it (fit / weak /
inverted, and how many features' associations with the target it distorts) and the share called fit:

    python -m benchmarks.select_sweep --root <project> --generators aim --epsilons 0.9 \
        --settings '{"n_bins": 16, "max_rounds": 16}' '{"n_bins": 8, "max_rounds": 16}' --draws 20 --verdict

The process grows by about 0.5 GB per minute of fits (measured on the bundled table: 1.7 GB after 1.5 minutes, 2.8
GB after 3.5), and a run of 80 fits there ran out of memory at 24 GB: keep a run to some 40 fits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from benchmarks.frontier import binned, kway_score
from pipelines.config import Paths, load_params
from pipelines.data.encoded import EncodedTable
from pipelines.data.layout import Layout
from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder
from pipelines.generators.base import Budget
from pipelines.generators.registry import make_generator
from pipelines.evaluation import verdict
from pipelines.evaluation.utility import target_scores
from pipelines.evaluation.marginals import column_subsets
from pipelines.io import read_json


class Session:
    """No ledger: a benchmark's fits are not releases."""

    def reserve(self, events) -> None:
        pass

    def record(self, events) -> list[int]:
        return list(range(len(events)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".")
    ap.add_argument("--generators", nargs="+", default=["aim"])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0])
    ap.add_argument("--settings", nargs="+", default=["{}"], help="JSON overrides of the generator's section")
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--rows", type=int, help="fit on the first N prepared training rows, n̂ = N")
    ap.add_argument(
        "--verdict",
        action="store_true",
        help="also the evaluate stage's utility verdict of each "
        "table (pipelines/evaluation/verdict.py: the word, its claims and distorted features)",
    )
    ap.add_argument("--json", type=Path, help="write the table's public shape, every fit's scores and the command")
    ap.add_argument(
        "--summarize",
        type=Path,
        nargs="+",
        help="print the markdown table of these --json files "
        "(per table and ε: each generator's mean 2-way score and mean AUROC) and fit nothing",
    )
    args = ap.parse_args()
    if args.summarize:
        print(summary([json.loads(f.read_text()) for f in args.summarize]))
        return
    config, sch, layout, encoded, train, holdout = kept_project(Path(args.root))
    table = encoded if args.rows is None else np.asarray(encoded)[: args.rows]
    train = train.iloc[: args.rows]
    real = binned(train, train, sch)
    k3 = [
        tuple(real.columns[i] for i in c) for c in column_subsets(len(real.columns), 3, 100, np.random.default_rng(0))
    ]
    delta = config.privacy.delta
    judge = verdict_of(config, train, holdout, sch, len(table)) if args.verdict else None
    fits: list[dict] = []
    for gen in args.generators:
        for eps in args.epsilons:
            for raw in args.settings:
                section = {**config.generator(gen), **json.loads(raw)}
                scores = []
                for draw in range(args.draws):
                    t = time.perf_counter()
                    try:
                        model = make_generator(
                            gen, layout, {**section, "epsilon": eps, "noise_seed": 100 + draw}, "cpu"
                        )
                    except ValueError as e:  # e.g. PPEM on a table without protected columns: not a candidate
                        print(f"{gen} ε={eps} {raw}: not applicable: {e}", flush=True)
                        fits.append(
                            {"generator": gen, "epsilon": eps, "settings": json.loads(raw), "not_applicable": str(e)}
                        )
                        break
                    model.fit(table, Session(), Budget(eps, delta))  # len(table): the public n̂
                    synth = Encoder(sch).decode(model.sample(len(table), 0))
                    auc = tstr_auroc(synth, holdout, sch)
                    synth_b = binned(synth, train, sch)
                    kway = [kway_score(real, synth_b, k, k3 if k == 3 else None) for k in (1, 2, 3)]
                    scores.append(kway + auc)
                    said = judge(synth) if judge else {}
                    fits.append(
                        {
                            "generator": gen,
                            "epsilon": eps,
                            "settings": json.loads(raw),
                            "noise_seed": 100 + draw,
                            "kway": kway,
                            "tstr_auroc": auc,
                            **said,
                            "seconds": round(time.perf_counter() - t, 1),
                        }
                    )
                    word = f", {said['verdict']} ({said['distorted']} distorted)" if said else ""
                    print(
                        f"{gen} ε={eps} {raw} draw {draw}: {line(kway + auc)}{word} ({time.perf_counter() - t:.0f} s)",
                        flush=True,
                    )
                if scores:
                    said = [f["verdict"] for f in fits[-len(scores) :] if "verdict" in f]
                    fit = f", fit {said.count('fit')} of {len(said)}" if said else ""
                    print(f"{gen} ε={eps} {raw} mean of {args.draws}: {line(list(np.mean(scores, axis=0)))}{fit}")
                if args.json:  # after each configuration: an interrupted sweep keeps what it measured
                    args.json.write_text(
                        json.dumps(
                            {
                                "command": " ".join(sys.argv),
                                "shape": shape(sch, len(table)),
                                "holdout_rows": len(holdout),
                                "fits": fits,
                            },
                            indent=1,
                        )
                        + "\n"
                    )


def kept_project(root: Path) -> tuple:
    """(config, schema, layout, encoded training rows, training rows, holdout rows) of a project after
    `dvc repro prepare`."""
    config = load_params(root / "params.yaml")
    p = Paths(config.dataset.name, root)
    return (
        config,
        load_schema(p.schema),
        Layout.from_dict(read_json(p.prepared / "layout.json")["layout"]),
        EncodedTable(p.prepared / "train_encoded.parquet"),
        pd.read_parquet(p.prepared / "train.parquet"),
        pd.read_parquet(p.prepared / "holdout.parquet"),
    )


def verdict_of(config, train: pd.DataFrame, holdout: pd.DataFrame, sch, n: int):
    """A function of a synthetic table: the evaluate stage's utility verdict of it (the same baseline tables,
    classifiers, bins and settings; tasks/evaluate.py::measure) as {verdict, distorted, associations_lower_bound}."""
    settings, k = config.utility_gate.model_dump(), config.evaluate
    seed, bins, cap = k.seed, k.kway_bins, k.utility_max_rows
    baselines = verdict.baseline_tables(train, n, seed, settings["baseline_draws"], cap)

    def judge(synth: pd.DataFrame) -> dict:
        scored = target_scores({"tstr": synth, **baselines}, holdout, sch.columns, sch.target, seed, None, cap)
        v = verdict.utility_verdict(scored, synth, baselines, holdout, sch.columns, bins, settings, seed, cap)
        a = v["associations"]
        return {
            "verdict": v["verdict"],
            "distorted": a.get("features_worse_than_baseline"),
            "associations_lower_bound": a.get("improvement_lower_bound"),
        }

    return judge


def tstr_auroc(synth: pd.DataFrame, holdout: pd.DataFrame, sch) -> list[float]:
    """Train on the synthetic rows, test on the holdout: the project's LR / RF / GBM AUROC (`target_scores`)."""
    scored = target_scores({"tstr": synth}, holdout, sch.columns, sch.target, 0)
    return [roc_auc_score(scored["y_test"], scored["scores"][m]["tstr"]) for m in scored["scores"]]


def summary(sweeps: list[dict]) -> str:
    """Markdown: one row per table and ε, each generator's mean 2-way score / mean AUROC (LR, RF, GBM) over its
    draws, the best of each marked in bold."""
    gens = list(dict.fromkeys(f["generator"] for s in sweeps for f in s["fits"] if "kway" in f))
    lines = [
        "| table (n̂, columns: numeric / categorical) | ε | " + " | ".join(gens) + " |",
        "|---|---|" + "---|" * len(gens),
    ]
    for s in sweeps:
        sh = s["shape"]
        for eps in dict.fromkeys(f["epsilon"] for f in s["fits"]):
            cells = {}
            for g in gens:
                fits = [f for f in s["fits"] if f["generator"] == g and f["epsilon"] == eps and "kway" in f]
                if fits:
                    cells[g] = (
                        float(np.mean([f["kway"][1] for f in fits])),
                        float(np.mean([np.mean(f["tstr_auroc"]) for f in fits])),
                    )
            best = [max(v[i] for v in cells.values()) for i in (0, 1)]
            row = [
                " / ".join((f"**{v:.{d}f}**" if v == b else f"{v:.{d}f}") for v, b, d in zip(cells[g], best, (0, 2)))
                if g in cells
                else "n/a"
                for g in gens
            ]
            lines.append(
                f"| {sh['dataset']} ({sh['rows_public']}, {sh['numeric']} / {sh['categorical']}) | {eps:g} | "
                + " | ".join(row)
                + " |"
            )
    return "\n".join(lines)


def shape(sch, n_rows: int) -> dict:
    """The table's public facts a selection rule may read: n̂, the columns by kind, the categorical domain sizes."""
    cards = [len(c.categories) for c in sch.columns if not c.is_numeric]
    return {
        "dataset": sch.name,
        "rows_public": n_rows,
        "columns": len(sch.columns),
        "numeric": sum(c.is_numeric for c in sch.columns),
        "categorical": len(cards),
        "largest_category_count": max(cards, default=0),
        "target": sch.target,
    }


def line(values: list[float]) -> str:
    """'1/2/3-way a / b / c, AUROC LR/RF/GBM d / e / f'."""
    return (
        f"1/2/3-way {' / '.join(f'{v:.1f}' for v in values[:3])}, AUROC LR/RF/GBM "
        f"{' / '.join(f'{v:.3f}' for v in values[3:])}"
    )


if __name__ == "__main__":
    main()
