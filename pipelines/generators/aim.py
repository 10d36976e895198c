"""AIM generator (McKenna et al. 2022) on Private-PGM (`mbi`): the mechanism, its plan and its zCDP-filtered rounds are
`pipelines.marginal.aim`; discretisation, sampling and persistence are MST's (`pipelines.generators.mst`).
Design, accounting, departures and evidence: docs/aim-mst.md.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from pipelines.data.encoded import RowChunks
from pipelines.generators.base import Budget
from pipelines.generators.mst import MST
from pipelines.generators.params.aim import public_settings
from pipelines.marginal.aim import AIMPlan, plan_aim, run_aim, workload
from pipelines.privacy.events import Event
from pipelines.privacy.noise import Streams
from pipelines.progress import report


class AIM(MST):
    """AIM generator (see module docstring). `params`: the params.yaml section over
    `pipelines.generators.params.aim.DEFAULTS` (MST's and the rounds'). `n_bins` and `max_rounds` left null are
    set by `public_settings` from n̂ and ε when the generator plans (before any row is read)."""

    name = "aim"

    def _plan(self, n_rows: int, budget: Budget) -> AIMPlan:
        """`public_settings` (n̂, ε: public), then `plan_aim` for the layout's columns, K rounds and the section's
        1-way share."""
        self._plan_bins(n_rows, budget)   # public: the layout, n̂ and ε
        rounds = public_settings(self.params, n_rows, budget.epsilon, self._cut_columns())[1]
        return plan_aim(len(self.names), rounds, budget.epsilon, budget.delta, n_rows=n_rows,
                        one_way_share=self.params["one_way_share"])

    def _target(self) -> str | None:
        if self.params["target"] is not None:
            return str(self.params["target"])
        return next((b.column for b in self.layout.blocks if b.is_target), None)

    def _fit(self, data: RowChunks, streams: Streams) -> Sequence[Event]:
        """Discretise the rows, run AIM's rounds with their noise from `streams`; the actual events (the plan's:
        d one-way Gaussians and the rounds' zCDP filter budget, `pipelines.marginal.aim`)."""
        p, plan = self.params, self.privacy
        codes = self._code_passes(data)
        work = workload(self.names, self._target(), bool(p["three_way"]))
        report(self.name, 0, plan.rounds)
        self.model, events, log, self.compression = run_aim(
            codes, self.discretizer.shape, self.names, plan, streams.numpy(f"{self.name}:mechanism"), work,
            float(p["max_model_size"]), int(p["iters"]), int(p["final_iters"]), self._jax_device(),
            progress=lambda t, k: report(self.name, t, k), compress_above=p["compress_above"])
        self.structure = {"rounds": log}
        if plan.private:   # the zCDP filter's budget (the ledger's ZCDPEvent) and what the rounds spent of it
            spent = math.fsum(entry["rho"] for entry in log)
            assert spent <= plan.rho_rounds, f"AIM rounds spent ρ = {spent} above the filter's {plan.rho_rounds}"
            self.structure.update(rho_rounds_budget=plan.rho_rounds, rho_rounds_spent=spent)
        return events
