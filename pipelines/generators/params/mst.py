"""MST's parameters (`pipelines.generators.mst`); AIM's extend them (`pipelines.generators.params.aim`)."""
from __future__ import annotations

from typing import Any

from pipelines.errors import ParamError
from pipelines.generators.params.encoding import check_bin_count
from pipelines.generators.params.shared import shared_defaults

DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,        # target ε; "inf" measures exact marginals (non-private)
    "n_bins": 32,          # equal-width bins per numeric column without public edges (over the schema bounds)
    "bins": {},            # {column: [edges in schema units]}: public edges, over the schema's own `bins`
    "iters": 2000,         # mirror-descent iterations of the final estimation
    "compress_above": 100,  # a column of more cells is modelled on the codes its noisy 1-way count supports (≥ 3σ)
                            # and one merged cell (pipelines/marginal/compress.py); null: never
    **shared_defaults(0.0, encoding=False),  # seed, noise_seed, calibration (params/shared.py)
}


NULLABLE = ("compress_above",)   # keys whose null is meaningful (pipelines/config.py types the others by default)


def check_bins(bins: Any, section: str) -> None:
    """`bins` a mapping of column names to strictly increasing lists of numbers (ParamError naming `section`.bins);
    the columns and the edges' units are checked against the layout when the generator is built."""
    bins = bins or {}
    if not isinstance(bins, dict):
        raise ParamError(f"{section}.bins", f"must be a mapping {{column: [edges]}}, got {bins!r}")
    for column, edges in bins.items():
        ok = isinstance(edges, (list, tuple)) and edges and all(
            isinstance(e, (int, float)) and not isinstance(e, bool) for e in edges)
        if not ok or list(edges) != sorted(set(edges)):
            raise ParamError(f"{section}.bins", f"of column '{column}' must be a strictly increasing list of numbers "
                             f"(public edges in the column's schema units), got {edges!r}")


def check_params(params: dict[str, Any]) -> None:
    """The params-only rules of an `mst:` section over DEFAULTS: `n_bins` >= 2, `check_bins`, `compress_above`."""
    check_bin_count(params["n_bins"], "mst.n_bins")
    check_bins(params["bins"], "mst")
    check_compress_above(params["compress_above"], "mst")


def check_compress_above(value: Any, section: str) -> None:
    """`compress_above` null or an integer of at least 2 (ParamError naming `section`.compress_above)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 2):
        raise ParamError(f"{section}.compress_above", f"must be an integer of at least 2 or null, got {value!r}")
