"""Summary statistics of the released synthetic table alone, for the public report.

Every number here is a function of the synthetic rows and the public schema (categories, bounds), never of a
real row: the synthetic table is the output of a DP generator, so by post-processing these statistics carry the
same (ε, δ) guarantee. Nothing here may take a real table as an argument.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from pipelines.evaluation.fidelity import CATEGORICAL_KINDS, NUMERIC_KINDS
from pipelines.evaluation.marginals import cell_codes, numeric_values

QUANTILES = {"min": 0.0, "q25": 0.25, "median": 0.5, "q75": 0.75, "max": 1.0}
OUTSIDE = "(outside the schema)"


def summarise_synthetic(synth: pd.DataFrame, columns: Sequence[Any]) -> dict[str, Any]:
    """{"rows": n, "numeric": {column: {mean, std, min, q25, median, q75, max}},
    "categorical": {column: {category: share}}} of the synthetic rows; a category share counts the schema's
    categories plus, for a decoder bug, values outside them."""
    numeric, categorical = {}, {}
    for col in columns:
        if col.kind in NUMERIC_KINDS:
            x = numeric_values(synth, col)
            numeric[col.name] = {
                "mean": float(np.mean(x)) if len(x) else None,
                "std": float(np.std(x)) if len(x) else None,
                **{k: float(np.quantile(x, q)) if len(x) else None for k, q in QUANTILES.items()},
            }
        elif col.kind in CATEGORICAL_KINDS:
            codes, cells = cell_codes(synth, col, bins=1)
            shares = np.bincount(codes, minlength=cells) / max(len(codes), 1)
            categorical[col.name] = {
                **{str(c): float(s) for c, s in zip(col.categories, shares)},
                **({OUTSIDE: float(shares[-1])} if shares[-1] > 0 else {}),
            }
    return {"rows": len(synth), "numeric": numeric, "categorical": categorical}
