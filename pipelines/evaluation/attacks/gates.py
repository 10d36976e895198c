"""params.yaml `risk_gates` thresholds as release gates over evaluate's privacy-risk results.

A gate fails only when the evidence of risk is clear at the sample sizes used (small holdouts give wide
intervals): it compares a *lower* confidence bound of an attack's risk with its threshold. One release runs
K interval tests (the DOMIAS and DCR AUCs, the exact-copy excess and every anonymeter risk that ran), so each
bound is one-sided at level α/K, α = 1 − `confidence` (Bonferroni): a generator whose true risk is at every
threshold is refused by chance with probability at most α, instead of up to 1 − 0.975^K (16 % for K = 7) with
per-test 95 % intervals. Membership: AUC − z·se (bootstrap standard error); anonymeter: R − z·σ_R (Wilson
errors, eq. 1-2); exact copies: Newcombe's lower bound of the excess r_S − r_H (``excess_lower_bound``);
z = Φ⁻¹(1 − α/K).
DCR alone is never a gate: the membership gate takes the worse of the DOMIAS and DCR attacks, and the copy
gate counts exact copies beyond the rate a fresh real sample (the holdout) has.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import norm

from pipelines.evaluation.attacks.anonymeter import risk_interval, wilson
from pipelines.gates.release import GateResult


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


GATES = ("membership_inference", "exact_copies", "singling_out_risk", "linkability_risk", "inference_risk")


def risk_gates(risk: dict[str, Any], t: dict[str, float]) -> list[GateResult]:
    """The release gates of one generator's `privacy_risk` results (``suite.privacy_risk``)."""
    outside = risk["outside_dp"]
    member = {name: risk["membership"][name] for name in ("domias", "dcr")}
    ran = {n: r for n, r in risk["anonymeter"].items() if "risk" in r}
    tests = len(member) + 1 + len(ran)  # + 1: the exact-copy excess
    z = family_z(t["confidence"], tests)
    family = {"family_confidence": t["confidence"], "family_tests": tests, "z": z}
    auc_low = {n: a["auc"] - z * a["auc_se"] for n, a in member.items()}
    worst = max(auc_low, key=auc_low.get)
    gates = [GateResult("membership_inference", auc_low[worst] <= t["membership_auc_max"], {
        "threshold_auc_lower_bound": t["membership_auc_max"], "worst_attack": worst, **family,
        **{f"{n}_auc": member[n]["auc"] for n in member}, **{f"{n}_auc_lower_bound": auc_low[n] for n in member},
        **{f"{n}_auc_ci95": member[n]["auc_ci95"] for n in member},
        **{f"{n}_tpr_at_1pct_fpr": member[n]["tpr_at_1pct_fpr"] for n in member}, "outside_dp": outside})]
    c = risk["copies"]
    excess = c["exact_match_rate"] - c["holdout_exact_match_rate"]
    copy_low = excess_lower_bound(*(tuple(c["exact_match_counts"][k]) for k in ("synthetic", "holdout")), z)
    gates.append(GateResult("exact_copies", copy_low <= t["exact_match_excess_max"], {
        "exact_match_rate": c["exact_match_rate"], "holdout_exact_match_rate": c["holdout_exact_match_rate"],
        "exact_match_counts": c["exact_match_counts"], "excess": excess, "excess_lower_bound": copy_low,
        "threshold_excess_lower_bound": t["exact_match_excess_max"], **family, "outside_dp": outside}))
    low = {n: risk_lower_bound(a, z) for n, a in ran.items()}
    for gate, key, attacks in (("singling_out", "singling_out_risk_max",
                                ("singling_out_univariate", "singling_out_multivariate")),
                               ("linkability", "linkability_risk_max", ("linkability",)),
                               ("inference", "inference_risk_max", ("inference",))):
        here = [n for n in attacks if n in ran]
        lower = max((low[n] for n in here), default=0.0)
        gates.append(GateResult(f"{gate}_risk", lower <= t[key], {
            "threshold_risk_lower_bound": t[key], "risk_lower_bound": lower, **family,
            **{f"{n}_risk": ran[n]["risk"] for n in here}, **{f"{n}_risk_ci95": ran[n]["risk_ci95"] for n in here},
            **({"skipped": sorted(set(attacks) - set(here))} if len(here) < len(attacks) else {}),
            "outside_dp": outside}))
    return gates
