"""MST's parameters (`pipelines.generators.mst`); AIM's extend them (`pipelines.generators.params.aim`)."""
from __future__ import annotations

from typing import Any

from pipelines.errors import ParamError
from pipelines.generators.params.encoding import BIN_COUNT
from pipelines.generators.params.shared import shared_defaults, shared_ranges
from pipelines.ranges import Range, check_ranges, ints, nullable

# (n̂·ε from which it applies, the fewest numeric columns the bin count cuts, n_bins, AIM's max_rounds), rising: the
# public rule that sets MST's and AIM's bin count (and AIM's round limit) where the section leaves them null
# (`public_bins`; AIM: params/aim.py `public_settings`). Fewer bins when n̂·ε is small: each measured cell then holds
# few rows against the noise. 8 bins only where at least two numeric columns are cut (a pair of them is 64 cells,
# not 256); with one (Titanic's age) its pairs with categories are small at 16 bins, which win there
# (docs/aim-mst.md, "Settings").
SETTINGS_RULE: tuple[tuple[float, int, int, int], ...] = (
    (0.0, 0, 16, 16), (0.0, 2, 8, 16), (500.0, 0, 16, 16), (5000.0, 0, 32, 40))

DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,        # target ε; "inf" measures exact marginals (non-private)
    "n_bins": None,        # equal-width bins per numeric column without public edges (over the schema bounds);
                           # null: `public_bins` (n̂·ε, public)
    "bins": {},            # {column: [edges in schema units]}: public edges, over the schema's own `bins`
    "iters": 2000,         # mirror-descent iterations of the final estimation
    "compress_above": 100,  # a column of more cells is modelled on the codes its noisy 1-way count supports (≥ 3σ)
                            # and one merged cell (pipelines/marginal/compress.py); null: never
    **shared_defaults(0.0, encoding=False),  # seed, noise_seed, calibration (params/shared.py)
}
RANGES: dict[str, Range] = {   # each numeric key's range (pipelines/ranges.py); ε: pipelines/config.py
    "n_bins": nullable(BIN_COUNT), "iters": ints(1, 10**6),
    "compress_above": ints(2, nullable=True, why="null: never; a cap above every column's cells is the same"),
    **shared_ranges(encoding=False),
}


def settings_row(n_rows: int, epsilon: float, cut: int) -> tuple[float, int, int, int]:
    """The last row of SETTINGS_RULE whose n̂·ε threshold n̂ = `n_rows` training rows at ε = `epsilon` reach and
    whose least count of cut numeric columns `cut` (``bins.equal_width_columns``) meets."""
    return [row for row in SETTINGS_RULE if n_rows * epsilon >= row[0] and cut >= row[1]][-1]


def public_bins(n_bins: int | None, n_rows: int, epsilon: float, cut: int) -> int:
    """The section's `n_bins`, or where it is null the rule's at n̂ = `n_rows`, the generator's ε and `cut` numeric
    columns without public edges: public inputs only (the schema's row count and columns, the allocated ε), so
    the choice costs no budget."""
    return int(n_bins) if n_bins is not None else settings_row(n_rows, epsilon, cut)[2]


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
    """The params-only rules of an `mst:` section over DEFAULTS: RANGES and `check_bins` (ParamError naming the
    key)."""
    check_ranges("mst", params, RANGES, DEFAULTS, skip_null=True)
    check_bins(params["bins"], "mst")
