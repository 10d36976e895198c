"""The DP release test's gate: the noisy bit of pipelines/privacy/release_test.py, as paid for and as checks.json
lists it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines.gates.release import GateResult, gate
from pipelines.privacy.release_test import ReleaseTest


def release_test_receipt(result: ReleaseTest, inputs: str, ledger_row_ids: list[int]) -> dict[str, Any]:
    """What the paid test keeps (`Paths.release_test`): its bit and evidence, `inputs` (the hash the bit is a function
    of) and the ledger rows that paid for it."""
    return GateResult(
        "release_test",
        result.passed,
        {**result.evidence(), "inputs": inputs, "reused": False, "ledger_row_ids": ledger_row_ids},
    ).to_dict()


@gate("release_test", dp=True)
def release_test_gate(receipt: Mapping[str, Any], reused: bool) -> GateResult:
    """The release test's gate from its `receipt` (`release_test_receipt`): `reused` when this run returned the bit
    already paid for instead of spending again."""
    return GateResult(receipt["name"], receipt["passed"], {**receipt["evidence"], "reused": reused})
