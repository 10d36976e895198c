"""The utility classifiers' and the verdict's cost against the table's rows, at the default row cap and without it.

    python -m benchmarks.utility_rows --rows 10000 100000 1000000 --repeats 3
    python -m benchmarks.utility_rows --rows 10000 100000 --cap none

Adult resampled (seed 0, with replacement) to each row count, split 80 / 20 into training and holdout rows; the
"synthetic" table is a resample of the training rows of the same size (n̂). Times what evaluate@gen and the
baseline stage spend on the target task: `target_scores` of the synthetic, the real training and the five
independent-marginals tables on the holdout, then `utility_verdict` (2-way, associations, task); median of
`--repeats` seconds and the ratio to the smallest row count. Figures: docs/performance.md ("Evaluation against
rows").
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from pipelines.config import Metrics, UtilityGate
from pipelines.data.readers import read_table
from pipelines.data.schema import load_schema
from pipelines.data.validation import validate_table
from pipelines.evaluation import verdict
from pipelines.evaluation.utility import target_scores


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", type=int, default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cap", default=str(Metrics().utility_max_rows), help="an integer, or none")
    args = ap.parse_args()
    cap = None if args.cap == "none" else int(args.cap)
    schema = load_schema(Path(__file__).resolve().parents[1] / "schemas" / "adult.yaml")
    raw, label = read_table("bundled:adult", schema)
    adult = validate_table(raw, schema, label)[0]
    s = UtilityGate().model_dump()
    first = None
    for n in args.rows:
        table = adult.sample(n, replace=True, random_state=0).reset_index(drop=True)
        train, holdout = table.iloc[: int(0.8 * n)], table.iloc[int(0.8 * n) :]
        synth = train.sample(len(train), replace=True, random_state=1).reset_index(drop=True)
        seconds = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            base = verdict.baseline_tables(train, len(train), 0, s["baseline_draws"], cap)
            scored = target_scores(
                {"tstr": synth, "trtr": train, **base}, holdout, schema.columns, schema.target, 0, max_rows=cap
            )
            v = verdict.utility_verdict(scored, synth, base, holdout, schema.columns, 10, s, 0, cap)
            seconds.append(time.perf_counter() - t)
        median = float(np.median(seconds))
        first = first or median
        print(
            f"rows {n:>9,}  cap {cap}  median {median:7.1f} s  ratio {median / first:5.2f}  verdict {v['verdict']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
