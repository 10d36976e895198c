"""The private selection's parameters (`pipelines.generators.private_selection`, `release.select: private`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from pipelines.errors import ParamError
from pipelines.parameters import GeneratorParams, Real
from pipelines.ranges import BIN_COUNT, OPEN_FRACTION, reals

TRIALS = ("random", "each")  # Papernot & Steinke's random trials; every candidate once (private_selection.py)


class Params(GeneratorParams):
    """A `private_selection:` section; its ε is that of the whole selection (every trial, score and the choice;
    Papernot & Steinke)."""

    candidates: list[str] | None = Field(
        None, description="generators to choose among; null: every other generator of `generators:`"
    )
    trials: Literal[TRIALS] = Field(
        "each",
        description="each: every candidate once, their events composed; random: T ~ Logarithmic trials of "
        "drawn candidates (Papernot & Steinke)",
    )
    mean_trials: Annotated[Real, reals(ge=1, le=100)] = Field(
        3.0, description="μ (trials: random): the mean number of trials T ~ Logarithmic on {1, 2, ...}"
    )
    favour_rule: bool = Field(
        True, description="half the trials run the public rule's choice among the candidates; false: uniform"
    )
    score_share: Annotated[Real, OPEN_FRACTION] = Field(
        0.1, description="share of each trial's ε for its DP quality score (docs/selection.md)"
    )
    score_bins: Annotated[int, BIN_COUNT] = Field(
        10, description="equal-width bins per numeric column (schema bounds) of the score's marginals"
    )
    sections: dict[str, Any] = Field(
        {}, description="the candidates' own sections (filled from params.yaml by the pipeline; leave unset)"
    )

    @field_validator("candidates")
    @classmethod
    def _candidates(cls, candidates: list[str] | None) -> list[str] | None:
        """Registered generators other than the selection itself."""
        from pipelines.generators.names import GENERATORS

        if candidates is None:
            return None
        if not candidates:
            raise ParamError("candidates", "must be a non-empty list of generators, got []")
        for c in candidates:
            if c not in GENERATORS or c == "private_selection":
                raise ParamError(
                    "candidates",
                    f"'{c}' is not a generator it can select; use "
                    f"{', '.join(g for g in GENERATORS if g != 'private_selection')}",
                )
        return candidates
