"""MST and AIM reading the training table in row groups (issue 32): fit seconds and peak memory against the rows.

    python -m benchmarks.marginal_rows --rows 100000 1000000 --generators aim mst --repeats 3 --out /tmp/marginal_rows

Adult (the bundled table) resampled with replacement to N rows (seeded), encoded by its schema and written as the
prepare stage writes `train_encoded.parquet` (`io.write_parquet`: row groups of `io.ROW_GROUP_ROWS` rows, a
`layout.json` with the public row count N). Each cell is one fresh process fitting the generator at ε = 1 from that
`EncodedTable` (noise seed 0; default params but AIM's rounds, `ESTIMATION`: the graphical-model estimation costs
what the domain costs, the same in both modes, and at 32 bins and 40 rounds it alone took over 10 minutes), in two
modes:
- `chunks`: the product's path, `RowChunks` of ROW_GROUP_ROWS rows (the marginals counted chunk by chunk);
- `whole`: one chunk of every row (`RowChunks` with N rows): what the fit read before, the whole float32 matrix
  and its integer codes at once.
Printed: the medians over --repeats processes of the fit seconds and of the process's peak resident memory (MiB; one
process's peak varies by a few hundred MiB with the estimation's allocations). Both modes give the same model
(tests/test_row_chunks.py), so only the cost differs.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ESTIMATION = {"aim": {"max_rounds": 4, "iters": 50, "final_iters": 100}}  # rows play no part in these


def build(out: Path, n: int) -> Path:
    """The N-row encoded Adult table and its layout.json in out/<n>/ (built once)."""
    from pipelines.data.readers import read_source
    from pipelines.data.schema import load_schema
    from pipelines.data.transform import Encoder
    from pipelines.io import write_parquet
    import pandas as pd

    folder = out / str(n)
    if (folder / "train_encoded.parquet").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    schema = load_schema(ROOT / "schemas" / "adult.yaml")
    frame = read_source("bundled:adult", schema).frame
    rows = np.random.default_rng(n).integers(0, len(frame), n)
    encoder = Encoder(schema)
    encoded = encoder.encode(frame.iloc[rows].reset_index(drop=True))
    write_parquet(folder / "train_encoded.parquet", pd.DataFrame(encoded, columns=encoder.column_names()))
    (folder / "layout.json").write_text(json.dumps({"rows_public": n, "rows_public_source": "benchmark"}))
    (folder / "layout_full.json").write_text(json.dumps(encoder.layout.to_dict()))
    return folder


def cell(folder: Path, generator: str, mode: str) -> dict:
    """One fit in this process (module docstring); its seconds and peak RSS."""
    from pipelines.data.encoded import EncodedTable
    from pipelines.data.layout import Layout
    from pipelines.generators.base import Budget
    from pipelines.generators.registry import make_generator

    table = EncodedTable(folder / "train_encoded.parquet")
    layout = Layout.from_dict(json.loads((folder / "layout_full.json").read_text()))

    class Session:
        def reserve(self, events):
            pass

        def record(self, events):
            return []

    gen = make_generator(generator, layout, {**ESTIMATION.get(generator, {}), "noise_seed": 0}, "cpu")
    if mode == "whole":
        gen.chunk_rows = table.n_actual
    start = time.perf_counter()
    gen.fit(table, Session(), Budget(1.0, 1e-5))
    return {
        "generator": generator,
        "mode": mode,
        "rows": table.n_actual,
        "fit_s": round(time.perf_counter() - start, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--generators", nargs="+", default=["aim", "mst"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cell", nargs=3, metavar=("FOLDER", "GENERATOR", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:
        print(json.dumps(cell(Path(args.cell[0]), args.cell[1], args.cell[2])))
        return
    results = []
    for n in args.rows:
        folder = build(args.out, n)
        for generator in args.generators:
            for mode in ("chunks", "whole"):
                for _ in range(args.repeats):
                    run = subprocess.run(
                        [sys.executable, __file__, "--out", str(args.out), "--cell", str(folder), generator, mode],
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    results.append(json.loads(run.stdout.strip().splitlines()[-1]))
                    print(results[-1], flush=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print("\n| generator | mode | " + " | ".join(f"{n:,} rows: fit s / peak MiB" for n in args.rows) + " |")
    print("|---|---|" + "---|" * len(args.rows))
    for generator in args.generators:
        for mode in ("chunks", "whole"):
            medians = []
            for n in args.rows:
                cells = [r for r in results if (r["generator"], r["mode"], r["rows"]) == (generator, mode, n)]
                medians.append(
                    f"{np.median([r['fit_s'] for r in cells]):.1f} / "
                    f"{np.median([r['peak_rss_mb'] for r in cells]):,.0f}"
                )
            print(f"| {generator} | {mode} | " + " | ".join(medians) + " |")


if __name__ == "__main__":
    main()
