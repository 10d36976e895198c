"""Stage 6: bundle every generator whose gates passed into releases/<dataset>/<release-id>/.

Two audiences, two artefacts (docs/architecture.md, "Public and steward artefacts"):
- the public bundle releases/<ds>/<release-id>/: synthetic.parquet, manifest.json, report.html, report.md,
  synthetic_marginals.png,
  holding only DP or public values (report.public_view is the whitelist of the report);
- the steward report reports/<ds>/steward/<release-id>/ (refused generators: steward/refused-<gen>/), internal:
  everything computed from real rows (evaluation, attacks, gate evidence, the PNGs that draw real rows).
The run's comparison page (every generator on one page, pipelines/reporting/comparison.py) has both audiences too:
releases/<ds>/runs/<run-id>/comparison.html and .md (public values only) and
reports/<ds>/steward/runs/<run-id>/steward_comparison.html and .md (internal). The run id is a content hash of what
the run released and refused, so an unchanged run rewrites the same pages; latest.json lists both.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from pipelines.config import ALLOCATION_SUMMARY, PARAMS_FILE, Config, Paths, check_noise_seeds, noise_seed_keys
from pipelines.data.declared import to_published
from pipelines.reporting import comparison
from pipelines.evaluation.outside_dp import public_verdict
from pipelines.reporting.plots import marginal_histograms
from pipelines.reporting.report import (
    comparison_html,
    comparison_markdown,
    public_html,
    public_markdown,
    render_html,
    render_markdown,
)
from pipelines.reporting.synthetic_summary import summarise_synthetic
from pipelines.data.schema import Schema
from pipelines.io import (
    ParquetColumns,
    ParquetParts,
    atomic_dir,
    parquet_row_groups,
    read_json,
    sha256_file,
    sha256_text,
    sha256_tree,
    write_json,
)
from pipelines.release.manifest import LedgerState, library_versions, public_manifest
from pipelines.selection import selected
from pipelines.weights.release import for_release, release_weights
from tasks import common
from tasks.artifacts import publish


def steward_dir(p: Paths, release_id: str) -> Path:
    """Where the internal steward report of one release (or `refused-<gen>`) lives: under reports/, never releases/."""
    return p.root / "reports" / p.dataset / "steward" / release_id


def weights_of(ctx: common.StageContext, generator: str) -> dict[str, Any] | None:
    """What the release needs of `generator`'s importance weights (`for_release`), or None when the release does not
    weight its table (then it has no weight column)."""
    p, config = ctx.paths, ctx.config
    if generator not in config.weighted(selected(config.generators, p.allocation)):
        return None
    return for_release(generator, p.weights_report(generator), p.weights(generator))


def manifest_of(ctx: common.StageContext, generator: str) -> dict[str, Any]:
    """The public manifest of `generator`'s release (pipelines/release/manifest.py) from the stages' outputs, the
    ledger and the allocation (its id is a content hash of config, model, table, weights)."""
    p, sch, config, led = ctx.paths, ctx.schema, ctx.config, ctx.ledger
    priv = config.privacy
    weights = weights_of(ctx, generator)
    population = common.population(config, sch)
    state = LedgerState(
        population,
        led.population_tables(population),
        led.spent(p.dataset, priv.delta),
        led.spent_rdp(p.dataset, priv.delta),
        priv.delta,
        priv.lifetime_epsilon,
        led.verify()["head"],
    )
    seeded = [
        k
        for k in noise_seed_keys(config.given)  # a fixed noise_seed: internal releases only (load_params)
        if k.split(".")[0] in ("dataset", generator) or (k == "weights.noise_seed" and weights is not None)
    ]
    return public_manifest(
        p.dataset,
        generator,
        privacy=read_json(p.model(generator) / "privacy.json"),
        checks=read_json(p.checks(generator)),
        metrics=read_json(p.metrics(generator)),
        weights=weights,
        hashes={
            "schema": sch.hash(),
            "params": config.hash,
            "model": sha256_tree(p.model(generator)),
            "synthetic": sha256_file(p.synthetic(generator)),
        },
        unit=sch.unit,
        max_rows=sch.max_rows,
        ledger=state,
        allocation=read_json(p.allocation(ALLOCATION_SUMMARY)),
        internal_release=priv.internal_release,
        noise_seeded=seeded,
        libraries=library_versions(),
        discovery=read_json(p.discovered) if sch.discovered else None,
    )


def steward_verdict(checks: dict[str, Any]) -> dict[str, Any] | None:
    """The verdict word for the steward report whatever the policy; its action "advise" when the utility gate did
    not decide publication (release.non_dp_gates: advise)."""
    verdict = public_verdict(checks["gates"], "refuse")
    deciding = checks.get("deciding_gates")
    return verdict if verdict is None or deciding is None or "utility" in deciding else {**verdict, "action": "advise"}


def _ledger_rows(ctx: common.StageContext, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    ids = set(manifest["privacy"]["ledger_rows"])
    return [
        {k: r[k] for k in ("seq", "run_id", "stage", "status", "event_json")}
        for r in ctx.ledger.rows(manifest["dataset"])
        if r["seq"] in ids
    ]


def steward_report(ctx: common.StageContext, generator: str, manifest: dict[str, Any], name: str) -> Path:
    """Write the internal steward report of one generator to steward_dir(p, name): steward_report.html (PNGs
    embedded), steward_report.md and the PNGs it links. Everything computed from real rows goes here, never
    into releases/. Returns the directory."""
    p = ctx.paths
    checks, metrics = read_json(p.checks(generator)), read_json(p.metrics(generator))
    weights = weights_of(ctx, generator)
    summary = {
        **manifest,
        "privacy": {**manifest["privacy"], "ledger_rows": _ledger_rows(ctx, manifest)},
        "deciding_gates": checks.get("deciding_gates"),
        "utility_verdict": steward_verdict(checks),
        "gates": [{"name": g["name"], "passed": g["passed"], "evidence": g["evidence"]} for g in checks["gates"]]
        + ([] if weights is None else [{k: weights["gate"][k] for k in ("name", "passed", "evidence")}]),
        "fidelity": metrics.get("fidelity"),
        "fidelity_summary": metrics.get("fidelity_summary"),
        "utility": metrics.get("utility"),
        "metrics": metrics,  # evaluate's scorecard and privacy-risk attacks
        "validation": read_json(p.validation_report) if p.validation_report.exists() else None,
        "weights_analysis": None
        if weights is None
        else read_json(p.metrics(generator).parent / "weights.json").get("analysis"),
        "plots": {Path(f).stem: (p.metrics(generator).parent / f).read_bytes() for f in metrics["plots"]},
    }
    markdown = render_markdown(summary)
    with atomic_dir(steward_dir(p, name)) as out:
        (out / "steward_report.html").write_text(render_html(summary))
        (out / "steward_report.md").write_text(markdown)
        for plot, png in summary["plots"].items():  # steward_report.md links them
            (out / f"{plot}.png").write_bytes(png)
    publish(
        f"{p.dataset}-{generator}-steward-report",
        markdown=render_markdown({**summary, "plots": {}}),
        table=[{"gate": g["name"], "passed": g["passed"]} for g in summary["gates"]],
        description="INTERNAL steward report: computed from real rows, not for publication",
    )
    return steward_dir(p, name)


def bundle(ctx: common.StageContext, generator: str) -> dict[str, Any]:
    """Write one public release bundle and its steward report; returns the manifest.

    The bundle holds synthetic.parquet, manifest.json and the public report (report.html, report.md and the PNG
    report.md links), whose
    only inputs are the manifest, the ledger rows, and statistics and a plot of the synthetic table alone."""
    p, sch = ctx.paths, ctx.schema
    manifest = manifest_of(ctx, generator)
    release_id = manifest["release_id"]
    synth = ParquetColumns(p.synthetic(generator))  # read a column at a time
    public = {
        **manifest,
        "privacy": {**manifest["privacy"], "ledger_rows": _ledger_rows(ctx, manifest)},
        "synthetic_summary": summarise_synthetic(synth, sch.columns),
        "plots": {"synthetic_marginals": marginal_histograms(None, synth, sch.columns)},
    }
    weights = weights_of(ctx, generator)
    # no weights configured, or weights refused: the table alone; else the `weight` column joined on row position
    column = (
        None if weights is None or not weights["passed"] else release_weights(weights["path"], p.synthetic(generator))
    )
    with atomic_dir(p.releases / release_id) as out:
        if column is None and sch.columns == sch.declared:
            shutil.copyfile(p.synthetic(generator), out / "synthetic.parquet")
        else:  # nulls, surrogate keys, dates (pipelines/data/declared.py), weights
            published_table(out / "synthetic.parquet", p.synthetic(generator), sch, column)
        write_json(out / "manifest.json", manifest)
        (out / "report.html").write_text(public_html(public))
        for plot, png in public["plots"].items():  # report.md links them
            (out / f"{plot}.png").write_bytes(png)
        (out / "report.md").write_text(public_markdown(public, bundled=public["plots"]))
        steward_report(ctx, generator, manifest, release_id)  # a failure here publishes nothing
    publish(
        f"{p.dataset}-{generator}-report",
        markdown=public_markdown({**public, "plots": {}}),
        table=[
            {"gate": g["name"], "passed": g["passed"], "data_dependent": g["data_dependent"]} for g in manifest["gates"]
        ],
        description="Public release report (DP or public values only)",
    )
    return manifest


def published_table(path: Path, synthetic: Path, sch: Schema, weights: np.ndarray | None) -> None:
    """The released table at `path`: the synthetic table at `synthetic` as the declared columns (`to_published`),
    with the `weight` column `weights` joined on row position when given, converted and written a row group at a
    time (`io.ParquetParts`: the bytes of the whole table converted at once)."""
    parts, first = ParquetParts(path), 0
    for part in parquet_row_groups(synthetic):
        if weights is not None:
            part = part.assign(weight=weights[first : first + len(part)])
        parts.add(to_published(part, sch, first))
        first += len(part)
    empty = pq.ParquetFile(synthetic).schema_arrow.empty_table().to_pandas()
    parts.close(to_published(empty if weights is None else empty.assign(weight=np.zeros(0)), sch))


def release_table(ctx: common.StageContext, released: list[dict], refused: list[dict]) -> list[dict]:
    """One row per generator for the Prefect UI: release id (or REFUSED), gates, ε spent and remaining."""
    priv, p = ctx.config.privacy, ctx.paths
    delta, lifetime = priv.delta, priv.lifetime_epsilon
    spent = ctx.ledger.spent(p.dataset, delta)
    rows = []
    for r in released + refused:
        gates = read_json(p.checks(r["generator"]))["gates"]
        rows.append(
            {
                "generator": r["generator"],
                "release_id": r.get("release_id", "REFUSED"),
                "gates": ", ".join(f"{g['name']}:{'pass' if g['passed'] else 'FAIL'}" for g in gates),
                "epsilon_generator": r.get("epsilon_generator"),
                "epsilon_spent_dataset": round(spent, 6),
                "epsilon_remaining": round(max(lifetime - spent, 0.0), 6),
                "delta": delta,
            }
        )
    return rows


def refusal(generator: str, checks: dict[str, Any]) -> dict[str, Any]:
    """What latest.json (and the run id) says of a refused generator: the names and reasons of the failed gates that
    decided publication (`checks["deciding_gates"]`). Under `release.non_dp_gates: advise` those are only the ledger
    gate and the DP release test, so the entry is a function of public metadata and DP bits alone; under `refuse`
    the row-reading gates decide too, and the manifest lists their bits as outside the DP guarantee. A gate that
    did not decide is never named, whether it passed or failed: it stays in the steward report."""
    deciding = set(checks["deciding_gates"])
    failed = [g for g in checks["gates"] if g["name"] in deciding and not g["passed"]]
    return {
        "generator": generator,
        "failed_gates": [g["name"] for g in failed],
        "reasons": [g["evidence"]["reason"] for g in failed if "reason" in g["evidence"]],
    }


RUNS = "runs"  # releases/<ds>/runs/<run-id>/ and reports/<ds>/steward/runs/<run-id>/: the run's comparison pages


def run_id(config: Config, released: list[dict], refused: list[dict]) -> str:
    """The release run's id: a content hash of the params, the released ids and each refused generator's failed
    deciding gates (`refusal`): public values and DP bits only, so the id says nothing a non-deciding gate found."""
    content = json.dumps(
        {
            "params": config.hash,
            "released": [r["release_id"] for r in released],
            "refused": [[r["generator"], r["failed_gates"]] for r in refused],
        },
        sort_keys=True,
    )
    return f"run-{sha256_text(content)[:12]}"


def comparison_pages(
    ctx: common.StageContext, run: str, manifests: dict[str, dict], released: set[str], steward: dict[str, str]
) -> dict[str, str]:
    """Write the run's comparison pages, public and steward (module docstring), for the generators of `manifests`
    (those in `released` were released); returns the run id and the pages' directories."""
    p, root = ctx.paths, ctx.root
    public_dir, internal_dir = p.releases / RUNS / run, steward_dir(p, f"{RUNS}/{run}")
    entries = []
    for generator, m in manifests.items():
        weights = weights_of(ctx, generator)
        entries.append(
            {
                "generator": generator,
                "released": generator in released,
                "manifest": m,
                "report": f"../../{m['release_id']}/report.html" if generator in released else None,
                "steward_report": f"../../{Path(steward[generator]).name}/steward_report.html",
                "metrics": read_json(p.metrics(generator)),
                "deciding": read_json(p.checks(generator)).get("deciding_gates"),
                "checks": read_json(p.checks(generator))["gates"] + ([] if weights is None else [weights["gate"]]),
            }
        )
    public = comparison.public_context(
        p.dataset,
        run,
        [{k: e[k] for k in ("generator", "released", "manifest", "report")} for e in entries if e["released"]],
    )  # nothing about refused ones
    internal = comparison.steward_context(p.dataset, run, [{**e, "report": e["steward_report"]} for e in entries])
    with atomic_dir(public_dir) as out:
        (out / "comparison.html").write_text(comparison_html(public))
        (out / "comparison.md").write_text(comparison_markdown(public))
    with atomic_dir(internal_dir) as out:
        (out / "steward_comparison.html").write_text(comparison_html(internal))
        (out / "steward_comparison.md").write_text(comparison_markdown(internal))
    publish(
        f"{p.dataset}-comparison",
        markdown=comparison_markdown(internal),
        description="INTERNAL comparison of the run's generators: computed from real rows, not for publication",
    )
    return {"run_id": run, "public": str(public_dir.relative_to(root)), "steward": str(internal_dir.relative_to(root))}


def release(config: Config, root: Path = Path(".")) -> dict[str, Any]:
    """The release stage (module docstring); writes releases/<ds>/latest.json and returns it."""
    return run(common.StageContext(config, root))


def run(ctx: common.StageContext, generator: str | None = None) -> dict[str, Any]:
    """`release` in its stage context (`generator` unused: one release stage per data set)."""
    config, p, root = ctx.config, ctx.paths, ctx.root
    # a fixed noise_seed never reaches a public bundle, whatever path the params took (load_params refuses it)
    check_noise_seeds(config.given, PARAMS_FILE, config.privacy.internal_release)
    released, refused, steward, manifests = [], [], {}, {}
    for generator in selected(config.generators, p.allocation):  # release.select's choice (pipelines/selection.py)
        checks = read_json(p.checks(generator))
        weights = weights_of(ctx, generator)
        if checks["passed"]:  # the table's own gates; a weight-gate failure withholds only the weight column
            m = manifests[generator] = bundle(ctx, generator)
            internal = steward_dir(p, m["release_id"])
            released.append(
                {
                    "generator": generator,
                    "release_id": m["release_id"],
                    "path": str((p.releases / m["release_id"]).relative_to(root)),
                    "epsilon_generator": m["privacy"]["epsilon_generator"],
                    "utility_verdict": (m["utility_verdict"] or {}).get("verdict"),
                    **(
                        {}
                        if weights is None or weights["passed"]
                        else {"weights_withheld": weights["gate"]["evidence"]["refused_because"]}
                    ),
                }
            )
        else:
            manifests[generator] = manifest_of(ctx, generator)
            internal = steward_report(ctx, generator, manifests[generator], f"refused-{generator}")
            refused.append(refusal(generator, checks))
        steward[generator] = str(internal.relative_to(root))  # internal: under reports/, never releases/
    pages = comparison_pages(
        ctx, run_id(config, released, refused), manifests, {r["generator"] for r in released}, steward
    )
    index = {
        "dataset": p.dataset,
        "released": released,
        "refused": refused,
        "steward_reports": steward,
        "comparison": pages,  # the run's comparison pages: public (releases/) and steward (reports/)
        "hashes": {"schema": ctx.schema.hash(), "params": config.hash},
        # check@gen verifies the chain still holds this row (deleted trailing rows are caught)
        "ledger_head": ctx.ledger.head(),
    }
    write_json(p.release_index, index)
    lines = [
        f"- `{r['generator']}` → `{r['path']}` (ε = {r['epsilon_generator']:.3g}; utility: "
        f"{r['utility_verdict']}{'; weights withheld' if 'weights_withheld' in r else ''})"
        for r in released
    ]
    lines += [f"- `{r['generator']}` REFUSED: failed {', '.join(r['failed_gates'])}" for r in refused]
    publish(
        f"{p.dataset}-release",
        markdown=f"## Release of `{p.dataset}`\n\n" + "\n".join(lines),
        table=release_table(ctx, released, refused),
    )
    return index
