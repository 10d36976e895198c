"""PEARL's parameters (`pipelines.generators.pearl`; appendix H of the paper, tabular, unless noted)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from pipelines.parameters import Calibration, Encoded, Real, calibration
from pipelines.ranges import BATCH, MAX_STEPS, POSITIVE, WIDTH, WIDTHS, ints, reals


class Params(Encoded):
    """A `pearl:` section."""

    frequencies: Annotated[
        int, ints(1, 10**5, why="the noise per embedding coordinate grows with the square root of k")
    ] = Field(1000, description="k")
    aux_share: Annotated[Real, reals(gt=0, lt=1, why="the mean distance's share of the budget; paper: 0.5")] = Field(
        0.5, description="the mean distance's share of the budget (μ²)"
    )
    critic: bool = Field(True, description="false: the 'w/o critic' ablation (uniform weights, eq. 7)")
    critic_min_ess: Annotated[Real, reals(ge=0, le=1, why="a fraction of the k frequencies")] = Field(
        0.5, description="the critic's set P: weights keep an effective sample size >= this·k"
    )
    steps: Annotated[int, ints(0, MAX_STEPS, why="training is post-processing: 0 keeps the initial generator")] = Field(
        8000, description="training iterations (post-processing)"
    )
    batch_size: Annotated[int, BATCH] = Field(1100, description="generated rows per step, split over the classes")
    lr: Annotated[Real, POSITIVE] = Field(0.01, description="Adam, generator")
    lr_critic: Annotated[Real, POSITIVE] = Field(0.01, description="Adam, critic")
    latent_dim: Annotated[int, WIDTH] = Field(32, description="generator input dimension (not in the paper)")
    hidden: Annotated[list[int], WIDTHS] = Field(
        [128, 128], description="widths of the two fc-bn-relu layers (not in the paper)"
    )
    calibration: Calibration = calibration(0.2)
