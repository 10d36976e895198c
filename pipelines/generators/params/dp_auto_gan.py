"""DP-AUTO-GAN's parameters (`pipelines.generators.dp_auto_gan`); Appendix C.3's Adult settings are in
params/adult-paper.yaml, these defaults are small and fast."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from pipelines.parameters import Calibration, Encoded, Real, calibration
from pipelines.ranges import (
    BATCH,
    EPOCHS,
    MAX_BATCH,
    NON_NEGATIVE,
    POSITIVE,
    STEPS,
    WIDTH,
    WIDTHS,
    ints,
    nullable,
    reals,
)


class Params(Encoded):
    """A `dp_auto_gan:` section: phase 1 the autoencoder (Algorithm 2), phase 2 the WGAN in latent space
    (Algorithms 3, 4)."""

    phases: ClassVar[tuple[str, ...]] = ("autoencoder_", "")
    autoencoder_share: Annotated[Real, reals(gt=0, lt=1, why="both phases read data, so both need budget")] = Field(
        0.5, description="s: the autoencoder's share of ε"
    )
    autoencoder_epochs: Annotated[int | None, nullable(EPOCHS)] = Field(
        100, description="T1 = ceil(epochs / q1) DP-SGD steps, unless autoencoder_steps is given"
    )
    autoencoder_steps: Annotated[int | None, nullable(STEPS)] = Field(None, description="T1, instead of epochs")
    autoencoder_max_steps: Annotated[int | None, nullable(STEPS)] = Field(
        25000, description="T1 <= this when T1 comes from epochs (null: no cap)"
    )
    autoencoder_batch_size: Annotated[int, BATCH] = Field(64, description="expected batch q1·n (paper: 64)")
    autoencoder_clip_norm: Annotated[Real, POSITIVE] = Field(
        1.0, description="C1, joint clipping of encoder and decoder per-example gradients"
    )
    autoencoder_lr: Annotated[Real, POSITIVE] = Field(5e-3, description="Adam, betas (0.9, 0.999) (paper)")
    autoencoder_hidden: Annotated[list[int], WIDTHS] = Field([60], description="encoder n-60-d, decoder d-60-n")
    latent_dim: Annotated[int, WIDTH] = Field(15, description="d (paper)")
    epochs: Annotated[int | None, nullable(EPOCHS)] = Field(
        60, description="T2 = ceil(epochs / q2) critic steps, unless steps is given"
    )
    steps: Annotated[int | None, nullable(STEPS)] = Field(None, description="T2, instead of epochs")
    max_steps: Annotated[int | None, nullable(STEPS)] = Field(
        10000, description="T2 <= this when T2 comes from epochs (null: no cap)"
    )
    batch_size: Annotated[
        int, ints(2, MAX_BATCH, why="a generator step normalises its batch_size fakes with BatchNorm, Appendix C.3")
    ] = Field(128, description="expected real batch q2·n (paper: 128)")
    n_critic: Annotated[int, ints(1, 100)] = Field(2, description="critic steps per generator step (paper: 15)")
    clip_norm: Annotated[Real, POSITIVE] = Field(1.0, description="C of the critic step")
    lr_critic: Annotated[Real, POSITIVE] = Field(2e-3, description="Adam, betas (0.5, 0.9) (paper: RMSProp, 0.005)")
    lr_generator: Annotated[Real, POSITIVE] = Field(2e-3, description="Adam, betas (0.5, 0.9)")
    gp_lambda: Annotated[Real, NON_NEGATIVE] = Field(10.0, description="λ of the gradient penalty")
    critic_hidden: Annotated[list[int], WIDTHS] = Field([32], description="critic widths (paper: [70, 35])")
    noise_dim: Annotated[int, WIDTH] = Field(64, description="generator input z ~ N(0, I) (paper: 64)")
    generator_hidden: Annotated[list[int], WIDTHS] = Field([64, 64], description="paper: [64, 64] then d")
    gumbel_tau: Annotated[Real, POSITIVE] = Field(
        0.2, description="temperature of the relaxed binary / categorical output heads"
    )
    calibration: Calibration = calibration(0.2)
