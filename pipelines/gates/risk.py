"""The privacy-risk gates: params.yaml `risk_gates` thresholds over evaluate's privacy-risk results.

A gate fails only when the evidence of risk is clear at the sample sizes used: it compares a *lower* confidence bound
of an attack's risk, one-sided at the family-wise level of all the release's interval tests
(pipelines/evaluation/attacks/gates.py: the bounds and their Bonferroni correction), with its threshold.
DCR alone is never a gate: the membership gate takes the worse of the DOMIAS and DCR attacks, and the copy
gate counts exact copies beyond the rate a fresh real sample (the holdout) has.
"""

from __future__ import annotations

from typing import Any

from pipelines.evaluation.attacks.gates import excess_lower_bound, family_z, risk_lower_bound
from pipelines.gates.release import GateResult, gate

GATES = ("membership_inference", "exact_copies", "singling_out_risk", "linkability_risk", "inference_risk")


@gate(*GATES)
def risk_gates(risk: dict[str, Any], t: dict[str, float]) -> list[GateResult]:
    """The release gates of one generator's `privacy_risk` results (``suite.privacy_risk``)."""
    outside = risk["outside_dp"]
    member = {name: risk["membership"][name] for name in ("domias", "dcr")}
    ran = {n: r for n, r in risk["anonymeter"].items() if "risk" in r}
    tests = len(member) + 1 + len(ran)  # + 1: the exact-copy excess
    z = family_z(t["confidence"], tests)
    family = {"family_confidence": t["confidence"], "family_tests": tests, "z": z}
    auc_low = {n: a["auc"] - z * a["auc_se"] for n, a in member.items()}
    worst = max(auc_low, key=lambda n: auc_low[n])
    gates = [
        GateResult(
            "membership_inference",
            auc_low[worst] <= t["membership_auc_max"],
            {
                "threshold_auc_lower_bound": t["membership_auc_max"],
                "worst_attack": worst,
                **family,
                **{f"{n}_auc": member[n]["auc"] for n in member},
                **{f"{n}_auc_lower_bound": auc_low[n] for n in member},
                **{f"{n}_auc_ci95": member[n]["auc_ci95"] for n in member},
                **{f"{n}_tpr_at_1pct_fpr": member[n]["tpr_at_1pct_fpr"] for n in member},
                "outside_dp": outside,
            },
        )
    ]
    c = risk["copies"]
    excess = c["exact_match_rate"] - c["holdout_exact_match_rate"]
    (k_s, n_s), (k_h, n_h) = (c["exact_match_counts"][k] for k in ("synthetic", "holdout"))
    copy_low = excess_lower_bound((k_s, n_s), (k_h, n_h), z)
    gates.append(
        GateResult(
            "exact_copies",
            copy_low <= t["exact_match_excess_max"],
            {
                "exact_match_rate": c["exact_match_rate"],
                "holdout_exact_match_rate": c["holdout_exact_match_rate"],
                "exact_match_counts": c["exact_match_counts"],
                "excess": excess,
                "excess_lower_bound": copy_low,
                "threshold_excess_lower_bound": t["exact_match_excess_max"],
                **family,
                "outside_dp": outside,
            },
        )
    )
    low = {n: risk_lower_bound(a, z) for n, a in ran.items()}
    for gate_name, key, attacks in (
        ("singling_out", "singling_out_risk_max", ("singling_out_univariate", "singling_out_multivariate")),
        ("linkability", "linkability_risk_max", ("linkability",)),
        ("inference", "inference_risk_max", ("inference",)),
    ):
        here = [n for n in attacks if n in ran]
        lower = max((low[n] for n in here), default=0.0)
        gates.append(
            GateResult(
                f"{gate_name}_risk",
                lower <= t[key],
                {
                    "threshold_risk_lower_bound": t[key],
                    "risk_lower_bound": lower,
                    **family,
                    **{f"{n}_risk": ran[n]["risk"] for n in here},
                    **{f"{n}_risk_ci95": ran[n]["risk_ci95"] for n in here},
                    **({"skipped": sorted(set(attacks) - set(here))} if len(here) < len(attacks) else {}),
                    "outside_dp": outside,
                },
            )
        )
    return gates
