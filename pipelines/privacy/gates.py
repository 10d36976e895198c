"""Release gates: functions of (model, data, config) -> pass/fail + evidence (ARCHITECTURE §3)."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pipelines.errors import LedgerIntegrityError
from pipelines.privacy.ledger import Ledger

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class GateResult:
    name: str
    passed: bool
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ledger_gate(ledger: Ledger, dataset: str, delta: float, lifetime_epsilon: float,
                model_row_ids: list[int]) -> GateResult:
    """Recompute the data set's total ε from every recorded event; pass iff it is within budget,
    the hash chain verifies, and the model's own ledger rows are present.

    Uses only the ledger (public metadata about mechanisms), never the data.
    """
    try:
        chain = ledger.verify()
    except LedgerIntegrityError as e:
        return GateResult("ledger", False, {"chain_ok": False, "error": str(e)})
    total = ledger.spent(dataset, delta)
    total_rdp = ledger.spent_rdp(dataset, delta)
    present = {r["seq"] for r in ledger.rows(dataset)}
    missing = sorted(set(model_row_ids) - present)
    passed = math.isfinite(total) and total <= lifetime_epsilon and not missing and bool(model_row_ids)
    return GateResult("ledger", passed, {
        "chain_ok": True, "ledger_rows": chain["rows"], "ledger_head": chain["head"],
        "epsilon_total_pld": total, "epsilon_total_rdp": total_rdp, "delta": delta,
        "lifetime_epsilon": lifetime_epsilon, "model_row_ids": list(model_row_ids),
        "missing_row_ids": missing,
    })


def alpha_lmdp_gate(score: Callable[[torch.Tensor], torch.Tensor], real: np.ndarray, generated: np.ndarray,
                    alpha: float, n_bootstrap: int, n_permutations: int, max_rows: int, seed: int) -> GateResult:
    """The α-LMDP gate of PPEM (Definition 2.2, §5.2.1): pass iff the level-α goodness-of-fit test of
    H₀: real x′ ~ p_model rejects, i.e. the quadratic KSD wild-bootstrap p-value (`score`: the model's
    score −∇ₓE) is ≤ α. The MMD two-sample test of generated against real x′ is recorded as evidence.

    Both statistics are computed from real rows (at most `max_rows`, a seeded random subset, as the
    U-statistics cost O(n²)); they are not covered by the DP guarantee (privacy rule 6) and say so.
    """
    import torch

    from pipelines.privacy.ksd import ksd_bootstrap_test
    from pipelines.privacy.two_sample import mmd_permutation_test

    rng = np.random.default_rng(seed)
    if len(real) > max_rows:
        real = real[np.sort(rng.choice(len(real), max_rows, replace=False))]
    x = torch.as_tensor(np.asarray(real, dtype=np.float32))
    ksd = ksd_bootstrap_test(x, score(x), n_bootstrap=n_bootstrap, seed=seed)
    mmd = mmd_permutation_test(torch.as_tensor(np.asarray(generated, dtype=np.float32)), x,
                               n_permutations=n_permutations, seed=seed)
    return GateResult("alpha_lmdp", bool(ksd.p_value <= alpha), {
        "alpha": alpha, "ksd": ksd.to_dict(), "mmd": mmd.to_dict(), "rows_used": len(real),
        "rejects_h0_real_marginal_fits_model": bool(ksd.p_value <= alpha),
        "outside_dp": "α-LMDP gate: KSD and MMD tests computed on real training rows of the protected columns",
    })
