"""IW-MMD-GAN's parameters (`pipelines.generators.iw_mmd_gan`; chapter 4 of the Diesendruck thesis unless noted)."""
from __future__ import annotations

from typing import Any

from pipelines.errors import ParamError
from pipelines.generators.params.encoding import check_encoding
from pipelines.generators.params.shared import shared_defaults, shared_ranges
from pipelines.ranges import (MAX_BATCH, MAX_STEPS, NON_NEGATIVE, POSITIVE, WIDTH, WIDTHS, Range, check_ranges, each,
                              ints, reals)

ESTIMATORS = ("uniform", "iw", "sniw", "miw", "id")   # Table 3.1 (`pipelines.generators.iw_estimators`)
PRIVATE_ESTIMATORS = ("uniform", "iw", "sniw")        # those with a one-shot private release
DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,                 # finite: one private embedding release; "inf": NON-PRIVATE MMD-GAN
    "estimator": "sniw",            # uniform | iw | sniw | miw | id (Table 3.1); private: uniform, iw, sniw
    "weights": None,                # null (w ≡ 1) | {rebalance: {...}} | {regressor: {file}} (iw_weights.py)
    "w_max": None,                  # clip weights to [0, w_max]; null: the weight function's own public bound
    "groups": 8,                    # miw: groups per batch (App. A.3.2: a batch of 128 in 8 groups of 16)
    "kernel": "auto",               # auto (adversarial if ε = inf, else random features) | adversarial | fixed
    "bandwidths": [0.5, 1.0, 2.0],  # fixed / random-feature Gaussian mixture on encoded rows (public, not from data)
    "code_bandwidths": [1.0, 2.0, 4.0, 8.0, 16.0],  # adversarial: mixture on the codes (Li et al. 2017)
    "frequencies": 200,             # k random features of the private release (DP noise in the MMD² grows with k)
    "steps": 500,                   # generator iterations
    "n_critic": 5,                  # adversarial: discriminator iterations per generator iteration (Li et al.)
    "batch_size": 128,
    "lr": 1e-3,                     # RMSProp, generator and discriminator (chapter 4)
    "mmd_weight": 0.1,              # weight of the MMD² in the discriminator loss (chapter 4)
    "latent_dim": 10,
    "hidden": [100, 100, 100],      # generator, encoder and decoder widths, ELU (chapter 4)
    "code_dim": 64,                 # bottleneck (chapter 4)
    "gumbel_tau": 0.2,              # temperature of the relaxed binary / categorical output heads
    **shared_defaults(0.2),  # seed, noise_seed, calibration, encoding (params/shared.py)
}


RANGES: dict[str, Range] = {   # each numeric key's range (pipelines/ranges.py); ε: pipelines/config.py
    "w_max": reals(gt=0, nullable=True, why="null: the weight function's own public bound"),
    "groups": ints(1, 1024), "bandwidths": each(POSITIVE), "code_bandwidths": each(POSITIVE),
    "frequencies": ints(1, 10**5, why="the DP noise in the MMD² grows with k"),
    "steps": ints(0, MAX_STEPS, why="0 keeps the initial generator"), "n_critic": ints(1, 100),
    "batch_size": ints(2, MAX_BATCH), "lr": POSITIVE, "mmd_weight": NON_NEGATIVE, "latent_dim": WIDTH,
    "hidden": WIDTHS, "code_dim": WIDTH, "gumbel_tau": POSITIVE, **shared_ranges(),
}


def check_params(params: dict[str, Any]) -> None:
    """An `iw_mmd_gan:` section over DEFAULTS: RANGES, the choices, and the rules between keys (ParamError, a
    ValueError, naming the key)."""
    check_ranges("iw_mmd_gan", params, RANGES, DEFAULTS, skip_null=True)
    check_encoding(params, "iw_mmd_gan")
    estimator, groups = params["estimator"], params["groups"]
    if estimator not in ESTIMATORS:
        raise ParamError("iw_mmd_gan.estimator", f"must be one of {ESTIMATORS}, got {estimator!r}")
    if estimator == "miw" and groups < 2:
        raise ParamError("iw_mmd_gan.groups", f"must be an integer >= 2 for the median-of-means estimator, "
                         f"got {groups}")
    if params["kernel"] not in ("auto", "adversarial", "fixed"):
        raise ParamError("iw_mmd_gan.kernel", f"must be auto, adversarial or fixed, got {params['kernel']!r}")
    if estimator == "uniform" and params["weights"] is not None:
        raise ParamError("iw_mmd_gan.weights", "is set, but estimator 'uniform' ignores iw_mmd_gan.weights; set "
                         "weights: null or pick an importance-weighted estimator (iw, sniw, miw, id)")
