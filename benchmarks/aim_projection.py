"""AIM's candidate projections (`pipelines/marginal/estimate.py::project_many`): NumPy's greedy einsum against
opt_einsum's, on the model AIM had in round 17 of a release of Adult resampled to 100,000 rows (issue 32's scale run:
that round's 196 projections took 78.5 s).

    python -m benchmarks.aim_projection                 # 20 candidates each way, medians of 3
    python -m benchmarks.aim_projection --candidates 196 --repeats 1

The model's cliques and domain sizes are the recorded ones (below); its log-potentials are seeded normal draws (the
contraction's cost depends on the shapes alone). The candidates are AIM's workload on Adult: every pair of columns
and every triple with the target, in that order. Prints seconds per candidate for each library, their ratio, and the
largest difference of the normalised marginals.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import numpy as np
import opt_einsum

DOMAIN = {
    "age": 32,
    "workclass": 9,
    "fnlwgt": 19,
    "education": 16,
    "education_num": 16,
    "marital_status": 7,
    "occupation": 15,
    "relationship": 6,
    "race": 5,
    "sex": 2,
    "capital_gain": 15,
    "capital_loss": 10,
    "hours_per_week": 14,
    "native_country": 42,
    "income": 2,
}
MODEL = [
    ("education", "education_num", "income"),
    ("marital_status", "relationship", "income"),
    ("relationship", "sex", "income"),
    ("workclass", "occupation", "income"),
    ("age", "marital_status", "income"),
    ("occupation", "sex", "income"),
    ("education_num", "occupation", "income"),
    ("occupation", "hours_per_week", "income"),
    ("relationship", "hours_per_week", "income"),
    ("sex", "capital_gain", "income"),
    ("education_num", "relationship", "income"),
    ("relationship", "race", "income"),
    ("workclass", "relationship", "income"),
    ("age", "relationship", "income"),
    ("workclass", "hours_per_week", "income"),
    ("fnlwgt",),
    ("capital_loss",),
    ("native_country",),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", type=int, default=20, help="the first N of the 196 candidates")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    axis = {a: i for i, a in enumerate(DOMAIN)}
    rng = np.random.default_rng(0)
    operands: list = []
    for clique in MODEL:
        operands += [np.exp(rng.normal(size=[DOMAIN[a] for a in clique])), [axis[a] for a in clique]]
    others = [a for a in DOMAIN if a != "income"]
    candidates = [*itertools.combinations(DOMAIN, 2), *((a, b, "income") for a, b in itertools.combinations(others, 2))]
    chosen = candidates[: args.candidates]
    libraries = {
        "numpy": lambda out: np.einsum(*operands, out, optimize="greedy"),
        "opt_einsum": lambda out: opt_einsum.contract(*operands, out, optimize="greedy"),
    }
    seconds, results = {}, {}
    for name, contract in libraries.items():
        runs = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            results[name] = [contract([axis[a] for a in r]) for r in chosen]
            runs.append((time.perf_counter() - start) / len(chosen))
        seconds[name] = statistics.median(runs)
    diff = max(float(np.abs(a / a.sum() - b / b.sum()).max()) for a, b in zip(results["numpy"], results["opt_einsum"]))
    print(
        f"{len(chosen)} of {len(candidates)} candidates, medians of {args.repeats}: numpy {seconds['numpy']:.4f} "
        f"s / candidate, opt_einsum {seconds['opt_einsum']:.5f} s / candidate "
        f"({seconds['numpy'] / seconds['opt_einsum']:.0f}x); largest difference {diff:.2e}"
    )


if __name__ == "__main__":
    main()
