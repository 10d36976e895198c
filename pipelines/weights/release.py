"""What the release of importance weights needs: the weight gate, the public manifest entry, and the released
table with its `weight` column (paper §3.5: release only when PSIS k̂ ≤ the bound)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pipelines.config import Config, Paths
from pipelines.errors import InputError
from pipelines.io import ParquetColumns, read_json, sha256_file
from pipelines.gates.release import GateResult
from pipelines.selection import selected


def weight_gate(khat: float, khat_bound: float, estimator: str, private: bool, internal: bool) -> GateResult:
    """The `importance_weights` gate: passes when PSIS k̂ ≤ `khat_bound` (the paper's reliability criterion) and
    the estimator is DP, or `internal` (privacy.internal_release) allows a non-private one; the evidence names
    every reason for a refusal."""
    return GateResult("importance_weights", bool(khat <= khat_bound) and (private or internal), {
        "khat": khat, "khat_bound": khat_bound, "private": private, "internal_release": internal,
        "label": "DP" if private else ("NON-PRIVATE (internal release only)" if internal else "NON-PRIVATE: refused"),
        "refused_because": [why for bad, why in (
            (khat > khat_bound, f"PSIS k̂ = {khat:.3g} > {khat_bound}: the synthetic distribution misses "
                                f"regions of the real one; importance-weighted estimates are unreliable"),
            (not private and not internal, f"{estimator} is not differentially private (set "
                                           f"privacy.internal_release: true for an internal release only)")) if bad]})


def manifest_entry(report: dict[str, Any]) -> dict[str, Any]:
    """The public manifest's `weights` entry, from the weight stage's report (weights.json): DP or public values
    only (estimator, ε, ledger rows, ESS and k̂ of the DP weights, the gate's bound and label)."""
    gate = report["gate"]
    return {"estimator": report["estimator"], "epsilon": report["epsilon"], "delta": report["delta"],
            "ledger_rows": report["ledger_row_ids"], "run_id": report["run_id"],
            "events": report["plan"]["events"], "n_released": report["n_released"],
            "ess": report["ess"], "khat": report["khat"], "khat_bound": gate["evidence"]["khat_bound"],
            "tempering": report["tempering"], "psis": report["psis"],
            "calibration": report["calibration"], "label": gate["evidence"]["label"]}


def release_weights(weights_file: Path, table_file: Path) -> np.ndarray:
    """The `weight` column of the released table, joined on row position to the synthetic table at `table_file`:
    the weights file's column, checked against the table's row count and column names (read from its footer; the
    files name the culprit of an InputError)."""
    table = ParquetColumns(table_file)
    weights = ParquetColumns(weights_file)["weight"].to_numpy(dtype=float)
    if len(table) != len(weights):
        raise InputError(f"the weights file has {len(weights)} rows for {len(table)} synthetic rows.",
                         file=str(weights_file), fix="re-run the weight stage after the evaluate stage.")
    if "weight" in table.columns:
        raise InputError("the synthetic table already has a 'weight' column.", file=str(table_file),
                         fix="rename that schema column; 'weight' is reserved for importance weights.")
    return weights


def for_release(config: Config, generator: str, root: Path) -> dict[str, Any] | None:
    """What the release stage needs of a generator's weights, or None when weights are not configured for it
    (then the release has no weight column): the gate result, the manifest entry and the weights file."""
    p = Paths(config.dataset.name, Path(root))
    if generator not in config.weighted(selected(p, config.generators)):
        return None
    report = read_json(p.weights_report(generator))
    path = p.weights(generator)
    if sha256_file(path) != report["hashes"]["weights"]:
        raise InputError("the weights file does not match its report (a partial or stale run).", file=str(path),
                         fix=f"re-run 'synthrelease stage weight --generator {generator}'.")
    gate = report["gate"]
    return {"passed": gate["passed"], "gate": gate, "path": path, "hash": report["hashes"]["weights"],
            "outside_dp": report["analysis"]["outside_dp"], "manifest": manifest_entry(report)}
