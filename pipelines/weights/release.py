"""What the release of importance weights needs beside its gate (pipelines/gates/weights.py): the public manifest
entry and the released table with its `weight` column (paper §3.5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pipelines.errors import InputError
from pipelines.io import ParquetColumns, read_json, sha256_file


def manifest_entry(report: dict[str, Any]) -> dict[str, Any]:
    """The public manifest's `weights` entry, from the weight stage's report (weights.json): DP or public values
    only (estimator, ε, ledger rows, ESS and k̂ of the DP weights, the gate's bound and label)."""
    gate = report["gate"]
    return {
        "estimator": report["estimator"],
        "epsilon": report["epsilon"],
        "delta": report["delta"],
        "ledger_rows": report["ledger_row_ids"],
        "run_id": report["run_id"],
        "events": report["plan"]["events"],
        "n_released": report["n_released"],
        "ess": report["ess"],
        "khat": report["khat"],
        "khat_bound": gate["evidence"]["khat_bound"],
        "tempering": report["tempering"],
        "psis": report["psis"],
        "calibration": report["calibration"],
        "label": gate["evidence"]["label"],
    }


def release_weights(weights_file: Path, table_file: Path) -> np.ndarray:
    """The `weight` column of the released table, joined on row position to the synthetic table at `table_file`:
    the weights file's column, checked against the table's row count and column names (read from its footer; the
    files name the culprit of an InputError)."""
    table = ParquetColumns(table_file)
    weights = ParquetColumns(weights_file)["weight"].to_numpy(dtype=float)
    if len(table) != len(weights):
        raise InputError(
            f"the weights file has {len(weights)} rows for {len(table)} synthetic rows.",
            file=str(weights_file),
            fix="re-run the weight stage after the evaluate stage.",
        )
    if "weight" in table.columns:
        raise InputError(
            "the synthetic table already has a 'weight' column.",
            file=str(table_file),
            fix="rename that schema column; 'weight' is reserved for importance weights.",
        )
    return weights


def for_release(generator: str, report_path: Path, weights_path: Path) -> dict[str, Any]:
    """What the release stage needs of the weights of a generator the release weights (`Config.weighted`): the gate
    result, the manifest entry and the weights file (`weights_path`), from the weight stage's report at
    `report_path`, checked against the file."""
    report = read_json(report_path)
    if sha256_file(weights_path) != report["hashes"]["weights"]:
        raise InputError(
            "the weights file does not match its report (a partial or stale run).",
            file=str(weights_path),
            fix=f"re-run 'synthrelease stage weight --generator {generator}'.",
        )
    gate = report["gate"]
    return {
        "passed": gate["passed"],
        "gate": gate,
        "path": weights_path,
        "hash": report["hashes"]["weights"],
        "outside_dp": report["analysis"]["outside_dp"],
        "manifest": manifest_entry(report),
    }
