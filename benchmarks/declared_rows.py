"""MST / AIM when the public n̂ is not the number of rows fitted (an extract of a documented table): k-way scores.

    python -m benchmarks.declared_rows --generator mst --rows 6000 --factors 1 3
    python -m benchmarks.declared_rows --generator aim --rows 6000 --factors 1 3

Adult's training side (public split seed 0), a seeded sample of `--rows` rows, fitted at ε = 1 (noise seed 0) with
n̂ = factor × rows declared; `--rows` rows sampled; 1-/2-/3-way scores (`frontier.kway_score`, 10 quantile bins
of the fitted rows, 100 seeded 3-subsets; 1000 = identical). AIM at 16 bins / 16 rounds whatever n̂, so that only
the total differs between factors. Figures: docs/aim-mst.md, "The estimation's total".
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.frontier import binned, kway_score
from pipelines.data.readers import read_table
from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder, train_holdout_split
from pipelines.data.validation import validate_table
from pipelines.evaluation.marginals import column_subsets
from pipelines.generators.base import Budget
from pipelines.generators.registry import generator_class
from benchmarks.select_sweep import Session


class Declared:
    """Rows whose len() is the declared public n̂."""

    def __init__(self, rows: np.ndarray, n_rows: int):
        self.rows, self.n_rows = rows, n_rows

    def __len__(self) -> int:
        return self.n_rows

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.asarray(self.rows, dtype=dtype)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generator", choices=["mst", "aim"], default="mst")
    ap.add_argument("--rows", type=int, default=6000)
    ap.add_argument("--factors", nargs="+", type=float, default=[1.0, 3.0])
    args = ap.parse_args()
    schema = load_schema(Path(__file__).resolve().parents[1] / "schemas" / "adult.yaml")
    raw, label = read_table("bundled:adult", schema)
    train, _ = train_holdout_split(validate_table(raw, schema, label)[0], 0.2, 0)
    train = train.sample(n=args.rows, random_state=0).reset_index(drop=True)
    enc = Encoder(schema)
    encoded = enc.encode(train)
    real = binned(train, train, schema)
    k3 = [
        tuple(real.columns[i] for i in c) for c in column_subsets(len(real.columns), 3, 100, np.random.default_rng(0))
    ]
    settings = {"max_rounds": 16, "n_bins": 16} if args.generator == "aim" else {}
    for factor in args.factors:
        n_hat, t = int(round(args.rows * factor)), time.perf_counter()
        gen = generator_class(args.generator)(enc.layout, {"noise_seed": 0, **settings}, "cpu")
        gen.fit(Declared(encoded, n_hat), Session(), Budget(1.0, 1e-5))
        synth = binned(enc.decode(gen.sample(args.rows, 0)), train, schema)
        scores = [kway_score(real, synth, k, k3 if k == 3 else None) for k in (1, 2, 3)]
        print(
            f"{args.generator} rows {args.rows} n̂ {n_hat}: 1/2/3-way {' / '.join(f'{s:.1f}' for s in scores)} "
            f"({time.perf_counter() - t:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
