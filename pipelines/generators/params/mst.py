"""MST's parameters (`pipelines.generators.mst`); AIM's extend them (`pipelines.generators.params.aim`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from pipelines.errors import ParamError
from pipelines.parameters import Calibration, GeneratorParams, Real, calibration
from pipelines.ranges import BIN_COUNT, ints, nullable

# (n̂·ε from which it applies, the fewest numeric columns the bin count cuts, n_bins, AIM's max_rounds), rising: the
# public rule that sets MST's and AIM's bin count (and AIM's round limit) where the section leaves them null
# (`public_bins`; AIM: params/aim.py `public_settings`). Fewer bins when n̂·ε is small: each measured cell then holds
# few rows against the noise. 8 bins only where at least two numeric columns are cut (a pair of them is 64 cells,
# not 256); with one (Titanic's age) its pairs with categories are small at 16 bins, which win there
# (docs/aim-mst.md, "Settings").
SETTINGS_RULE: tuple[tuple[float, int, int, int], ...] = (
    (0.0, 0, 16, 16),
    (0.0, 2, 8, 16),
    (500.0, 0, 16, 16),
    (5000.0, 0, 32, 40),
)


class Params(GeneratorParams):
    """An `mst:` section."""

    n_bins: Annotated[int | None, nullable(BIN_COUNT)] = Field(
        None,
        description="equal-width bins per numeric column without public edges (over the schema bounds); "
        "null: the public rule from n̂·ε",
    )
    bins: dict[str, list[Real]] = Field(
        {}, description="{column: [edges in schema units]}: public edges, over the schema's own `bins`"
    )
    sub_bins: Annotated[int | None, ints(1, 64, nullable=True, why="null: the public rule")] = Field(
        None,
        description="parts each numeric bin is cut in for the 1-way measurements, whose noisy counts give the bin "
        "its shape inside (docs/aim-mst.md); 1: uniform inside the bin; null: the public rule from n̂ and σ₁",
    )
    iters: Annotated[int, ints(1, 10**6)] = Field(2000, description="mirror-descent iterations of the estimation")
    compress_above: Annotated[
        int | None, ints(2, nullable=True, why="null: never; a cap above every column's cells is the same")
    ] = Field(
        100,
        description="a column of more cells is modelled on the codes its noisy 1-way count supports (>= 3σ) "
        "and one merged cell; null: never",
    )
    calibration: Calibration = calibration(0.0)

    @field_validator("bins")
    @classmethod
    def _increasing(cls, bins: dict[str, list[float]]) -> dict[str, list[float]]:
        """Each column's edges a non-empty strictly increasing list (columns and units: checked against the
        layout when the generator is built)."""
        for column, edges in bins.items():
            if not edges or list(edges) != sorted(set(edges)):
                raise ParamError(
                    "bins",
                    f"of column '{column}' must be a strictly increasing list of numbers "
                    f"(public edges in the column's schema units), got {edges!r}",
                )
        return bins


def settings_row(n_rows: int, epsilon: float, cut: int) -> tuple[float, int, int, int]:
    """The last row of SETTINGS_RULE whose n̂·ε threshold n̂ = `n_rows` training rows at ε = `epsilon` reach and
    whose least count of cut numeric columns `cut` (``bins.equal_width_columns``) meets."""
    return [row for row in SETTINGS_RULE if n_rows * epsilon >= row[0] and cut >= row[1]][-1]


def public_bins(n_bins: int | None, n_rows: int, epsilon: float, cut: int) -> int:
    """The section's `n_bins`, or where it is null the rule's at n̂ = `n_rows`, the generator's ε and `cut` numeric
    columns without public edges: public inputs only (the schema's row count and columns, the allocated ε), so
    the choice costs no budget."""
    return int(n_bins) if n_bins is not None else settings_row(n_rows, epsilon, cut)[2]


SHAPE_ROWS = 10.0  # `public_sub_bins`: a bin is cut only where its parts would hold this many σ₁ of rows on average
SUB_BINS_CAP = 16  # the most parts the rule cuts a bin in


def public_sub_bins(sub_bins: int | None, n_rows: int, sigma: float, cells: int) -> int:
    """The section's `sub_bins`, or where it is null the rule's: the largest power of two s ≤ SUB_BINS_CAP with
    n̂/(cells·s) ≥ SHAPE_ROWS·σ₁, for n̂ = `n_rows`, the 1-way noise σ₁ = `sigma` (0: exact counts, the cap) and
    the most bins of a numeric column `cells`. Cutting a bin in s parts gives its own count √s times the noise
    (docs/aim-mst.md), which a bin of many σ₁ of rows can afford and a small one cannot. Public inputs only."""
    if sub_bins is not None:
        return int(sub_bins)
    s = 1
    while s < SUB_BINS_CAP and (sigma == 0 or n_rows / (max(cells, 1) * 2 * s) >= SHAPE_ROWS * sigma):
        s *= 2
    return s
