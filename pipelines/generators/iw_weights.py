"""Importance weights w(x) ∝ 1/M(x) as PUBLIC functions of an encoded row (thesis §3.2.4, §3.3.3), from the
`iw_mmd_gan.weights` section of params.yaml. Neither kind looks at the private training rows:

  null        w ≡ 1 (the unweighted MMD-GAN).
  rebalance   {column, observed, target}: a binary or categorical column whose category proportions in the
              training data are `observed` (public knowledge, e.g. a data set's published class distribution)
              and should become `target` (both in the schema's category order; [P(0), P(1)] for a binary
              column): w(x) = target_c / observed_c for x in category c = 1/M(x), the known M of §3.2.2.
  regressor   {file}: the "estimated weighting function" of §3.3.3, a small neural network regressor fitted on
              a labelled file of public rows (CSV or Parquet: the encoded columns in layout order plus a
              `weight` column, e.g. a few hundred rows a steward labelled with preference weights), M known up
              to a constant (use the self-normalised estimator). Never fit it on the private training rows:
              that would be a data access without a ledger event.

Every weight function carries a public upper bound `bound` (rebalance: max target/observed; regressor: the
largest labelled weight, predictions clipped to [0, bound]), which the private release needs (w_max).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from pipelines.data.layout import Block, Layout


@dataclass(frozen=True)
class WeightFunction:
    """w(x) for encoded rows x (n, width) → (n,), with 0 ≤ w ≤ `bound` for EVERY row, and a description."""

    kind: str
    bound: float
    apply: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    info: dict[str, Any] = field(default_factory=dict)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.clip(self.apply(np.asarray(x, dtype=float)), 0.0, self.bound)


def weight_function(spec: dict | None, layout: Layout, seed: int = 0) -> WeightFunction:
    """The weight function described by `spec` (module docstring)."""
    if spec is None:
        return WeightFunction("uniform", 1.0, lambda x: np.ones(len(x)))
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in ("rebalance", "regressor"):
        raise ValueError(
            f"iw_mmd_gan.weights must be null, {{rebalance: {{column, observed, target}}}} or "
            f"{{regressor: {{file}}}}, got {spec!r}"
        )
    kind, body = next(iter(spec.items()))
    return rebalance_weights(layout, **body) if kind == "rebalance" else regressor_weights(layout, seed=seed, **body)


def _proportions(name: str, values: Any, count: int, column: str, positive: bool) -> np.ndarray:
    p = np.asarray(values, dtype=float)
    if (
        p.shape != (count,)
        or not np.all(np.isfinite(p))
        or np.any(p < 0)
        or (positive and np.any(p <= 0))
        or abs(p.sum() - 1) > 1e-6
    ):
        sign = "positive" if positive else "non-negative"
        raise ValueError(
            f"iw_mmd_gan.weights.rebalance.{name} must list {count} {sign}"
            f" proportions summing to 1 for column '{column}' (schema category order), got {values!r}"
        )
    return p


def category_codes(x: np.ndarray, block: Block) -> np.ndarray:
    """The category index of each row in a binary (x ≥ 0.5) or one-hot block (argmax)."""
    if block.kind == "binary":
        return (x[:, block.start] >= 0.5).astype(int)
    return x[:, block.start : block.stop].argmax(1)


def rebalance_weights(layout: Layout, column: str, observed: list[float], target: list[float]) -> WeightFunction:
    """w(x) = target_c / observed_c for the category c of `column` in x (§3.2.2 with M(x) = observed_c/target_c)."""
    try:
        block = layout.block(column)
    except KeyError:
        raise ValueError(
            f"iw_mmd_gan.weights.rebalance.column '{column}' is not a column of the data set; "
            f"columns: {[b.column for b in layout.blocks]}"
        ) from None
    if block.kind not in ("binary", "categorical"):
        raise ValueError(
            f"iw_mmd_gan.weights.rebalance.column '{column}' is {block.kind}; rebalancing needs a "
            f"binary or categorical column"
        )
    count = 2 if block.kind == "binary" else block.width
    ratio = _proportions("target", target, count, column, False) / _proportions(
        "observed", observed, count, column, True
    )
    return WeightFunction(
        "rebalance",
        float(ratio.max()),
        lambda x: ratio[category_codes(x, block)],
        {
            "column": column,
            "observed": list(map(float, observed)),
            "target": list(map(float, target)),
            "category_weights": ratio.tolist(),
        },
    )


def regressor_weights(
    layout: Layout, file: str, hidden: list[int] | tuple[int, ...] = (32,), seed: int = 0
) -> WeightFunction:
    """§3.3.3's estimated weighting function: an MLP regressor from encoded rows to weights, fitted on the
    public labelled `file`, predictions clipped to [0, largest labelled weight]."""
    from sklearn.neural_network import MLPRegressor

    path = Path(file)
    if not path.is_file():
        raise ValueError(
            f"iw_mmd_gan.weights.regressor.file '{file}' does not exist; give a CSV or Parquet file of "
            f"public labelled rows (encoded columns in layout order plus a 'weight' column)"
        )
    import pandas as pd

    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    if "weight" not in frame.columns or frame.shape[1] != layout.width + 1:
        raise ValueError(
            f"{file}: expected {layout.width} encoded columns plus a 'weight' column, got columns {list(frame.columns)}"
        )
    x = frame.drop(columns="weight").to_numpy(dtype=float)
    w = frame["weight"].to_numpy(dtype=float)
    if len(w) < 2 or not np.all(np.isfinite(w)) or np.any(w < 0) or not np.all((x >= 0) & (x <= 1)):
        raise ValueError(f"{file}: needs at least 2 rows, finite non-negative weights and encoded values in [0, 1]")
    model = MLPRegressor(hidden_layer_sizes=tuple(hidden), max_iter=3000, random_state=seed).fit(x, w)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return WeightFunction(
        "regressor",
        float(w.max()),
        lambda rows: model.predict(rows),
        {"file": str(file), "sha256": digest, "labelled_rows": len(w)},
    )
