"""AIM generator (McKenna et al. 2022) on Private-PGM (`mbi`): the mechanism and its PLD budget loop are
`pipelines.marginal.aim`; discretisation, sampling and persistence are MST's (`pipelines.generators.mst`).
Design, accounting, departures and evidence: docs/aim-mst.md.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pipelines.generators.base import Budget
from pipelines.generators.mst import DEFAULTS as MST_DEFAULTS
from pipelines.generators.mst import MST
from pipelines.generators.mst import check_params as check_mst_params
from pipelines.marginal.aim import AIMPlan, plan_aim, run_aim, workload
from pipelines.privacy.events import Event
from pipelines.progress import report

DEFAULTS: dict[str, Any] = {
    **MST_DEFAULTS,
    "max_rounds": 40,          # K: selection slots, the round limit (wall-clock independent)
    "max_model_size": 20.0,    # MB of mbi junction-tree cells (the paper's 80 is slower on 2 cores)
    "iters": 300,              # mirror-descent iterations per round (warm-started)
    "final_iters": 2000,       # iterations of the final estimation
    "three_way": True,         # workload: all 2-way + the 3-way marginals containing the target
    "target": None,            # the target column (default: the layout's target block)
}


def check_params(params: dict[str, Any]) -> None:
    """MST's params-only rule (`check_mst_params`), naming the key under `aim:`."""
    check_mst_params(params, "aim")


class AIM(MST):
    """AIM generator (see module docstring)."""

    name = "aim"
    defaults = DEFAULTS

    def _plan(self, n_rows: int, budget: Budget) -> tuple[dict[str, Any], list[Event]]:
        plan = plan_aim(len(self.names), int(self.params["max_rounds"]), budget.epsilon, budget.delta)
        return {"scale": plan.scale, "rounds": plan.rounds, "epsilon_select": plan.epsilon_select}, plan.events()

    def _target(self) -> str | None:
        if self.params["target"] is not None:
            return str(self.params["target"])
        return next((b.column for b in self.layout.blocks if b.is_target), None)

    def _run(self, codes: np.ndarray, rng: np.random.Generator) -> list[Event]:
        priv, p = self.privacy, self.params
        plan = AIMPlan(priv["scale"], int(priv["rounds"]), float(priv["epsilon_select"]), len(self.names))
        work = workload(self.names, self._target(), bool(p["three_way"]))
        report(self.name, 0, plan.rounds)
        self.model, events, log = run_aim(
            codes, self.discretizer.shape, self.names, plan, priv["n_rows"], rng, work, float(p["max_model_size"]),
            int(p["iters"]), int(p["final_iters"]), self._jax_device(),
            progress=lambda t, k: report(self.name, t, k))
        self.structure = {"rounds": log}
        return events
