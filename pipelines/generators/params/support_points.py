"""Private support points' parameters (`pipelines.generators.support_points`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from pipelines.errors import ParamError
from pipelines.parameters import Calibration, GeneratorParams, Real, calibration
from pipelines.ranges import MAX_STEPS, OPEN_FRACTION, POSITIVE, STEPS, each, ints, reals

EXPANSIONS = ("kde_public", "kde_laplace", "kde_exponential", "repeat")


class Params(GeneratorParams):
    """A `support_points:` section; its ε is the total of every release below ('inf': the exact support points)."""

    n_points: Annotated[int, ints(1, 10**5)] = Field(20, description="n, points per private set (§5.7.2: 5-20 % of N)")
    norm: Annotated[
        Real,
        reals(
            ge=1,
            le=2,
            why="ℓ_p is a metric of negative type only there, so the energy distance is >= 0; the thesis uses p = 2",
        ),
    ] = Field(2.0, description="p of the energy distance")
    chains: Annotated[int, ints(4, 256, why="§5.5: the split-R̂ gate compares several chains from random starts")] = (
        Field(4, description="MH chains from uniform random starts")
    )
    burn_in: Annotated[int, ints(0, MAX_STEPS)] = Field(
        5000, description="MH steps with step-size adaptation (§5.7.1.3)"
    )
    steps: Annotated[int, STEPS] = Field(10000, description="MH steps after burn-in, step size frozen")
    thin: Annotated[int, ints(1, 10**6)] = Field(10, description="keep every thin-th energy for the R̂ diagnostic")
    target_acceptance: Annotated[Real, OPEN_FRACTION] = Field(0.3, description="§5.7.1.3")
    rhat_max: Annotated[Real, reals(gt=1, why="R̂ is 1 at convergence")] = Field(
        1.05, description="the gate's bound on split-R̂"
    )
    expansion: Literal[EXPANSIONS] = Field("kde_public", description="§5.6")
    bandwidth: Annotated[Real, POSITIVE] = Field(0.05, description="kde_public: the public bandwidth, encoded units")
    bandwidth_bounds: Annotated[list[Real], each(POSITIVE)] = Field(
        [0.01, 0.125], description="kde_laplace / kde_exponential: public [σ_lo, σ_hi] (§5.7.1.5)"
    )
    bandwidth_grid: Annotated[int, ints(1, 10**4)] = Field(
        32, description="grid size for the bounded MLE and the exponential mechanism"
    )
    bandwidth_share: Annotated[Real, OPEN_FRACTION] = Field(
        0.1, description="kde_laplace / kde_exponential: the bandwidth's share of ε"
    )
    repeats: Annotated[int, ints(1, 1000)] = Field(1, description="repeat: k private sets")
    support_steps: Annotated[int, STEPS] = Field(300, description="ε = inf: Adam steps for Y* (§5.7.1.2)")
    lr: Annotated[Real, POSITIVE] = Field(0.01, description="Adam learning rate of Y*")
    accept_heuristic: bool = Field(
        False, description="true: release.select auto / private may pick it, its heuristic ε labelled"
    )
    calibration: Calibration = calibration(0.2)

    @model_validator(mode="after")
    def _rules(self) -> "Params":
        if self.steps < 4 * self.thin:
            raise ParamError(
                "steps",
                f"must be at least 4·thin (R̂ needs >= 4 draws per chain), got steps = {self.steps}, thin = {self.thin}",
            )
        bounds = self.bandwidth_bounds
        if not (len(bounds) == 2 and bounds[0] < bounds[1]):
            raise ParamError("bandwidth_bounds", f"must be [lower, upper] with 0 < lower < upper, got {bounds}")
        return self
