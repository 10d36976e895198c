"""The whole privacy-risk suite on one synthetic table, configured by params.yaml `evaluate.attacks`."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pipelines.config import PARAMS_FILE, check_section, fail
from pipelines.evaluation.attacks import anonymeter
from pipelines.evaluation.attacks.disclosure import copies, disclosure
from pipelines.evaluation.attacks.inference import attribute_inference, baseline_accuracy
from pipelines.evaluation.attacks.membership import membership_inference, split_targets
from pipelines.evaluation.outside_dp import PRIVACY_RISK_ATTACKS
from pipelines.progress import Steps

SECTION = "evaluate.attacks"
# params.yaml `evaluate.attacks` (data-independent defaults; every random choice seeded by evaluate.seed)
DEFAULTS: dict[str, Any] = {
    "max_rows": 2000,                 # members and non-members per membership/inference attack (each)
    "bootstrap": 200,                 # bootstrap resamples of the membership AUC interval
    "n_attacks": 500,                 # targets (linkability, inference) or queries (singling out) per attack
    "singling_out_columns": 3,        # predicates per multivariate singling-out query
    "neighbours": 1,                  # linkability: nearest synthetic rows compared per side
    "secret": None,                   # the secret column; null = the schema's target
    "known": None,                    # the columns the attacker knows; null = every other column
    "linkability_columns": None,      # [[A...], [B...]]; null = a seeded random halving of the columns
    "tolerance": 0.05,                # a numeric guess is correct within this share of the schema range
    "disclosure_fraction": 0.05,      # thesis §4.3: set size as a share of the training rows
    "near_duplicate_distance": 0.01,  # Gower DCR at or below which a synthetic row is a near duplicate
}


def ranges(raw: dict[str, Any] | None) -> dict[str, Any]:
    """`evaluate.attacks` (keys and types by its model, pipelines/config.py) merged over DEFAULTS, every number in
    its range (what needs no schema; `load_params` runs it); every problem is one InputError naming the key path."""
    s = {**DEFAULTS, **check_section(SECTION, raw)}
    for key, least in (("max_rows", 1), ("bootstrap", 20), ("n_attacks", 1), ("singling_out_columns", 1),
                       ("neighbours", 1)):
        if isinstance(s[key], bool) or not isinstance(s[key], int) or s[key] < least:
            raise fail(PARAMS_FILE, f"{SECTION}.{key}", f"must be an integer of at least {least}, got {s[key]!r}.",
                       f"set it to {DEFAULTS[key]}.")
    for key in ("tolerance", "disclosure_fraction", "near_duplicate_distance"):
        if isinstance(s[key], bool) or not isinstance(s[key], (int, float)) or not 0 < s[key] < 1:
            raise fail(PARAMS_FILE, f"{SECTION}.{key}", f"must be in (0, 1), got {s[key]!r}.",
                       f"set it to {DEFAULTS[key]}.")
    return s


def settings(raw: dict[str, Any] | None, schema: Any) -> dict[str, Any]:
    """`evaluate.attacks`: `ranges`, then the columns it names checked against the schema; every problem is one
    InputError naming the key path."""
    s = ranges(raw)
    names = [c.name for c in schema.columns]
    s["secret"] = s["secret"] or schema.target
    if s["secret"] not in names:
        raise fail(PARAMS_FILE, f"{SECTION}.secret", f"must name a schema column, got {s['secret']!r}.",
                   "set it to a column of the public schema (or declare a target).")
    s["known"] = list(s["known"] or [n for n in names if n != s["secret"]])
    links = s["linkability_columns"]
    if links is None:
        order = np.random.default_rng(0).permutation(names).tolist()
        links = [order[: len(order) // 2], order[len(order) // 2:]]
    for group in (s["known"], *links):
        bad = sorted(set(group) - set(names))
        if bad or not group:
            key = "known" if group is s["known"] else "linkability_columns"
            raise fail(PARAMS_FILE, f"{SECTION}.{key}", f"lists columns {bad or group!r} that are not (all) schema "
                       "columns.", f"use non-empty lists of {names}.")
    if set(links[0]) & set(links[1]) or s["secret"] in s["known"]:
        key = "linkability_columns" if set(links[0]) & set(links[1]) else "known"
        raise fail(PARAMS_FILE, f"{SECTION}.{key}", "the linkability column sets must be disjoint, and `known` must "
                   "not contain the secret.", f"edit {SECTION}.linkability_columns / known.")
    s["linkability_columns"] = [list(links[0]), list(links[1])]
    return s


def real_side(train: pd.DataFrame, holdout: pd.DataFrame, schema: Any, s: dict[str, Any],
              seed: int) -> dict[str, Any]:
    """What ``privacy_risk`` computes from real rows alone (the attribute-inference baseline, a forest fitted on
    the holdout reference rows): the target split is the seeded rng's first draw, whatever S is, so the
    baseline stage computes it once per data set and ``privacy_risk(real=...)`` takes it."""
    split = split_targets(train, holdout, s["max_rows"], np.random.default_rng(seed))
    return {"attribute_inference_baseline": baseline_accuracy(split, list(schema.columns), s["secret"], s["known"],
                                                              s["tolerance"], seed)}


def privacy_risk(train: pd.DataFrame, synth: pd.DataFrame, holdout: pd.DataFrame, schema: Any,
                 s: dict[str, Any], seed: int, real: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every attack of the package on S against the real training (members) and holdout (non-members) rows;
    `real`: ``real_side`` of the same rows, settings and seed."""
    rng = np.random.default_rng(seed)
    columns = list(schema.columns)
    split = split_targets(train, holdout, s["max_rows"], rng)
    baseline = None if real is None else real["attribute_inference_baseline"]
    control, n, step = split.non_members, s["n_attacks"], Steps("attacks", 8)  # 8 attacks, in this order (rng)
    membership = step.done(membership_inference(split, synth, columns, s["bootstrap"], rng))
    attribute = step.done(attribute_inference(split, synth, columns, s["secret"], s["known"], s["tolerance"], seed,
                                               baseline))
    anonymeter_results = {
        "singling_out_univariate": step.done(anonymeter.singling_out(train, synth, control, columns, n, 1, rng)),
        "singling_out_multivariate": step.done(anonymeter.singling_out(train, synth, control, columns, n,
                                                                       s["singling_out_columns"], rng)),
        "linkability": step.done(anonymeter.linkability(train, synth, control, columns,
                                                        tuple(s["linkability_columns"]), n, s["neighbours"], rng)),
        "inference": step.done(anonymeter.inference(train, synth, control, columns, s["secret"], s["known"], n,
                                                    s["tolerance"], rng))}
    return {
        "settings": s,
        "membership": membership,
        "attribute_inference": attribute,
        "anonymeter": anonymeter_results,
        "disclosure": step.done(disclosure(train, synth, holdout, columns, s["disclosure_fraction"], 5, s["tolerance"],
                                           rng)),
        "copies": step.done(copies(train, synth, holdout, columns, s["near_duplicate_distance"], s["max_rows"], rng)),
        "outside_dp": PRIVACY_RISK_ATTACKS,
    }
