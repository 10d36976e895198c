"""MST generator (McKenna, Miklau & Sheldon 2021) on Private-PGM (`mbi`): the mechanism and its plan are
`pipelines.marginal.mst`; this module wraps it in the generator contract (`PrivateGenerator`).

Encoded rows are discretised from public facts only (`pipelines.data.bins.Discretizer`, the one binning of
every generator): the layout's numeric blocks carry the schema's bounds and optional public `bins` edges
(overridable here by `bins: {column: [edges]}`, schema units), else `n_bins` equal-width bins over the bounds,
integer-aligned for integer columns (`n_bins` null: a public rule of n̂·ε, 16 below 5,000 and 32 from it, as
AIM's); a numeric column's null is one more cell of that column (`Discretizer`'s `fold_missing`). Sampling draws codes from the fitted graphical model and decodes a numeric bin by a uniform draw inside it. A column of more than `compress_above` cells (a long code list) is modelled on
the codes its noisy 1-way count supports and one cell for the rest (`pipelines.marginal.compress`, the paper's
domain compression). Design, derivations and evidence: docs/aim-mst.md.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.data.bins import Discretizer, equal_width_columns
from pipelines.data.encoded import RowChunks
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.params.mst import public_bins
from pipelines.marginal import estimate as est
from pipelines.marginal.compress import Compression
from pipelines.marginal.measure import Passes
from pipelines.marginal.mst import MSTPlan, plan_mst, run_mst
from pipelines.marginal.sample import sample_codes
from pipelines.privacy.events import Event
from pipelines.privacy.noise import Streams
from pipelines.progress import report


class MST(PrivateGenerator):
    """MST generator (see module docstring). `params`: the params.yaml section over
    `pipelines.generators.params.mst.DEFAULTS`. The fitted graphical model is saved as <name>.npz (no pickle)
    next to <name>.json."""

    name = "mst"
    reads_in_chunks = True   # counts its marginals a row chunk at a time (`run_mst`'s two passes)
    phases = ()                                # no training loop: no steps or epochs
    input_note = " (MST discretises encoded values by the layout's public bins, which cover [0, 1])"

    def build(self) -> None:
        self.discretizer = self._discretizer(self._bin_count(0, 0.0))   # the rule's may change when it plans
        self.model = None                          # the fitted mbi MarkovRandomField
        self.structure: dict[str, Any] = {}        # what the mechanism selected (public: DP outputs)
        self.compression: Compression | None = None   # the model's domain: codes its 1-way counts support (DP)

    def _bin_count(self, n_rows: int, epsilon: float) -> int:
        """The section's `n_bins`, or the public rule's at n̂ = `n_rows` and `epsilon` (`public_bins`)."""
        return public_bins(self.params["n_bins"], n_rows, epsilon, self._cut_columns())

    def _cut_columns(self) -> int:
        """The numeric columns `n_bins` cuts (no public edges in the schema or `bins`): the rule's public input."""
        return equal_width_columns(self.layout, self.params["bins"])

    def _plan_bins(self, n_rows: int, budget: Budget) -> None:
        """The discretiser for n̂ = `n_rows` and the generator's ε (`_bin_count`: public inputs, no budget)."""
        self.discretizer = self._discretizer(self._bin_count(n_rows, budget.epsilon))

    def _discretizer(self, n_bins: int) -> Discretizer:
        """The layout's public bins, `n_bins` equal-width where a numeric column has no public edges (`bins`
        checked against the layout: a ValueError naming `<generator>.bins`); a numeric column's null is a cell of
        the column, not an indicator column (`fold_missing`)."""
        try:
            return Discretizer(self.layout, n_bins, self.params["bins"], fold_missing=True)
        except ValueError as e:
            raise ValueError(f"{self.name}.bins: {e}") from None

    @property
    def names(self) -> list[str]:
        """The model's columns: the discretiser's (indicators folded into their numeric columns)."""
        return self.discretizer.names

    def _plan(self, n_rows: int, budget: Budget) -> MSTPlan:
        """The bins (`_plan_bins`), then `plan_mst` for the layout's columns: data-independent (schema and ε, δ
        only)."""
        self._plan_bins(n_rows, budget)
        return plan_mst(len(self.names), budget.epsilon, budget.delta, n_rows=n_rows)

    def _fit(self, data: RowChunks, streams: Streams) -> Sequence[Event]:
        """Discretise the rows, run the mechanism with its noise from `streams`; the actual events."""
        codes = self._code_passes(data)
        report(self.name, 0, 1)
        self.model, events, edges, self.compression = run_mst(
            codes, self.discretizer.shape, self.names, self.privacy, streams.numpy(f"{self.name}:mechanism"),
            iters=int(self.params["iters"]), device=self._jax_device(), compress_above=self.params["compress_above"])
        self.structure = {"edges": [[self.names[i], self.names[j]] for i, j in edges]}
        report(self.name, 1, 1)
        return events

    def _code_passes(self, data: RowChunks) -> Passes:
        """Passes over the training rows' integer codes (`Discretizer.codes`), one row chunk at a time: the rows are
        never held whole (`reads_in_chunks`), the mechanism counts its marginals chunk by chunk (on a Dask cluster's
        workers when the table has one: `RowChunks.map`)."""
        return Passes(data, (self.discretizer.codes,))

    def _jax_device(self) -> str:
        return "cuda" if self.device == "cuda" else "cpu"

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n encoded rows: codes from the model (`sample_codes`, seeded from `rng`), numeric bins decoded
        uniformly inside the bin."""
        if self.model is None:
            raise RuntimeError(f"{self.name}: fit() or load() first")
        codes = sample_codes(self.model, n, int(rng.integers(2**32)), self.names)
        if self.compression is not None:
            codes = self.compression.expand(codes, rng)
        return self.discretizer.decode(codes, rng)

    def _state(self) -> dict[str, Any]:
        """The discretiser actually used (authoritative on load, whatever the schema says by then) and
        the selected structure; the model's potentials go to <name>.npz (`save`)."""
        state = {"discretizer": self.discretizer.to_dict(), "structure": self.structure}
        if self.compression is not None and self.compression.supported:  # none: the file as before compression
            state["compression"] = self.compression.to_dict()
        return state

    def _restore(self, state: dict[str, Any]) -> None:
        self.discretizer = Discretizer.from_dict(self.layout, state["discretizer"])
        self.structure = state["structure"]
        self.compression = Compression.from_dict(state.get("compression"))

    def save(self, directory: Path) -> None:
        """<name>.json (`PrivateGenerator.save`) and the fitted model as <name>.npz."""
        super().save(directory)
        if self.model is not None:
            est.save_model(self.model, Path(directory) / f"{self.name}.npz")

    @classmethod
    def load(cls, directory: Path, device: str = "cpu") -> "MST":
        """`PrivateGenerator.load`, then the model from <name>.npz when one was saved."""
        out = super().load(directory, device)
        path = Path(directory) / f"{cls.name}.npz"
        if path.exists():
            out.model = est.load_model(path, out._jax_device())
        return out
