"""DP-WGAN's parameters (`pipelines.generators.dpwgan`)."""
from __future__ import annotations

from typing import Any

from pipelines.generators.params.encoding import check_encoding
from pipelines.generators.params.shared import shared_defaults, shared_ranges
from pipelines.ranges import (BATCH, EPOCHS, NON_NEGATIVE, POSITIVE, STEPS, WIDTH, WIDTHS, Range, check_ranges, ints,
                              nullable)

DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,             # target ε; "inf" trains without clipping or noise
    "epochs": 60,               # T = ceil(epochs / q) critic (DP-SGD) steps ...
    "steps": None,              # ... unless steps (T) is given instead
    "max_steps": 10000,         # T ≤ max_steps when T comes from epochs (null: no cap): 60 epochs up to 21,333
                                # rows; Adult's 39,074 training rows would take 18,316 steps (compute, not privacy)
    "batch_size": 128,          # expected real batch size q·n (Poisson sampling)
    "n_critic": 2,              # critic steps per generator step
    "clip_norm": 1.0,           # per-example L2 clipping norm C
    "lr_critic": 2e-3,          # Adam, betas (0.5, 0.9), for both networks
    "lr_generator": 2e-3,
    "gp_lambda": 10.0,          # λ of the gradient penalty
    "latent_dim": 32,
    "critic_hidden": [32],      # small on purpose: DP noise grows with the number of critic parameters
    "generator_hidden": [64, 64],
    "gumbel_tau": 0.2,          # temperature of the relaxed binary / categorical output heads
    **shared_defaults(0.2),  # seed, noise_seed, calibration, encoding (params/shared.py)
}
RANGES: dict[str, Range] = {   # each numeric key's range (pipelines/ranges.py); ε: pipelines/config.py
    "epochs": EPOCHS, "steps": nullable(STEPS), "max_steps": nullable(STEPS), "batch_size": BATCH,
    "n_critic": ints(1, 100), "clip_norm": POSITIVE, "lr_critic": POSITIVE, "lr_generator": POSITIVE,
    "gp_lambda": NON_NEGATIVE, "latent_dim": WIDTH, "critic_hidden": WIDTHS, "generator_hidden": WIDTHS,
    "gumbel_tau": POSITIVE, **shared_ranges(),
}


def check_params(params: dict[str, Any]) -> None:
    """A `dpwgan:` section over DEFAULTS: RANGES and the encoding's choices (ParamError, a ValueError, naming the
    key)."""
    check_ranges("dpwgan", params, RANGES, DEFAULTS, skip_null=True)
    check_encoding(params, "dpwgan")
