"""The release's joint-fidelity and utility scorecard, next to DP-auto-GAN's metrics (``unsupervised``):

- all 2-way marginals (TV, and PEARL's 2-way marginal error: the mean L1 distance = 2·TV, appendix I.1);
- the correlation-matrix difference (``association``);
- Gaussian-kernel MMD with a permutation p-value, W1 between the full tables, detection AUC (``joint``);
- the 10 classifiers of PEARL's Table 2, TSTR next to TRTR, ROC and PRC (``classifiers``), tested on at most
  `evaluate.utility_max_rows` holdout rows (the utility scores' seeded sample);
- 1,000 random 3-attribute range queries (``queries``).

Every number reads real rows (outside the DP guarantee).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from pipelines.evaluation.association import correlation_difference, real_associations
from pipelines.evaluation.classifiers import trtr_results, tstr_classifiers
from pipelines.evaluation.joint import detection_auc, mmd_test, table_wasserstein1, wasserstein1_reference
from pipelines.evaluation.marginals import kway_marginal_tv, kway_reference
from pipelines.evaluation.queries import range_query_error, real_answers
from pipelines.evaluation.utility import capped
from pipelines.progress import Steps


def real_side(
    train: pd.DataFrame, holdout: pd.DataFrame, n_synth: int, sch: Any, seed: int, k: dict[str, int | None]
) -> dict[str, Any]:
    """What ``scorecard`` computes from real rows alone (the 10 train-on-real classifiers, the holdout references,
    A(R) and the range queries' answers on R) for a synthetic table of `n_synth` rows, the same for every
    generator: the baseline stage computes it once per data set and ``scorecard(real=...)`` takes it."""
    columns = list(sch.columns)
    return {
        "marginal_2way_reference": kway_reference(
            train, holdout, columns, 2, math.comb(len(columns), 2), k["kway_bins"], seed
        ),
        "correlation": real_associations(train, holdout, columns),
        "wasserstein1_reference": wasserstein1_reference(train, holdout, n_synth, columns, k["ot_max_rows"], seed),
        "range_queries": real_answers(train, holdout, columns, k["range_queries"], k["range_query_attributes"], seed),
        "classifiers_trtr": trtr_results(
            train,
            _classifier_test_rows(holdout, k, seed),
            columns,
            sch.target,
            seed,
            k["classifier_max_rows"],
            positive=sch.target_positive,
        )
        if sch.target
        else None,
    }


def _classifier_test_rows(holdout: pd.DataFrame, k: dict[str, int | None], seed: int) -> pd.DataFrame:
    """The holdout rows PEARL's classifiers are tested on: the utility scores' seeded sample of at most
    `k["utility_max_rows"]` rows (every row when `k` has no such key)."""
    return capped(holdout, k.get("utility_max_rows"), seed)


def scorecard(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    sch: Any,
    seed: int,
    k: dict[str, int | None],
    real: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The scorecard (module docstring); `k` holds the keys of pipelines/config.py's `Scorecard`, `ot_max_rows`,
    `kway_bins` and, in a stage, `utility_max_rows`; `real`: ``real_side`` of the same rows, seed and knobs."""
    real = real or dict.fromkeys(
        ("marginal_2way_reference", "correlation", "wasserstein1_reference", "range_queries", "classifiers_trtr")
    )
    columns, step = list(sch.columns), Steps("scorecard", 7)
    pairs = step.done(
        kway_marginal_tv(
            train,
            synth,
            holdout,
            columns,
            2,
            math.comb(len(columns), 2),
            k["kway_bins"],
            seed,
            reference=real["marginal_2way_reference"],
        )
    )
    if "skipped" not in pairs:
        pairs["pearl_mean_l1"] = 2 * pairs["mean_tv"]
    return {
        "marginal_2way": pairs,
        "correlation": step.done(correlation_difference(train, synth, holdout, columns, real=real["correlation"])),
        "mmd": step.done(mmd_test(train, synth, columns, k["mmd_permutations"], k["mmd_max_rows"], seed)),
        "wasserstein1": step.done(
            table_wasserstein1(train, synth, holdout, columns, k["ot_max_rows"], seed, real["wasserstein1_reference"])
        ),
        "detection": step.done(detection_auc(train, synth, columns, k["detection_max_rows"], seed)),
        "range_queries": step.done(
            range_query_error(
                train,
                synth,
                holdout,
                columns,
                k["range_queries"],
                k["range_query_attributes"],
                seed,
                real["range_queries"],
            )
        ),
        "classifiers": step.done(
            tstr_classifiers(
                train,
                synth,
                _classifier_test_rows(holdout, k, seed),
                columns,
                sch.target,
                seed,
                k["classifier_max_rows"],
                trtr=real["classifiers_trtr"],
                positive=sch.target_positive,
            )
            if sch.target
            else {"skipped": "schema declares no target"}
        ),
    }
