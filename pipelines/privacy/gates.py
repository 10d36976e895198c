"""Release gates: functions of (model, data, config) -> pass/fail + evidence (ARCHITECTURE §3)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from pipelines.errors import LedgerIntegrityError
from pipelines.privacy.ledger import Ledger


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
