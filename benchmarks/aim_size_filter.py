"""AIM's size filter (`pipelines/marginal/estimate.py::model_size_mb`, asked of every candidate in every round)
against mbi's `hypothetical_model_size`, the definition it reproduces, on the same calls in the same run.

    python -m benchmarks.aim_size_filter

Two replays, each every round's filter over AIM's workload candidates (every pair of columns, every triple with the
target), the model's cliques being every 1-way and the rounds' cliques so far:
- Adult: the 18 cliques AIM had by round 17 of issue 32's 100,000-row run (`aim_projection.MODEL`, its domain);
- a wide table like the bundled breast-cancer one: 31 columns of 16 values, 900 candidates, and 3 rounds whose
  cliques are seeded draws of the workload (the default release ran 3 rounds).
Prints each implementation's seconds, their ratio, and asserts that every size is mbi's.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
from benchmarks.aim_projection import DOMAIN, MODEL  # beside this file

from pipelines.marginal import estimate as est


def replay(names: list[str], shape: list[int], rounds: list[tuple[str, ...]], target: str) -> tuple[float, float, int]:
    """(our seconds, mbi's seconds, calls) of the filter over every round of `rounds`."""
    from mbi.junction_tree import hypothetical_model_size

    dom = est.domain(names, shape)
    others = [n for n in names if n != target]
    cands = list(itertools.combinations(names, 2)) + [(target, a, b) for a, b in itertools.combinations(others, 2)]
    ours = theirs = 0.0
    calls = 0
    for t in range(len(rounds) + 1):
        cliques = [(n,) for n in names] + rounds[:t]
        t0 = time.perf_counter()
        mine = [est.model_size_mb(dom, cliques + [r]) for r in cands]
        t1 = time.perf_counter()
        ref = [float(hypothetical_model_size(dom, cliques + [r])) for r in cands]
        ours, theirs, calls = ours + t1 - t0, theirs + time.perf_counter() - t1, calls + len(cands)
        assert mine == ref
    return ours, theirs, calls


def main() -> None:
    rng = np.random.default_rng(0)
    wide = [f"x{i}" for i in range(30)] + ["target"]
    wide_work = list(itertools.combinations(wide, 2))
    wide_rounds = [wide_work[int(i)] for i in rng.choice(len(wide_work), 3, replace=False)]
    cases = {
        "Adult, 17 rounds": (list(DOMAIN), list(DOMAIN.values()), [c for c in MODEL if len(c) > 1], "income"),
        "31 columns of 16, 3 rounds": (wide, [16] * 31, wide_rounds, "target"),
    }
    print(f"{'replay':<28}{'calls':>7}{'ours s':>9}{'mbi s':>9}{'ratio':>7}")
    for name, case in cases.items():
        ours, theirs, calls = replay(*case)
        print(f"{name:<28}{calls:>7}{ours:>9.2f}{theirs:>9.2f}{theirs / ours:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
