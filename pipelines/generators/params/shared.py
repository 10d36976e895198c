"""The keys every generator's section shares, in one place: the public `seed`, the test-only `noise_seed`, the
marginal calibration and (deep generators) the numeric encoding. Each generator's DEFAULTS end with
`**shared_defaults(...)` and its RANGES with `**shared_ranges(...)`; its method keys come before."""
from __future__ import annotations

from typing import Any

from pipelines.generators.params.calibration import calibration_defaults
from pipelines.generators.params.encoding import ENCODING_DEFAULTS, ENCODING_RANGES
from pipelines.ranges import NOISE_SEED, SEED, Range


def shared_defaults(calibration_share: float, encoding: bool = True) -> dict[str, Any]:
    """`seed` (public: initialisation, batches of synthetic rows, sampling), `noise_seed` (DP noise: None = the
    steward key or OS entropy, pipelines/privacy/noise.py; an integer only in an internal release, for tests and
    audits: a published noise seed voids the guarantee), `calibration` at `calibration_share` of the generator's ε
    (params/calibration.py; 0: off) and, with `encoding`, numeric_encoding / numeric_bins (params/encoding.py)."""
    return {"seed": 0, "noise_seed": None, "calibration": calibration_defaults(calibration_share),
            **(ENCODING_DEFAULTS if encoding else {})}


def shared_ranges(encoding: bool = True) -> dict[str, Range]:
    """The ranges of `shared_defaults`' numeric keys (the `calibration:` mapping's: CALIBRATION_RANGES)."""
    return {"seed": SEED, "noise_seed": NOISE_SEED, **(ENCODING_RANGES if encoding else {})}
