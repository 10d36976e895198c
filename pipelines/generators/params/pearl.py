"""PEARL's parameters (`pipelines.generators.pearl`; appendix H of the paper unless noted)."""
from __future__ import annotations

from typing import Any

from pipelines.errors import ParamError
from pipelines.generators.params.encoding import check_encoding
from pipelines.generators.params.shared import shared_defaults

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


def check_params(params: dict[str, Any]) -> None:
    """The value ranges of a `pearl:` section over DEFAULTS (ParamError, a ValueError, naming the key)."""
    check_encoding(params, "pearl")
    if not 0 < float(params["aux_share"]) < 1:
        raise ParamError("pearl.aux_share", f"must lie strictly between 0 and 1 (the mean distance's share of the "
                         f"budget; paper: 0.5), got {params['aux_share']}")
    if not 0 <= float(params["critic_min_ess"]) <= 1:
        raise ParamError("pearl.critic_min_ess", f"must lie in [0, 1] (a fraction of the k frequencies), "
                         f"got {params['critic_min_ess']}")
    for key, least in (("frequencies", 1), ("steps", 0), ("batch_size", 1)):
        if int(params[key]) < least:
            raise ParamError(f"pearl.{key}", f"must be >= {least}, got {params[key]}")
