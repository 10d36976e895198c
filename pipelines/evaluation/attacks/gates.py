"""params.yaml `risk_gates` thresholds as release gates over evaluate's privacy-risk results.

Each gate compares the *lower* end of an attack's 95 % interval with its threshold, so a gate fails only when
the evidence of risk is clear at the sample sizes used (small holdouts give wide intervals). DCR alone is
never a gate: the membership gate takes the worse of the DOMIAS and DCR attacks, and the copy gate counts
exact copies beyond the rate a fresh real sample (the holdout) has.
"""
from __future__ import annotations

from typing import Any

from pipelines.errors import InputError
from pipelines.privacy.gates import GateResult

DEFAULTS = {"membership_auc_max": 0.6,      # lower 95 % bound of the DOMIAS and DCR membership AUCs
            "exact_match_excess_max": 0.0,  # exact training-row copies in S beyond the holdout's rate
            "singling_out_risk_max": 0.1,   # lower 95 % bound of the anonymeter risks (0 = no risk)
            "linkability_risk_max": 0.1,
            "inference_risk_max": 0.1}


def thresholds(raw: dict[str, Any] | None) -> dict[str, float]:
    """`risk_gates` merged over DEFAULTS; each a number in [0, 1]."""
    t = {**DEFAULTS, **(raw or {})}
    for key, value in t.items():
        if key not in DEFAULTS:
            raise InputError(f"unknown risk_gates key '{key}'.", file="params.yaml", fix=f"use {sorted(DEFAULTS)}.")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise InputError(f"risk_gates.{key} must be a number in [0, 1], got {value!r}.", file="params.yaml",
                             fix=f"set it to {DEFAULTS[key]}.")
    return {k: float(v) for k, v in t.items()}


def risk_gates(risk: dict[str, Any], t: dict[str, float]) -> list[GateResult]:
    """The release gates of one generator's `privacy_risk` results (``suite.privacy_risk``)."""
    outside = risk["outside_dp"]
    member = {name: risk["membership"][name] for name in ("domias", "dcr")}
    worst = max(member, key=lambda n: member[n]["auc_ci95"][0])
    gates = [GateResult("membership_inference", member[worst]["auc_ci95"][0] <= t["membership_auc_max"], {
        "threshold_auc_lower_bound": t["membership_auc_max"], "worst_attack": worst,
        **{f"{n}_auc": member[n]["auc"] for n in member}, **{f"{n}_auc_ci95": member[n]["auc_ci95"] for n in member},
        **{f"{n}_tpr_at_1pct_fpr": member[n]["tpr_at_1pct_fpr"] for n in member}, "outside_dp": outside})]
    c = risk["copies"]
    excess = c["exact_match_rate"] - c["holdout_exact_match_rate"]
    gates.append(GateResult("exact_copies", excess <= t["exact_match_excess_max"], {
        "exact_match_rate": c["exact_match_rate"], "holdout_exact_match_rate": c["holdout_exact_match_rate"],
        "excess": excess, "threshold_excess": t["exact_match_excess_max"], "outside_dp": outside}))
    a = risk["anonymeter"]
    for gate, key, attacks in (("singling_out", "singling_out_risk_max",
                                ("singling_out_univariate", "singling_out_multivariate")),
                               ("linkability", "linkability_risk_max", ("linkability",)),
                               ("inference", "inference_risk_max", ("inference",))):
        ran = {n: a[n] for n in attacks if "risk" in a[n]}
        lower = max((r["risk_ci95"][0] for r in ran.values()), default=0.0)
        gates.append(GateResult(f"{gate}_risk", lower <= t[key], {
            "threshold_risk_lower_bound": t[key], "risk_lower_bound": lower,
            **{f"{n}_risk": r["risk"] for n, r in ran.items()},
            **{f"{n}_risk_ci95": r["risk_ci95"] for n, r in ran.items()},
            **({"skipped": sorted(set(attacks) - set(ran))} if len(ran) < len(attacks) else {}),
            "outside_dp": outside}))
    return gates
