"""Whether the gates' results allow publication, under params.yaml `release.non_dp_gates`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pipelines.gates.ledger import ledger_gate
from pipelines.gates.ppem import alpha_lmdp_gate
from pipelines.gates.release import Gate, GateResult
from pipelines.gates.release_test import release_test_gate
from pipelines.gates.risk import risk_gates
from pipelines.gates.support_points import mh_convergence_gate
from pipelines.gates.utility import utility_gate

GATES: tuple[Gate[Any, Any], ...] = (
    ledger_gate,
    release_test_gate,
    alpha_lmdp_gate,
    mh_convergence_gate,
    risk_gates,
    utility_gate,
)
DP_GATES = tuple(name for g in GATES if g.dp for name in g.names)  # they decide whatever `non_dp_gates` says


def decide(gates: Sequence[GateResult], non_dp_gates: Literal["advise", "refuse"]) -> dict[str, Any]:
    """checks.json's decision over `gates`: under `advise` only the DP gates (`DP_GATES`: their bits may be public)
    decide, the others are findings for the steward report; under `refuse` every gate decides. {"passed",
    "non_dp_gates", "deciding_gates": their names in the gates' order}."""
    deciding = list(gates) if non_dp_gates == "refuse" else [g for g in gates if g.name in DP_GATES]
    return {
        "passed": all(g.passed for g in deciding),
        "non_dp_gates": non_dp_gates,
        "deciding_gates": [g.name for g in deciding],
    }
