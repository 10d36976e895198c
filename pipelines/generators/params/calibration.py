"""The `calibration:` sub-section every generator accepts (DP marginal calibration of its samples,
`pipelines/marginal/calibrate.py`): its defaults and rules, defined once. A generator's DEFAULTS hold
`"calibration": calibration_defaults(share)` with the share that suits the method (0 turns it off: MST and AIM
measure marginals themselves)."""
from __future__ import annotations

from typing import Any

from pipelines.errors import ParamError
from pipelines.ranges import POSITIVE, Range, check_ranges, ints, reals

PAIRS = ("target", "none")   # every column with the schema's target / no 2-way marginal; or [[a, b], ...]


# How the shares and these defaults were chosen on public data (not Adult): docs/calibration.md, "How the defaults
# were chosen".
def calibration_defaults(share: float) -> dict[str, Any]:
    """The sub-section's defaults with the generator's own `share`."""
    return {
        "share": share,        # fraction of the generator's ε spent on the noisy marginals (0: off; < 1)
        "pairs": "target",     # 2-way marginals measured: "target" (every column with the target), "none", or a
                               # list of "target" and explicit column pairs, e.g. [target, [relationship, sex]]
                               # for columns the public documentation says determine each other
        "oversample": 5,       # M = oversample × n rows drawn from the generator, raked, then n resampled
        "sweeps": 50,          # raking sweeps over every measured marginal (at most; stops at `tolerance`)
        "tolerance": 1e-6,     # largest total variation distance between a raked and a target marginal
        "max_noise_tv": None,  # a number: off when the noise's expected 1-way TV error (public: σ, bins, n̂;
                               # calibrate.expected_noise_tv) exceeds it, the method then gets all of ε; null: always
                               # on (measured better for most generators even where that error is ≈ 3: docs/calibration.md)
    }


# the sub-section's ranges, beside `calibration_defaults`: M = oversample × n̂ rows are drawn and raked, so both
# counts bound the work
CALIBRATION_RANGES: dict[str, Range] = {
    "share": reals(ge=0, lt=1, why="0 turns calibration off; the method needs the rest of ε"),
    "oversample": ints(1, 100),
    "sweeps": ints(1, 10**4),
    "tolerance": POSITIVE,
    "max_noise_tv": reals(gt=0, nullable=True, why="null: never off"),
}


def calibration_params(section: str, defaults: dict[str, Any], given: Any) -> dict[str, Any]:
    """`given` (the params' `calibration:` mapping, or None) over the generator's `defaults`, checked: a
    ParamError naming `<section>.calibration.<key>` for an unknown key or a value out of CALIBRATION_RANGES."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise ParamError(f"{section}.calibration", f"must be a mapping of keys {sorted(defaults)}, got {given!r}")
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ParamError(f"{section}.calibration", f"unknown keys {unknown}; known: {sorted(defaults)}")
    p = {**defaults, **given}
    key = f"{section}.calibration"
    check_ranges(key, p, CALIBRATION_RANGES, defaults)
    pairs = p["pairs"]
    explicit = isinstance(pairs, (list, tuple)) and all(
        q == "target" or (isinstance(q, (list, tuple)) and len(q) == 2 and all(isinstance(c, str) for c in q)
                          and q[0] != q[1]) for q in pairs)
    if pairs not in PAIRS and not explicit:
        raise ParamError(f"{key}.pairs", f"must be 'target', 'none' or a list of 'target' and pairs of two distinct "
                         f"column names such as [target, [relationship, sex]], got {pairs!r}")
    cap = p["max_noise_tv"]
    return {**p, "share": float(p["share"]), "tolerance": float(p["tolerance"]),
            "max_noise_tv": None if cap is None else float(cap),
            "pairs": pairs if pairs in PAIRS else [q if q == "target" else list(q) for q in pairs]}
