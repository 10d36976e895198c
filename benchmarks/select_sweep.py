"""The sweep behind `release.select: auto`'s rule (docs/selection.md): generators × ε × settings × noise draws,
each fitted on a project's prepared training rows and scored train-on-synthetic, test-on-real (the holdout), and by
its k-way marginal scores against the training rows (k = 1, 2, 3; `frontier.kway_score`, 100 seeded 3-subsets).

    python benchmarks/select_sweep.py --root . --generators aim --epsilons 0.95 \
        --settings '{"max_rounds": 16, "n_bins": 16}' '{"max_rounds": 40, "n_bins": 32}' --draws 3
    python benchmarks/select_sweep.py --root <a product.py --keep project> --rows 6000 ...   # the first 6,000 rows

`--root` is a project after `dvc repro prepare` (data/prepared/<ds>/ and schemas/<ds>.yaml of params.yaml's
data set). Each fit uses the public n̂ as the pipeline does, noise seeds 100, 101, ... (a fixed noise seed: not a
release), n̂ synthetic rows sampled with seed 0, and the project's TSTR classifiers
(`pipelines.evaluation.utility.target_scores`: LR / RF / GBM AUROC on the holdout). `--rows N` fits on the first N
prepared training rows with n̂ = N (a smaller table of the same shape). It prints one line per fit and the mean
per configuration.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from frontier import binned, kway_score
from pipelines.config import Paths, load_params
from pipelines.data.encoded import EncodedTable
from pipelines.data.layout import Layout
from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder
from pipelines.generators.base import Budget
from pipelines.generators.registry import make_generator
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
    args = ap.parse_args()
    root = Path(args.root)
    params = load_params(root / "params.yaml")
    p = Paths(params["dataset"]["name"], root)
    sch = load_schema(p.schema)
    layout = Layout.from_dict(read_json(p.prepared / "layout.json")["layout"])
    encoded = EncodedTable(p.prepared / "train_encoded.parquet")
    table = encoded if args.rows is None else np.asarray(encoded)[:args.rows]
    train = pd.read_parquet(p.prepared / "train.parquet").iloc[:args.rows]
    holdout = pd.read_parquet(p.prepared / "holdout.parquet")
    real = binned(train, train, sch)
    k3 = [tuple(real.columns[i] for i in c)
          for c in column_subsets(len(real.columns), 3, 100, np.random.default_rng(0))]
    delta = float(params["privacy"]["delta"])
    for gen in args.generators:
        for eps in args.epsilons:
            for raw in args.settings:
                section = {**(params.get(gen) or {}), **json.loads(raw)}
                scores = []
                for draw in range(args.draws):
                    t = time.perf_counter()
                    model = make_generator(gen, layout, {**section, "epsilon": eps, "noise_seed": 100 + draw}, "cpu")
                    model.fit(table, Session(), Budget(eps, delta))  # len(table): the public n̂
                    synth = Encoder(sch).decode(model.sample(len(table), 0))
                    scored = target_scores({"tstr": synth}, holdout, sch.columns, sch.target, 0)
                    auc = [roc_auc_score(scored["y_test"], scored["scores"][m]["tstr"]) for m in scored["scores"]]
                    synth_b = binned(synth, train, sch)
                    kway = [kway_score(real, synth_b, k, k3 if k == 3 else None) for k in (1, 2, 3)]
                    scores.append(kway + auc)
                    print(f"{gen} ε={eps} {raw} draw {draw}: {line(kway + auc)} ({time.perf_counter() - t:.0f} s)",
                          flush=True)
                print(f"{gen} ε={eps} {raw} mean of {args.draws}: {line(list(np.mean(scores, axis=0)))}")


def line(values: list[float]) -> str:
    """'1/2/3-way a / b / c, AUROC LR/RF/GBM d / e / f'."""
    return (f"1/2/3-way {' / '.join(f'{v:.1f}' for v in values[:3])}, AUROC LR/RF/GBM "
            f"{' / '.join(f'{v:.3f}' for v in values[3:])}")


if __name__ == "__main__":
    main()
