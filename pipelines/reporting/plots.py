"""The evaluation plots of DP-auto-GAN §5 as PNG bytes: dimension-wise probability and prediction
scatters (Figures 2-4), 1-way marginal histograms over the schema's public bins (Figure 7) and the 2-way PCA
marginal (Figure 5).

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

from pipelines.data.bins import NumericBins, column_bins
from pipelines.evaluation.figure import not_applicable, png
from pipelines.evaluation.fidelity import NUMERIC_KINDS, scale_by_bounds
from pipelines.evaluation.marginals import cell_codes, numeric_values

HIST_BINS = 20  # equal-width bins of a numeric column whose schema declares no public edges (`column_bins`)
MAX_TICK_LABELS = 12  # tick labels per histogram panel at most (`_tick_labels`)
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
    """1-way marginals, one panel per schema column: the share of real and synthetic rows in each histogram
    cell (`histogram_cells`: a numeric column's public bins, a categorical column's categories).

    Each cell is one bar of the same width, labelled by its edges (or its category), whatever the width of the
    bin it stands for. A density over unequal bins on the column's own axis would read worse: a heavy-tailed
    column (a loan amount bounded by 1,000,000, most values below 40,000) would put its bulk in a sliver at the
    left of the axis, and an atom (a zero-width bin, e.g. 0 for "no cost") would have no width to draw. One bar
    per public bin shows every bin, and its height is the share of rows in it: the 1-way marginal MST and AIM
    measure on those very bins.

    `real=None` draws the synthetic rows alone: the public report's figure, whose every pixel is a function
    of the released table and the public schema (cell edges come from the schema, never from the rows)."""
    cells = [(col, histogram_cells(synth, col)) for col in columns]
    ticks = [_tick_labels(labels, ordered=col.kind in NUMERIC_KINDS) for col, (_, labels) in cells]
    fig, height, width = _panel_grid(len(cells), max((len(t) for labels in ticks for t in labels), default=0))
    for i, ((col, (q, labels)), shown) in enumerate(zip(cells, ticks)):
        ax = fig.add_subplot(height, width, i + 1)
        idx = np.arange(len(labels))
        if real is not None:
            ax.bar(idx - 0.2, histogram_cells(real, col)[0], width=0.4, color=REAL, alpha=0.5, label="real")
        ax.bar(
            idx if real is None else idx + 0.2, q, width=0.8 if real is None else 0.4, color=SYNTH, label="synthetic"
        )
        at = [k for k, label in enumerate(shown) if label]  # ticks only where a label is shown
        ax.set_xticks(idx[at], [shown[k] for k in at], rotation=90, fontsize=6)
        ax.set_title(col.name, fontsize=8)
        ax.tick_params(labelsize=6)
    fig.axes[0].legend(fontsize=6)
    return png(fig)


def _panel_grid(n: int, label_chars: int) -> tuple[Figure, int, int]:
    """An empty figure for `n` histogram panels in a near-square grid, and the grid's rows and columns. Below each
    panel is room for its rotated tick labels of at most `label_chars` characters, set from their length (a 6 pt
    character is at most about 0.06 in wide) rather than measured by a layout engine, which would lay every label
    out once more before drawing."""
    width = math.ceil(math.sqrt(n))
    height = math.ceil(n / width)
    panel_w, panel_h, left, top = 2.6, 1.6, 0.45, 0.3  # inches
    gap_w, gap_h = 0.5, 0.4 + 0.06 * label_chars  # between panels: the y labels; the x labels and the next title
    fig_w, fig_h = left + width * (panel_w + gap_w), top + height * (panel_h + gap_h)
    fig = Figure(figsize=(fig_w, fig_h))
    fig.subplots_adjust(
        left=left / fig_w,
        right=1 - gap_w / 2 / fig_w,
        bottom=gap_h / fig_h,
        top=1 - top / fig_h,
        wspace=gap_w / panel_w,
        hspace=gap_h / panel_h,
    )
    return fig, height, width


def histogram_cells(frame: pd.DataFrame, col: Any) -> tuple[np.ndarray, list[str]]:
    """The share of `frame`'s rows in each histogram cell of one schema column, and the cells' labels.

    Numeric: the column's public bins (`pipelines.data.bins.column_bins`: the schema's declared `bins` edges and
    `atoms`, else HIST_BINS equal-width bins over its bounds; integer columns integer-aligned), a function of the
    schema alone, never of the rows. Labels: "[a, b)" (the last bin "[a, b]"), "= a" for an atom, "a–b" (or "a")
    for the integers of an integer bin. Categorical/binary: the schema's categories, then "(outside)" for values
    outside them (a decoder bug shows as a bar)."""
    if col.kind in NUMERIC_KINDS:
        bins = column_bins(col, HIST_BINS)
        codes = bins.codes(scale_by_bounds(numeric_values(frame, col), col.lower, col.upper, col.name))
        labels = _bin_labels(bins)
    else:
        codes = cell_codes(frame, col, HIST_BINS)[0]
        labels = [str(c) for c in col.categories] + ["(outside)"]
    return np.bincount(codes, minlength=len(labels)) / max(len(codes), 1), labels


def _bin_labels(bins: NumericBins) -> list[str]:
    """Each public bin's label, in code order (`histogram_cells`)."""
    if bins.kind == "integer":
        return [_edge(lo) if lo == hi else f"{_edge(lo)}–{_edge(hi)}" for lo, hi in zip(bins.lo, bins.hi)]
    last = len(bins.edges) - 2
    return [f"= {_edge(a)}" for a in bins.atoms] + [
        f"[{_edge(a)}, {_edge(b)}{']' if k == last else ')'}"
        for k, (a, b) in enumerate(zip(bins.edges, bins.edges[1:]))
    ]


def _edge(x: float) -> str:
    """A bin edge as a short tick label: 40000 as 40k, 1000000 as 1M, 0.25 as 0.25."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.4g}{suffix}"
    return f"{x:.4g}"


def _tick_labels(labels: Sequence[str], ordered: bool) -> list[str]:
    """At most MAX_TICK_LABELS of `labels` shown: every k-th of ordered (numeric) bins, which still read as an
    axis; none of more categories than that (a thinned list of categories would name bars at random)."""
    if len(labels) <= MAX_TICK_LABELS:
        return list(labels)
    if not ordered:
        return [""] * len(labels)
    step = math.ceil(len(labels) / MAX_TICK_LABELS)
    return [label if k % step == 0 else "" for k, label in enumerate(labels)]


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
