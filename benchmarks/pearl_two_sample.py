"""PEARL §4 / appendix C (Figure 2): rejection rate of the CF two-sample test against dimension for the
"unoptimized", "normal" and "optimized" frequency sets (and our critic's re-weighting of the unoptimized
set); 20 frequencies, 1,000 samples per distribution, 100 trials, the whole experiment repeated 5 times
(mean ± standard deviation over the repeats). Test and sets: benchmarks/cf_two_sample.py.

    python -m benchmarks.pearl_two_sample
    python -m benchmarks.pearl_two_sample --dims 2 5 10 --repeats 2 --trials 50
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.cf_two_sample import SETS, rejection_rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dims", nargs="+", type=int, default=[1, 2, 5, 10, 15, 20, 30])
    ap.add_argument("--frequencies", type=int, default=20)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--permutations", type=int, default=200)
    ap.add_argument("--shift", type=float, default=1.0, help="mean of Q's first coordinate")
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args()
    print(f"{'d':>3}  " + "  ".join(f"{name:>13}" for name in SETS))
    for d in args.dims:
        runs = [
            rejection_rates(
                d, args.frequencies, args.samples, args.trials, args.permutations, args.shift, args.alpha, seed=r
            )
            for r in range(args.repeats)
        ]
        rates = {
            name: (float(np.mean([r[name] for r in runs])), float(np.std([r[name] for r in runs]))) for name in SETS
        }
        print(f"{d:>3}  " + "  ".join(f"{m:>6.2f} ± {s:4.2f}" for m, s in rates.values()), flush=True)


if __name__ == "__main__":
    main()
