"""The sweep behind `release.select: auto`'s rule (docs/selection.md): generators × ε × settings × noise draws,
each fitted on a project's prepared training rows and scored train-on-synthetic, test-on-real (the holdout).

    python benchmarks/select_sweep.py --root . --generators aim --epsilons 0.95 \
        --settings '{"max_rounds": 16, "n_bins": 16}' '{"max_rounds": 16, "n_bins": 32}' --draws 3

`--root` is a project after `dvc repro prepare` (data/prepared/<ds>/ and schemas/<ds>.yaml of params.yaml's
data set). Each fit uses the public n̂ as the pipeline does, noise seeds 100, 101, ... (a fixed noise seed: not a
release), n̂ synthetic rows sampled with seed 0, and the project's TSTR classifiers
(`pipelines.evaluation.utility.target_scores`: LR / RF / GBM AUROC on the holdout). It prints one line per fit
and the mean per configuration.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from pipelines.config import Paths, load_params
from pipelines.data.encoded import EncodedTable
from pipelines.data.layout import Layout
from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder
from pipelines.generators.base import Budget
from pipelines.generators.registry import make_generator
from pipelines.evaluation.utility import target_scores
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
    args = ap.parse_args()
    root = Path(args.root)
    params = load_params(root / "params.yaml")
    p = Paths(params["dataset"]["name"], root)
    sch = load_schema(p.schema)
    layout = Layout.from_dict(read_json(p.prepared / "layout.json")["layout"])
    table = EncodedTable(p.prepared / "train_encoded.parquet")
    holdout = pd.read_parquet(p.prepared / "holdout.parquet")
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
                    scores.append(auc)
                    print(f"{gen} ε={eps} {raw} draw {draw}: AUROC LR/RF/GBM "
                          f"{' / '.join(f'{a:.3f}' for a in auc)} ({time.perf_counter() - t:.0f} s)", flush=True)
                mean = np.mean(scores, axis=0)
                print(f"{gen} ε={eps} {raw} mean of {args.draws}: {' / '.join(f'{a:.3f}' for a in mean)}")


if __name__ == "__main__":
    main()
