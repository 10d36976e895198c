"""The private selection's parameters (`pipelines.generators.private_selection`, `release.select: private`)."""
from __future__ import annotations

from typing import Any

from pipelines.errors import ParamError
from pipelines.generators.params.encoding import BIN_COUNT
from pipelines.ranges import NOISE_SEED, OPEN_FRACTION, SEED, Range, check_ranges, reals

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
RANGES: dict[str, Range] = {   # each numeric key's range (pipelines/ranges.py); ε: pipelines/config.py
    "mean_trials": reals(ge=1, le=100), "score_share": OPEN_FRACTION, "score_bins": BIN_COUNT, "seed": SEED,
    "noise_seed": NOISE_SEED,
}


def check_params(params: dict[str, Any]) -> None:
    """RANGES; candidates are registered generators other than the selection itself; a known `trials` (ParamError
    naming the key)."""
    from pipelines.generators.names import GENERATORS
    check_ranges("private_selection", params, RANGES, DEFAULTS, skip_null=True)
    candidates = params["candidates"]
    if candidates is not None:
        if not isinstance(candidates, (list, tuple)) or not candidates:
            raise ParamError("private_selection.candidates", f"must be a non-empty list of generators, got "
                             f"{candidates!r}")
        for c in candidates:
            if c not in GENERATORS or c == "private_selection":
                raise ParamError("private_selection.candidates", f"'{c}' is not a generator it can select; use "
                                 f"{', '.join(g for g in GENERATORS if g != 'private_selection')}")
    if params["trials"] not in TRIALS:
        raise ParamError("private_selection.trials", f"must be one of {', '.join(TRIALS)}, got {params['trials']!r}")
