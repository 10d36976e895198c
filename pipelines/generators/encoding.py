"""The model encoding, a part every generator composes with its method (`PrivateGenerator.encoding`): the public map
between the table's layout and the layout the method trains on, and back.

Under the encoding params (`pipelines.parameters.Encoded`) `numeric_encoding: bins` bins the numeric columns and
`code_lists: buckets` buckets the long code lists (`pipelines.data.bins.BinnedEncoding`); otherwise, or for a
generator without those params, the method trains on the table's layout itself. The map is a function of the layout
and the params alone: it spends no budget, and the plan, the networks and every sensitivity are for `layout`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from pipelines.data.bins import BinnedEncoding, long_lists
from pipelines.data.layout import Layout, project_to_layout
from pipelines.data.schema import NUMERIC_KINDS
from pipelines.parameters import Encoded, GeneratorParams


class ModelEncoding:
    """The map between `table_layout` and the method's `layout` under `params`. `scaled`: the numeric columns kept
    as one scaled value under `numeric_encoding: bins` (None: the protected ones; PPEM names its x′). `binning`: the
    `BinnedEncoding`, None when the method trains on the table's layout (scaled numerics and no long list)."""

    def __init__(self, table_layout: Layout, params: GeneratorParams, scaled: Iterable[str] | None = None) -> None:
        self.table_layout = table_layout
        self.binning = _binning(table_layout, params, scaled)
        self.layout = table_layout if self.binning is None else self.binning.layout

    def model_rows(self, X: Any) -> Any:
        """Rows of the table's layout as rows of the method's (`BinnedEncoding.encode`; X itself when unbinned)."""
        return X if self.binning is None else self.binning.encode(X)

    def table_rows(self, raw: np.ndarray) -> np.ndarray:
        """The method's raw rows as exact rows of the table's layout: `project_to_layout` onto the method's layout,
        then `BinnedEncoding.decode` when binned."""
        rows = project_to_layout(raw, self.layout)
        return rows if self.binning is None else self.binning.decode(rows)


def _binning(layout: Layout, params: GeneratorParams, scaled: Iterable[str] | None) -> BinnedEncoding | None:
    """The `BinnedEncoding` the encoding params ask for on `layout`, None when neither applies."""
    if not isinstance(params, Encoded):
        return None
    bins, lists = params.numeric_encoding == "bins", params.code_lists == "buckets" and bool(long_lists(layout))
    if not (bins or lists):
        return None
    numeric = {b.column for b in layout.blocks if b.kind in NUMERIC_KINDS}
    kept = ({b.column for b in layout.blocks if b.protected} if scaled is None else set(scaled)) if bins else numeric
    return BinnedEncoding(layout, params.numeric_bins, kept, code_lists=lists)
