"""The DP marginal calibration as a part any generator composes with its method (`PrivateGenerator.calibration`).

The statistics, the event and the raking are `pipelines.marginal.calibrate` (its docstring derives the sensitivity).
This part holds the lifecycle around them, on when the params' `calibration.share` > 0 and some marginal is left:

  plan     the method is planned at (1 − share)·ε and the noisy marginals get the rest (one composed plan,
           `calibrate.plan_calibration`); when the expected noise of the marginals exceeds `max_noise_tv` on n̂ rows
           (too few rows for this ε) the method is planned at the whole ε instead and nothing is calibrated;
  measure  after the method's `_fit`: the noisy marginals of the real rows (plain counts, or the generator's public
           importance weights `weights()` summed), their event returned for the ledger;
  sample   an oversampled draw of the method, raked to the noisy marginals (post-processing);
  save     the noisy marginals go with the model (`to_dict`, `restore`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.data.bins import Discretizer
from pipelines.data.layout import Layout
from pipelines.marginal import calibrate
from pipelines.parameters import Calibration as CalibrationParams, Encoded, GeneratorParams
from pipelines.privacy.events import Event
from pipelines.privacy.noise import Streams
from pipelines.privacy.plan import PrivacyPlan

Weights = tuple[Callable[[np.ndarray], np.ndarray], float] | None  # (w of table rows, public bound w_max) or counts


def counts() -> Weights:
    """No weights: the marginals count rows."""
    return None


class Calibration:
    """One generator's calibration part (module docstring). `settings`: its `calibration` params (None: none);
    `hidden`: columns it must not measure nor match (PPEM's protected x′, which α-LMDP promises not to reproduce);
    `weights`: the public importance weights the marginals sum instead of counting rows, (w, w_max) with w a function
    of rows of the table's layout, 0 ≤ w ≤ w_max, both fixed by the params, never by rows (the plan's σ is scaled by
    w_max, `calibrate.plan_calibration`), or None for counts: IW-MMD-GAN's, called when planning and measuring (its
    weight function is built after this part)."""

    def __init__(
        self,
        layout: Layout,
        settings: CalibrationParams | None,
        generator: str,
        numeric_bins: int | None,
        hidden: Iterable[str] = (),
        weights: Callable[[], Weights] = counts,
    ) -> None:
        self.layout, self.settings, self.numeric_bins, self.weights = layout, settings, numeric_bins, weights
        self.generator, self.hidden = generator, frozenset(hidden)
        self.cliques = (
            tuple(q for q in calibrate.marginals(layout, settings.pairs, generator) if not self.hidden.intersection(q))
            if settings and settings.share > 0
            else ()
        )
        self.noisy: calibrate.NoisyMarginals | None = None

    @classmethod
    def of(
        cls,
        generator: str,
        layout: Layout,
        params: GeneratorParams,
        hidden: Iterable[str] = (),
        weights: Callable[[], Weights] = counts,
    ) -> "Calibration":
        """Generator `generator`'s part under its `params`: their `calibration` section, and an `Encoded` generator's
        `numeric_bins` for the cells."""
        bins = params.numeric_bins if isinstance(params, Encoded) else None
        return cls(layout, params.calibration, generator, bins, hidden, weights)

    def cells(self) -> Discretizer:
        """The public discretiser the marginals are counted on (`calibrate.public_discretizer`, the generator's
        numeric_bins)."""
        return calibrate.public_discretizer(self.layout, self.numeric_bins)

    def plan(
        self, method_plan: Callable[[float], PrivacyPlan], n_rows: int, epsilon: float, delta: float
    ) -> PrivacyPlan:
        """The generator's plan for n̂ = `n_rows` at (ε, δ): `method_plan(ε')` is the method's own plan at ε'."""
        if not self.cliques:
            return method_plan(epsilon)
        share = self.settings.share
        method = method_plan((1 - share) * epsilon)
        weights = self.weights()
        cal = calibrate.plan_calibration(
            method.events, self.cliques, share, epsilon, delta, None if weights is None else weights[1]
        )
        cells, limit = self.cells(), self.settings.max_noise_tv
        if limit is not None and calibrate.expected_noise_tv(cal, cells.shape, cells.names, n_rows) > limit:
            return method_plan(epsilon)  # too few rows for this ε: the method gets all of it
        return method.calibrated(cal, epsilon)

    def measure(self, plan: PrivacyPlan, data: np.ndarray, streams: Streams) -> Event | None:
        """The noisy marginals of the table rows `data` when `plan` calibrates (kept for `sample`), and their event;
        None when it does not."""
        if plan.calibration is None:
            return None
        weights = self.weights()
        w = None if weights is None else weights[0](data)  # public weights of the rows (None: counts)
        self.noisy, event = calibrate.NoisyMarginals.measure(
            self.cells(), plan.calibration, data, streams.numpy("calibration"), w
        )
        return event

    def sample(self, draw: Callable[[int], np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
        """n rows: `draw(n)` as it is without noisy marginals, else `oversample`·n drawn, those that break none of
        the layout's public rules kept (all of them if none does), and raked to the noisy marginals, so the raking
        re-weights rows the release may publish (the release keeps the rules on every row it publishes:
        `rules.draw_within`)."""
        if self.noisy is None:
            return draw(n)
        s = self.settings
        rows = draw(n * s.oversample)
        valid = ~self.layout.broken(rows)
        return self.noisy.calibrate(rows[valid] if valid.any() else rows, n, rng, s.sweeps, s.tolerance)

    def to_dict(self) -> dict[str, Any] | None:
        return None if self.noisy is None else self.noisy.to_dict()

    def restore(self, saved: dict[str, Any] | None, plan: PrivacyPlan | None, directory: Path) -> None:
        """The noisy marginals `to_dict` saved; a plan that calibrates without them is refused, naming the model's
        file in `directory` and the fix."""
        if saved is not None:
            self.noisy = calibrate.NoisyMarginals.from_dict(self.layout, saved)
        elif plan is not None and plan.calibration is not None:
            raise ValueError(
                f"{directory}/{self.generator}.json: the plan calibrates samples but the noisy marginals are missing. "
                f"Fix: re-run the train stage (dvc repro -f train@{self.generator})"
            )
