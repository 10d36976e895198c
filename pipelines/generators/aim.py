"""AIM generator (McKenna et al. 2022) on Private-PGM (`mbi`): the mechanism, its plan and its zCDP-filtered rounds are
`pipelines.marginal.aim`; the discretisation, the fitted model, sampling and its <name>.npz are the generator's
`MarginalModel` (`pipelines.generators.marginal_model`, shared with MST).
Design, accounting, departures and evidence: docs/aim-mst.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


from pipelines.data.encoded import RowChunks
from pipelines.generators.base import Budget
from pipelines.generators.marginal_model import MarginalGenerator
from pipelines.generators.params.aim import public_settings
from pipelines.marginal.aim import AIMPlan, plan_aim, run_aim, workload
from pipelines.privacy.events import Event
from pipelines.privacy.noise import Streams
from pipelines.progress import report


class AIM(MarginalGenerator):
    """AIM generator (see module docstring). `params`: the params.yaml section over
    `pipelines.generators.params.aim.Params` (MST's and the rounds'). `n_bins` and `max_rounds` left null are
    set by `public_settings` from n̂ and ε when the generator plans (before any row is read). `marginals`: the
    `MarginalModel`; `structure`: the rounds' log and what they spent of the zCDP filter."""

    name = "aim"
    input_note = " (AIM discretises encoded values by the layout's public bins, which cover [0, 1])"

    def _plan(self, n_rows: int, budget: Budget) -> AIMPlan:
        """The bins (`MarginalModel.plan_bins`), K from `public_settings` (n̂, ε: public), then `plan_aim` for the
        layout's columns, K rounds and the section's 1-way share, and the bins' parts at its σ₁ (`cut_bins`)."""
        self.marginals.plan_bins(n_rows, budget.epsilon)
        rounds = public_settings(self.params, n_rows, budget.epsilon, self.marginals.cut_columns())[1]
        plan = plan_aim(
            len(self.names),
            rounds,
            budget.epsilon,
            budget.delta,
            n_rows=n_rows,
            one_way_share=self.params.one_way_share,
        )
        self.marginals.cut_bins(n_rows, plan.one_way)
        return plan

    def _target(self) -> str | None:
        if self.params.target is not None:
            return str(self.params.target)
        return next((b.column for b in self.layout.blocks if b.is_target), None)

    def _related(self) -> list[tuple[str, ...]]:
        """The schema's `related` pairs (public, `Layout.related`) as cliques of the model's columns, in its column
        order: the last round's budget measures them (`run_aim`)."""
        names = self.names
        return [tuple(sorted(p, key=names.index)) for p in self.layout.related if set(p) <= set(names)]

    def _fit(self, data: RowChunks, streams: Streams) -> Sequence[Event]:
        """Discretise the rows, run AIM's rounds with their noise from `streams`; the actual events (the plan's:
        d one-way Gaussians and the rounds' zCDP filter budget, `pipelines.marginal.aim`)."""
        p, plan, m = self.params, self.privacy, self.marginals
        codes = m.code_passes(data)
        work = workload(m.names, self._target(), bool(p.three_way))
        report(self.name, 0, plan.rounds)
        m.model, events, log, m.compression, m.within = run_aim(
            codes,
            m.discretizer.shape,
            m.names,
            plan,
            streams.numpy(f"{self.name}:mechanism"),
            work,
            float(p.max_model_size),
            int(p.iters),
            int(p.final_iters),
            m.jax_device,
            progress=lambda t, k: report(self.name, t, k),
            compress_above=p.compress_above,
            cells=m.one_way_cells(data),
            related=self._related(),
        )
        self.structure = {"rounds": log}
        if plan.private:  # the zCDP filter's budget (the ledger's ZCDPEvent) and what the rounds spent of it
            spent = math.fsum(entry["rho"] for entry in log)
            assert spent <= plan.rho_rounds, f"AIM rounds spent ρ = {spent} above the filter's {plan.rho_rounds}"
            self.structure.update(rho_rounds_budget=plan.rho_rounds, rho_rounds_spent=spent)
        return events
