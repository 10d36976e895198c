"""The numeric encoding every deep generator offers (issue 21): its DEFAULTS, merged into each such generator's
DEFAULTS, and their rules. `PrivateGenerator` applies them (`pipelines.generators.base`); the binning is
`pipelines.data.bins.BinnedEncoding`."""
from __future__ import annotations

from typing import Any

from pipelines.errors import ParamError

NUMERIC_ENCODINGS = ("scaled", "bins")
# Scaled vs bins measured on public data (not Adult): docs/calibration.md, "How the defaults were chosen".
ENCODING_DEFAULTS: dict[str, Any] = {
    "numeric_encoding": "scaled",  # scaled: a numeric column is one value in [0, 1]; bins: a one-hot over its public
                                   # bins (the schema's `bins` edges, else numeric_bins equal-width bins over its
                                   # bounds) plus the offset inside the bin (pipelines/data/bins.py; no budget)
    "numeric_bins": 20,            # bins per numeric column without public edges (numeric_encoding: bins)
}


def check_bin_count(value: Any, key: str) -> None:
    """A number of bins: an integer >= 2 (ParamError naming `key`)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ParamError(key, f"must be an integer >= 2, got {value!r}")


def check_encoding(params: dict[str, Any], section: str) -> None:
    """`numeric_encoding` one of NUMERIC_ENCODINGS and `numeric_bins` a bin count (ParamError naming `section`.key)."""
    if params["numeric_encoding"] not in NUMERIC_ENCODINGS:
        raise ParamError(f"{section}.numeric_encoding", f"must be one of {list(NUMERIC_ENCODINGS)}, "
                         f"got {params['numeric_encoding']!r}")
    check_bin_count(params["numeric_bins"], f"{section}.numeric_bins")
