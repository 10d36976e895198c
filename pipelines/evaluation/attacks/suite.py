"""The whole privacy-risk suite on one synthetic table, configured by params.yaml `evaluate.attacks`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pipelines.config import PARAMS_FILE, fail
from pipelines.evaluation.attacks import anonymeter
from pipelines.evaluation.attacks.disclosure import copies, disclosure
from pipelines.evaluation.attacks.inference import attribute_inference, baseline_accuracy
from pipelines.evaluation.attacks.membership import membership_inference, split_targets
from pipelines.evaluation.marginals import row_sample
from pipelines.evaluation.outside_dp import PRIVACY_RISK_ATTACKS
from pipelines.progress import Steps

SECTION = "evaluate.attacks"


def settings(attacks: Any, schema: Any) -> dict[str, Any]:
    """`evaluate.attacks` (`Config.evaluate.attacks`: types, defaults and ranges checked, pipelines/config.py) as the
    attacks read it, the columns it names checked against the schema and resolved (the secret, the known columns,
    the linkability halves); every problem is one InputError naming the key path."""
    s = attacks.model_dump()
    names = [c.name for c in schema.columns]
    s["secret"] = s["secret"] or schema.target
    if s["secret"] not in names:
        raise fail(
            PARAMS_FILE,
            f"{SECTION}.secret",
            f"must name a schema column, got {s['secret']!r}.",
            "set it to a column of the public schema (or declare a target).",
        )
    s["known"] = list(s["known"] or [n for n in names if n != s["secret"]])
    links = s["linkability_columns"]
    if links is None:
        order = np.random.default_rng(0).permutation(names).tolist()
        links = [order[: len(order) // 2], order[len(order) // 2 :]]
    for group in (s["known"], *links):
        bad = sorted(set(group) - set(names))
        if bad or not group:
            key = "known" if group is s["known"] else "linkability_columns"
            raise fail(
                PARAMS_FILE,
                f"{SECTION}.{key}",
                f"lists columns {bad or group!r} that are not (all) schema columns.",
                f"use non-empty lists of {names}.",
            )
    if set(links[0]) & set(links[1]) or s["secret"] in s["known"]:
        key = "linkability_columns" if set(links[0]) & set(links[1]) else "known"
        raise fail(
            PARAMS_FILE,
            f"{SECTION}.{key}",
            "the linkability column sets must be disjoint, and `known` must not contain the secret.",
            f"edit {SECTION}.linkability_columns / known.",
        )
    s["linkability_columns"] = [list(links[0]), list(links[1])]
    return s


def real_side(train: pd.DataFrame, holdout: pd.DataFrame, schema: Any, s: dict[str, Any], seed: int) -> dict[str, Any]:
    """What ``privacy_risk`` computes from real rows alone (the attribute-inference baseline, a forest fitted on
    the holdout reference rows): the target split is the seeded rng's first draw, whatever S is, so the
    baseline stage computes it once per data set and ``privacy_risk(real=...)`` takes it."""
    split = split_targets(train, holdout, s["max_rows"], np.random.default_rng(seed), s["pool_max_rows"])
    return {
        "attribute_inference_baseline": baseline_accuracy(
            split, list(schema.columns), s["secret"], s["known"], s["tolerance"], seed
        )
    }


def privacy_risk(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    schema: Any,
    s: dict[str, Any],
    seed: int,
    real: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every attack of the package on S against the real training (members) and holdout (non-members) rows;
    `real`: ``real_side`` of the same rows, settings and seed. The attacks search a seeded sample of at most
    `pool_max_rows` synthetic rows (its own generator, so the attacks on a table under the cap draw as uncapped); the
    exact-copy counts read every synthetic row."""
    rng = np.random.default_rng(seed)
    columns = list(schema.columns)
    whole, synth = synth, synth.iloc[row_sample(len(synth), s["pool_max_rows"], np.random.default_rng([seed, 1]))]
    split = split_targets(train, holdout, s["max_rows"], rng, s["pool_max_rows"])
    baseline = None if real is None else real["attribute_inference_baseline"]
    control, n, step = split.non_members, s["n_attacks"], Steps("attacks", 8)  # 8 attacks, in this order (rng)
    membership = step.done(membership_inference(split, synth, columns, s["bootstrap"], rng))
    attribute = step.done(
        attribute_inference(split, synth, columns, s["secret"], s["known"], s["tolerance"], seed, baseline)
    )
    anonymeter_results = {
        "singling_out_univariate": step.done(anonymeter.singling_out(train, synth, control, columns, n, 1, rng)),
        "singling_out_multivariate": step.done(
            anonymeter.singling_out(train, synth, control, columns, n, s["singling_out_columns"], rng)
        ),
        "linkability": step.done(
            anonymeter.linkability(
                train, synth, control, columns, tuple(s["linkability_columns"]), n, s["neighbours"], rng
            )
        ),
        "inference": step.done(
            anonymeter.inference(train, synth, control, columns, s["secret"], s["known"], n, s["tolerance"], rng)
        ),
    }
    return {
        "settings": s,
        "membership": membership,
        "attribute_inference": attribute,
        "anonymeter": anonymeter_results,
        "disclosure": step.done(
            disclosure(train, synth, holdout, columns, s["disclosure_fraction"], s["max_rows"], 5, s["tolerance"], rng)
        ),
        "copies": step.done(
            copies(train, whole, holdout, columns, s["near_duplicate_distance"], s["max_rows"], s["pool_max_rows"], rng)
        ),
        "outside_dp": PRIVACY_RISK_ATTACKS,
    }
