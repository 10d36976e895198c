"""AIM's parameters (`pipelines.generators.aim`): MST's (`pipelines.generators.params.mst`), its rounds, and the
public rule (MST's SETTINGS_RULE) that sets the bin count and the round limit from n̂ and ε when the section leaves
them null."""
from __future__ import annotations

from typing import Any

from pipelines.generators.params.mst import DEFAULTS as MST_DEFAULTS
from pipelines.generators.params.mst import RANGES as MST_RANGES
from pipelines.generators.params.mst import check_bins, public_bins, settings_row
from pipelines.ranges import Range, check_ranges, ints, reals

DEFAULTS: dict[str, Any] = {
    **MST_DEFAULTS,
    "max_rounds": None,        # K: selection slots, the round limit (wall-clock independent); null: `public_settings`
    "max_model_size": 20.0,    # MB of mbi junction-tree cells (the paper's 80 is slower on 2 cores)
    "iters": 300,              # mirror-descent iterations per round (warm-started)
    "final_iters": 2000,       # iterations of the final estimation
    "three_way": True,         # workload: all 2-way + the 3-way marginals containing the target
    "one_way_share": 0.2,      # the most of the zCDP budget the 1-way measurements take (σ₁ = m·x, m ≥ 1);
                               # null: σ₁ = x (the paper's form; docs/aim-mst.md "The 1-way share")
    "target": None,            # the target column (default: the layout's target block)
}
RANGES: dict[str, Range] = {   # each numeric key's range (pipelines/ranges.py); ε: pipelines/config.py
    **MST_RANGES,
    "max_rounds": ints(1, 1000, nullable=True, why="null: the public rule"),
    "max_model_size": reals(gt=0, le=10**4, why="MB of one model's cells: a larger cap lets AIM select cliques "
                                                "beyond the memory of the machine that estimates them"),
    "iters": ints(1, 10**6), "final_iters": ints(1, 10**6),
    "one_way_share": reals(gt=0, lt=1, nullable=True, why="null: σ₁ = x, the paper's form"),
}


def public_settings(params: dict[str, Any], n_rows: int, epsilon: float, cut: int) -> tuple[int, int]:
    """(n_bins, max_rounds) for n̂ = `n_rows` training rows at the generator's ε with `cut` numeric columns without
    public edges: the section's own values, or, where it leaves them null, the rule's (`params.mst.SETTINGS_RULE`;
    bins as MST's, `public_bins`). Public inputs only, so the choice costs no budget. Fewer rounds when n̂·ε is
    small: the noise σ grows with the number of rounds."""
    rounds = settings_row(n_rows, epsilon, cut)[3]
    return (public_bins(params["n_bins"], n_rows, epsilon, cut),
            int(params["max_rounds"]) if params["max_rounds"] is not None else rounds)


def check_params(params: dict[str, Any]) -> None:
    """An `aim:` section over DEFAULTS: RANGES and MST's `bins` rule (ParamError naming the key under `aim:`)."""
    check_ranges("aim", params, RANGES, DEFAULTS, skip_null=True)
    check_bins(params["bins"], "aim")
