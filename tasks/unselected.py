"""What a foreach stage (train, evaluate, check, weight @gen) writes for a generator this release did not select
(`release.select`, pipelines/selection.py): the outputs DVC expects of the stage, each saying so, and nothing
spent (no ledger row, no model, nothing under releases/).

Light on imports on purpose: flows/cli.py calls `write` before it imports the stage's task, so each of an
unselected candidate's stages costs about a second instead of the task's imports (torch, prefect, the
evaluation): the configuration loads without the generators' lifecycle (`pipelines.generators.names`), and
numpy, pandas and matplotlib load only for the tables and figures a stage writes. The tasks call it first too, so
calling one directly for an unselected generator spends nothing.
"""

from __future__ import annotations

from typing import Any

from pipelines.config import EVALUATE_PLOTS, Config, Paths
from pipelines.io import atomic_dir, atomic_path, write_json, write_parquet
from pipelines.selection import NOT_SELECTED, left_out, not_trained, selected


def write(stage: str, p: Paths, generator: str) -> dict[str, Any] | None:
    """Write `stage`'s outputs for `generator` when this release left it out (the budget stage's allocation
    entry; after train@gen, the model's `selection.json`) and return what they record; None when it is selected
    (the stage then runs)."""
    skipped = left_out(p.allocation(generator)) if stage == "train" else not_trained(p.model(generator))
    if skipped is None:
        return None
    record = {"generator": generator, "dataset": p.dataset, **skipped}
    if stage == "train":
        with atomic_dir(p.model(generator)) as out:
            write_json(out / NOT_SELECTED, skipped)
    elif stage == "evaluate":
        _evaluate_outputs(p, generator, skipped)
        record["plots"] = [f"{name}.png" for name in EVALUATE_PLOTS]
        write_json(p.metrics(generator), record)
    elif stage == "check":
        record.update(passed=False, gates=[])
        write_json(p.checks(generator), record)
    else:
        return no_weights(p, generator, "this release did not select it")
    return record


def unweighted(config: Config, p: Paths, generator: str) -> dict[str, Any] | None:
    """weight@gen's outputs when it weights nothing (no ledger row, no weights): for a generator this release left
    out (`write`), or one whose table `weights.generators` does not name; None when it gets weights (the stage
    then runs)."""
    skipped = write("weight", p, generator)
    if skipped is not None or generator in config.weighted(selected(config.generators, p.allocation)):
        return skipped
    return no_weights(p, generator, f"weights.generators ({config.weights.generators}) does not name it")


def no_weights(p: Paths, generator: str, why: str) -> dict[str, Any]:
    """weight@gen's outputs when it weights nothing: an empty `weight` column and weights.json saying why."""
    import pandas as pd

    report = {"generator": generator, "dataset": p.dataset, "weighted": False, "reason": why}
    write_parquet(p.weights(generator), pd.DataFrame({"weight": pd.Series([], dtype=float)}))
    write_json(p.weights_report(generator), report)
    return report


def _evaluate_outputs(p: Paths, generator: str, skipped: dict[str, Any]) -> None:
    """A table of no rows in the schema's columns, and a figure per declared plot that says why it is empty."""
    import numpy as np

    from pipelines.data.schema import load_schema
    from pipelines.data.transform import Encoder
    from pipelines.evaluation.figure import not_applicable

    encoder = Encoder(load_schema(p.schema))
    write_parquet(p.synthetic(generator), encoder.decode(np.zeros((0, encoder.layout.width))))
    reason = f"not trained in this release: release.select chose {', '.join(skipped['selected_generators'])}"
    for name in EVALUATE_PLOTS:
        with atomic_path(p.metrics(generator).parent / f"{name}.png") as tmp:
            tmp.write_bytes(not_applicable(f"{generator}: {name}", reason))


def skip(stage: str, config: Config, p: Paths, generator: str) -> dict[str, Any] | None:
    """What per-generator `stage` writes for `generator` when it does nothing for it (`write`; weight@gen:
    `unweighted`), None when the stage runs."""
    return unweighted(config, p, generator) if stage == "weight" else write(stage, p, generator)
