"""Stage 6: bundle every generator whose gates passed into releases/<dataset>/<release-id>/."""
from __future__ import annotations

import platform
import shutil
from importlib.metadata import version
from pathlib import Path
from typing import Any

from prefect import task

from pipelines.config import params_hash
from pipelines.evaluation.report import render_html, render_markdown
from pipelines.io import atomic_dir, read_json, sha256_file, sha256_text, sha256_tree, write_json
from tasks import common
from tasks.artifacts import publish

LIBRARIES = ("torch", "opacus", "dp-accounting", "prefect", "dvc", "pandas", "pyarrow", "numpy",
             "scikit-learn", "great-expectations", "SQLAlchemy")

OUTSIDE_DP = [
    "release gates: the ledger gate reads only the ledger (no data)",
    "evaluation metrics and plots (marginal distances, TSTR/TRTR AUROC, dimension-wise probability and "
    "prediction, k-way marginal TV, PCA marginal fitted on real rows, Wasserstein scores, target accuracy) "
    "computed on real train/holdout rows",
    "schema validation counts (rows dropped or clipped) computed on the raw table",
]


def library_versions() -> dict[str, str]:
    return {"python": platform.python_version(), **{name: version(name) for name in LIBRARIES}}


def bundle(params: dict[str, Any], generator: str, root: Path) -> dict[str, Any]:
    """Write one release bundle; returns its manifest."""
    p, sch = common.paths(params, root), common.schema(params, root)
    priv = params["privacy"]
    privacy = read_json(p.model(generator) / "privacy.json")
    checks = read_json(p.checks(generator))
    metrics = read_json(p.metrics(generator))
    ledger = common.ledger(params, root)
    hashes = {"schema": sch.hash(), "params": params_hash(params),
              "model": sha256_tree(p.model(generator)), "synthetic": sha256_file(p.synthetic(generator))}
    release_id = f"{generator}-{sha256_text(hashes['params'] + hashes['model'] + hashes['synthetic'])[:12]}"
    delta = float(priv["delta"])
    manifest = {
        "dataset": p.dataset, "generator": generator, "release_id": release_id,
        "privacy": {"epsilon_generator": privacy["epsilon_pld"], "epsilon_generator_rdp": privacy["epsilon_rdp"],
                    "epsilon_dataset_total": ledger.spent(p.dataset, delta),
                    "epsilon_dataset_total_rdp": ledger.spent_rdp(p.dataset, delta),
                    "delta": delta, "lifetime_budget": float(priv["lifetime_epsilon"]),
                    "ledger_rows": privacy["ledger_row_ids"], "ledger_head": ledger.verify()["head"],
                    "events": privacy["events"], "run_id": privacy["run_id"]},
        "gates": checks["gates"], "rows": metrics["n_synthetic"],
        "computed_from_real_data_outside_dp_guarantee": OUTSIDE_DP + [
            g["evidence"]["outside_dp"] for g in checks["gates"] if "outside_dp" in g["evidence"]],
        "hashes": hashes, "libraries": library_versions(),
    }
    rows = [{k: r[k] for k in ("seq", "run_id", "stage", "status", "event_json")}
            for r in ledger.rows(p.dataset) if r["seq"] in set(privacy["ledger_row_ids"])]
    summary = {**manifest, "privacy": {**manifest["privacy"], "ledger_rows": rows}, "gates": [{"name": g["name"], "passed": g["passed"], "evidence": g["evidence"]}
                                     for g in checks["gates"]],
               "fidelity": metrics["fidelity"], "fidelity_summary": metrics["fidelity_summary"],
               "utility": metrics["utility"]}
    with atomic_dir(p.releases / release_id) as out:
        shutil.copyfile(p.synthetic(generator), out / "synthetic.parquet")
        write_json(out / "manifest.json", manifest)
        (out / "report.html").write_text(render_html(summary))
        (out / "report.md").write_text(render_markdown(summary))
    return manifest


@task(name="release")
def release(params: dict[str, Any], root: Path = Path(".")) -> dict[str, Any]:
    p = common.paths(params, root)
    released, refused = [], []
    for generator in params["generators"]:
        checks = read_json(p.checks(generator))
        if checks["passed"]:
            m = bundle(params, generator, root)
            released.append({"generator": generator, "release_id": m["release_id"],
                             "path": str((p.releases / m["release_id"]).relative_to(root)),
                             "epsilon_generator": m["privacy"]["epsilon_generator"]})
        else:
            refused.append({"generator": generator,
                            "failed_gates": [g["name"] for g in checks["gates"] if not g["passed"]]})
    index = {"dataset": p.dataset, "released": released, "refused": refused,
             "hashes": {"schema": common.schema(params, root).hash(), "params": params_hash(params)}}
    write_json(p.release_index, index)
    lines = [f"- `{r['generator']}` → `{r['path']}` (ε = {r['epsilon_generator']:.3g})" for r in released]
    lines += [f"- `{r['generator']}` REFUSED: failed {', '.join(r['failed_gates'])}" for r in refused]
    publish(f"{p.dataset}-release", markdown=f"## Release of `{p.dataset}`\n\n" + "\n".join(lines))
    return index
