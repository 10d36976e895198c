"""Time per draw of the published noise before and after the exact samplers (issue 28, item 4), in one run.

    python -m benchmarks.samplers            # the table (seconds)
    python -m benchmarks.samplers --quick    # fewer repeats
    python -m benchmarks.samplers --json benchmarks/results/samplers.json

Per mechanism, "before" is the float sampler the code used (NumPy's inverse-CDF Laplace, NumPy's normal, float
Gumbel-max for the exponential mechanism) and "after" the exact sampler that replaced it
(pipelines/privacy/samplers.py, through the mechanism the pipeline calls), both drawing from the project's CSPRNG
(AES-128-CTR behind `np.random.Generator`, pipelines/privacy/noise.py). Each cell is the median over repeats of
one call's wall time divided by the draws it makes (a selection is one draw); sizes are the pipeline's: one
noisy row count, a 1-way marginal of 32 cells and a 2-way one of 1,024 at MST/AIM's σ, the calibration's weighted
counts on the lattice w_max/64, 16,000 released log-weights, and selections over 10 to 10,000 candidates whose
scores spread as AIM's do (a few close to the best, most far below it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
from randomgen import AESCounter

from pipelines.privacy import samplers
from pipelines.privacy.mechanisms import (
    discrete_gaussian_mechanism,
    discrete_laplace_mechanism,
    exponential_mechanism,
    lattice_gaussian_mechanism,
    lattice_laplace_mechanism,
)
from pipelines.privacy.events import DiscreteGaussianEvent, DiscreteLaplaceEvent


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up (imports, caches)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def gumbel_max(rng: np.random.Generator, scores: np.ndarray, sensitivity: float, epsilon: float) -> int:
    """The exponential mechanism as it was sampled before: argmax of float logits plus float Gumbel noise."""
    return int(np.argmax(epsilon * scores / (2.0 * sensitivity) + rng.gumbel(size=scores.shape)))


def aim_like_scores(rng: np.random.Generator, n: int) -> np.ndarray:
    """L1 errors of n candidate marginals: a handful near the top, the rest hundreds below (AIM at ε = 1)."""
    return np.sort(rng.gamma(0.5, 400.0, size=n))[::-1]


def rows(repeats: int) -> list[dict]:
    rng = np.random.Generator(AESCounter(key=2**127 + 2**64 + 12345))
    out = []

    def add(mechanism: str, draws: int, before, after, reps: int = repeats) -> None:
        b = median_seconds(before, reps) / draws
        a = median_seconds(after, reps) / draws
        out.append(
            {"mechanism": mechanism, "draws_per_call": draws, "before_us": b * 1e6, "after_us": a * 1e6, "ratio": a / b}
        )

    # noisy training row count: one Laplace(1/ε) draw, ε = 0.05
    add(
        "row count (Laplace → discrete Laplace, ε = 0.05)",
        1,
        lambda: 39_074 + rng.laplace(0.0, 20.0),
        lambda: discrete_laplace_mechanism(39_074, 1, 20.0, rng),
    )
    # marginal measurements (MST / AIM / calibration counts)
    for sigma, cells in ((8.0, 32), (8.0, 1024), (60.0, 1024), (400.0, 1024)):
        counts = rng.integers(0, 1000, size=cells)
        add(
            f"marginal counts, {cells} cells, σ = {sigma:g} (normal → discrete Gaussian)",
            cells,
            lambda: counts + rng.normal(0.0, sigma, size=cells),
            lambda: discrete_gaussian_mechanism(counts, 1, sigma, rng),
        )
    # the calibration's importance-weighted counts: σ = z·√m·w_max in weight units, 64 lattice points per w_max
    weighted = rng.uniform(0, 500, size=1024)
    sigma_w, k = 12.0 * 2.5, 64
    add(
        "weighted calibration counts, 1024 cells (normal → lattice discrete Gaussian)",
        1024,
        lambda: weighted + rng.normal(0.0, sigma_w, size=1024),
        lambda: lattice_gaussian_mechanism(
            weighted, Fraction(2.5) / k, DiscreteGaussianEvent(sigma_w * k / 2.5, k, 1), rng
        ),
    )
    # the weight column: 16,000 log-weights, lattice Δ_w
    log_w = rng.normal(0.0, 0.5, size=16_000)
    delta_w = 0.004
    add(
        "output_norm log-weights, 16,000 (normal → lattice discrete Gaussian)",
        16_000,
        lambda: log_w + rng.normal(0.0, 0.6, size=16_000),
        lambda: lattice_gaussian_mechanism(
            log_w, Fraction(delta_w), DiscreteGaussianEvent(0.6 / delta_w, 1, 16_000), rng
        ),
        max(3, repeats // 4),
    )
    add(
        "output_lapl log-weights, 16,000 (Laplace → lattice discrete Laplace)",
        16_000,
        lambda: log_w + rng.laplace(0.0, 0.4, size=16_000),
        lambda: lattice_laplace_mechanism(
            log_w, Fraction(delta_w), DiscreteLaplaceEvent(0.4 / delta_w, 1, 16_000), rng
        ),
        max(3, repeats // 4),
    )
    # selections (exponential mechanism): one draw per selection
    for n, eps in ((10, 0.5), (300, 0.05), (3000, 0.05), (10_000, 0.02)):
        scores = aim_like_scores(rng, n)
        add(
            f"selection, {n} candidates, ε_sel = {eps:g} (Gumbel-max → exact rejection)",
            1,
            lambda: gumbel_max(rng, scores, 3.0, eps),
            lambda: exponential_mechanism(scores, 3.0, eps, rng),
        )
    # the primitive itself
    gam = rng.uniform(0, 3, size=100_000)
    add(
        "Bernoulli(e^-γ), 100,000 (float compare → exact)",
        100_000,
        lambda: rng.random(100_000) < np.exp(-gam),
        lambda: samplers.bernoulli_exp(rng, gam, gam * 2.0**-46, lambda i: Fraction(float(gam[i]))),
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 repeats per cell instead of 21")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    table = rows(5 if args.quick else 21)
    print("| mechanism | draws/call | before µs/draw | after µs/draw | after/before |")
    print("|---|---:|---:|---:|---:|")
    for r in table:
        print(
            f"| {r['mechanism']} | {r['draws_per_call']:,} | {r['before_us']:.3f} | {r['after_us']:.3f} | "
            f"{r['ratio']:.1f}× |"
        )
    if args.json:
        args.json.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
