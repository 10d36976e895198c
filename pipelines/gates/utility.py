"""The utility gate: params.yaml `utility_gate`'s policy applied to evaluate's utility verdict
(pipelines/evaluation/verdict.py; docs/privacy-risk.md)."""

from __future__ import annotations

from typing import Any

from pipelines.evaluation.verdict import REASONS, SECTION
from pipelines.gates.release import GateResult, gate


@gate("utility")
def utility_gate(verdict: dict[str, Any], s: dict[str, Any]) -> GateResult:
    """The `utility` gate: fails when `s` (`Config.utility_gate`, pipelines/config.py) says to refuse tables with this
    verdict; a labelled verdict passes and travels to the manifest and both reports. The evidence keeps the numbers."""
    word = verdict["verdict"]
    action = s.get(word) if word in REASONS else None
    evidence = {
        "verdict": word,
        "policy": {k: s[k] for k in REASONS},
        "action": action or "none",
        "task": verdict["task"],
        "two_way": verdict["two_way"],
        "outside_dp": verdict["outside_dp"],
    }
    if action is not None:
        evidence["reason"] = f"utility verdict '{word}' ({SECTION}.{word}: {action}): {REASONS[word]}"
    return GateResult("utility", action != "refuse", evidence)
