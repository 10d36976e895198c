"""The private selection's parameters (`pipelines.generators.private_selection`, `release.select: private`)."""
from __future__ import annotations

import math
from typing import Any

from pipelines.errors import ParamError

TRIALS = ("random", "each")   # Papernot & Steinke's random trials; every candidate once (private_selection.py)
DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,         # ε of the whole selection (every trial, score and the choice; Papernot & Steinke)
    "candidates": None,     # generators to choose among; null = every other generator of `generators:`
    "trials": "each",       # each: every candidate once, their events composed (the better cover for a few
                            # candidates); random: T ~ Logarithmic trials of drawn candidates (Papernot & Steinke)
    "mean_trials": 3,       # μ (trials: random): the mean number of trials T ~ Logarithmic on {1, 2, ...}
    "favour_rule": True,    # half the trials run the public rule's choice among the candidates; false: uniform
    "score_share": 0.1,     # share of each trial's ε for its DP quality score (pipelines/marginal/score.py;
                            # benchmarks/select_share.py: docs/selection.md "The score's share")
    "score_bins": 10,       # equal-width bins per numeric column (schema bounds) of the score's marginals
    "sections": {},         # the candidates' own sections (filled from params.yaml by the pipeline; leave unset)
    "seed": 0,              # public: each trial's sampling of its scored table
    "noise_seed": None,     # tests and audits only (a published noise seed voids the guarantee)
}


def check_params(params: dict[str, Any]) -> None:
    """Candidates are registered generators other than the selection itself; μ in [1, 100]; score_share in (0, 1);
    score_bins ≥ 2 (ParamError naming the key)."""
    from pipelines.generators.names import GENERATORS
    candidates = params["candidates"]
    if candidates is not None:
        if not isinstance(candidates, (list, tuple)) or not candidates:
            raise ParamError("private_selection.candidates", f"must be a non-empty list of generators, got "
                             f"{candidates!r}")
        for c in candidates:
            if c not in GENERATORS or c == "private_selection":
                raise ParamError("private_selection.candidates", f"'{c}' is not a generator it can select; use "
                                 f"{', '.join(g for g in GENERATORS if g != 'private_selection')}")
    mean = params["mean_trials"]
    if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not (1 <= mean <= 100 and math.isfinite(mean)):
        raise ParamError("private_selection.mean_trials", f"must be a number in [1, 100], got {mean!r}")
    if params["trials"] not in TRIALS:
        raise ParamError("private_selection.trials", f"must be one of {', '.join(TRIALS)}, got {params['trials']!r}")
    if not 0 < params["score_share"] < 1:
        raise ParamError("private_selection.score_share", f"must lie in (0, 1), got {params['score_share']!r}")
    if int(params["score_bins"]) < 2:
        raise ParamError("private_selection.score_bins", f"must be >= 2, got {params['score_bins']!r}")
