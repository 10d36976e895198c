"""DP-auto-GAN's parameters (`pipelines.generators.dp_auto_gan`)."""
from __future__ import annotations

from typing import Any

from pipelines.generators.params.encoding import check_encoding
from pipelines.generators.params.shared import shared_defaults, shared_ranges
from pipelines.ranges import (BATCH, EPOCHS, MAX_BATCH, NON_NEGATIVE, POSITIVE, STEPS, WIDTH, WIDTHS, Range,
                              check_ranges, ints, nullable, reals)

DEFAULTS: dict[str, Any] = {      # Appendix C.3 (Adult) in params/adult-paper.yaml; here: small, fast
    "epsilon": 1.0,               # total target ε of both phases; "inf" trains without clipping or noise
    "autoencoder_share": 0.5,     # s: the autoencoder's share of ε (split rule, dp_auto_gan's docstring)
    # phase 1: autoencoder (Algorithm 2)
    "autoencoder_epochs": 100,    # T1 = ceil(epochs / q1) DP-SGD steps ...
    "autoencoder_steps": None,    # ... unless autoencoder_steps (T1) is given instead
    "autoencoder_max_steps": 25000,  # T1 ≤ this when T1 comes from epochs (null: no cap): 100 epochs up to 16,000
                                  # rows; Adult's 39,074 training rows would take 61,054 steps (compute)
    "autoencoder_batch_size": 64, # expected batch q1·n (paper: 64)
    "autoencoder_clip_norm": 1.0, # C1, joint clipping of encoder + decoder per-example gradients
    "autoencoder_lr": 5e-3,       # Adam, betas (0.9, 0.999) (paper)
    "autoencoder_hidden": [60],   # encoder n-60-d, decoder d-60-n (paper)
    "latent_dim": 15,             # d (paper)
    # phase 2: WGAN in latent space (Algorithms 3, 4)
    "epochs": 60,                 # T2 = ceil(epochs / q2) critic steps ...
    "steps": None,                # ... unless steps (T2) is given instead
    "max_steps": 10000,           # T2 ≤ this when T2 comes from epochs (null: no cap; as dpwgan's)
    "batch_size": 128,            # expected real batch q2·n (paper: 128)
    "n_critic": 2,                # critic steps per generator step (paper: 15)
    "clip_norm": 1.0,             # C of the critic step
    "lr_critic": 2e-3,            # Adam, betas (0.5, 0.9) (paper: RMSProp, lr 0.005)
    "lr_generator": 2e-3,
    "gp_lambda": 10.0,            # λ of the gradient penalty
    "critic_hidden": [32],        # paper: [70, 35]
    "noise_dim": 64,              # generator input z ~ N(0, I) (paper: 64)
    "generator_hidden": [64, 64], # paper: [64, 64] then d
    "gumbel_tau": 0.2,            # temperature of the relaxed binary / categorical output heads
    **shared_defaults(0.2),  # seed, noise_seed, calibration, encoding (params/shared.py)
}


RANGES: dict[str, Range] = {   # each numeric key's range (pipelines/ranges.py); ε: pipelines/config.py
    "autoencoder_share": reals(gt=0, lt=1, why="both phases read data, so both need budget"),
    "autoencoder_epochs": EPOCHS, "autoencoder_steps": nullable(STEPS), "autoencoder_max_steps": nullable(STEPS),
    "autoencoder_batch_size": BATCH, "autoencoder_clip_norm": POSITIVE, "autoencoder_lr": POSITIVE,
    "autoencoder_hidden": WIDTHS, "latent_dim": WIDTH,
    "epochs": EPOCHS, "steps": nullable(STEPS), "max_steps": nullable(STEPS),
    "batch_size": ints(2, MAX_BATCH, why="a generator step normalises its batch_size fakes with BatchNorm, "
                                         "Appendix C.3"),
    "n_critic": ints(1, 100), "clip_norm": POSITIVE, "lr_critic": POSITIVE, "lr_generator": POSITIVE,
    "gp_lambda": NON_NEGATIVE, "critic_hidden": WIDTHS, "noise_dim": WIDTH, "generator_hidden": WIDTHS,
    "gumbel_tau": POSITIVE, **shared_ranges(),
}


def check_params(params: dict[str, Any]) -> None:
    """A `dp_auto_gan:` section over DEFAULTS: RANGES and the encoding's choices (ParamError, a ValueError, naming
    the key)."""
    check_ranges("dp_auto_gan", params, RANGES, DEFAULTS, skip_null=True)
    check_encoding(params, "dp_auto_gan")
