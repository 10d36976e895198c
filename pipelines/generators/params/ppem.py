"""PPEM's parameters (`pipelines.generators.ppem`)."""
from __future__ import annotations

from typing import Any

from pipelines.generators.params.encoding import check_encoding
from pipelines.generators.params.shared import shared_defaults, shared_ranges
from pipelines.ranges import (BATCH, DRAWS, EPOCHS, NON_NEGATIVE, OPEN_FRACTION, POSITIVE, STEPS, WIDTH, Range,
                              check_ranges, ints, nullable)

DEFAULTS: dict[str, Any] = {      # appendix D.1 unless noted
    "epsilon": 1.0,               # target ε (paper: 1); "inf" trains without clipping or noise
    "epochs": 100,                # T = ceil(epochs / q) energy steps ...
    "steps": None,                # ... unless steps (T) is given instead
    "max_steps": 8000,            # T ≤ max_steps when T comes from epochs (null: no cap; ours, not the paper's):
                                  # 100 epochs up to 10,240 rows; beyond, a run of fixed length
                                  # (Adult's 39,074 training rows would take 30,527 steps, almost 4× as long)
    "batch_size": 128,            # expected real batch size q·n (Poisson sampling)
    "energy_steps": 5,            # energy-model steps per generator step
    "margin": 10.0,               # m of Eq. 6, 7
    "gp_lambda": 1.0,             # λ_L, Lipschitz penalty (§3.7)
    "lipschitz": 1.0,             # K, the penalty's target gradient norm on the [0, 1] encoding
    "alpha": 0.05,                # α of α-LMDP
    "alpha_lambda": 10.0,         # λ_α of Eq. 18; 0 disables the α-LMDP penalty
    "hidden": 256,                # MLP layer width, all networks
    "latent_dim": 128,            # both generators
    "lr_energy": 1e-3,            # Adam; betas (0.5, 0.9) (not in the paper: the usual GAN setting)
    "lr_generator": 5e-4,
    "clip_norm": 1.0,             # C, per-example clipping (not in the paper)
    "ksd_clip": 0.5,              # C_α, clipping of the batch-coupled KSD-penalty gradient (ours)
    "protected": None,            # x′: numeric columns; None = the schema's protected columns
    "gumbel_tau": 0.2,            # relaxed discrete output heads of G_υ
    "gate_bootstrap": 1000,       # α-LMDP gate: wild-bootstrap draws of the quadratic KSD test
    "gate_permutations": 1000,    # permutations of the MMD test
    "gate_max_rows": 2000,        # rows (a seeded random subset) the O(n²) gate statistics use
    **shared_defaults(0.2),  # seed, noise_seed, calibration, encoding (params/shared.py)
}


RANGES: dict[str, Range] = {   # each numeric key's range (pipelines/ranges.py); ε: pipelines/config.py
    "epochs": EPOCHS, "steps": nullable(STEPS), "max_steps": nullable(STEPS), "batch_size": BATCH,
    "energy_steps": ints(1, 100), "margin": NON_NEGATIVE, "gp_lambda": NON_NEGATIVE, "lipschitz": POSITIVE,
    "alpha": OPEN_FRACTION, "alpha_lambda": NON_NEGATIVE, "hidden": WIDTH, "latent_dim": WIDTH,
    "lr_energy": POSITIVE, "lr_generator": POSITIVE, "clip_norm": POSITIVE, "ksd_clip": POSITIVE,
    "gumbel_tau": POSITIVE, "gate_bootstrap": DRAWS, "gate_permutations": DRAWS,
    "gate_max_rows": ints(1, 20000, why="the gate's statistics hold rows x rows matrices"),
    **shared_ranges(),
}


def check_params(params: dict[str, Any]) -> None:
    """A `ppem:` section over DEFAULTS: RANGES and the encoding's choices (ParamError, a ValueError, naming the
    key)."""
    check_ranges("ppem", params, RANGES, DEFAULTS, skip_null=True)
    check_encoding(params, "ppem")
