"""Distributional metrics of DP-auto-GAN §4 (Tantipongpipat et al.): k-way marginal total variation,
2-way PCA marginal and the normalised Wasserstein score.

All three compare the real *training* rows R with the synthetic rows S (the paper's notation); each
also reports the same number for the real holdout T against R, the score a perfect generator would
get from sampling noise alone. Rows are represented by ``utility.featurise`` (every schema column,
numeric scaled to [0, 1] by the schema bounds, binary 0/1, categorical one-hot over the schema's
categories), so the data universe X is fixed by the schema alone.

Everything here reads real rows (and the PCA basis is fitted on them): not covered by the DP guarantee.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Sequence

import numpy as np
import pandas as pd

from pipelines.errors import InputError
from pipelines.evaluation.fidelity import CATEGORICAL_KINDS, NUMERIC_KINDS, scale_by_bounds
from pipelines.evaluation.transport import pot
from pipelines.evaluation.utility import featurise

MAX_DENSE_CELLS = 1 << 24  # a joint histogram counted over its whole domain (`joint_tv`): 128 MiB of counts at most


def row_sample(n: int, cap: int | None, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of a uniform subsample of min(n, cap) of n rows without replacement (all if cap is None)."""
    if cap is None or n <= cap:
        return np.arange(n)
    return np.sort(rng.choice(n, size=cap, replace=False))


def capped_rows(lengths: Sequence[int], cap: int | None, seed: int) -> list[np.ndarray]:
    """``row_sample`` of tables of these `lengths` (R, S, T), in this order, from one generator seeded by `seed`:
    T's subsample depends on S's length only, so the real side of a metric needs no synthetic row."""
    rng = np.random.default_rng(seed)
    return [row_sample(n, cap, rng) for n in lengths]


def numeric_values(frame: pd.DataFrame, col: Any) -> np.ndarray:
    """A numeric column as floats; missing or non-numeric values are an error (validate first)."""
    x = pd.to_numeric(frame[col.name], errors="coerce").to_numpy(dtype=float)
    if np.isnan(x).any():
        raise InputError(
            "missing or non-numeric values.",
            column=col.name,
            fix="validate the table against the public schema before evaluation.",
        )
    return x


def cell_codes(frame: pd.DataFrame, col: Any, bins: int) -> tuple[np.ndarray, int]:
    """Each row's histogram cell for one column, and the number of cells.

    Numeric: `bins` equal-width bins over the schema bounds [lower, upper] (the upper bound falls in
    the last bin). Categorical/binary: the index of the value in the schema's category list, and one
    extra "outside the schema" cell (as in ``fidelity``), so a generator emitting such values is penalised.
    """
    if col.name not in frame.columns:
        raise InputError(
            "the table has no such column.", column=col.name, fix="decode the table with the same public schema."
        )
    if col.kind in NUMERIC_KINDS:
        scaled = scale_by_bounds(numeric_values(frame, col), col.lower, col.upper, col.name)
        return np.minimum((scaled * bins).astype(int), bins - 1), bins
    if col.kind in CATEGORICAL_KINDS:
        codes = pd.Categorical(frame[col.name], categories=list(col.categories)).codes.astype(int)
        return np.where(codes < 0, len(col.categories), codes), len(col.categories) + 1
    raise InputError(
        f"unknown column kind '{col.kind}'.",
        column=col.name,
        fix="use one of continuous, integer, categorical, binary.",
    )


def _cells(frame: pd.DataFrame, columns: Sequence[Any], bins: int) -> tuple[list[np.ndarray], list[int]]:
    """Each column's cell per row (``cell_codes``, one array per column), and each column's number of cells."""
    coded = [cell_codes(frame, col, bins) for col in columns]
    return [np.ascontiguousarray(c, dtype=np.int64) for c, _ in coded], [n for _, n in coded]


def joint_tv(real_cells: Sequence[np.ndarray], synth_cells: Sequence[np.ndarray], dims: Sequence[int]) -> float:
    """TV = ½ Σ_cells |p_R(cell) − p_S(cell)| of the joint histogram over the cells' columns (one cell array per
    column and side).

    Each row's cell is its mixed-radix index over `dims`; the histograms count them directly (one pass, the
    domain's size in memory) when the domain has at most MAX_DENSE_CELLS cells, else over the cells that occur
    (a sort). Cells no row occupies add 0 either way."""
    joint = []
    for cells in (real_cells, synth_cells):
        index = cells[0].copy()
        for column, dim in zip(cells[1:], dims[1:]):
            index *= dim
            index += column
        joint.append(index)
    size = math.prod(dims)
    if size > MAX_DENSE_CELLS:
        _, both = np.unique(np.concatenate(joint), return_inverse=True)
        joint, size = [both[: len(joint[0])], both[len(joint[0]) :]], int(both.max()) + 1
    p, q = (np.bincount(index, minlength=size) / len(index) for index in joint)
    return float(min(0.5 * np.abs(p - q).sum(), 1.0))  # min: rounding can exceed 1 by an ulp


def total_variation(real: pd.DataFrame, synth: pd.DataFrame, columns: Sequence[Any], bins: int) -> float:
    """TV between the joint histograms of `columns` in `real` and `synth` (cells as in ``cell_codes``)."""
    (r, dims), (s, _) = _cells(real, columns, bins), _cells(synth, columns, bins)
    return joint_tv(r, s, dims)


def column_subsets(n_columns: int, k: int, count: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """`count` distinct random k-subsets of range(n_columns) (every subset when there are at most `count`)."""
    total = math.comb(n_columns, k)
    if total <= count:
        return list(combinations(range(n_columns), k))
    chosen: dict[tuple[int, ...], None] = {}
    while len(chosen) < count:
        chosen.setdefault(tuple(sorted(rng.choice(n_columns, size=k, replace=False).tolist())), None)
    return list(chosen)


def kway_reference(
    train: pd.DataFrame, holdout: pd.DataFrame, columns: Sequence[Any], k: int, n_subsets: int, bins: int, seed: int
) -> float | None:
    """``kway_marginal_tv``'s `holdout_reference_mean_tv` (T against R over the same subsets), from real rows
    alone; None when the schema has fewer than k columns."""
    columns = list(columns)
    if len(columns) < k:
        return None
    subsets = column_subsets(len(columns), k, n_subsets, np.random.default_rng(seed))
    (r, dims), (h, _) = (_cells(f, columns, bins) for f in (train, holdout))
    return float(np.mean([joint_tv([r[i] for i in c], [h[i] for i in c], [dims[i] for i in c]) for c in subsets]))


def kway_marginal_tv(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    k: int,
    n_subsets: int,
    bins: int,
    seed: int,
    n_worst: int = 5,
    reference: float | None = None,
) -> dict:
    """k-way marginal score of NIST's 2018 challenge (DP-auto-GAN Table 1): mean TV between the k-way
    joint histograms of R and S over random column k-subsets (numeric columns binned by schema bounds).

    Returns {"k", "n_subsets", "bins", "mean_tv", "max_tv", "worst": [{"columns", "tv"}],
    "holdout_reference_mean_tv"}, or {"skipped": reason} when the schema has fewer than k columns.
    `reference`: ``kway_reference`` of the same arguments, computed earlier.
    """
    columns = list(columns)
    if len(columns) < k:
        return {"skipped": f"the schema has {len(columns)} column(s), fewer than k = {k}"}
    subsets = column_subsets(len(columns), k, n_subsets, np.random.default_rng(seed))
    (r, dims), (s, _) = (_cells(f, columns, bins) for f in (train, synth))
    tvs = [joint_tv([r[i] for i in c], [s[i] for i in c], [dims[i] for i in c]) for c in subsets]
    if reference is None:
        reference = kway_reference(train, holdout, columns, k, n_subsets, bins, seed)
    worst = sorted(zip(tvs, subsets), key=lambda t: -t[0])[:n_worst]
    return {
        "k": k,
        "n_subsets": len(subsets),
        "bins": bins,
        "mean_tv": float(np.mean(tvs)),
        "max_tv": float(np.max(tvs)),
        "holdout_reference_mean_tv": reference,
        "worst": [{"columns": [columns[i].name for i in s], "tv": tv} for tv, s in worst],
    }


def max_distance(columns: Sequence[Any]) -> float:
    """max_{x,y∈X} ‖x − y‖₂ over the data universe X of the featurised space (the Wscore normaliser, §4).

    Per block of ``featurise``: a numeric coordinate lies in [0, 1] (schema bounds), so |Δ|² ≤ 1; a
    binary coordinate lies in {0, 1}, |Δ|² ≤ 1; a categorical column with m ≥ 2 categories is a one-hot
    e_i and ‖e_i − e_j‖² = 2 for i ≠ j (0 when m = 1). The blocks vary independently, so all maxima
    are attained at once: max ‖x − y‖ = √(#numeric + #binary + 2·#categorical). From the schema only.
    """
    squared = 0
    for col in columns:
        if col.kind in NUMERIC_KINDS or col.kind == "binary":
            squared += 1
        elif col.kind in CATEGORICAL_KINDS:
            squared += 2 if len(col.categories) >= 2 else 0
        else:
            raise InputError(
                f"unknown column kind '{col.kind}'.",
                column=col.name,
                fix="use one of continuous, integer, categorical, binary.",
            )
    return math.sqrt(squared)


def _optimal_transport_cost(x: np.ndarray, y: np.ndarray, metric: str) -> float:
    """min_π Σ π_ij c(x_i, y_j) between the empirical (uniform) measures on the rows of x and y, solved
    exactly as a linear program by POT's network simplex (``ot.emd2``; imported here, not at module level:
    `pipelines.config` must not pay for POT's import)."""
    ot = pot()
    cost = ot.dist(np.asarray(x, dtype=float), np.asarray(y, dtype=float), metric=metric)
    value, log = ot.emd2(
        np.full(len(x), 1 / len(x)), np.full(len(y), 1 / len(y)), cost, numItermax=100 * cost.size, log=True
    )
    if log.get("warning"):
        raise RuntimeError(f"exact optimal transport did not converge: {log['warning']}")
    return max(float(value), 0.0)


def wasserstein2(x: np.ndarray, y: np.ndarray) -> float:
    """Exact W2 = √(min_π Σ π_ij ‖x_i − y_j‖²) between the empirical measures on the rows of x and y."""
    return math.sqrt(_optimal_transport_cost(x, y, "sqeuclidean"))


def wasserstein1(x: np.ndarray, y: np.ndarray) -> float:
    """Exact W1 = min_π Σ π_ij ‖x_i − y_j‖₂ between the empirical measures on the rows of x and y."""
    return _optimal_transport_cost(x, y, "euclidean")


def wasserstein_reference(
    train: pd.DataFrame, holdout: pd.DataFrame, n_synth: int, columns: Sequence[Any], max_rows: int | None, seed: int
) -> float:
    """W2(R, T) of ``wasserstein_score`` (the holdout reference) for a synthetic table of `n_synth` rows."""
    rows = capped_rows([len(train), n_synth, len(holdout)], max_rows, seed)
    return wasserstein2(featurise(train.iloc[rows[0]], columns), featurise(holdout.iloc[rows[2]], columns))


def wasserstein_score(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    max_rows: int | None,
    seed: int,
    reference: float | None = None,
) -> dict:
    """Wscore(R, S) = 1 − W2(R, S) / max_{x,y∈X} ‖x − y‖₂ (§4, "Distributional distance") on the whole
    featurised rows, W2 on seeded subsamples of at most `max_rows` rows per side. 1 = identical.
    `reference`: ``wasserstein_reference`` of the same arguments, computed earlier."""
    rows = capped_rows([len(train), len(synth), len(holdout)], max_rows, seed)
    r, s = featurise(train.iloc[rows[0]], columns), featurise(synth.iloc[rows[1]], columns)
    diameter = max_distance(columns)
    w2 = wasserstein2(r, s)
    w2_ref = (
        wasserstein_reference(train, holdout, len(synth), columns, max_rows, seed) if reference is None else reference
    )
    return {
        "w2": w2,
        "max_distance": diameter,
        "score": 1 - w2 / diameter,
        "holdout_reference_score": 1 - w2_ref / diameter,
        "rows": {"real": len(r), "synthetic": len(s)},
    }


PCA_BLOCK_ROWS = 65_536  # training rows featurised at a time for the PCA's covariance: memory p², not rows × p


@dataclass(frozen=True)
class Principal:
    """The first principal directions of featurised rows (as sklearn's PCA with `svd_solver="covariance_eigh"`:
    `components_`, `explained_variance_ratio_`, `transform`)."""

    mean_: np.ndarray
    components_: np.ndarray
    explained_variance_ratio_: np.ndarray

    def transform(self, rows: np.ndarray) -> np.ndarray:
        return (rows - self.mean_) @ self.components_.T


def _pca(train: pd.DataFrame, columns: Sequence[Any], n_components: int) -> Principal | str:
    """The PCA of ``pca_marginal``, fitted on every featurised real training row, or why there is none. The rows are
    featurised PCA_BLOCK_ROWS at a time into Σx and the p × p Gram matrix Σxxᵀ; the covariance is
    (Σxxᵀ − n·x̄x̄ᵀ)/(n − 1) and its eigenvectors are the directions, each signed so its largest entry is positive:
    the p × p product and the sign rule of sklearn's `covariance_eigh` solver, without the rows × p matrix."""
    n, width = len(train), featurise(train.iloc[:0], columns).shape[1]
    if width < n_components or n <= n_components:
        return (
            f"PCA needs more than {n_components} rows and at least {n_components} featurised "
            f"dimensions; got {n} rows, {width} dimensions"
        )
    total, gram = np.zeros(width), np.zeros((width, width))
    low, high = np.full(width, np.inf), np.full(width, -np.inf)
    for start in range(0, n, PCA_BLOCK_ROWS):
        x = featurise(train.iloc[start : start + PCA_BLOCK_ROWS], columns)
        total, gram = total + x.sum(axis=0), gram + x.T @ x
        low, high = np.minimum(low, x.min(axis=0)), np.maximum(high, x.max(axis=0))
    if not (high - low).any():
        return "the real training rows are all identical; principal components are undefined"
    mean = total / n
    values, vectors = np.linalg.eigh((gram - n * np.outer(mean, mean)) / (n - 1))
    values, vectors = np.clip(values[::-1], 0.0, None), vectors[:, ::-1]
    components = vectors[:, :n_components].T
    components = components * np.sign(components[np.arange(n_components), np.abs(components).argmax(axis=1)])[:, None]
    return Principal(mean, components, values[:n_components] / values.sum())


def pca_reference(
    train: pd.DataFrame,
    holdout: pd.DataFrame,
    n_synth: int,
    columns: Sequence[Any],
    max_rows: int | None,
    seed: int,
    n_components: int = 2,
) -> float | None:
    """W2(R·P, T·P) of ``pca_marginal`` (the holdout reference) for a synthetic table of `n_synth` rows; None
    where the PCA is undefined."""
    pca = _pca(train, columns, n_components)
    if isinstance(pca, str):
        return None
    rows = capped_rows([len(train), n_synth, len(holdout)], max_rows, seed)
    return wasserstein2(
        *(pca.transform(featurise(frame.iloc[r], columns)) for frame, r in ((train, rows[0]), (holdout, rows[2])))
    )


def pca_marginal(
    train: pd.DataFrame,
    synth: pd.DataFrame,
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    max_rows: int | None,
    seed: int,
    n_components: int = 2,
    reference: float | None = None,
) -> tuple[dict, dict[str, np.ndarray]]:
    """2-way PCA marginal (§4): P = the first `n_components` (2) principal directions of the featurised
    real training rows; W2 between R·P and S·P, and
    Wscore(R, S, P) = 1 − W2(RP, SP) / (√v · max ‖x − y‖₂), v = the fraction of the real training variance
    that P explains (the explained variance ratio: the normaliser stays a length, the score dimensionless).

    Returns (metrics, projections {"real", "synthetic"} of the subsampled rows, for the scatter plot).
    `reference`: ``pca_reference`` of the same arguments, computed earlier.
    """
    pca = _pca(train, columns, n_components)
    if isinstance(pca, str):
        return {"skipped": pca}, {}
    v = float(pca.explained_variance_ratio_.sum())
    rows = capped_rows([len(train), len(synth), len(holdout)], max_rows, seed)
    proj = {
        label: pca.transform(featurise(frame.iloc[r], columns))
        for label, frame, r in (("real", train, rows[0]), ("synthetic", synth, rows[1]))
    }
    denominator = math.sqrt(v) * max_distance(columns)
    w2 = wasserstein2(proj["real"], proj["synthetic"])
    w2_ref = (
        pca_reference(train, holdout, len(synth), columns, max_rows, seed, n_components)
        if reference is None
        else reference
    )
    metrics = {
        "n_components": n_components,
        "explained_variance_ratio": v,
        "w2": w2,
        "score": 1 - w2 / denominator,
        "holdout_reference_score": 1 - w2_ref / denominator,
        "rows": {"real": len(proj["real"]), "synthetic": len(proj["synthetic"])},
        "fitted_on": "real training rows (outside the DP guarantee)",
    }
    return metrics, {"real": proj["real"], "synthetic": proj["synthetic"]}
