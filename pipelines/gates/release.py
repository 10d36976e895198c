"""Release gates: functions of (model, data, config) -> pass/fail + evidence (docs/architecture.md, contracts)."""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pipelines.errors import LedgerIntegrityError
from pipelines.evaluation.outside_dp import ALPHA_LMDP_GATE, sampler_facts
from pipelines.privacy.events import NonPrivateEvent, event_from_dict
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
                model_row_ids: list[int], internal_release: bool = False,
                expect_head: Mapping[str, Any] | None = None, head_source: str = "the last release") -> GateResult:
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
        return GateResult("ledger", False, {"chain_ok": False, "error": reason,
                                            "expected_head": None if expect_head is None else dict(expect_head)})
    total = ledger.spent(dataset, delta)
    total_rdp = ledger.spent_rdp(dataset, delta)
    rows = {r["seq"]: r for r in ledger.rows(dataset)}
    missing = sorted(set(model_row_ids) - set(rows))
    events = [event_from_dict(json.loads(rows[i]["event_json"])) for i in model_row_ids if i in rows]
    non_private = any(isinstance(e, NonPrivateEvent) for e in events)
    sampler = sampler_facts(events)
    passed = (math.isfinite(total) and total <= lifetime_epsilon and not missing and bool(model_row_ids)
              and (internal_release or not non_private))
    return GateResult("ledger", passed, {
        "non_private": non_private, "internal_release": internal_release, "exact_sampler": sampler["exact_sampler"],
        "label": ("NON-PRIVATE (internal release only)" if non_private and internal_release else
                  "NON-PRIVATE: refused (set privacy.internal_release: true for an internal-only release)"
                  if non_private else sampler.get("guarantee", "differentially private")),
        "chain_ok": True, "ledger_rows": chain["rows"], "ledger_head": chain["head"], "chain": chain["chain"],
        "expected_head": None if expect_head is None else dict(expect_head),
        "epsilon_total_pld": total, "epsilon_total_rdp": total_rdp, "delta": delta,
        "lifetime_epsilon": lifetime_epsilon, "model_row_ids": list(model_row_ids),
        "missing_row_ids": missing,
    })


def alpha_lmdp_gate(score: Callable[[torch.Tensor], torch.Tensor], real: np.ndarray, generated: np.ndarray,
                    alpha: float, n_bootstrap: int, n_permutations: int, max_rows: int, seed: int) -> GateResult:
    """The α-LMDP gate of PPEM (Definition 2.2, §5.2.1): passes iff BOTH level-α tests reject.

    - KSD goodness of fit, H₀: real x′ ~ p_ξ ∝ exp(−E_ξ) (`score`: the model's score −∇ₓE_ξ),
      quadratic KSD with wild-bootstrap p-value: the paper's test of α-LMDP.
    - MMD two-sample test, H₀: real x′ and the generator's x′ (`generated`) share a distribution,
      permutation p-value: the test of Definition 2.2 on p_Gx′ itself, the marginal that is released.

    Why both (docs/architecture.md, departures): the KSD test reaches p_Gx′ only through E_ξ, and a
    margin-loss energy is not a density model of G_ω's output (Theorem 3.2: at equilibrium E_ξ is
    constant on the support). Measured: the KSD test rejects for every trained PPEM, λ_α = 0
    included, so on its own it never refuses. The paper's own confirmation (§5.2.1) asks both
    p-values to be ≤ α; so does this gate. A generator whose x′ the MMD test cannot tell from the
    real x′ is refused whatever E_ξ says.

    Both statistics are computed from real rows (at most `max_rows`, a seeded random subset, as the
    U-statistics cost O(n²)); they are not covered by the DP guarantee (privacy rule 6) and say so.
    """
    import torch

    from pipelines.stats.ksd import ksd_bootstrap_test
    from pipelines.stats.two_sample import mmd_permutation_test

    rng = np.random.default_rng(seed)
    if len(real) > max_rows:
        real = real[np.sort(rng.choice(len(real), max_rows, replace=False))]
    x = torch.as_tensor(np.asarray(real, dtype=np.float32))
    ksd = ksd_bootstrap_test(x, score(x), n_bootstrap=n_bootstrap, seed=seed)
    mmd = mmd_permutation_test(torch.as_tensor(np.asarray(generated, dtype=np.float32)), x,
                               n_permutations=n_permutations, seed=seed)
    ksd_rejects, mmd_rejects = bool(ksd.p_value <= alpha), bool(mmd.p_value <= alpha)
    refusals = [why for rejected, why in (
        (ksd_rejects, f"the KSD test cannot reject that the real protected marginal fits the energy model "
                      f"(p = {ksd.p_value:.3g} > α = {alpha})"),
        (mmd_rejects, f"the MMD test cannot tell the generated protected marginal from the real one "
                      f"(p = {mmd.p_value:.3g} > α = {alpha})")) if not rejected]
    return GateResult("alpha_lmdp", ksd_rejects and mmd_rejects, {
        "alpha": alpha, "ksd": ksd.to_dict(), "mmd": mmd.to_dict(), "rows_used": len(real),
        "rejects_h0_real_marginal_fits_model": ksd_rejects,
        "rejects_h0_generated_marginal_is_real": mmd_rejects,
        "refused_because": refusals,
        "outside_dp": ALPHA_LMDP_GATE,
    })
