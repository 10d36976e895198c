"""The ledger gate: the data set's recorded ε against its lifetime budget, and the ledger's integrity."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from pipelines.errors import LedgerIntegrityError
from pipelines.evaluation.outside_dp import sampler_facts
from pipelines.gates.release import GateResult, gate
from pipelines.privacy.events import NonPrivateEvent, event_from_dict
from pipelines.privacy.ledger import Ledger


@gate("ledger", dp=True)
def ledger_gate(
    ledger: Ledger,
    dataset: str,
    delta: float,
    lifetime_epsilon: float,
    model_row_ids: list[int],
    internal_release: bool = False,
    expect_head: Mapping[str, Any] | None = None,
    head_source: str = "the last release",
) -> GateResult:
    """Recompute the data set's total ε from every recorded event; pass iff it is within budget,
    the hash chain verifies (and still holds `expect_head` {"seq", "hash"}, the head recorded by the
    last release, read from `head_source`: deleting rows up to it is caught), the model's own ledger
    rows are present, and the model is private, or non-private for an internal-only release
    (`internal_release`; labelled NON-PRIVATE in the evidence). The label (the manifest's `guarantee`) is
    "differentially private", NON-PRIVATE, or, where one of the model's events was not sampled exactly (the support
    points' finite MCMC chain), the heuristic guarantee `outside_dp.MCMC_HEURISTIC`: such a release still passes,
    labelled, with `exact_sampler` false in the evidence.

    Uses only the ledger (public metadata about mechanisms), never the data.
    """
    try:
        chain = ledger.verify(expect_head=expect_head)
    except LedgerIntegrityError as e:
        reason = f"{e} (ledger head recorded by {head_source})" if expect_head is not None else str(e)
        return GateResult(
            "ledger",
            False,
            {"chain_ok": False, "error": reason, "expected_head": None if expect_head is None else dict(expect_head)},
        )
    total = ledger.spent(dataset, delta)
    total_rdp = ledger.spent_rdp(dataset, delta)
    rows = {r["seq"]: r for r in ledger.rows(dataset)}
    missing = sorted(set(model_row_ids) - set(rows))
    events = [event_from_dict(json.loads(rows[i]["event_json"])) for i in model_row_ids if i in rows]
    non_private = any(isinstance(e, NonPrivateEvent) for e in events)
    sampler = sampler_facts(events)
    passed = (
        math.isfinite(total)
        and total <= lifetime_epsilon
        and not missing
        and bool(model_row_ids)
        and (internal_release or not non_private)
    )
    return GateResult(
        "ledger",
        passed,
        {
            "non_private": non_private,
            "internal_release": internal_release,
            "exact_sampler": sampler["exact_sampler"],
            "label": (
                "NON-PRIVATE (internal release only)"
                if non_private and internal_release
                else "NON-PRIVATE: refused (set privacy.internal_release: true for an internal-only release)"
                if non_private
                else sampler.get("guarantee", "differentially private")
            ),
            "chain_ok": True,
            "ledger_rows": chain["rows"],
            "ledger_head": chain["head"],
            "chain": chain["chain"],
            "expected_head": None if expect_head is None else dict(expect_head),
            "epsilon_total_pld": total,
            "epsilon_total_rdp": total_rdp,
            "delta": delta,
            "lifetime_epsilon": lifetime_epsilon,
            "model_row_ids": list(model_row_ids),
            "missing_row_ids": missing,
        },
    )
