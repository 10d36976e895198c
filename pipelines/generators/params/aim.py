"""AIM's parameters (`pipelines.generators.aim`): MST's (`pipelines.generators.params.mst`) and its rounds."""
from __future__ import annotations

from typing import Any

from pipelines.generators.params.mst import DEFAULTS as MST_DEFAULTS
from pipelines.generators.params.mst import check_bins

DEFAULTS: dict[str, Any] = {
    **MST_DEFAULTS,
    "max_rounds": 40,          # K: selection slots, the round limit (wall-clock independent)
    "max_model_size": 20.0,    # MB of mbi junction-tree cells (the paper's 80 is slower on 2 cores)
    "iters": 300,              # mirror-descent iterations per round (warm-started)
    "final_iters": 2000,       # iterations of the final estimation
    "three_way": True,         # workload: all 2-way + the 3-way marginals containing the target
    "target": None,            # the target column (default: the layout's target block)
}


def check_params(params: dict[str, Any]) -> None:
    """MST's params-only rule (`check_bins`), naming the key under `aim:`."""
    check_bins(params, "aim")
