"""The encoding every deep generator offers for numeric columns and long code lists: its
DEFAULTS, merged into each such generator's DEFAULTS, and their rules. `PrivateGenerator` applies them
(`pipelines.generators.base`); the map is `pipelines.data.bins.BinnedEncoding`."""
from __future__ import annotations

from typing import Any

from pipelines.errors import ParamError
from pipelines.ranges import MAX_BINS, Range, ints

NUMERIC_ENCODINGS = ("scaled", "bins")
CODE_LIST_ENCODINGS = ("buckets", "one_hot")
# Scaled vs bins measured on public data (not Adult): docs/calibration.md, "How the defaults were chosen".
ENCODING_DEFAULTS: dict[str, Any] = {
    "numeric_encoding": "scaled",  # scaled: a numeric column is one value in [0, 1]; bins: a one-hot over its public
                                   # bins (the schema's `bins` edges, else numeric_bins equal-width bins over its
                                   # bounds) plus the offset inside the bin (pipelines/data/bins.py; no budget)
    "numeric_bins": 20,            # bins per numeric column without public edges (numeric_encoding: bins)
    "code_lists": "buckets",       # buckets: a categorical column of more than 100 codes is a one-hot over 64
                                   # buckets of consecutive codes plus the code's place inside its bucket
                                   # (pipelines/data/code_lists.py; no budget); one_hot: one column per code
}
BIN_COUNT = ints(2, MAX_BINS)      # bins per numeric column: one bin would say nothing of the value
ENCODING_RANGES: dict[str, Range] = {"numeric_bins": BIN_COUNT}


def check_encoding(params: dict[str, Any], section: str) -> None:
    """`numeric_encoding` one of NUMERIC_ENCODINGS and `code_lists` one of CODE_LIST_ENCODINGS (ParamError naming
    `section`.key); `numeric_bins`' range is ENCODING_RANGES'."""
    for key, allowed in (("numeric_encoding", NUMERIC_ENCODINGS), ("code_lists", CODE_LIST_ENCODINGS)):
        if params[key] not in allowed:
            raise ParamError(f"{section}.{key}", f"must be one of {list(allowed)}, got {params[key]!r}")
