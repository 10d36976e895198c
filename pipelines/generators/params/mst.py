"""MST's parameters (`pipelines.generators.mst`); AIM's extend them (`pipelines.generators.params.aim`)."""
from __future__ import annotations

from typing import Any

from pipelines.errors import ParamError

DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,        # target ε; "inf" measures exact marginals (non-private)
    "delta": 1e-5,         # used only when fit() gets no budget and plan() was not called
    "n_bins": 32,          # equal-width bins per numeric column (over the schema bounds)
    "schema": None,        # path of the data set's schema YAML: integer-aligned bins and its public `bins` edges
    "bins": {},            # {column: [edges in schema units]}: public edges (needs `schema`), over the schema's
    "iters": 2000,         # mirror-descent iterations of the final estimation
    "steps": None,         # unused (contract: merge_params reads steps/epochs)
    "epochs": None,
    "seed": 0,             # sampling (public)
    "noise_seed": None,    # DP noise: None = OS entropy (pipelines/privacy/noise.py); an integer is for tests only
}


def check_bins(params: dict[str, Any], section: str) -> None:
    """Public `bins` edges are in schema units, so they need `schema` (ParamError naming `section`.bins); their
    columns are checked against the schema when the generator is built."""
    if params["schema"] is None and params["bins"]:
        raise ParamError(f"{section}.bins", "needs 'schema' (the edges are in schema units)")


def check_params(params: dict[str, Any]) -> None:
    """The params-only rule of an `mst:` section over DEFAULTS (`check_bins`)."""
    check_bins(params, "mst")
