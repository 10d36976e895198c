"""How a generator's run time grows with rows and columns (issue 20): seconds to fit and to sample each
generator at its defaults on Adult, ε = 1, δ = 1e-5, so a steward can predict a run's length.

    python -m benchmarks.scaling                                    # every generator, every size (long)
    python -m benchmarks.scaling --generators mst,dpwgan --sizes 1000,10000x5

Sizes are ROWS or ROWSxCOLUMNS (default 1000, 10000, 40000 rows with all 15 columns; 10000 rows with 5 and 10
columns). Rows: a seeded subsample of validated Adult (training and holdout rows together: nothing is evaluated).
Columns: the first COLUMNS − 1 of the schema's file order plus the target (a fixed public order). Each
generator samples as many rows as it was trained on; fit seconds include planning and the ledger reservation,
sample seconds include decoding. Each cell runs in a fresh process, as a train stage does (JAX's compilation for
MST and AIM counts in every cell; memory does not accumulate from one generator to the next). Measurements accumulate
in the JSON file (default
benchmarks/results/scaling.json: a new run replaces the cells it measures), and the table prints every cell
measured so far, "not measured" for the rest. Timings depend on the machine's load: each cell records the load
average at its start.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime, timezone
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.generator_runs import (
    ROOT,
    SCHEMA,
    adult,
    fit_and_sample,
    generator_params,
    overrides,
    sub_schema,
    subsample,
)
from pipelines.data.schema import Schema, load_schema
from pipelines.generators.names import GENERATORS

SIZES = "1000,10000,40000,10000x5,10000x10"


def parse_sizes(text: str, n_columns: int) -> list[tuple[int, int]]:
    """'ROWS' or 'ROWSxCOLUMNS', comma-separated → [(rows, columns)]; ValueError naming the bad item."""
    sizes = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        rows, _, cols = item.partition("x")
        try:
            size = (int(rows), int(cols) if cols else n_columns)
        except ValueError:
            raise ValueError(f"--sizes {item!r}: expected ROWS or ROWSxCOLUMNS, e.g. 10000x5") from None
        if not 2 <= size[1] <= n_columns:
            raise ValueError(f"--sizes {item!r}: columns must be 2..{n_columns} (the target and at least one more)")
        sizes.append(size)
    return sizes


def first_columns(schema: Schema, count: int) -> Schema:
    """The schema restricted to its first `count` − 1 non-target columns in file order, plus the target."""
    names = [c.name for c in schema.columns if c.name != schema.target][: count - 1]
    return sub_schema(schema, names + [schema.target])


def measure_cell(name: str, rows: int, cols: int, epsilon: float, delta: float, seed: int) -> dict[str, Any]:
    """One cell: generator `name` fitted and sampled on `rows` seeded rows of Adult's first `cols` columns."""
    schema, train, holdout = adult(seed)
    sch = first_columns(schema, cols)
    frame = subsample(pd.concat([train, holdout], ignore_index=True), rows, seed, flag="--sizes")
    extra = overrides(None, [], [name])[name]
    cell: dict[str, Any] = {
        "rows": rows,
        "columns": sch.names,
        "settings": extra,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load_average": round(os.getloadavg()[0], 2),
        "cpus": len(os.sched_getaffinity(0)),
    }
    run = fit_and_sample(name, sch, frame[sch.names], generator_params(name, extra, seed), epsilon, delta, seed)
    return {**cell, "fit_s": round(run.fit_s, 2), "sample_s": round(run.sample_s, 2)}


def markdown(cells: dict[str, dict[str, Any]], generators: list[str], sizes: list[tuple[int, int]]) -> str:
    """Fit / sample seconds per generator (rows) and size (columns), 'not measured' where no cell exists."""
    head = " | ".join(f"{r:,} × {c}" for r, c in sizes)
    lines = [f"| generator | {head} |", "|---|" + "---:|" * len(sizes)]
    for g in generators:
        row = []
        for r, c in sizes:
            cell = cells.get(f"{g}/{r}x{c}")
            row.append(
                "not measured"
                if cell is None
                else f"failed: {cell['error']}"
                if "error" in cell
                else f"{cell['fit_s']:.1f} / {cell['sample_s']:.1f}"
            )
        lines.append(f"| {g} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n\n(fit s / sample s; rows × columns; ε = 1, δ = 1e-5, default params)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generators", default=",".join(GENERATORS), help="comma-separated (default: the registry)")
    ap.add_argument("--sizes", default=SIZES, help=f"ROWS or ROWSxCOLUMNS, comma-separated (default {SIZES})")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "scaling.json")
    args = ap.parse_args()
    generators = [g.strip() for g in args.generators.split(",") if g.strip()]
    unknown = sorted(set(generators) - set(GENERATORS))
    if unknown:
        ap.error(f"--generators: unknown {unknown}; the registry has {', '.join(GENERATORS)}")
    schema = load_schema(SCHEMA)
    try:
        sizes = parse_sizes(args.sizes, len(schema.columns))
    except ValueError as exc:
        ap.error(str(exc))
    rows_available = len(pd.concat(adult(args.seed)[1:]))
    if max(r for r, _ in sizes) > rows_available:
        ap.error(f"--sizes: Adult has {rows_available} validated rows; ask for at most that many")
    saved = json.loads(args.json.read_text()) if args.json.exists() else {}
    if saved and (saved["epsilon"], saved["delta"]) != (args.epsilon, args.delta):
        ap.error(
            f"{args.json} holds cells at ε = {saved['epsilon']}, δ = {saved['delta']}; pass another --json "
            f"for ε = {args.epsilon}, δ = {args.delta}"
        )
    cells = saved.get("cells", {})
    failed = False
    for rows, cols in sizes:
        for name in generators:
            with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
                try:
                    cell = pool.submit(measure_cell, name, rows, cols, args.epsilon, args.delta, args.seed).result()
                except Exception as exc:  # recorded as the cell's result; the other cells still run
                    traceback.print_exc()
                    failed = True
                    why = (
                        "its process was killed (out of memory?)"
                        if isinstance(exc, BrokenProcessPool)
                        else f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
                    )
                    cell = {"rows": rows, "columns": first_columns(schema, cols).names, "error": why}
            cells[f"{name}/{rows}x{cols}"] = cell
            print(json.dumps({"generator": name, **cell}), flush=True)
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(
                json.dumps({"epsilon": args.epsilon, "delta": args.delta, "cells": cells}, indent=2, sort_keys=True)
                + "\n"
            )
    all_sizes = sorted(
        {(c["rows"], len(c["columns"])) for c in cells.values()} | set(sizes),
        key=lambda s: (s[1] != len(schema.columns), s[0], s[1]),
    )
    print("\n" + markdown(cells, [g for g in GENERATORS if any(k.startswith(g + "/") for k in cells)], all_sizes))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
