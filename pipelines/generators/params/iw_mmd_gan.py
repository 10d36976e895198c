"""IW-MMD-GAN's parameters (`pipelines.generators.iw_mmd_gan`; chapter 4 of the Diesendruck thesis unless noted)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from pipelines.errors import ParamError
from pipelines.parameters import Calibration, Encoded, Real, calibration
from pipelines.ranges import MAX_BATCH, MAX_STEPS, NON_NEGATIVE, POSITIVE, WIDTH, WIDTHS, each, ints, reals

ESTIMATORS = ("uniform", "iw", "sniw", "miw", "id")  # Table 3.1 (`pipelines.generators.iw_estimators`)
PRIVATE_ESTIMATORS = ("uniform", "iw", "sniw")  # those with a one-shot private release


class Params(Encoded):
    """An `iw_mmd_gan:` section. ε finite: one private embedding release; 'inf': the non-private MMD-GAN."""

    estimator: Literal[ESTIMATORS] = Field(
        "sniw", description="Table 3.1; those with a private release: uniform, iw, sniw"
    )
    weights: dict[str, Any] | None = Field(
        None, description="null (w = 1) | {rebalance: {column, observed, target}} | {regressor: {file}}"
    )
    w_max: Annotated[Real | None, reals(gt=0, nullable=True, why="null: the weight function's own public bound")] = (
        Field(None, description="clip weights to [0, w_max]; null: the weight function's own public bound")
    )
    groups: Annotated[int, ints(1, 1024)] = Field(
        8, description="miw: groups per batch (App. A.3.2: a batch of 128 in 8 groups of 16)"
    )
    kernel: Literal["auto", "adversarial", "fixed"] = Field(
        "auto", description="auto: adversarial if ε = inf, else random features"
    )
    bandwidths: Annotated[list[Real], each(POSITIVE)] = Field(
        [0.5, 1.0, 2.0], description="fixed / random-feature Gaussian mixture on encoded rows (public)"
    )
    code_bandwidths: Annotated[list[Real], each(POSITIVE)] = Field(
        [1.0, 2.0, 4.0, 8.0, 16.0], description="adversarial: mixture on the codes (Li et al. 2017)"
    )
    frequencies: Annotated[int, ints(1, 10**5, why="the DP noise in the MMD² grows with k")] = Field(
        200, description="k random features of the private release"
    )
    steps: Annotated[int, ints(0, MAX_STEPS, why="0 keeps the initial generator")] = Field(
        500, description="generator iterations"
    )
    n_critic: Annotated[int, ints(1, 100)] = Field(
        5, description="adversarial: discriminator iterations per generator iteration (Li et al.)"
    )
    batch_size: Annotated[int, ints(2, MAX_BATCH)] = Field(128, description="rows per batch")
    lr: Annotated[Real, POSITIVE] = Field(1e-3, description="RMSProp, generator and discriminator")
    mmd_weight: Annotated[Real, NON_NEGATIVE] = Field(0.1, description="weight of the MMD² in the discriminator loss")
    latent_dim: Annotated[int, WIDTH] = Field(10, description="generator input dimension")
    hidden: Annotated[list[int], WIDTHS] = Field(
        [100, 100, 100], description="generator, encoder and decoder widths, ELU"
    )
    code_dim: Annotated[int, WIDTH] = Field(64, description="bottleneck")
    gumbel_tau: Annotated[Real, POSITIVE] = Field(
        0.2, description="temperature of the relaxed binary / categorical output heads"
    )
    calibration: Calibration = calibration(0.2)

    @model_validator(mode="after")
    def _rules(self) -> "Params":
        if self.estimator == "miw" and self.groups < 2:
            raise ParamError("groups", f"must be an integer >= 2 for the median-of-means estimator, got {self.groups}")
        if self.estimator == "uniform" and self.weights is not None:
            raise ParamError(
                "weights",
                "is set, but estimator 'uniform' ignores iw_mmd_gan.weights; set "
                "weights: null or pick an importance-weighted estimator (iw, sniw, miw, id)",
            )
        return self
