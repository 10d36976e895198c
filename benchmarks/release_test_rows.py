"""The DP release test's near-row counts (`pipelines/privacy/release_test.py::near_counts`) against the rows: its
exact radius search (`distance.within`) and the all-pairs nearest distance it replaced, on UCI Adult resampled.

    python -m benchmarks.release_test_rows 20000 100000 800000

For each N: N "training" rows and N "synthetic" rows, two seeded resamples with replacement of the bundled Adult
table (so many rows have a copy on the other side), their Gower features (`gower_features`), then which training
rows have a synthetic row within the default radius 0.01. The all-pairs search runs up to 20,000 rows only (it
grows with N²) and must give the same answer. Prints seconds per step.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from pipelines.data.readers import read_source
from pipelines.data.schema import load_schema
from pipelines.evaluation.attacks.distance import gower_features, nearest, within

RADIUS = 0.01 + 1e-12  # near_counts' radius at the default near_duplicate_distance
ALL_PAIRS_UP_TO = 20_000


def main() -> None:
    schema = load_schema("schemas/adult.yaml")
    source = read_source("bundled:adult", schema, "strict").frame
    for n in map(int, sys.argv[1:] or ["20000"]):
        train = source.sample(n=n, replace=True, random_state=1).reset_index(drop=True)
        synth = source.sample(n=n, replace=True, random_state=2).reset_index(drop=True)
        t0 = time.perf_counter()
        targets, pool = gower_features(train, schema.columns), gower_features(synth, schema.columns)
        t1 = time.perf_counter()
        near = within(targets, pool, RADIUS, schema.columns)
        t2 = time.perf_counter()
        line = f"N = {n:,}: features {t1 - t0:.1f} s, within {t2 - t1:.1f} s ({int(near.sum()):,} near)"
        if n <= ALL_PAIRS_UP_TO:
            every = nearest(targets, pool)[0][:, 0] <= RADIUS
            line += f", all pairs {time.perf_counter() - t2:.1f} s (same answer: {np.array_equal(near, every)})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
