"""AIM's parameters (`pipelines.generators.aim`): MST's (`pipelines.generators.params.mst`), its rounds, and the
public rule (MST's SETTINGS_RULE) that sets the bin count and the round limit from n̂ and ε when the section leaves
them null."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from pipelines.generators.params import mst
from pipelines.generators.params.mst import public_bins, settings_row
from pipelines.parameters import Real
from pipelines.ranges import ints, reals


class Params(mst.Params):
    """An `aim:` section: MST's keys and AIM's rounds."""

    iters: Annotated[int, ints(1, 10**6)] = Field(300, description="mirror-descent iterations per round (warm-started)")
    max_rounds: Annotated[int | None, ints(1, 1000, nullable=True, why="null: the public rule")] = Field(
        None, description="K: selection slots, the round limit; null: the public rule from n̂·ε"
    )
    max_model_size: Annotated[
        Real,
        reals(
            gt=0,
            le=10**4,
            why="MB of one model's cells: a larger cap lets AIM "
            "select cliques beyond the memory of the machine "
            "that estimates them",
        ),
    ] = Field(20.0, description="MB of mbi junction-tree cells")
    final_iters: Annotated[int, ints(1, 10**6)] = Field(2000, description="iterations of the final estimation")
    three_way: bool = Field(True, description="workload: all 2-way and the 3-way marginals containing the target")
    one_way_share: Annotated[Real | None, reals(gt=0, lt=1, nullable=True, why="null: σ₁ = x, the paper's form")] = (
        Field(
            0.2,
            description="the most of the zCDP budget the 1-way measurements take (σ₁ = m·x, m >= 1); null: σ₁ = x "
            "(docs/aim-mst.md)",
        )
    )
    target: str | None = Field(None, description="the target column (null: the layout's target block)")


def public_settings(params: Params, n_rows: int, epsilon: float, cut: int) -> tuple[int, int]:
    """(n_bins, max_rounds) for n̂ = `n_rows` training rows at the generator's ε with `cut` numeric columns without
    public edges: the section's own values, or, where it leaves them null, the rule's (`params.mst.SETTINGS_RULE`;
    bins as MST's, `public_bins`). Public inputs only, so the choice costs no budget. Fewer rounds when n̂·ε is
    small: the noise σ grows with the number of rounds."""
    rounds = settings_row(n_rows, epsilon, cut)[3]
    return (
        public_bins(params.n_bins, n_rows, epsilon, cut),
        params.max_rounds if params.max_rounds is not None else rounds,
    )
