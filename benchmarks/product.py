"""Issue 33's harness: what a release PUBLISHES, measured through the product path.

    python -m benchmarks.product --data bundled:adult --schema schemas/adult.yaml --rows 16000 --seeds 0 1 2
    python -m benchmarks.product --data bundled:adult --schema schemas/adult.yaml --rows 16000 \
        --params params/adult-all.yaml --set release.select=all --seeds 0
    python -m benchmarks.product --data bundled:breast_cancer --schema schemas/breast_cancer.yaml --seeds 0 1 2

Per seed, a scratch project (a copy of pipelines/, tasks/, flows/, schemas/, dvc.yaml, requirements.lock, a git
and DVC repository) holds the table and the params (what `synthrelease init` writes from params.yaml for a
steward's own table, then `--params` deep-merged over it, then each `--set`), and `dvc repro` runs every stage a
steward's release runs. The seed is the steward noise key
(privacy.noise_key_file = sha256("synthrelease/benchmarks/product/<seed>")): it fixes the keyed split and every DP
draw, so a seed's run is reproducible and different seeds are independent noise draws, as separate releases are.

`--rows N`: the table is a seeded sample (`--sample-seed`, 0) of N rows of the source, used as the WHOLE table
(the schema's public `rows.count` is set to N, as a steward releasing that extract documents it); the rows of the
source outside the sample are then the test rows (never seen by the pipeline; on Adult that is 32,842 real rows).
Without `--rows` the whole source is the table and the project's keyed holdout is the test set.

Each published table (releases/<ds>/latest.json's `released`) is scored by `frontier.measure`: k-way marginal
scores (k = 1, 2, 3; 1000 = identical; numerics in 10 quantile bins of the real training rows), train on synthetic,
test on real AUROC (LR / RF / GBM), detection AUC (the project's: a random forest on the featurised modelled form), and
an independent detection AUC (`declared_detection`: gradient-boosted trees on the declared form, the published table
as it is against the source table's rows, nulls as nulls, every column as a feature, with the five columns that
give a synthetic row away most, each alone). The last lines give each table's mean and spread over the seeds.
A benchmark reads real rows: its figures are not release artefacts. A column the schema declares `derived` (never
modelled; published as the documented function of its source) is scored in its declared place like any other
(`frontier.scoring_schema`), so a schema that declares one is scored on the same columns as before.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from benchmarks.frontier import TSTR, measure, scoring_schema
from pipelines.data.declared import to_modelled
from pipelines.data.readers import read_source
from pipelines.config import EXTENDS, merged
from pipelines.data.scaffold import params_text
from pipelines.data.schema import ID_KIND, load_schema
from pipelines.data.validation import validate_table
from pipelines.evaluation.marginals import column_subsets

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("pipelines", "tasks", "flows", "schemas", "dvc.yaml", "requirements.lock")
METRICS = ("1-way", "2-way", "3-way")


def assignment(text: str) -> dict:
    """'a.b=VALUE' (VALUE as YAML) → {"a": {"b": VALUE}}."""
    path, _, value = text.partition("=")
    out: Any = yaml.safe_load(value)
    for key in reversed(path.split(".")):
        out = {key: out}
    return out


def noise_key(seed: int) -> str:
    return hashlib.sha256(f"synthrelease/benchmarks/product/{seed}".encode()).hexdigest()


def project(
    scratch: Path, name: str, schema_text: str, table: pd.DataFrame, params: dict, seed: int, schema_dir: Path
) -> Path:
    """A committed git + DVC copy of the project with the table, the schema (and the code lists its
    `categories_file`s name, from `schema_dir`) and the params (module docstring)."""
    root = scratch / "repo"
    for item in COPIED:
        src = ROOT / item
        if src.is_dir():
            shutil.copytree(src, root / item, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, root / item)
    (root / "schemas" / f"{name}.yaml").write_text(schema_text)
    for spec in (yaml.safe_load(schema_text).get("columns") or {}).values():
        if isinstance(spec, dict) and "categories_file" in spec:
            (root / "schemas" / spec["categories_file"]).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(schema_dir / spec["categories_file"], root / "schemas" / spec["categories_file"])
    (root / "source").mkdir()
    table.to_parquet(root / "source" / f"{name}.parquet", index=False)
    key = scratch / "steward.key"
    key.write_text(noise_key(seed) + "\n")
    params = merged(
        params, {"dataset": {"name": name, "source": f"source/{name}.parquet"}, "privacy": {"noise_key_file": str(key)}}
    )
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for cmd in (
        ["git", "init", "-q"],
        ["dvc", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "bench"],
    ):
        subprocess.run(cmd, cwd=root, env=environment(root), check=True, capture_output=True)
    return root


def environment(root: Path) -> dict[str, str]:
    """The scratch project's imports, this interpreter's `dvc`, no steward key from the caller's shell."""
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    env.pop("SYNTHRELEASE_NOISE_KEY", None)
    return env


def published(root: Path, name: str) -> list[dict[str, Any]]:
    """The release's published tables: generator, path, what its privacy.json / manifest say of it, and the
    steward report's utility verdict of it (the word and how many features' associations it distorts)."""
    index = json.loads((root / "releases" / name / "latest.json").read_text())
    out = []
    for entry in index["released"]:
        manifest = json.loads((root / entry["path"] / "manifest.json").read_text())
        said = json.loads((root / "reports" / name / entry["generator"] / "metrics.json").read_text())[
            "utility_verdict"
        ]
        out.append(
            {
                "generator": entry["generator"],
                "path": root / entry["path"] / "synthetic.parquet",
                "drawn_by": manifest.get("drawn_by") if manifest.get("drawn_by") != entry["generator"] else None,
                "epsilon_generator": round(entry["epsilon_generator"], 4),
                "verdict": said["verdict"],
                "distorted": said["associations"].get("features_worse_than_baseline"),
            }
        )
    return out


def run_seed(
    args: argparse.Namespace,
    seed: int,
    name: str,
    schema_text: str,
    table: pd.DataFrame,
    test: pd.DataFrame | None,
    params: dict,
    k3: list[tuple[str, ...]],
    schema_dir: Path,
) -> list[dict[str, Any]]:
    """One seed: build the scratch project, `dvc repro` (its wall time, and the peak resident memory of the largest
    process it ran, and of any earlier seed's: run one seed per call to read it alone), score every published
    table."""
    with tempfile.TemporaryDirectory(prefix=f"product-{seed}-", dir=args.scratch) as tmp:
        root = project(Path(tmp), name, schema_text, table, params, seed, schema_dir)
        t0 = time.perf_counter()
        done = subprocess.run(
            ["dvc", "repro", *([args.until] if args.until else [])],
            cwd=root,
            env=environment(root),
            capture_output=True,
            text=True,
        )
        wall = round(time.perf_counter() - t0, 1)
        peak = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)  # MiB, largest stage so far
        if done.returncode != 0:
            tail = (done.stdout + done.stderr)[-3000:]
            print(tail, file=sys.stderr)
            return [
                {"seed": seed, "error": f"dvc repro exited {done.returncode}", "repro_s": wall, "peak_rss_mb": peak}
            ]
        if args.until:  # a prepared project for benchmarks/select_sweep.py: nothing published to score
            shutil.copytree(root, args.keep / f"seed-{seed}", ignore=shutil.ignore_patterns(".dvc", ".git"))
            return []
        found = root / "data" / "discovered" / f"{name}.json"  # the schema's discovered parts, if any
        schema = load_schema(root / "schemas" / f"{name}.yaml", json.loads(found.read_text())["columns"])
        train = pd.read_parquet(root / "data" / "prepared" / name / "train.parquet")
        holdout = test if test is not None else pd.read_parquet(root / "data" / "prepared" / name / "holdout.parquet")
        rows = []
        declared = [c.name for c in schema.columns if c.kind != ID_KIND and c.name in table.columns]
        dates = [c.name for c in schema.columns if c.kind == "datetime" and c.name in declared]
        for table_ in published(root, name):
            synth = pd.read_parquet(table_.pop("path"))
            weighted = "weight" in synth.columns
            independent = declared_detection(table, synth, declared, dates, seed)
            synth = to_modelled(synth[schema.declared_names], schema)  # nulls as the pipeline models them
            scores = measure(train, holdout, synth, schema, k3, 0)
            rows.append(
                {
                    "seed": seed,
                    **table_,
                    "rows": len(synth),
                    "weight_column": weighted,
                    "repro_s": wall,
                    "peak_rss_mb": peak,
                    **{k: v for k, v in scores.items() if k != "worst_1way_tv"},
                    "detection_auc_declared": independent["auc"],
                    "detection_by_column": independent["columns"],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        if args.keep:
            shutil.copytree(root, args.keep / f"seed-{seed}", ignore=shutil.ignore_patterns(".dvc", ".git"))
        return rows


def declared_detection(
    real: pd.DataFrame, synth: pd.DataFrame, columns: list[str], dates: list[str], seed: int
) -> dict[str, Any]:
    """AUC of histogram gradient boosting telling the source table's rows `real` from the published rows `synth`,
    both in the declared form (the published table as a user reads it, nulls as NaN, a date as its timestamp, a
    category as its ordinal code in the union of both tables' values), from out-of-fold scores (5 stratified
    folds) on min(|R|, |S|) seeded rows each: on all `columns`, and on each column alone (the five highest)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    n = min(len(real), len(synth))
    both = pd.concat(
        [f[columns].sample(n=n, random_state=seed).reset_index(drop=True) for f in (real, synth)], ignore_index=True
    )
    features = pd.DataFrame(index=both.index)
    for c in columns:
        if c in dates:
            stamps = pd.to_datetime(both[c], errors="coerce", utc=True)
            features[c] = (stamps - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
            continue
        numeric = pd.api.types.is_numeric_dtype(both[c]) and not pd.api.types.is_bool_dtype(both[c])
        as_float = pd.to_numeric(both[c], errors="coerce").astype(float) if numeric else None
        if as_float is None:  # a category, a date: its ordinal code, nulls as NaN
            codes = both[c].astype("string").astype("category").cat.codes.astype(float)
            as_float = codes.where(codes >= 0)
        features[c] = as_float
    y = np.repeat([1, 0], n)

    def auc(x: pd.DataFrame) -> float:
        model = HistGradientBoostingClassifier(max_iter=100, random_state=seed)
        folds = StratifiedKFold(5, shuffle=True, random_state=seed)
        return float(roc_auc_score(y, cross_val_predict(model, x, y, cv=folds, method="predict_proba")[:, 1]))

    alone = {c: round(auc(features[[c]]), 3) for c in columns}
    return {
        "auc": round(auc(features), 3),
        "columns": dict(sorted(alone.items(), key=lambda kv: -kv[1])[:5]),
    }


def summary(rows: list[dict[str, Any]]) -> str:
    """Markdown: per published generator, mean ± sample s.d. over seeds of each score."""

    def cell(values: list[float]) -> str:
        mean = statistics.fmean(values)
        return (
            f"{mean:.3f}"
            if mean < 1.5
            else f"{mean:.1f}" + (f" ± {statistics.stdev(values):.1f}" if len(values) > 1 else "")
        )

    lines = [
        "| published table | seeds | 1-way | 2-way | 3-way | AUROC LR / RF / GBM | detection AUC (ours / declared) "
        "| repro s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ok = [r for r in rows if "error" not in r]
    for gen in dict.fromkeys(r["generator"] for r in ok):
        mine = [r for r in ok if r["generator"] == gen]
        label = gen + (
            ""
            if mine[0]["drawn_by"] is None
            else " (drawn by " + ", ".join(sorted({r["drawn_by"] for r in mine})) + ")"
        )
        auc = " / ".join(cell([r["tstr_auroc"][m] for r in mine]) for m in TSTR)
        lines.append(
            f"| {label} | {', '.join(str(r['seed']) for r in mine)} | "
            + " | ".join(cell([r[m] for r in mine]) for m in METRICS)
            + f" | {auc} | {cell([r['detection_auc'] for r in mine])} / "
            + f"{cell([r.get('detection_auc_declared', float('nan')) for r in mine])} "
            f"| {statistics.fmean(r['repro_s'] for r in mine):.0f} |"
        )
    if ok:
        lines.append(
            "| train on real (reference) | | 1000 | 1000 | 1000 | "
            + " / ".join(f"{ok[0]['trtr_auroc'][m]:.3f}" for m in TSTR)
            + " | | |"
        )
    lines += [f"| seed {r['seed']} | failed: {r['error']} | | | | | | |" for r in rows if "error" in r]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="bundled:<name> or a .csv / .parquet path")
    ap.add_argument("--schema", required=True, type=Path, help="its schema (relative to the project or absolute)")
    ap.add_argument("--rows", type=int, help="use a seeded sample of N rows as the whole table (module docstring)")
    ap.add_argument("--sample-seed", type=int, default=0)
    ap.add_argument(
        "--params", type=Path, help="YAML deep-merged over init's params (an override file's own keys: params/*.yaml)"
    )
    ap.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE", help="one override (repeatable)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0], help="steward noise keys (independent releases)")
    ap.add_argument("--subsets3", type=int, default=0, help="3-way: N seeded column subsets (0: all)")
    ap.add_argument("--scratch", type=Path, default=None, help="parent of the scratch projects (default: TMPDIR)")
    ap.add_argument("--keep", type=Path, help="copy each seed's project here (without .git / .dvc)")
    ap.add_argument("--json", type=Path, help="write the rows and the command here")
    ap.add_argument(
        "--until",
        help="run `dvc repro UNTIL` only (e.g. prepare) and keep the project (--keep): "
        "a --root for benchmarks/select_sweep.py",
    )
    args = ap.parse_args()
    if args.until and not args.keep:
        ap.error("--until keeps the project and scores nothing: give --keep")
    schema_path = args.schema if args.schema.is_absolute() else ROOT / args.schema
    name = schema_path.stem
    schema = load_schema(schema_path, pending=True)  # its discovered parts are the release's (`run_seed`)
    if args.rows and schema.discovered:
        ap.error("--rows scores the rest of the source against the schema: a schema with `discover` parts has none")
    # the configuration `synthrelease init` writes for a steward's own table (params.yaml less the generators whose
    # sections name the bundled table's columns), then the overrides
    params = yaml.safe_load(params_text((ROOT / "params.yaml").read_text(), name, "", "params.yaml"))
    if args.params:
        own = yaml.safe_load(args.params.read_text()) or {}  # an override file's own keys: its base is init's
        params = merged(params, {k: v for k, v in own.items() if k != EXTENDS})
    for text in args.set:
        params = merged(params, assignment(text))
    raw = read_source(args.data, schema, params["dataset"].get("columns", "strict")).frame
    for i, col in enumerate(schema.declared):  # identifiers are never read (`kind: id`): placeholders in their place
        if col.kind == ID_KIND and col.name not in raw.columns:  # (the privacy unit's column is read)
            raw.insert(i, col.name, [f"{col.name}-{r}" for r in range(len(raw))])
    schema_doc = yaml.safe_load(schema_path.read_text())
    test = None
    if args.rows:
        if args.rows >= len(raw):
            ap.error(f"--rows {args.rows}: the source has only {len(raw)} rows")
        table = raw.sample(n=args.rows, random_state=args.sample_seed)
        rest = raw.drop(index=table.index)
        table = table.reset_index(drop=True)
        test = validate_table(rest.reset_index(drop=True), schema, "rest of the source")[0]
        schema_doc["rows"] = {
            "count": args.rows,
            "source": f"benchmark extract: {args.rows} rows of {args.data} (sample seed {args.sample_seed})",
        }
    else:
        table = raw
    names = scoring_schema(schema).names
    k3 = (
        [
            tuple(names[i] for i in s)
            for s in column_subsets(len(names), 3, args.subsets3 or 10**9, np.random.default_rng(0))
        ]
        if len(names) >= 3
        else []
    )
    rows: list[dict[str, Any]] = []
    for seed in args.seeds:
        rows += run_seed(
            args, seed, name, yaml.safe_dump(schema_doc, sort_keys=False), table, test, params, k3, schema_path.parent
        )
    print("\n" + summary(rows))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "command": " ".join(sys.argv),
                    "table_rows": len(table),
                    "test_rows": None if test is None else len(test),
                    "rows": rows,
                },
                indent=2,
                default=str,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
