"""Issue 31's large code lists: the same release with a 50-code and a 5,000-code column, time and peak memory.

    python -m benchmarks.code_list --out /tmp/codes --codes 50 5000 --rows 2500 --seeds 0

Builds, per K in --codes, Adult (the bundled table) with one more categorical column `dx` of K documented codes
(`D0000` ... ; the list in `codes/dx<K>.txt`, read by the schema's `categories_file`): a row's code is
(r + 97·occupation) mod K with r ~ Zipf(1.1) truncated to K (seeded), so few codes are common, most are rare or
absent, and the code carries the occupation, as a diagnosis carries a department. The schema is
schemas/adult.yaml plus that column. Then `benchmarks/product.py` releases a --rows extract of each with the
default params (`release.select: auto`), one process per K and seed, and this prints each run's `dvc repro`
seconds and peak resident memory of its largest process, and the 5,000-code run's ratios to the 50-code run's.
The issue's target: at most 2x in time and in memory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

from pipelines.data.readers import read_source
from pipelines.data.schema import load_schema

ROOT = Path(__file__).resolve().parents[1]
OCCUPATION_STRIDE = 97


def codes(k: int) -> list[str]:
    return [f"D{i:04d}" for i in range(k)]


def build(out: Path, k: int, seed: int = 0) -> tuple[Path, Path]:
    """The table (CSV) and its schema with the K-code column `dx` (module docstring)."""
    schema = load_schema(ROOT / "schemas" / "adult.yaml")
    table = read_source("bundled:adult", schema).frame
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, k + 1) ** 1.1
    rank = rng.choice(k, size=len(table), p=weights / weights.sum())
    occupation = table["occupation"].astype("category").cat.codes.to_numpy()
    table["dx"] = np.asarray(codes(k))[(rank + OCCUPATION_STRIDE * occupation) % k]
    (out / "codes").mkdir(parents=True, exist_ok=True)
    (out / "codes" / f"dx{k}.txt").write_text("\n".join(codes(k)) + "\n")
    doc = yaml.safe_load((ROOT / "schemas" / "adult.yaml").read_text())
    doc["name"] = f"adult_dx{k}"
    doc.pop("source", None)
    doc["columns"]["dx"] = {"kind": "categorical", "categories_file": f"codes/dx{k}.txt"}
    data, schema_file = out / f"adult_dx{k}.csv", out / f"adult_dx{k}.yaml"
    table.to_csv(data, index=False)
    schema_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    return data, schema_file


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--codes", type=int, nargs="+", default=[50, 5000])
    ap.add_argument("--rows", type=int, default=2500)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--set", action="append", default=[], help="passed to product.py")
    args = ap.parse_args()
    runs: dict[int, list[dict]] = {}
    for k in args.codes:
        data, schema = build(args.out, k)
        for seed in args.seeds:
            result = args.out / f"product-dx{k}-seed{seed}.json"
            cmd = [
                sys.executable,
                "-m",
                "benchmarks.product",
                "--data",
                str(data),
                "--schema",
                str(schema),
                "--rows",
                str(args.rows),
                "--seeds",
                str(seed),
                "--json",
                str(result),
                *[a for s in args.set for a in ("--set", s)],
            ]
            subprocess.run(cmd, check=True)
            runs.setdefault(k, []).extend(json.loads(result.read_text())["rows"])
    print(
        "| codes | seed | published | repro s | peak RSS MiB | 2-way | AUROC LR / RF / GBM |\n"
        "|---|---|---|---|---|---|---|"
    )
    for k, rows in runs.items():
        for r in rows:
            auc = " / ".join(f"{v:.3f}" for v in r.get("tstr_auroc", {}).values())
            print(
                f"| {k} | {r['seed']} | {r.get('generator', r.get('error'))} | {r['repro_s']} | {r['peak_rss_mb']} "
                f"| {r.get('2-way', '')} | {auc} |"
            )
    low, high = min(runs), max(runs)
    if low != high:
        for key in ("repro_s", "peak_rss_mb"):
            ratio = np.median([r[key] for r in runs[high]]) / np.median([r[key] for r in runs[low]])
            print(f"{key}: {high} codes / {low} codes = {ratio:.2f} (median over seeds)")


if __name__ == "__main__":
    main()
