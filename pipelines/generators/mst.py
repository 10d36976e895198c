"""MST generator (McKenna, Miklau & Sheldon 2021) on Private-PGM (`mbi`): the mechanism and its plan are
`pipelines.marginal.mst`; the discretisation, the fitted model, sampling and its <name>.npz are the generator's
`MarginalModel` (`pipelines.generators.marginal_model`, shared with AIM); this module wraps them in the generator
contract (`PrivateGenerator`). Design, derivations and evidence: docs/aim-mst.md.
"""

from __future__ import annotations

from collections.abc import Sequence


from pipelines.data.encoded import RowChunks
from pipelines.generators.base import Budget
from pipelines.generators.marginal_model import MarginalGenerator
from pipelines.marginal.mst import MSTPlan, plan_mst, run_mst
from pipelines.privacy.events import Event
from pipelines.privacy.noise import Streams
from pipelines.progress import report


class MST(MarginalGenerator):
    """MST generator (see module docstring). `params`: the params.yaml section over
    `pipelines.generators.params.mst.Params`. `marginals`: the `MarginalModel` (the discretiser, the fitted
    graphical model, saved as <name>.npz next to <name>.json); `structure`: the tree it selected."""

    name = "mst"
    input_note = " (MST discretises encoded values by the layout's public bins, which cover [0, 1])"

    def _plan(self, n_rows: int, budget: Budget) -> MSTPlan:
        """The bins (`MarginalModel.plan_bins`), then `plan_mst` for the layout's columns, and the bins' parts at
        its σ₁ (`cut_bins`): data-independent (schema and ε, δ only)."""
        self.marginals.plan_bins(n_rows, budget.epsilon)
        plan = plan_mst(len(self.names), budget.epsilon, budget.delta, n_rows=n_rows)
        self.marginals.cut_bins(n_rows, plan.sigma_1way)
        return plan

    def _fit(self, data: RowChunks, streams: Streams) -> Sequence[Event]:
        """Discretise the rows, run the mechanism with its noise from `streams`; the actual events."""
        m = self.marginals
        codes = m.code_passes(data)
        report(self.name, 0, 1)
        m.model, events, edges, m.compression, m.within = run_mst(
            codes,
            m.discretizer.shape,
            m.names,
            self.privacy,
            streams.numpy(f"{self.name}:mechanism"),
            iters=int(self.params.iters),
            device=m.jax_device,
            compress_above=self.params.compress_above,
            cells=m.one_way_cells(data),
        )
        self.structure = {"edges": [[m.names[i], m.names[j]] for i, j in edges]}
        report(self.name, 1, 1)
        return events
