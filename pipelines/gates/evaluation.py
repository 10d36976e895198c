"""The gates over evaluate's results (metrics.json): the privacy-risk gates and the utility gate."""

from __future__ import annotations

from typing import Any

from pipelines.config import RiskGates, UtilityGate
from pipelines.evaluation.outside_dp import EVALUATION_METRICS, UNAVAILABLE
from pipelines.gates.release import GateResult
from pipelines.gates.risk import risk_gates
from pipelines.gates.utility import utility_gate


def evaluation_gates(metrics: dict[str, Any], risk: RiskGates, utility: UtilityGate) -> list[GateResult]:
    """The privacy-risk gates (`risk_gates`, thresholds `risk`) and the utility gate (policy `utility`) over evaluate's
    results. Where the real rows did not
    allow the evaluation (metrics.json's `evaluation_unavailable`: a holdout with one target class, say), each of them
    fails with that reason: under `release.non_dp_gates: advise` a finding in the steward report that decides
    nothing, under `refuse` a refusal (nothing unevaluated is published on the gates' word)."""
    reason = metrics.get(UNAVAILABLE)
    if reason is None:
        return [
            *risk_gates(metrics["privacy_risk"], risk.model_dump()),
            utility_gate(metrics["utility_verdict"], utility.model_dump()),
        ]
    return [
        GateResult(name, False, {"reason": f"not evaluated: {reason}", "outside_dp": EVALUATION_METRICS})
        for name in (*risk_gates.names, *utility_gate.names)
    ]
