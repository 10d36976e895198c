"""DP-WGAN's parameters (`pipelines.generators.dpwgan`)."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from pipelines.parameters import Calibration, Encoded, Real, calibration
from pipelines.ranges import BATCH, EPOCHS, NON_NEGATIVE, POSITIVE, STEPS, WIDTH, WIDTHS, ints, nullable


class Params(Encoded):
    """A `dpwgan:` section."""

    phases: ClassVar[tuple[str, ...]] = ("",)
    epochs: Annotated[int | None, nullable(EPOCHS)] = Field(
        60, description="T = ceil(epochs / q) critic (DP-SGD) steps, unless `steps` is given"
    )
    steps: Annotated[int | None, nullable(STEPS)] = Field(None, description="T, instead of epochs")
    max_steps: Annotated[int | None, nullable(STEPS)] = Field(
        10000, description="T <= this when T comes from epochs (null: no cap; compute, not privacy)"
    )
    batch_size: Annotated[int, BATCH] = Field(128, description="expected real batch size q·n (Poisson sampling)")
    n_critic: Annotated[int, ints(1, 100)] = Field(2, description="critic steps per generator step")
    clip_norm: Annotated[Real, POSITIVE] = Field(1.0, description="per-example L2 clipping norm C")
    lr_critic: Annotated[Real, POSITIVE] = Field(2e-3, description="Adam, betas (0.5, 0.9)")
    lr_generator: Annotated[Real, POSITIVE] = Field(2e-3, description="Adam, betas (0.5, 0.9)")
    gp_lambda: Annotated[Real, NON_NEGATIVE] = Field(10.0, description="λ of the gradient penalty")
    latent_dim: Annotated[int, WIDTH] = Field(32, description="generator input dimension")
    critic_hidden: Annotated[list[int], WIDTHS] = Field(
        [32], description="critic widths (small: DP noise grows with the critic's parameters)"
    )
    generator_hidden: Annotated[list[int], WIDTHS] = Field([64, 64], description="generator widths")
    gumbel_tau: Annotated[Real, POSITIVE] = Field(
        0.2, description="temperature of the relaxed binary / categorical output heads"
    )
    calibration: Calibration = calibration(0.2)
