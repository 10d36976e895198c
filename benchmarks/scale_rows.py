"""Issue 32's scale table: each stage of a release, its wall seconds and the peak resident memory of its largest
process, as the table grows from 10,000 to 1,000,000 rows, through the product path (`dvc repro` in a scratch copy
of the project, `benchmarks/product.py`'s `project`).

    python -m benchmarks.scale_rows --rows 10000 100000 1000000 --json /tmp/scale_rows.json
    python -m benchmarks.scale_rows --rows 100000 --set generators=[mst] --set release.select=all
    python -m benchmarks.scale_rows --rows 10000000 --stages validate prepare --parts 500000 \
        --set orchestration.task_runner=dask --set orchestration.dask_memory_limit=2GiB   # out of core
    python -m benchmarks.scale_rows --rows 1000000 --whole   # issue 32's measure: one `dvc repro`

The table: UCI Adult (the bundled file) resampled with replacement to N rows (seed 0) and used as the whole table,
the schema's public `rows.count` set to N, the configuration `synthrelease init` writes (params.yaml's, so
`release.select: auto` and its candidates: by default the release trains and publishes one table) with each `--set`
over it. The stages run one at a time (`dvc repro -s STAGE`, in the order `dvc repro --dry` gives), each under a
fresh wrapper process whose RUSAGE_CHILDREN peak is the largest process that stage ran (DVC's own included). A stage
that does nothing for an unselected generator still costs its process start: they are summed as one line.
`--whole` runs the release as ONE `dvc repro` instead (every stage in one DVC process, as a steward runs it; issue
32's "releases end to end by `dvc repro`"): its wall seconds, its largest process, and each stage's seconds from
DVC's "Running stage" lines. `--stages` runs only those stages (e.g. validate and prepare, the ones that run out of
core on Dask); `--parts R`
gives the table as a directory of Parquet parts of R rows (a partitioned table, read in parts) instead of one file.
A benchmark reads real rows: its figures are not release artefacts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.product import ROOT, assignment, environment, project

from pipelines.config import merged
from pipelines.data.readers import read_source
from pipelines.data.scaffold import params_text
from pipelines.data.schema import load_schema

FAMILIES = ("code", "validate", "prepare", "budget", "baseline", "train", "evaluate", "check", "weight", "release")
# one wrapper per stage: the stage's largest process (dvc, the stage it runs, a Dask cluster's workers), in KiB: the
# larger of its children's peak (processes reaped by their parents) and every descendant's RSS sampled each 0.2 s;
# and the peak of their sum (a stage's second process, runtime.beside, beside the stage's own)
WRAPPER = (
    "import resource, subprocess, sys, threading, psutil\n"
    "peak, tree, done = [0], [0], threading.Event()\n"
    "def sample():\n"
    "    while not done.wait(0.2):\n"
    "        rss = []\n"
    "        for p in psutil.Process().children(recursive=True):\n"
    "            try: rss.append(p.memory_info().rss // 1024)\n"
    "            except psutil.Error: pass\n"
    "        peak[0], tree[0] = max([peak[0], *rss]), max(tree[0], sum(rss))\n"
    "t = threading.Thread(target=sample, daemon=True); t.start()\n"
    "import json, re, time\n"
    "t0, marks, tail = time.perf_counter(), [], []\n"
    "p = subprocess.Popen(['dvc', 'repro', *sys.argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,\n"
    "                     text=True)\n"
    "for line in p.stdout:\n"
    "    tail = (tail + [line])[-200:]\n"
    "    m = re.search(r\"Running stage '([^']+)'\", line)\n"
    "    if m: marks.append([m.group(1), time.perf_counter() - t0])\n"
    "rc = p.wait()\n"
    "done.set(); t.join()\n"
    "sys.stderr.write(''.join(tail)[-8000:] if rc else '')\n"
    "print(json.dumps({'marks': marks, 'seconds': time.perf_counter() - t0,\n"
    "                  'peak_kib': max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, peak[0]),\n"
    "                  'tree_kib': tree[0]}))\n"
    "sys.exit(rc)\n"
)


def stage_order(root: Path) -> list[str]:
    """dvc.yaml's stages in an order their dependencies allow (`--dry` cannot list them: it stops at the first stage
    whose inputs do not exist yet), a per-generator stage once per configured generator."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    generators = yaml.safe_load((root / "params.yaml").read_text())["generators"]
    order = [name for name in FAMILIES if name in stages]
    assert sorted(order) == sorted(stages), f"dvc.yaml's stages {sorted(stages)}: add the new ones to FAMILIES"
    return [
        f"{name}@{g}" if "foreach" in stages[name] else name
        for name in order
        for g in (generators if "foreach" in stages[name] else [None])
    ]


def run_stages(root: Path, only: list[str] | None = None) -> list[dict[str, Any]]:
    """Each stage alone (of the families `only`, default all): wall seconds and peak resident MiB of its largest
    process."""
    out = []
    for stage in stage_order(root):
        if only and stage.partition("@")[0] not in ("code", *only):  # every stage reads the code fingerprints
            continue
        t0 = time.perf_counter()
        run = wrapped(root, ["-s", stage])
        out.append(
            {
                "stage": stage,
                "seconds": round(time.perf_counter() - t0, 1),
                "peak_mib": round(run["peak_kib"] / 1024),
                "tree_peak_mib": round(run["tree_kib"] / 1024),
            }
        )
        print(json.dumps(out[-1]), flush=True)
    return out


def wrapped(root: Path, repro_args: list[str]) -> dict[str, Any]:
    """`dvc repro *repro_args` under WRAPPER: its "Running stage" marks (stage, seconds from the start), wall
    seconds, the peak KiB of its largest process and the sampled peak of all its processes together."""
    r = subprocess.run(
        [sys.executable, "-c", WRAPPER, *repro_args], cwd=root, env=environment(root), capture_output=True, text=True
    )
    if r.returncode != 0:
        raise SystemExit(f"dvc repro {' '.join(repro_args)} failed ({r.returncode}):\n{r.stderr[-6000:]}")
    return json.loads(r.stdout.splitlines()[-1])


def run_whole(root: Path) -> list[dict[str, Any]]:
    """The release as one `dvc repro`: each stage's seconds (from its "Running stage" line to the next, the last to
    the end), each with the run's peak (one DVC process runs them all; its largest child is not per stage)."""
    run = wrapped(root, [])
    marks = run["marks"] + [["", run["seconds"]]]
    peak, tree = round(run["peak_kib"] / 1024), round(run["tree_kib"] / 1024)
    out = [
        {
            "stage": "dvc, before the first stage",
            "seconds": round(marks[0][1], 1),
            "peak_mib": peak,
            "tree_peak_mib": tree,
        }
    ]
    out += [
        {"stage": name, "seconds": round(marks[i + 1][1] - t, 1), "peak_mib": peak, "tree_peak_mib": tree}
        for i, (name, t) in enumerate(marks[:-1])
    ]
    print(
        json.dumps({"dvc_repro_seconds": round(run["seconds"], 1), "peak_mib": peak, "tree_peak_mib": tree}), flush=True
    )
    return out


def is_idle(stage: dict[str, Any], selected: set[str]) -> bool:
    """A per-generator stage of a generator the release neither trained nor weighted (it wrote 'not selected')."""
    gen = stage["stage"].partition("@")[2]
    return bool(gen) and gen not in selected


def chosen(root: Path) -> list[str]:
    """The generators the budget stage selected (all of them before it has run)."""
    from pipelines.config import Paths
    from pipelines.selection import selected

    return selected(yaml.safe_load((root / "params.yaml").read_text())["generators"], Paths("adult", root).allocation)


def partitioned(root: Path, table: Any, rows: int) -> None:
    """The project's source as a directory of Parquet parts of `rows` rows (part-00000.parquet, ...)."""
    parts = root / "source" / "adult"
    parts.mkdir()
    for i, start in enumerate(range(0, len(table), rows)):
        table.iloc[start : start + rows].to_parquet(parts / f"part-{i:05d}.parquet", index=False)
    (root / "source" / "adult.parquet").unlink()
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["dataset"]["source"] = "source/adult"
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def summary(results: dict[int, list[dict[str, Any]]], selected: dict[int, set[str]]) -> str:
    """Markdown: one row per stage (idle per-generator stages summed), one column pair per row count."""
    sizes = sorted(results)
    lines = [
        "| stage | " + " | ".join(f"{n:,} rows: s / peak MiB" for n in sizes) + " |",
        "|---|" + "---:|" * len(sizes),
    ]
    names = list(dict.fromkeys(s["stage"] for n in sizes for s in results[n] if not is_idle(s, selected[n])))
    for name in names:
        cells = []
        for n in sizes:
            hit = [s for s in results[n] if s["stage"] == name]
            cells.append(f"{hit[0]['seconds']:.1f} / {hit[0]['peak_mib']:,}" if hit else "–")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    idle = [[s for s in results[n] if is_idle(s, selected[n])] for n in sizes]
    if any(idle):
        lines.append(
            "| stages of unselected generators (each) | "
            + " | ".join(
                f"{sum(s['seconds'] for s in i):.1f} ({len(i)}) / {max((s['peak_mib'] for s in i), default=0):,}"
                for i in idle
            )
            + " |"
        )
    lines.append(
        "| **total** | "
        + " | ".join(
            f"**{sum(s['seconds'] for s in results[n]):.1f} / {max(s['peak_mib'] for s in results[n]):,}**"
            for n in sizes
        )
        + " |"
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE", help="one override (repeatable)")
    ap.add_argument("--seed", type=int, default=0, help="the steward noise key (benchmarks/product.py)")
    ap.add_argument("--scratch", type=Path, default=None, help="parent of the scratch projects (default: TMPDIR)")
    ap.add_argument("--json", type=Path, help="write the per-stage figures and the command here")
    ap.add_argument("--stages", nargs="+", choices=FAMILIES, help="run only these stages (default: the release)")
    ap.add_argument("--parts", type=int, help="give the table as a directory of Parquet parts of this many rows")
    ap.add_argument("--whole", action="store_true", help="one `dvc repro` of the release instead of stage by stage")
    ap.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep each project as KEEP/N (rerun or profile a stage there: cd KEEP/N; dvc repro -s -f ...)",
    )
    args = ap.parse_args()
    schema_path = ROOT / "schemas" / "adult.yaml"
    schema = load_schema(schema_path)
    params = yaml.safe_load(params_text((ROOT / "params.yaml").read_text(), "adult", "", "params.yaml"))
    for text in args.set:
        params = merged(params, assignment(text))
    source = read_source("bundled:adult", schema, "strict").frame
    results: dict[int, list[dict[str, Any]]] = {}
    selected: dict[int, set[str]] = {}
    for n in args.rows:
        doc = yaml.safe_load(schema_path.read_text())
        doc["rows"] = {"count": n, "source": f"benchmark: bundled:adult resampled with replacement to {n} rows"}
        table = source.sample(n=n, replace=True, random_state=0).reset_index(drop=True)
        with tempfile.TemporaryDirectory(prefix=f"scale-{n}-", dir=args.scratch) as tmp:
            where = Path(tmp) if args.keep is None else args.keep / str(n)
            where.mkdir(parents=True, exist_ok=True)
            root = project(
                where, "adult", yaml.safe_dump(doc, sort_keys=False), table, params, args.seed, schema_path.parent
            )
            if args.parts:
                partitioned(root, table, args.parts)
            del table
            load = os.getloadavg()
            results[n] = run_whole(root) if args.whole else run_stages(root, args.stages)
            index = root / "releases" / "adult" / "latest.json"
            selected[n] = (
                {r["generator"] for r in json.loads(index.read_text())["released"]}
                if index.exists()
                else set(chosen(root))
            )  # no release stage ran: the budget stage's choice
            print(
                f"{n:,} rows: published {sorted(selected[n])}; load before {load}, after {os.getloadavg()}", flush=True
            )
    print("\n" + summary(results, selected))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "command": " ".join(sys.argv),
                    "cpus": os.cpu_count(),
                    "results": {str(n): r for n, r in results.items()},
                    "published": {str(n): sorted(s) for n, s in selected.items()},
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
