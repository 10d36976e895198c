"""The graphical-model half that MST and AIM share: each generator composes one `MarginalModel`, which owns the
discretisation of its rows, the fitted Private-PGM (`mbi`) model, sampling from it and the model's file.

Encoded rows are discretised from public facts only (`pipelines.data.bins.Discretizer`, the one binning of every
generator): the layout's numeric blocks carry the schema's bounds and optional public `bins` edges (overridable by
the section's `bins: {column: [edges]}`, schema units), else `n_bins` equal-width bins over the bounds,
integer-aligned for integer columns (`n_bins` null: the public rule of n̂·ε, `params.mst.public_bins`); a numeric
column's null is one more cell of that column (`Discretizer`'s `fold_missing`). The 1-way measurements count each
numeric bin in `sub_bins` parts (`pipelines.marginal.one_way`), which give the bin its DP-measured shape. Sampling
draws codes from the fitted model (`pipelines.marginal.sample`) and decodes a numeric bin by a part drawn by that
shape and a uniform point inside the part. A column of more than
`compress_above` cells (a long code list) is modelled on the codes its noisy 1-way count supports and one cell for
the rest (`pipelines.marginal.compress`): the mechanism decides the `compression`, sampling expands it back.
The model is saved as <name>.npz (no pickle) next to the generator's <name>.json. Design: docs/aim-mst.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pipelines.data.bins import Discretizer, equal_width_columns
from pipelines.data.encoded import RowChunks
from pipelines.data.layout import Layout
from pipelines.generators.base import PrivateGenerator
from pipelines.generators.params.mst import Params, public_bins, public_sub_bins
from pipelines.marginal import estimate as est
from pipelines.marginal.compress import Compression
from pipelines.marginal.measure import Passes
from pipelines.marginal.one_way import Cells, WithinBins
from pipelines.marginal.sample import sample_codes


class MarginalModel:
    """The discretiser, the fitted model and its compression for generator `name` (module docstring). `params`: the
    generator's section (MST's keys: `n_bins`, `bins`, `sub_bins`); `device`: the generator's, on which mbi runs
    (`jax_device`). The mechanism sets `model`, `compression` and `within` (the bins' shapes) when it fits; the
    discretiser is replaced when the generator plans (`plan_bins`)."""

    def __init__(self, name: str, layout: Layout, params: Params, device: str) -> None:
        self.name, self.layout, self.params = name, layout, params
        self.jax_device = "cuda" if device == "cuda" else "cpu"
        self.discretizer = self._discretizer(self.bin_count(0, 0.0))  # the rule's may change when it plans
        self.model = None  # the fitted mbi MarkovRandomField
        self.compression: Compression | None = None  # the model's domain: codes its 1-way counts support (DP)
        self.within: WithinBins | None = None  # the numeric bins' shapes from the 1-way measurements (DP)

    @property
    def names(self) -> list[str]:
        """The model's columns: the discretiser's (indicators folded into their numeric columns)."""
        return self.discretizer.names

    # -- the public bins -----------------------------------------------------------------------------------------
    def cut_columns(self) -> int:
        """The numeric columns `n_bins` cuts (no public edges in the schema or `bins`): the rule's public input."""
        return equal_width_columns(self.layout, self.params.bins)

    def bin_count(self, n_rows: int, epsilon: float) -> int:
        """The section's `n_bins`, or the public rule's at n̂ = `n_rows` and `epsilon` (`public_bins`)."""
        return public_bins(self.params.n_bins, n_rows, epsilon, self.cut_columns())

    def plan_bins(self, n_rows: int, epsilon: float) -> None:
        """The discretiser for n̂ = `n_rows` and the generator's ε (`bin_count`: public inputs, no budget)."""
        self.discretizer = self._discretizer(self.bin_count(n_rows, epsilon))

    def cut_bins(self, n_rows: int, sigma: float) -> None:
        """The parts of each numeric bin for n̂ = `n_rows` and the plan's 1-way noise σ₁ = `sigma`
        (`public_sub_bins` over the most bins of a numeric column: public inputs, no budget)."""
        numeric = [nb.size for nb in self.discretizer.bins.values()]
        parts = public_sub_bins(self.params.sub_bins, n_rows, sigma, max(numeric, default=1))
        self.discretizer = self._discretizer(self.discretizer.n_bins, parts)

    def _discretizer(self, n_bins: int, sub_bins: int = 1) -> Discretizer:
        """The layout's public bins, `n_bins` equal-width where a numeric column has no public edges (`bins`
        checked against the layout: a ValueError naming `<generator>.bins`), each cut in `sub_bins` parts for the
        1-way measurements; a numeric column's null is a cell of the column, not an indicator column
        (`fold_missing`)."""
        try:
            return Discretizer(self.layout, n_bins, self.params.bins, fold_missing=True, sub_bins=sub_bins)
        except ValueError as e:
            raise ValueError(f"{self.name}.bins: {e}") from None

    # -- the rows, and rows from the model -------------------------------------------------------------------------
    def code_passes(self, data: RowChunks) -> Passes:
        """Passes over the training rows' integer codes (`Discretizer.codes`), one row chunk at a time: the rows are
        never held whole, the mechanism counts its marginals chunk by chunk (on a Dask cluster's workers when the
        table has one: `RowChunks.map`)."""
        return Passes(data, (self.discretizer.codes,))

    def one_way_cells(self, data: RowChunks) -> Cells:
        """The cells the 1-way measurements count: passes over the rows' fine codes (each numeric bin in
        `sub_bins` parts, `Discretizer.fine_codes`) and the parts of each cell."""
        return Cells(Passes(data, (self.discretizer.fine_codes,)), tuple(self.discretizer.splits()))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n encoded rows: codes from the model (`sample_codes`, seeded from `rng`), compressed codes expanded, numeric
        bins decoded inside the bin by its measured shape (`within`; uniformly without one)."""
        if self.model is None:
            raise RuntimeError(f"{self.name}: fit() or load() first")
        codes = sample_codes(self.model, n, int(rng.integers(2**32)), self.names)
        if self.compression is not None:
            codes = self.compression.expand(codes, rng)
        return self.discretizer.decode(codes, rng, self.within)

    # -- persistence -----------------------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The discretiser actually used (authoritative on load, whatever the schema says by then), the
        compression when it compressed a column and the bins' shapes when it cut bins; the model's potentials go to
        <name>.npz (`save`)."""
        state = {"discretizer": self.discretizer.to_dict()}
        if self.compression is not None and self.compression.supported:  # none: the file as before compression
            state["compression"] = self.compression.to_dict()
        if self.within is not None and self.within.shares:
            state["within"] = self.within.to_dict()
        return state

    def restore(self, state: dict[str, Any]) -> None:
        """The discretiser, compression and shapes `state()` wrote."""
        self.discretizer = Discretizer.from_dict(self.layout, state["discretizer"])
        self.compression = Compression.from_dict(state.get("compression"))
        self.within = WithinBins.from_dict(state.get("within"))

    def save(self, directory: Path) -> None:
        """The fitted model as <name>.npz in `directory` (nothing before a fit)."""
        if self.model is not None:
            est.save_model(self.model, Path(directory) / f"{self.name}.npz")

    def load(self, directory: Path) -> None:
        """The model from <name>.npz in `directory`, when one was saved."""
        path = Path(directory) / f"{self.name}.npz"
        if path.exists():
            self.model = est.load_model(path, self.jax_device)


def delegated(attribute: str) -> property:
    """A generator's read-only view of its `marginals`' `attribute` (`gen.model` is `gen.marginals.model`)."""
    return property(
        lambda self: getattr(self.marginals, attribute),
        doc=f"The `MarginalModel`'s `{attribute}` (`self.marginals.{attribute}`).",
    )


class MarginalGenerator(PrivateGenerator):
    """What MST and AIM share in the generator contract: their `MarginalModel` (`marginals`, read through `model`,
    `discretizer`, `compression`, `names`), what their mechanism selected (`structure`, public: DP outputs),
    sampling, and persistence (<name>.json with the discretiser, compression and structure, then <name>.npz). A
    subclass names itself and implements `_plan` and `_fit` (its mechanism)."""

    reads_in_chunks = True  # counts its marginals a row chunk at a time (the mechanisms' two passes)
    discretizer = delegated("discretizer")
    model = delegated("model")
    compression = delegated("compression")
    names = delegated("names")

    def build(self) -> None:
        self.marginals = MarginalModel(self.name, self.layout, self.params, self.device)
        self.structure: dict[str, Any] = {}

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.marginals.sample(n, rng)

    def _state(self) -> dict[str, Any]:
        """The `MarginalModel`'s (discretiser, compression) and the mechanism's `structure`."""
        return {**self.marginals.state(), "structure": self.structure}

    def _restore(self, state: dict[str, Any]) -> None:
        self.marginals.restore(state)
        self.structure = state["structure"]

    def save(self, directory: Path) -> None:
        """<name>.json (`PrivateGenerator.save`) and the fitted model as <name>.npz."""
        super().save(directory)
        self.marginals.save(directory)

    @classmethod
    def load(cls, directory: Path, device: str = "cpu") -> "MarginalGenerator":
        """`PrivateGenerator.load`, then the model from <name>.npz when one was saved."""
        out = super().load(directory, device)
        assert isinstance(out, MarginalGenerator)
        out.marginals.load(directory)
        return out
