"""PPEM's parameters (`pipelines.generators.ppem`; appendix D.1 unless noted)."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from pipelines.parameters import Calibration, Encoded, Real, calibration
from pipelines.ranges import BATCH, DRAWS, EPOCHS, NON_NEGATIVE, OPEN_FRACTION, POSITIVE, STEPS, WIDTH, ints, nullable


class Params(Encoded):
    """A `ppem:` section."""

    phases: ClassVar[tuple[str, ...]] = ("",)
    epochs: Annotated[int | None, nullable(EPOCHS)] = Field(
        100, description="T = ceil(epochs / q) energy steps, unless steps is given"
    )
    steps: Annotated[int | None, nullable(STEPS)] = Field(None, description="T, instead of epochs")
    max_steps: Annotated[int | None, nullable(STEPS)] = Field(
        8000, description="T <= this when T comes from epochs (null: no cap; not the paper's)"
    )
    batch_size: Annotated[int, BATCH] = Field(128, description="expected real batch size q·n (Poisson sampling)")
    energy_steps: Annotated[int, ints(1, 100)] = Field(5, description="energy-model steps per generator step")
    margin: Annotated[Real, NON_NEGATIVE] = Field(10.0, description="m of Eq. 6, 7")
    gp_lambda: Annotated[Real, NON_NEGATIVE] = Field(1.0, description="λ_L, Lipschitz penalty (§3.7)")
    lipschitz: Annotated[Real, POSITIVE] = Field(
        1.0, description="K, the penalty's target gradient norm on the [0, 1] encoding"
    )
    alpha: Annotated[Real, OPEN_FRACTION] = Field(0.05, description="α of α-LMDP")
    alpha_lambda: Annotated[Real, NON_NEGATIVE] = Field(
        10.0, description="λ_α of Eq. 18; 0 disables the α-LMDP penalty"
    )
    hidden: Annotated[int, WIDTH] = Field(256, description="MLP layer width, all networks")
    latent_dim: Annotated[int, WIDTH] = Field(128, description="both generators")
    lr_energy: Annotated[Real, POSITIVE] = Field(1e-3, description="Adam, betas (0.5, 0.9)")
    lr_generator: Annotated[Real, POSITIVE] = Field(5e-4, description="Adam, betas (0.5, 0.9)")
    clip_norm: Annotated[Real, POSITIVE] = Field(1.0, description="C, per-example clipping (not in the paper)")
    ksd_clip: Annotated[Real, POSITIVE] = Field(
        0.5, description="C_α, clipping of the batch-coupled KSD-penalty gradient"
    )
    protected: list[str] | None = Field(None, description="x′: numeric columns; null: the schema's protected columns")
    gumbel_tau: Annotated[Real, POSITIVE] = Field(0.2, description="relaxed discrete output heads of G_υ")
    gate_bootstrap: Annotated[int, DRAWS] = Field(
        1000, description="α-LMDP gate: wild-bootstrap draws of the quadratic KSD test"
    )
    gate_permutations: Annotated[int, DRAWS] = Field(1000, description="permutations of the MMD test")
    gate_max_rows: Annotated[int, ints(1, 20000, why="the gate's statistics hold rows x rows matrices")] = Field(
        2000, description="rows (a seeded random subset) the O(n²) gate statistics use"
    )
    calibration: Calibration = calibration(0.2)
