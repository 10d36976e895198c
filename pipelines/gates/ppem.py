"""PPEM's own gate: α-LMDP (Definition 2.2, §5.2.1), from the KSD and MMD tests of pipelines/stats."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from pipelines.evaluation.outside_dp import ALPHA_LMDP_GATE
from pipelines.gates.release import GateResult, gate

if TYPE_CHECKING:
    import torch


@gate("alpha_lmdp")
def alpha_lmdp_gate(
    score: Callable[[torch.Tensor], torch.Tensor],
    real: np.ndarray,
    generated: np.ndarray,
    alpha: float,
    n_bootstrap: int,
    n_permutations: int,
    max_rows: int,
    seed: int,
) -> GateResult:
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
    mmd = mmd_permutation_test(
        torch.as_tensor(np.asarray(generated, dtype=np.float32)), x, n_permutations=n_permutations, seed=seed
    )
    ksd_rejects, mmd_rejects = bool(ksd.p_value <= alpha), bool(mmd.p_value <= alpha)
    refusals = [
        why
        for rejected, why in (
            (
                ksd_rejects,
                f"the KSD test cannot reject that the real protected marginal fits the energy model "
                f"(p = {ksd.p_value:.3g} > α = {alpha})",
            ),
            (
                mmd_rejects,
                f"the MMD test cannot tell the generated protected marginal from the real one "
                f"(p = {mmd.p_value:.3g} > α = {alpha})",
            ),
        )
        if not rejected
    ]
    return GateResult(
        "alpha_lmdp",
        ksd_rejects and mmd_rejects,
        {
            "alpha": alpha,
            "ksd": ksd.to_dict(),
            "mmd": mmd.to_dict(),
            "rows_used": len(real),
            "rejects_h0_real_marginal_fits_model": ksd_rejects,
            "rejects_h0_generated_marginal_is_real": mmd_rejects,
            "refused_because": refusals,
            "outside_dp": ALPHA_LMDP_GATE,
        },
    )
