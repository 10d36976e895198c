"""AIM's parameters (`pipelines.generators.aim`): MST's (`pipelines.generators.params.mst`), its rounds, and the
public rule (MST's SETTINGS_RULE) that sets the bin count and the round limit from n̂ and ε when the section leaves
them null."""
from __future__ import annotations

from typing import Any

from pipelines.errors import ParamError
from pipelines.generators.params.encoding import check_bin_count
from pipelines.generators.params.mst import DEFAULTS as MST_DEFAULTS
from pipelines.generators.params.mst import NULLABLE as MST_NULLABLE
from pipelines.generators.params.mst import check_bins, check_compress_above, public_bins, settings_row

NULLABLE = (*MST_NULLABLE, "one_way_share")   # keys whose null is meaningful: MST's and the 1-way share
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

def public_settings(params: dict[str, Any], n_rows: int, epsilon: float, cut: int) -> tuple[int, int]:
    """(n_bins, max_rounds) for n̂ = `n_rows` training rows at the generator's ε with `cut` numeric columns without
    public edges: the section's own values, or, where it leaves them null, the rule's (`params.mst.SETTINGS_RULE`;
    bins as MST's, `public_bins`). Public inputs only, so the choice costs no budget. Fewer rounds when n̂·ε is
    small: the noise σ grows with the number of rounds."""
    rounds = settings_row(n_rows, epsilon, cut)[3]
    return (public_bins(params["n_bins"], n_rows, epsilon, cut),
            int(params["max_rounds"]) if params["max_rounds"] is not None else rounds)


def check_params(params: dict[str, Any]) -> None:
    """MST's `bins` rule and, when given, `n_bins` >= 2, `max_rounds` >= 1 and 0 < `one_way_share` < 1 (ParamError
    naming the key under `aim:`)."""
    if params["n_bins"] is not None:
        check_bin_count(params["n_bins"], "aim.n_bins")
    check_bins(params["bins"], "aim")
    check_compress_above(params["compress_above"], "aim")
    share = params["one_way_share"]
    if share is not None and (isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1):
        raise ParamError("aim.one_way_share", f"must be a number strictly between 0 and 1 or null (σ₁ = x, the "
                         f"paper's form), got {share!r}")
    rounds = params["max_rounds"]
    if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1):
        raise ParamError("aim.max_rounds", f"must be an integer >= 1 or null (the public rule), got {rounds!r}")
