"""The DP-auto-GAN paper's unsupervised evaluation (§4, appendix B; docs/metrics.md) as one bundle:
dimension-wise probability and prediction, k-way marginal TV, the 2-way PCA marginal, the Wasserstein
scores and the target accuracy of its Table 2, with their PNG plots. Every number reads real rows
(outside the DP guarantee)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from pipelines.config import UNSUPERVISED_PLOTS
from pipelines.reporting import plots
from pipelines.evaluation.dimensionwise import (
    dimension_wise_prediction,
    dimension_wise_probability,
    real_accuracy,
    real_column_scores,
    target_accuracy,
)
from pipelines.evaluation.marginals import (
    capped_rows,
    kway_marginal_tv,
    kway_reference,
    pca_marginal,
    pca_reference,
    wasserstein_reference,
    wasserstein_score,
)

PLOTS = UNSUPERVISED_PLOTS  # reports/<ds>/<gen>/<name>.png


def real_side(
    train: pd.DataFrame, holdout: pd.DataFrame, n_synth: int, sch: Any, seed: int, k: dict[str, int | None]
) -> dict[str, Any]:
    """What ``paper_metrics`` computes from R and T alone (the fits on real rows, the holdout references), for any
    synthetic table of `n_synth` rows: the baseline stage computes it once per data set, ``paper_metrics(real=...)``
    takes it."""
    r, _, t = capped_rows([len(train), n_synth, len(holdout)], k["max_rows"], seed)
    capped_train, capped_holdout = train.iloc[r], holdout.iloc[t]
    return {
        "dimension_wise_prediction": real_column_scores(capped_train, capped_holdout, sch.columns, seed),
        "target_accuracy": None
        if sch.target is None
        else real_accuracy(capped_train, capped_holdout, sch.columns, sch.target, seed),
        "kway_reference": kway_reference(
            train, holdout, sch.columns, k["kway"], k["kway_subsets"], k["kway_bins"], seed
        ),
        "pca_reference": pca_reference(train, holdout, n_synth, sch.columns, k["ot_max_rows"], seed),
        "wasserstein_reference": wasserstein_reference(train, holdout, n_synth, sch.columns, k["ot_max_rows"], seed),
    }


def paper_metrics(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    sch: Any,
    seed: int,
    k: dict[str, int | None],
    real: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The DP-auto-GAN evaluation metrics and their PNGs (bytes, written by the caller); `real`: ``real_side``
    of the same R, T, seed and knobs for `len(synth)` rows."""
    frames = (train, synth, holdout)
    capped = [f.iloc[i] for f, i in zip(frames, capped_rows([len(f) for f in frames], k["max_rows"], seed))]
    real = real or dict.fromkeys(
        ("dimension_wise_prediction", "target_accuracy", "kway_reference", "pca_reference", "wasserstein_reference")
    )
    probability = dimension_wise_probability(train, synth, sch.columns)
    prediction = dimension_wise_prediction(*capped, sch.columns, seed, real["dimension_wise_prediction"])
    pca, projections = pca_marginal(
        train, synth, holdout, sch.columns, k["ot_max_rows"], seed, reference=real["pca_reference"]
    )
    metrics = {
        "dimension_wise": {"probability": probability, "prediction": prediction},
        "kway_marginal": kway_marginal_tv(
            train,
            synth,
            holdout,
            sch.columns,
            k["kway"],
            k["kway_subsets"],
            k["kway_bins"],
            seed,
            reference=real["kway_reference"],
        ),
        "pca_marginal": pca,
        "wasserstein_score": wasserstein_score(
            train, synth, holdout, sch.columns, k["ot_max_rows"], seed, real["wasserstein_reference"]
        ),
        "target_accuracy": target_accuracy(*capped, sch.columns, sch.target, seed, real["target_accuracy"]),
    }
    pngs = {
        "dimwise_probability": plots.scatter_against_real(
            [{**v, "score": "probability"} for v in probability["columns"].values()],
            "Dimension-wise probability",
            "real training: share of 1s",
            "synthetic: share of 1s",
            probability.get("reason", ""),
        ),
        "dimwise_prediction": plots.scatter_against_real(
            prediction["columns"].values(),
            "Dimension-wise prediction (scored on the real holdout)",
            "model fitted on real training rows",
            "model fitted on synthetic rows",
            "every column was dropped (see metrics.json)",
        ),
        "marginals_1way": plots.marginal_histograms(train, synth, sch.columns),
        "pca_2way": plots.pca_scatter(projections, pca.get("explained_variance_ratio"), pca.get("skipped")),
    }
    return metrics, pngs
