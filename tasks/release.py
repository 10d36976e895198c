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
from tasks.weight import for_release, write_weighted_table

LIBRARIES = ("torch", "opacus", "dp-accounting", "prefect", "dvc", "pandas", "pyarrow", "numpy",
             "scikit-learn", "great-expectations", "SQLAlchemy")

OUTSIDE_DP = [
    "release gates: the ledger gate reads only the ledger (no data)",
    "evaluation metrics and plots (marginal distances, TSTR/TRTR AUROC, dimension-wise probability and "
    "prediction, k-way marginal TV, PCA marginal fitted on real rows, Wasserstein scores, target accuracy, the "
    "scorecard: 2-way marginals, correlation difference, MMD, W1, detection AUC, 10 classifiers, range queries) "
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
    weights = for_release(params, generator, root)  # importance weights (tasks/weight.py), None if not configured
    if weights is not None:
        hashes["weights"] = weights["hash"]
    content = hashes["params"] + hashes["model"] + hashes["synthetic"] + hashes.get("weights", "")
    release_id = f"{generator}-{sha256_text(content)[:12]}"
    delta = float(priv["delta"])
    ledger_evidence = next(g["evidence"] for g in checks["gates"] if g["name"] == "ledger")
    manifest = {
        "dataset": p.dataset, "generator": generator, "release_id": release_id,
        "audience": "internal only" if priv.get("internal_release", False) else "public",
        "guarantee": ledger_evidence["label"],
        "privacy": {"epsilon_generator": privacy["epsilon_pld"], "epsilon_generator_rdp": privacy["epsilon_rdp"],
                    "epsilon_dataset_total": ledger.spent(p.dataset, delta),
                    "epsilon_dataset_total_rdp": ledger.spent_rdp(p.dataset, delta),
                    "delta": delta, "lifetime_budget": float(priv["lifetime_epsilon"]),
                    "ledger_rows": privacy["ledger_row_ids"], "ledger_head": ledger.verify()["head"],
                    "events": privacy["events"], "run_id": privacy["run_id"]},
        "gates": checks["gates"], "rows": metrics["n_synthetic"],
        "weights": None if weights is None else weights["manifest"],
        "computed_from_real_data_outside_dp_guarantee": list(dict.fromkeys(OUTSIDE_DP + [  # risk gates share one line
            g["evidence"]["outside_dp"] for g in checks["gates"] if "outside_dp" in g["evidence"]] + (
            [] if weights is None else [weights["outside_dp"]]))),
        "hashes": hashes, "libraries": library_versions(),
    }
    rows = [{k: r[k] for k in ("seq", "run_id", "stage", "status", "event_json")}
            for r in ledger.rows(p.dataset) if r["seq"] in set(privacy["ledger_row_ids"])]
    summary = {**manifest, "privacy": {**manifest["privacy"], "ledger_rows": rows}, "gates": [{"name": g["name"], "passed": g["passed"], "evidence": g["evidence"]}
                                     for g in checks["gates"]],
               "fidelity": metrics["fidelity"], "fidelity_summary": metrics["fidelity_summary"],
               "utility": metrics["utility"], "metrics": metrics,  # evaluate's scorecard and privacy-risk attacks
               "plots": {Path(f).stem: (p.metrics(generator).parent / f).read_bytes() for f in metrics["plots"]}}
    with atomic_dir(p.releases / release_id) as out:
        if weights is None:
            shutil.copyfile(p.synthetic(generator), out / "synthetic.parquet")
        else:  # the `weight` column joined on row position
            write_weighted_table(p.synthetic(generator), weights["path"], out / "synthetic.parquet")
        write_json(out / "manifest.json", manifest)
        (out / "report.html").write_text(render_html(summary))
        (out / "report.md").write_text(render_markdown(summary))
        for name, png in summary["plots"].items():  # report.md links them; report.html embeds them
            (out / f"{name}.png").write_bytes(png)
    publish(f"{p.dataset}-{generator}-report", markdown=render_markdown({**summary, "plots": {}}),
            table=[{"gate": g["name"], "passed": g["passed"]} for g in checks["gates"]])
    return manifest


def release_table(params: dict[str, Any], root: Path, released: list[dict], refused: list[dict]) -> list[dict]:
    """One row per generator for the Prefect UI: release id (or REFUSED), gates, ε spent and remaining."""
    priv, p = params["privacy"], common.paths(params, root)
    delta, lifetime = float(priv["delta"]), float(priv["lifetime_epsilon"])
    spent = common.ledger(params, root).spent(p.dataset, delta)
    rows = []
    for r in released + refused:
        gates = read_json(p.checks(r["generator"]))["gates"]
        rows.append({"generator": r["generator"], "release_id": r.get("release_id", "REFUSED"),
                     "gates": ", ".join(f"{g['name']}:{'pass' if g['passed'] else 'FAIL'}" for g in gates),
                     "epsilon_generator": r.get("epsilon_generator"), "epsilon_spent_dataset": round(spent, 6),
                     "epsilon_remaining": round(max(lifetime - spent, 0.0), 6), "delta": delta})
    return rows


@task(name="release")
def release(params: dict[str, Any], root: Path = Path(".")) -> dict[str, Any]:
    p = common.paths(params, root)
    released, refused = [], []
    for generator in params["generators"]:
        checks = read_json(p.checks(generator))
        weights = for_release(params, generator, root)
        if checks["passed"] and (weights is None or weights["passed"]):
            m = bundle(params, generator, root)
            released.append({"generator": generator, "release_id": m["release_id"],
                             "path": str((p.releases / m["release_id"]).relative_to(root)),
                             "epsilon_generator": m["privacy"]["epsilon_generator"]})
        else:
            refused.append({"generator": generator,
                            "failed_gates": [g["name"] for g in checks["gates"] if not g["passed"]] + (
                                [] if weights is None or weights["passed"] else [weights["gate"]["name"]])})
    index = {"dataset": p.dataset, "released": released, "refused": refused,
             "hashes": {"schema": common.schema(params, root).hash(), "params": params_hash(params)}}
    write_json(p.release_index, index)
    lines = [f"- `{r['generator']}` → `{r['path']}` (ε = {r['epsilon_generator']:.3g})" for r in released]
    lines += [f"- `{r['generator']}` REFUSED: failed {', '.join(r['failed_gates'])}" for r in refused]
    publish(f"{p.dataset}-release", markdown=f"## Release of `{p.dataset}`\n\n" + "\n".join(lines),
            table=release_table(params, root, released, refused))
    return index
