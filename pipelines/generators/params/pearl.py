"""PEARL's parameters (`pipelines.generators.pearl`; appendix H of the paper unless noted)."""
from __future__ import annotations

from typing import Any

from pipelines.generators.params.encoding import check_encoding
from pipelines.generators.params.shared import shared_defaults, shared_ranges
from pipelines.ranges import BATCH, MAX_STEPS, POSITIVE, WIDTH, WIDTHS, Range, check_ranges, ints, reals

DEFAULTS: dict[str, Any] = {      # appendix H (tabular) unless noted
    "epsilon": 1.0,               # target ε of both releases together; "inf" releases them without noise
    "frequencies": 1000,          # k
    "aux_share": 0.5,             # the mean distance's share of the budget (μ²); paper: equal
    "critic": True,               # False: the "w/o critic" ablation (uniform weights, eq. 7)
    "critic_min_ess": 0.5,        # the critic's set P: weights keep an effective sample size ≥ this·k (ours)
    "steps": 8000,                # training iterations (post-processing)
    "batch_size": 1100,           # generated rows per step, split evenly over the classes
    "lr": 0.01,                   # Adam, generator
    "lr_critic": 0.01,            # Adam, critic
    "latent_dim": 32,             # not in the paper
    "hidden": [128, 128],         # widths of the two fc-bn-relu layers (not in the paper)
    **shared_defaults(0.2),  # seed, noise_seed, calibration, encoding (params/shared.py)
}


RANGES: dict[str, Range] = {   # each numeric key's range (pipelines/ranges.py); ε: pipelines/config.py
    "frequencies": ints(1, 10**5, why="the noise per embedding coordinate grows with the square root of k"),
    "aux_share": reals(gt=0, lt=1, why="the mean distance's share of the budget; paper: 0.5"),
    "critic_min_ess": reals(ge=0, le=1, why="a fraction of the k frequencies"),
    "steps": ints(0, MAX_STEPS, why="training is post-processing: 0 keeps the initial generator"),
    "batch_size": BATCH, "lr": POSITIVE, "lr_critic": POSITIVE, "latent_dim": WIDTH, "hidden": WIDTHS,
    **shared_ranges(),
}


def check_params(params: dict[str, Any]) -> None:
    """A `pearl:` section over DEFAULTS: RANGES and the encoding's choices (ParamError, a ValueError, naming the
    key)."""
    check_ranges("pearl", params, RANGES, DEFAULTS, skip_null=True)
    check_encoding(params, "pearl")
