"""Stage 0: private domain discovery (pipelines/data/discovery.py) of the schema's `<key>: discover` parts.

A paid step (`paid`): reserved in the ledger before a row is read, noise bound to the step, the result kept in a
steward-side receipt (`Paths.discovery`, not a DVC output) that every later release reuses for free while its
ledger rows stand. The receipt's inputs are the schema's requests, their ε and δ and the privacy unit, not the
rows: a domain once discovered is reused on a refreshed table as documentation is (the noise is bound to the rows
read as well, so a discovery run again on other rows draws other noise); a value new to it goes to the column's
"(other)" cell (categories) or its on_invalid policy (bounds). To discover again, delete the receipt (the
new spend is charged like the first). The stage's output (`Paths.discovered`, what validate reads) is the
receipt's domain; a schema without a request gets an empty one and spends nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.config import Config
from pipelines.data import units
from pipelines.data.discovery import check_found, discover, planned_events, steps
from pipelines.data.header import read_header
from pipelines.data.readers import check_columns, read_source
from pipelines.io import sha256_text, write_json
from pipelines.privacy.ledger import LedgerSession
from pipelines.privacy.noise import NoiseSource, binding_facts
from pipelines.privacy.paid import Binding, Receipt, paid
from tasks import common
from tasks.artifacts import publish
from tasks.progress import run_logger


def found_text(found: dict[str, Any]) -> str:
    """One column's discovered parts in words, e.g. "12 categories + (other)", "upper 4096, 7 atoms"."""
    parts = [f"{len(found['categories'])} categories + (other)"] if "categories" in found else []
    parts += [f"{k} {found[k]:g}" for k in ("lower", "upper") if k in found]
    parts += [step_text(found["step"])] if "step" in found else []
    if "rounding" in found:
        rounded = sum(bool(shares) for _, shares in found["rounding"] or [])
        parts.append(f"coarser grids at {rounded} magnitude{'s' * (rounded != 1)}" if rounded else "no coarser grids")
    return ", ".join(parts + ([f"{len(found['atoms'])} atoms"] if "atoms" in found else []))


def step_text(step: float | list[list[float]] | None) -> str:
    """A discovered step in words: "step 25", "step 0.1 below 1, 1 from 1", "no step"."""
    if step is None:
        return "no step"
    pieces = [[0.0, step]] if isinstance(step, (int, float)) else step
    words = [
        f"{s:g}" + (f" from {f:g}" if i else "") + (f" below {pieces[i + 1][0]:g}" if i + 1 < len(pieces) else "")
        for i, (f, s) in enumerate(pieces)
    ]
    return "step " + ", ".join(words)


def discover_stage(config: Config, root: Path = Path(".")) -> dict[str, Any]:
    """The discover stage (module docstring); writes `Paths.discovered` and returns its content."""
    return run(common.StageContext(config, root))


def run(ctx: common.StageContext, generator: str | None = None) -> dict[str, Any]:
    """`discover_stage` in its stage context (`generator` unused: one discover stage per data set)."""
    config, p, sch = ctx.config, ctx.paths, ctx.pending_schema
    priv = config.privacy
    common.check_against_schema(config, sch)  # every configuration error before any budget is spent
    source = ctx.source
    if not source.startswith("bundled:"):  # the table's header against the schema before anything is written
        check_columns(read_header(source), sch, source, config.dataset.columns)
    plan = steps(sch, priv.discovery_epsilon, priv.delta) if sch.discovered else []
    if not plan:
        domain: dict[str, Any] = {"columns": {}}
        write_json(p.discovered, domain)
        return domain
    requested = {s.column for s in plan}
    inputs = sha256_text(
        json.dumps(
            {
                "requests": [list(r) for r in sch.discovered],
                "columns": {c.name: c.kind for c in sch.declared if c.name in requested},
                "epsilon": priv.discovery_epsilon,
                "delta": priv.delta,
                **common.unit_facts(sch),
            },
            sort_keys=True,
        )
    )

    read: dict[str, str] = {}  # the hash of the rows read: the noise is bound to them, never reused on other rows

    def compute(session: LedgerSession, noise: NoiseSource) -> dict[str, Any]:
        columns = replace(
            sch,
            declared=tuple(
                c for c in sch.declared if c.name in requested or c.name == getattr(sch.unit, "column", None)
            ),
            columns=tuple(c for c in sch.columns if c.name in requested),
        )  # the discovered columns (and the unit's id) alone are read
        frame, names = read_source(source, columns, "schema").frame, None
        if sch.unit is not None:
            frame, names, _ = units.bound(
                frame, sch.unit, [c.name for c in columns.read], common.split_key(config, ctx.root)[0]
            )
        read["rows"] = hashlib.sha256(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes()).hexdigest()
        streams = noise.streams(private=True, seed=0)
        domain, events = discover(frame, names, sch, plan, streams.numpy)
        session.record(events)
        return domain

    binding = Binding(
        ctx.noise_key,
        f"{p.dataset}/discover",
        lambda: {"requests": inputs, "rows": read["rows"]},  # at the first draw, after the rows are read
        binding_facts(common.hashes(config, "discover", sch), priv.discovery_epsilon, priv.delta),
        config.dataset.noise_seed,
    )
    result = paid(
        ctx.ledger,
        ctx.account("discover", "discover"),
        binding,
        compute,
        planned=planned_events(plan, sch),
        receipt=Receipt(
            p.discovery, inputs, lambda d, session: {"inputs": inputs, **d, "ledger_row_ids": list(session.row_ids)}
        ),
    )
    domain = result.value
    check_found(domain, sch, str(p.schema))
    write_json(p.discovered, domain)
    found = "; ".join(f"{c}: {found_text(v)}" for c, v in domain["columns"].items())
    run_logger().info(
        "discover: %s (ε = %g in all%s; steward-side file %s).",
        found,
        priv.discovery_epsilon,
        ", reused: nothing spent" if result.reused else "",
        p.discovery,
    )
    publish(f"{p.dataset}-discovery", markdown=f"## Discovered domain of `{p.dataset}`\n\n{found}")
    return domain
