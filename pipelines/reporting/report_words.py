"""The words of the release reports: one plain sentence per gate outcome, per utility verdict and per weights
decision; a paragraph per method and its guarantee; human names and units of the evidence keys and ledger events.

Sentences come in two registers. The *public* one names a gate and its reason without any number read from real
rows (a public page may show the gate's pass/fail bit, never its evidence); the *steward* one adds the evidence
(`GateWords.detail`, filled from the gate's evidence dict). `tests/test_report_words.py` checks that every gate
name constructed in pipelines/ has an entry in GATES.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from pipelines.evaluation.outside_dp import MCMC_HEURISTIC

ROW_UNIT = (
    "one row: ε bounds how much adding or removing any one row of the table can change what is published; "
    "a person with k rows in the table is protected only at about k·ε"
)


def unit_statement(column: str | None, max_rows: int) -> str:
    """What one ε protects, in one sentence a reader understands: ROW_UNIT without a declared unit, else one
    value of the unit column with its at most `max_rows` rows."""
    if column is None:
        return ROW_UNIT
    return (
        f"one {column}: ε bounds how much adding or removing every row of any one {column} can change what is "
        f"published; each {column} appears in at most {max_rows} rows of the table used (rows beyond that were "
        f"set aside by a keyed rule). The synthetic rows carry fresh {column} values, one per row: they are "
        f"not grouped into synthetic {column}s, and no within-{column} pattern is published"
    )


NA = "not available"


@dataclass(frozen=True)
class GateWords:
    """`title`: the gate's human name; `refused`: why a refusal matters (public: no real-row number);
    `passed`: what a pass means; `detail`: steward-only evidence, a str.format template over the gate's evidence
    (left out when the evidence lacks a field)."""

    title: str
    refused: str
    passed: str
    detail: str = ""


GATES: dict[str, GateWords] = {
    "ledger": GateWords(
        "Privacy ledger",
        "the privacy ledger does not allow it (over the lifetime budget, a broken hash chain, "
        "missing ledger rows, or a non-private generator in a public release)",
        "its privacy cost is recorded in an intact ledger and fits the lifetime budget",
        "data set total ε = {epsilon_total_pld} of the lifetime {lifetime_epsilon}; hash chain intact: {chain_ok}",
    ),
    "alpha_lmdp": GateWords(
        "α-LMDP",
        "the α-LMDP tests could not reject, so the protected marginals may be reproduced",
        "the α-LMDP tests rejected, so the released protected marginal is distinguishable from the real one",
        "α = {alpha}; KSD p = {ksd[p_value]}, MMD p = {mmd[p_value]}",
    ),
    "mh_convergence": GateWords(
        "MCMC convergence",
        "the Metropolis-Hastings chains did not converge, so the released "
        "points may not follow the private exponential mechanism",
        "the Metropolis-Hastings chains converged",
        "split-R̂ = {rhat} (bound {rhat_max})",
    ),
    "membership_inference": GateWords(
        "Membership inference",
        "membership-inference attacks tell training records from others clearly better than chance",
        "membership-inference attacks did no clearly better than chance",
        "worst attack {worst_attack}: AUC lower bound {domias_auc_lower_bound} (DOMIAS), "
        "{dcr_auc_lower_bound} (DCR); threshold {threshold_auc_lower_bound}",
    ),
    "exact_copies": GateWords(
        "Exact copies",
        "the table copies training records more often than a fresh sample of people would",
        "the table copies training records no more often than a fresh sample of people would",
        "copy-rate excess lower bound {excess_lower_bound} (threshold {threshold_excess_lower_bound})",
    ),
    "singling_out_risk": GateWords(
        "Singling out",
        "an attacker can single out training records with it",
        "singling-out attacks found no clear risk",
        "risk lower bound {risk_lower_bound} (threshold {threshold_risk_lower_bound})",
    ),
    "linkability_risk": GateWords(
        "Linkability",
        "an attacker can link training records' attributes with it",
        "linkability attacks found no clear risk",
        "risk lower bound {risk_lower_bound} (threshold {threshold_risk_lower_bound})",
    ),
    "inference_risk": GateWords(
        "Attribute inference (Anonymeter)",
        "an attacker can infer training records' secret attributes with it",
        "inference attacks found no clear risk",
        "risk lower bound {risk_lower_bound} (threshold {threshold_risk_lower_bound})",
    ),
    "release_test": GateWords(
        "DP release test",
        "the DP release test found more training rows near the table than its holdout share "
        "allows (its noise alone refuses a table within the tolerance with probability at most 1 − "
        "release.test_confidence: a refusal is evidence, not proof; the paid bit stands for this "
        "table, and only a new training, at new budget, gives a new table and a new test)",
        "the DP release test found no excess of training rows near the table",
        "ε = {epsilon}; statistic {statistic} (noisy {noisy_statistic}), threshold {threshold}; training rows near "
        "the table {near_train_rows}, holdout rows {near_holdout_rows}",
    ),
    "utility": GateWords(
        "Utility",
        "the utility policy (params.yaml utility_gate) refuses tables with its utility verdict",
        "the utility policy accepts this verdict",
        "verdict {verdict}; policy action {action}",
    ),
    "importance_weights": GateWords(
        "Importance weights (PSIS k̂)",
        "the importance weights are unreliable or not private",
        "the importance weights are reliable (PSIS k̂ within its bound) and private",
        "k̂ = {khat} (bound {khat_bound})",
    ),
}

UTILITY_LABELLED = "the utility policy (params.yaml utility_gate) labels such tables rather than refusing them"
VERDICTS = {
    "fit": "fit: models trained on it beat a baseline of independent columns drawn from the real 1-way marginals",
    "weak": (
        "WEAK: not measurably better than independent columns drawn from the real 1-way marginals, or "
        "models trained on it not measurably better than chance, or a relationship with the target distorted"
    ),
    "inverted": "INVERTED: models trained on it predict the opposite of the truth",
    "not_assessed": "not assessed (no target task and fewer than two columns)",
}

GENERATORS = {
    "dpwgan": "DP-WGAN",
    "ppem": "PPEM",
    "dp_auto_gan": "DP-auto-GAN",
    "pearl": "PEARL",
    "iw_mmd_gan": "IW-MMD-GAN",
    "support_points": "Private support points",
    "mst": "MST",
    "aim": "AIM",
}

METHODS = {
    "dpwgan": "A Wasserstein GAN whose critic is trained with DP-SGD: each step samples records independently "
    "(Poisson), clips every record's gradient contribution and adds Gaussian noise, so the critic, and the "
    "generator trained only through it, is (ε, δ)-differentially private for adding or removing one record.",
    "ppem": "Privacy-Preserving Energy Models: energy models and generators for the protected columns and the rest, "
    "trained with DP-SGD when ε is finite. On top of DP it promises α-LMDP: the released marginal of the "
    "protected columns must be statistically distinguishable from the real one at level α, which the "
    "α-LMDP gate tests before release.",
    "dp_auto_gan": "DP-auto-GAN: an autoencoder trained with DP-SGD (encoder and decoder both noised), then a "
    "DP-WGAN in its latent space judged through the frozen decoder; the two phases are composed in "
    "the ledger, so the whole model is (ε, δ)-DP.",
    "pearl": "PEARL: one Gaussian-mechanism release of a class-conditional characteristic-function embedding of the "
    "table (and one of the mean pairwise distance), then a generator trained on that sanitised embedding "
    "alone; training is post-processing, so the guarantee is that of the two releases.",
    "iw_mmd_gan": "Importance-weighted MMD-GAN: one Gaussian release of a weighted random-feature kernel mean "
    "embedding that targets a chosen distribution (e.g. a rebalanced class), then training by "
    "post-processing; (ε, δ)-DP from the weights' public bound.",
    "support_points": "Private support points: a small set of points meant to be drawn by the exponential mechanism "
    "with the energy distance to the training rows as score (pure ε-DP for an exact draw), "
    "sampled by Metropolis-Hastings. Its guarantee is " + MCMC_HEURISTIC + "; the convergence "
    "gate's R̂ is evidence that the chains approximate the mechanism, not a proof.",
    "mst": "MST: noisy 1- and 2-way counts (Gaussian mechanism) on a maximum spanning tree of column pairs chosen "
    "by the exponential mechanism, then a graphical model (Private-PGM) fitted to the noisy counts and "
    "sampled; (ε, δ)-DP, everything after the measurements is post-processing.",
    "aim": "AIM: adaptively chosen noisy marginals (exponential-mechanism selection, Gaussian measurement) within a "
    "budget planned before the data are read, fitted by Private-PGM and sampled; (ε, δ)-DP.",
}

# Evidence and metric keys → (human name, unit). Units: "" = a plain number.
EVIDENCE: dict[str, tuple[str, str]] = {
    "epsilon_total_pld": ("Data set total ε (PLD accountant)", "ε"),
    "epsilon_total_rdp": ("Data set total ε (RDP cross-check)", "ε"),
    "lifetime_epsilon": ("Lifetime ε budget", "ε"),
    "delta": ("δ", "probability"),
    "chain_ok": ("Hash chain intact", ""),
    "ledger_rows": ("Ledger rows", "rows"),
    "non_private": ("Non-private generator", ""),
    "internal_release": ("Internal release", ""),
    "exact_sampler": ("Every mechanism sampled exactly", ""),
    "label": ("Guarantee", ""),
    "missing_row_ids": ("Missing ledger rows", "row ids"),
    "model_row_ids": ("This model's ledger rows", "row ids"),
    "error": ("Error", ""),
    "alpha": ("Test level α", "probability"),
    "rows_used": ("Real rows used", "rows"),
    "ksd": ("KSD goodness-of-fit test", ""),
    "mmd": ("MMD two-sample test", ""),
    "rejects_h0_real_marginal_fits_model": ("KSD test rejects", ""),
    "rejects_h0_generated_marginal_is_real": ("MMD test rejects", ""),
    "refused_because": ("Refused because", ""),
    "rhat": ("Split-R̂ of the chains", ""),
    "rhat_max": ("Largest accepted split-R̂", ""),
    "ess": ("Effective sample size", "rows"),
    "acceptance": ("Acceptance rate", "share"),
    "threshold_auc_lower_bound": ("Accepted AUC lower bound, at most", "AUC"),
    "worst_attack": ("Strongest attack", ""),
    "family_confidence": ("Family-wise confidence", "probability"),
    "family_tests": ("Tests in the family", "tests"),
    "z": ("Normal quantile used", "z"),
    "domias_auc": ("DOMIAS AUC", "AUC"),
    "dcr_auc": ("Distance-to-closest-record AUC", "AUC"),
    "domias_auc_lower_bound": ("DOMIAS AUC, lower bound", "AUC"),
    "dcr_auc_lower_bound": ("Distance-to-closest-record AUC, lower bound", "AUC"),
    "domias_auc_ci95": ("DOMIAS AUC, 95 % interval", "AUC"),
    "dcr_auc_ci95": ("Distance-to-closest-record AUC, 95 % interval", "AUC"),
    "domias_tpr_at_1pct_fpr": ("DOMIAS true-positive rate at 1 % false positives", "share"),
    "dcr_tpr_at_1pct_fpr": ("DCR true-positive rate at 1 % false positives", "share"),
    "exact_match_rate": ("Synthetic rows equal to a training row", "share"),
    "holdout_exact_match_rate": ("Holdout rows equal to a training row", "share"),
    "exact_match_counts": ("Exact matches (synthetic, holdout)", "[matches, rows]"),
    "excess": ("Copy-rate excess over the holdout", "share"),
    "excess_lower_bound": ("Copy-rate excess, lower bound", "share"),
    "threshold_excess_lower_bound": ("Accepted excess lower bound, at most", "share"),
    "threshold_risk_lower_bound": ("Accepted risk lower bound, at most", "risk"),
    "risk_lower_bound": ("Risk, lower bound", "risk"),
    "skipped": ("Attacks skipped", ""),
    "verdict": ("Verdict", ""),
    "action": ("Policy action", ""),
    "policy": ("Policy", ""),
    "reason": ("Reason", ""),
    "khat": ("PSIS k̂", ""),
    "khat_bound": ("Largest accepted k̂", ""),
    "private": ("Differentially private", ""),
    "p_value": ("p-value", "probability"),
    "statistic": ("Statistic", ""),
}
# Anonymeter attack names inside `<attack>_risk` / `<attack>_risk_ci95` evidence keys
ATTACKS = {
    "singling_out_univariate": "Singling out (one column)",
    "singling_out_multivariate": "Singling out (several columns)",
    "linkability": "Linkability",
    "inference": "Inference",
}
HIDDEN = {
    "outside_dp",
    "task",
    "two_way",
    "associations",
    "ledger_head",
    "chain",
    "expected_head",  # own sections
    "guarantee",
}

EVENTS = {
    "poisson_gaussian": "Poisson-subsampled Gaussian (DP-SGD)",
    "gaussian": "Gaussian mechanism",
    "laplace": "Laplace mechanism",
    "pure_epsilon": "ε-DP step (exponential mechanism)",
    "discrete_gaussian": "discrete Gaussian mechanism (exact sampler)",
    "discrete_laplace": "discrete Laplace mechanism (exact sampler)",
    "zcdp": "zCDP budget (adaptive steps under a privacy filter, or discrete Gaussian counts at the unit)",
    "non_private": "NON-PRIVATE access",
    "repeat_and_select": "private selection (the best of a secret, random number of trials)",
}
EVENT_PARAMS = {
    "noise_multiplier": "noise multiplier",
    "sample_rate": "sampling rate",
    "steps": "steps",
    "sigma": "noise σ",
    "l2_sensitivity": "L2 sensitivity",
    "query": "query",
    "scale": "scale",
    "l1_sensitivity": "L1 sensitivity",
    "epsilon": "ε",
    "mechanism": "mechanism",
    "reason": "reason",
    "internal": "internal",
    "sensitivity": "sensitivity (lattice units)",
    "count": "compositions",
    "dims": "coordinates per block",
    "rho": "ρ (zCDP)",
    "mean": "mean number of trials",
    "group": "rows per privacy unit",
}


def fmt(value: Any, digits: int = 4) -> str:
    """Readable text for a value: numbers to `digits` significant digits, booleans yes/no, lists comma-joined."""
    if value is None:
        return NA
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, Real):
        return f"{float(value):.{digits}g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt(v, digits) for v in value) or "none"
    if isinstance(value, dict):
        return "; ".join(f"{label(k)}: {fmt(v, digits)}" for k, v in value.items()) or "none"
    return str(value)


def label(key: str) -> str:
    """The human name of an evidence key (with its Anonymeter attack spelled out), else the key in words."""
    if key in EVIDENCE:
        return EVIDENCE[key][0]
    for suffix, words in (("_risk_ci95", "risk, 95 % interval"), ("_risk", "risk")):
        if key.endswith(suffix) and key[: -len(suffix)] in ATTACKS:
            return f"{ATTACKS[key[: -len(suffix)]]} {words}"
    return key.replace("_", " ").capitalize()


def unit(key: str) -> str:
    if key in EVIDENCE:
        return EVIDENCE[key][1]
    return "risk" if key.endswith(("_risk", "_risk_ci95")) else ""


def evidence_rows(evidence: dict[str, Any]) -> list[list[str]]:
    """A gate's evidence as [quantity, value, unit] rows; nested sections with their own tables are left out."""
    return [[label(k), fmt(v), unit(k)] for k, v in evidence.items() if k not in HIDDEN]


def generator_name(generator: str | None) -> str:
    return GENERATORS.get(generator or "", fmt(generator))


def part_name(part: str) -> str:
    """A part of the release budget's allocation: a generator, or "weights" (tasks/budget.WEIGHTS)."""
    return "the importance weights" if part == "weights" else generator_name(part)


class _Numbers(string.Formatter):
    """str.format over evidence with numbers through `fmt`."""

    def format_field(self, value: Any, format_spec: str) -> str:
        return fmt(value) if not format_spec else format(value, format_spec)


def gate_detail(words: GateWords, evidence: dict[str, Any]) -> str | None:
    """The steward's evidence clause of a gate sentence; None when the evidence lacks one of its fields."""
    try:
        return _Numbers().vformat(words.detail, (), evidence) if words.detail else None
    except (KeyError, IndexError, TypeError):
        return None


def gate_sentence(generator: str, gate: dict[str, Any], audience: str) -> str:
    """One plain sentence for one gate's outcome: "<Generator> refused: <why>." or "<Generator> passed the <title>
    gate: <what that means>." (public: no evidence); the steward's adds the evidence in brackets. A utility gate
    that let a verdict other than fit through (its evidence's `verdict`) does not read "passed": "<Generator>'s
    utility verdict is WEAK: the utility policy labels such tables rather than refusing them." A gate missing
    from GATES reads "the <name> gate failed" (tests/test_report_words.py checks that every gate constructed in
    pipelines/ has its words)."""
    gname = str(gate["name"])
    words = GATES.get(gname) or GateWords(gname, f"the {gname} gate failed", f"the {gname} gate passed")
    name = generator_name(generator)
    evidence = gate.get("evidence") or {}
    labelled = gname == "utility" and gate["passed"] and evidence.get("verdict") in ("weak", "inverted")
    if gname == "importance_weights":
        head = f"{name}'s importance weights {'released' if gate['passed'] else 'withheld'}"
    elif labelled:
        head = f"{name}'s utility verdict is {str(evidence['verdict']).upper()}"
    else:
        head = f"{name} passed the {words.title} gate" if gate["passed"] else f"{name} refused"
    why = UTILITY_LABELLED if labelled else words.passed if gate["passed"] else words.refused
    detail = gate_detail(words, evidence) if audience == "steward" else None
    return f"{head}: {why}" + (f" ({detail})." if detail else ".")


def calibration_sentence(calibration: dict[str, Any] | None) -> str | None:
    """The method paragraph's last sentence when the samples are calibrated (`pipelines.marginal.calibrate.summary`:
    public plan facts only), e.g. "Its samples are calibrated to noisy 1-way marginals of 15 columns and 14 pairs
    with 'income' at ε = 0.49 of 1 ..."."""
    if not calibration:
        return None
    if not float(calibration["sigma"]) > 0:
        return (
            f"Its samples are raked to the exact (NON-PRIVATE, ε = ∞) "
            f"{calibration['description'].removeprefix('noisy ')} of the training rows."
        )
    return (
        f"Its samples are calibrated to {calibration['description']} at ε = {fmt(calibration['epsilon'], 3)} "
        f"of the generator's {fmt(calibration['generator_epsilon'], 3)} (that ε alone; the method was planned at "
        f"{fmt(calibration['method_epsilon'], 3)} and the two compose to the generator's ε): Gaussian noise of "
        f"σ = {fmt(calibration['sigma'], 3)} on every count, then the generator's own rows are re-weighted by "
        f"raking to the noisy marginals and resampled. Only those noisy marginals touch real rows."
    )


# What each failed condition of a weak verdict (verdict.py `failed_claims`) says, and the one thing to try for it.
# A claim's words name the comparisons and features it read; `verdict_words` fills them from the verdict's evidence.
ASSESSED = {
    "task": "the target task",
    "associations": "the features' associations with the target",
    "two_way": "2-way fidelity",
}
MEASURES_MARGINALS = ("aim", "mst")  # generators that fit noisy marginals themselves (their calibration is off)
NAMED_FEATURES = 5  # distorted features named in the verdict; the rest are counted
POLICY = {
    "refuse": "The policy refuses such tables.",
    "label": "The policy releases such tables with this label.",
}
PUBLICATION = {
    "advise": "A finding for the steward only: under release.non_dp_gates: advise the verdict neither decides "
    "publication nor appears in the public manifest or report.",
    "published": "Under release.non_dp_gates: refuse the public manifest and report show this word, none of its "
    "evidence.",
    "refused_by_it": "The table is refused: the run's refusal record (latest.json under releases/) names the utility "
    "gate with this word as its reason, none of its evidence.",
    "refused": "The table is refused by another gate, so nothing of this verdict is published.",
}


def _signed(value: Any) -> str:
    return f"{float(value):+.2f}"


def _listed(items: list[str], conjunction: str = "and") -> str:
    """The items joined as a list in words: a; a and b; a, b and c."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


def claim_words(claim: str, evidence: dict[str, Any], detail: bool = True) -> str:
    """One failed condition of a weak verdict in words, from the verdict's evidence (metrics.json
    `utility_verdict`); `detail`: with the models and the features it names (the steward headline), else its
    summary alone (the release table)."""
    task, assoc = evidence.get("task") or {}, evidence.get("associations") or {}
    if claim == "baseline":
        on = [words for key, words in ASSESSED.items() if evidence.get(key) and "skipped" not in evidence[key]]
        return "not measurably better than independent columns drawn from the real 1-way marginals" + (
            f" on {_listed(on, 'or')}" if on else ""
        )
    if claim == "chance":
        low = [
            f"{name} AUROC {fmt(m.get('auroc'), 2)}, lower bound {fmt(m.get('auroc_lower_bound'), 2)}"
            for name, m in (task.get("models") or {}).items()
            if not m.get("auroc_lower_bound", 0.0) > 0.5
        ]
        head = "models trained on it not measurably better than chance on real rows"
        return head + (f" ({'; '.join(low)})" if detail and low else "")
    if claim == "distorted":
        head = (
            f"{fmt(assoc.get('features_worse_than_baseline'))} of {fmt(assoc.get('features'))} features' "
            "associations with the target distorted"
        )
        found = assoc.get("distorted") or []
        if not detail or not found:
            return head
        named = [
            f"'{f['feature']}' (real {_signed(f['real'])}, synthetic {_signed(f['synthetic'])})"
            for f in found[:NAMED_FEATURES]
        ]
        more = len(found) - len(named)
        return f"{head}: {', '.join(named)}" + (f" and {more} more" if more else "")
    return fmt(claim)


def claim_advice(claim: str, generator: str, failed: Sequence[str] = ()) -> str:
    """The one concrete thing to try for a failed condition of a weak verdict (`claim_words`) on `generator`'s
    table, naming the key to change; `failed`: every failed condition, so that "more ε" is said once."""
    key, name = generator or "<generator>", generator_name(generator)
    more = f"give {name} more ε (`{key}.epsilon` or `privacy.release_epsilon`)"
    if claim == "chance":
        check = "check that the schema's `target:` and `target_positive:` name the class to predict"
        return check if "baseline" in failed else f"{check}, or {more}"
    if generator in MEASURES_MARGINALS:
        return more
    if claim == "distorted":
        return (
            f"raise `{key}.calibration.share` so that {name}'s samples are raked to noisy marginals of each column "
            "with the target"
        )
    return f"{more}, or try a marginal generator such as AIM"


def verdict_words(verdict: dict[str, Any], evidence: dict[str, Any] | None = None, detail: bool = True) -> str:
    """The verdict word with its meaning (VERDICTS); for a weak verdict with its `evidence` (the steward's
    metrics.json `utility_verdict`, whose `failed_claims` say which conditions failed): "WEAK: " and those
    conditions alone (`claim_words`). Without evidence (the public pages: its numbers read real rows), the
    meaning of WEAK lists every condition that can make a table weak."""
    word = verdict.get("verdict")
    claims = (evidence or {}).get("failed_claims") or []
    if word != "weak" or not claims:
        return VERDICTS.get(str(word), fmt(word))
    return "WEAK: " + "; ".join(claim_words(c, evidence or {}, detail) for c in claims)


def advice_sentence(generator: str, evidence: dict[str, Any] | None) -> str | None:
    """One sentence, one thing to try per failed condition of a weak verdict (`claim_advice`); None otherwise."""
    if not evidence or evidence.get("verdict") != "weak" or not evidence.get("failed_claims"):
        return None
    failed = evidence["failed_claims"]
    advice = list(dict.fromkeys(claim_advice(c, generator, failed) for c in failed))
    return f"To try: {'; '.join(advice)}."


def publication_words(verdict: dict[str, Any], published: bool | None) -> str | None:
    """What is published of the verdict, true under each `release.non_dp_gates`. Its action "advise" (the steward
    summary's, tasks/release.py `steward_verdict`: the utility gate did not decide publication) means nothing of
    it is published, whatever happened to the table. Any other action comes with `refuse`, under which a released
    table's (`published`) public manifest and report show the word alone, a table the utility gate refused has
    the word as the reason of its refusal, and a table another gate refused publishes nothing of it; None when
    `published` is not known."""
    if verdict.get("action") == "advise":
        return PUBLICATION["advise"]
    if published is None:
        return None
    if published:
        return PUBLICATION["published"]
    return PUBLICATION["refused_by_it" if verdict.get("action") == "refuse" else "refused"]


def verdict_sentence(
    generator: str,
    verdict: dict[str, Any] | None,
    evidence: dict[str, Any] | None = None,
    published: bool | None = None,
) -> str | None:
    """The utility verdict (manifest `utility_verdict`) in one sentence, with what the policy does and what is
    published of it (`publication_words`; `published`: whether the table was released, None where unknown).
    `evidence` (steward only: metrics.json `utility_verdict`) names, for a weak verdict, the conditions that
    failed, the features whose association with the target is distorted, and one thing to try per failed
    condition (`verdict_words`, `advice_sentence`)."""
    if not verdict:
        return None
    tail = [
        s
        for s in (
            advice_sentence(generator, evidence),
            POLICY.get(str(verdict.get("action"))),
            publication_words(verdict, published),
        )
        if s
    ]
    return " ".join([f"Utility of {generator_name(generator)}: {verdict_words(verdict, evidence)}.", *tail])


POSITIVE_RULES = {  # how utility.positive_class chose (results' "positive_class_rule")
    "target_positive": "the schema's target_positive",
    "second_category": "the schema's second category; set target_positive: to choose",
}


def positive_class_words(utility: dict[str, Any]) -> str:
    """Which class of the target the utility scores read as positive and how it was chosen (`utility.tstr_auroc`'s
    result), e.g. "positive class '>50K': the schema's second category; set target_positive: to choose"; a
    result without its rule predates `target_positive` and read the second category."""
    rule = POSITIVE_RULES.get(utility.get("positive_class_rule", "second_category"), NA)
    return f"positive class '{fmt(utility.get('positive_class'))}': {rule}"


def weights_sentence(generator: str, weights: dict[str, Any] | None) -> str | None:
    """Released or withheld importance weights (manifest `weights`: `released`, `withheld_because`)."""
    if not weights:
        return None
    name = generator_name(generator)
    if weights.get("released", True):
        return (
            f"{name}'s importance weights published as the `weight` column (ε = {fmt(weights.get('epsilon'))}, "
            f"PSIS k̂ = {fmt(weights.get('khat'))})."
        )
    why = "; ".join(weights.get("withheld_because") or []) or GATES["importance_weights"].refused
    return f"{name}'s importance weights withheld: {why}; the table is released without its `weight` column."
