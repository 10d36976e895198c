"""The statistics of the privacy-risk gates (pipelines/gates/risk.py): lower confidence bounds of the attacks' risks.

A gate fails only when the evidence of risk is clear at the sample sizes used (small holdouts give wide
intervals): it compares a *lower* confidence bound of an attack's risk with its threshold. One release runs
K interval tests (the DOMIAS and DCR AUCs, the exact-copy excess and every anonymeter risk that ran), so each
bound is one-sided at level α/K, α = 1 − `confidence` (Bonferroni): a generator whose true risk is at every
threshold is refused by chance with probability at most α, instead of up to 1 − 0.975^K (16 % for K = 7) with
per-test 95 % intervals. Membership: AUC − z·se (bootstrap standard error); anonymeter: R − z·σ_R (Wilson
errors, eq. 1-2); exact copies: Newcombe's lower bound of the excess r_S − r_H (``excess_lower_bound``);
z = Φ⁻¹(1 − α/K).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import norm

from pipelines.evaluation.attacks.anonymeter import risk_interval, wilson


def family_z(confidence: float, tests: int) -> float:
    """z = Φ⁻¹(1 − α/K): the one-sided normal quantile of each of K tests at family-wise level α = 1 − confidence."""
    return float(norm.ppf(1 - (1 - confidence) / tests))


def risk_lower_bound(attack: dict[str, Any], z: float) -> float:
    """max(R − z·σ_R, 0) of one anonymeter attack, recomputed from its counts (``risk_interval``)."""
    risk, error = risk_interval(attack["counts"]["main"], attack["counts"]["control"], z)
    return max(risk - error, 0.0)


def excess_lower_bound(synthetic: tuple[int, int], holdout: tuple[int, int], z: float) -> float:
    """Lower confidence bound of r_S − r_H from k_S of n_S synthetic and k_H of n_H holdout rows that equal a
    training row: Newcombe's hybrid score interval (Newcombe 1998, method 10),
    d − √((r_S − l_S)² + (u_H − r_H)²) with (l, u) each rate's Wilson interval at z. Given the training rows,
    a generator that samples the population without copying gives synthetic rows that match a training row
    with the same probability as a holdout row, so this is a two-sample test of equal rates; unlike a Wald
    interval it stays valid at 0 or n matches (a copy: r_S = 1)."""
    (c_s, h_s), (c_h, h_h) = wilson(*synthetic, z), wilson(*holdout, z)
    r_s, r_h = synthetic[0] / synthetic[1], holdout[0] / holdout[1]
    return float(r_s - r_h - np.hypot(r_s - (c_s - h_s), (c_h + h_h) - r_h))
