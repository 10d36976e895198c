"""Wall time of PPEM at default settings on a 1,000-row, 60-encoded-column table (issue 20: ≤ 3 minutes).

The table is synthetic with the schema of the issue's credit table: `--protected` continuous columns (x′, the
KSD-tested marginal), 8 more continuous ones and 4-level categoricals up to `--width` encoded columns (the
layout of benchmarks/dpsgd_step.py). PPEM runs its real `fit` (plan at ε = 1, δ = 1e-5 for n̂ = `--rows`,
T = ceil(epochs / q) steps at the defaults of pipelines/generators/params/ppem.py, ledger calls to a session
that accepts them), then its α-LMDP release gate; the plan's PLD calibration, training and gate are timed
apart. `--steps` overrides T (then the full run's time is
extrapolated from the seconds per step, and printed as such).

    .venv/bin/python -m benchmarks.ppem_runtime                # full default run
    .venv/bin/python -m benchmarks.ppem_runtime --steps 40     # seconds per step only
"""

from __future__ import annotations

import argparse
import math
import os
import time

import torch

from benchmarks.dpsgd_step import encoded_rows, layout_of
from pipelines.generators.base import Budget
from pipelines.generators.params.ppem import Params
from pipelines.generators.ppem import PPEM
from pipelines.privacy.dpsgd import sampling_schedule
from pipelines.privacy.noise import NoiseSource


class AcceptingSession:
    """A ledger session that accepts every reservation and record (no ledger file)."""

    def reserve(self, events: list) -> None:
        pass

    def record(self, events: list) -> list[int]:
        return list(range(len(events)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--width", type=int, default=60)
    parser.add_argument("--protected", type=int, default=4)
    parser.add_argument("--steps", type=int, default=None, help="T (default: the plan's ceil(epochs / q))")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-gate", action="store_true", help="skip the α-LMDP gate")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    layout = layout_of(args.width, args.protected)
    data = encoded_rows(layout, args.rows).numpy()
    model = PPEM(layout, {"steps": args.steps, "noise_seed": 0})
    p = Params()
    q, full_steps = sampling_schedule(p.batch_size, args.rows, None, p.epochs, p.max_steps)
    print(
        f"PPEM defaults, {args.rows} rows × {layout.width} encoded columns ({args.protected} protected), "
        f"{torch.get_num_threads()} torch thread(s), 1-min load {os.getloadavg()[0]:.2f}; "
        f"default T = min(ceil({p.epochs} / {q:.3f}), {p.max_steps}) = {full_steps}"
    )
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # torch's lazy optimiser imports, outside the timing
    start = time.perf_counter()
    model.plan(args.rows, Budget(1.0, 1e-5))
    print(f"plan (PLD calibration of σ): {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    model.fit(data, AcceptingSession(), None, NoiseSource())
    fit_s = time.perf_counter() - start
    steps = model.privacy.steps
    per_step = fit_s / steps
    note = "" if steps == full_steps else f"  -> {per_step * full_steps:.0f} s extrapolated to T = {full_steps}"
    print(f"fit: {steps} steps in {fit_s:.1f} s ({1e3 * per_step:.1f} ms/step){note}")
    if not args.no_gate:
        start = time.perf_counter()
        gates = model.release_gates(data)
        print(f"α-LMDP gate: {time.perf_counter() - start:.1f} s ({', '.join(g.name for g in gates)})")
    print(f"T = {full_steps}: {math.ceil(per_step * full_steps)} s of training")


if __name__ == "__main__":
    main()
