"""The evaluation plots of DP-auto-GAN §5 as PNG bytes: dimension-wise probability and prediction
scatters (Figures 2-4), 1-way marginal histograms (Figure 7) and the 2-way PCA marginal (Figure 5).

Figures are built with matplotlib's object API on the Agg canvas (no pyplot global state), so
generators evaluated concurrently in the Prefect flow's threads cannot draw into each other's figure.
Every function returns the PNG's bytes; the caller writes them (atomically, after every metric is computed).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from pipelines.evaluation.figure import not_applicable, png
from pipelines.evaluation.fidelity import NUMERIC_KINDS
from pipelines.evaluation.marginals import cell_codes

HIST_BINS = 20  # equal-width bins over the schema bounds in the 1-way histograms
MAX_TICK_LABELS = 12  # categorical histograms with more categories than this drop their tick labels
SCORE_COLOURS = {"auroc": "tab:green", "f1": "tab:blue", "r2": "tab:red", "probability": "tab:purple"}
REAL, SYNTH = "tab:gray", "tab:orange"


def scatter_against_real(points: Sequence[dict], title: str, xlabel: str, ylabel: str, empty_reason: str) -> bytes:
    """Real score (x) against synthetic score (y), one point per column, with the ideal line y = x.

    `points`: dicts with "real", "synthetic" and "score" (its colour); entries with a None score are
    skipped. Scores below 0 (a negative R²) are drawn at 0, as the figure's axes span [0, 1].
    """
    pts = [p for p in points if p.get("real") is not None and p.get("synthetic") is not None]
    if not pts:
        return not_applicable(title, empty_reason)
    fig = Figure(figsize=(5, 5))
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="black", lw=0.8, label="y = x")
    for score in sorted({p["score"] for p in pts}):
        xs = np.clip([p["real"] for p in pts if p["score"] == score], 0, 1)
        ys = np.clip([p["synthetic"] for p in pts if p["score"] == score], 0, 1)
        ax.scatter(xs, ys, s=18, color=SCORE_COLOURS.get(score, "black"), label=score)
    ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel=xlabel, ylabel=ylabel, title=title, aspect="equal")
    ax.legend(loc="upper left", fontsize=8)
    return png(fig)


def marginal_histograms(real: pd.DataFrame | None, synth: pd.DataFrame, columns: Sequence[Any]) -> bytes:
    """1-way marginals, one panel per schema column: the share of real and synthetic rows in each
    histogram cell (numeric: HIST_BINS bins over the schema bounds; categorical: the schema's
    categories plus "outside the schema").

    `real=None` draws the synthetic rows alone: the public report's figure, whose every pixel is a function
    of the released table and the public schema (cell edges are the schema bounds, never the rows)."""
    n = len(columns)
    width = math.ceil(math.sqrt(n))
    height = math.ceil(n / width)
    fig = Figure(figsize=(3.2 * width, 2.4 * height))
    fig.subplots_adjust(left=0.04, right=0.99, top=0.96, bottom=0.06, hspace=0.7, wspace=0.3)
    for i, col in enumerate(columns):
        ax = fig.add_subplot(height, width, i + 1)
        s, cells = cell_codes(synth, col, HIST_BINS)
        q = np.bincount(s, minlength=cells) / max(len(s), 1)
        p = (
            None
            if real is None
            else np.bincount(cell_codes(real, col, HIST_BINS)[0], minlength=cells) / max(len(real), 1)
        )
        if col.kind in NUMERIC_KINDS:
            edges = np.linspace(col.lower, col.upper, cells + 1)
            if p is not None:
                ax.stairs(p, edges, color=REAL, fill=True, alpha=0.5, label="real")
            ax.stairs(q, edges, color=SYNTH, lw=1.5, fill=p is None, label="synthetic")
        else:
            idx = np.arange(cells)
            if p is not None:
                ax.bar(idx - 0.2, p, width=0.4, color=REAL, alpha=0.5, label="real")
            ax.bar(idx if p is None else idx + 0.2, q, width=0.8 if p is None else 0.4, color=SYNTH, label="synthetic")
            labels = [str(c) for c in col.categories] + ["(outside)"]
            ax.set_xticks(idx, labels if cells <= MAX_TICK_LABELS else [""] * cells, rotation=90, fontsize=6)
        ax.set_title(col.name, fontsize=8)
        ax.tick_params(labelsize=6)
    fig.axes[0].legend(fontsize=6)
    return png(fig)


def pca_scatter(projections: dict[str, np.ndarray], explained: float | None, reason: str | None = None) -> bytes:
    """The real training rows and the synthetic rows projected on the real data's first two principal
    components, side by side on shared axes (Figure 5)."""
    title = "2-way PCA marginal"
    if not projections:
        return not_applicable(title, reason or "no projection")
    fig = Figure(figsize=(9, 4.2), layout="constrained")
    axes = fig.subplots(1, 2, sharex=True, sharey=True)
    for ax, (name, colour) in zip(axes, (("real", REAL), ("synthetic", SYNTH))):
        pts = projections[name]
        ax.scatter(pts[:, 0], pts[:, 1], s=3, alpha=0.5, color=colour)
        ax.set(title=f"{name} ({len(pts)} rows)", xlabel="PC 1", ylabel="PC 2")
    fig.suptitle(f"{title}: PCA of the real training rows (explains {explained:.1%} of their variance)")
    return png(fig)


def roc_curves(curves: dict[str, dict], title: str) -> bytes:
    """ROC curves of attacks (`curves`: name -> {"roc": {"fpr", "tpr"}, "auc"}), log-scaled FPR so the
    low-FPR regime that matters for membership inference is visible, with the chance diagonal."""
    fig = Figure(figsize=(5, 5))
    ax = fig.add_subplot()
    grid = np.logspace(-3, 0, 50)
    ax.plot(grid, grid, color="black", lw=0.8, ls="--", label="chance")
    for name, result in curves.items():
        fpr, tpr = np.asarray(result["roc"]["fpr"]), np.asarray(result["roc"]["tpr"])
        ax.step(np.maximum(fpr, 1e-3), tpr, where="post", label=f"{name} (AUC {result['auc']:.3f})")
    ax.set(
        xscale="log",
        xlim=(1e-3, 1),
        ylim=(0, 1.02),
        xlabel="false positive rate (log)",
        ylabel="true positive rate",
        title=title,
    )
    ax.legend(loc="lower right", fontsize=8)
    return png(fig)
