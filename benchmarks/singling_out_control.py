"""Singling-out control: the exchangeable null used by the risk gates against anonymeter-style size
extrapolation, with fresh real rows standing in for the synthetic table (true risk 0).

    python -m benchmarks.singling_out_control     # ≈ 1 min on 1 core

Queries are built from rows disjoint from the "training" rows, so any difference between the main success
rate and a control estimate is that estimate's bias. On Adult a control set as large as the training set is
available and gives the reference rate directly. anonymeter-style: the control set is subsampled at 10 sizes
(5 repeats), the counts are fitted by a·∫₀^w n v (1 − v)^(n−1) dv and evaluated at the training size.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import curve_fit

from pipelines.data.readers import read_table
from pipelines.data.schema import load_schema
from pipelines.evaluation.attacks import anonymeter as A
from pipelines.evaluation.queries import column_arrays


def extrapolated(mask: np.ndarray, n_target: int, rng: np.random.Generator) -> float:
    m = mask.shape[1]
    prob = lambda n, w: (1 - (1 - w) ** n * (1 + n * w)) / (n + 1)  # noqa: E731
    sizes, counts = [], []
    for size in np.linspace(max(2, m // 5), m, 10).astype(int):
        for _ in range(5):
            counts.append(float((mask[:, rng.choice(m, size, replace=False)].sum(1) == 1).sum()))
            sizes.append(float(size))
    (u, a), _ = curve_fit(
        lambda n, u, a: a * prob(n, u / m),
        np.array(sizes),
        np.array(counts),
        p0=(1.0, max(counts) / prob(m, 1 / m)),
        bounds=([1e-9, 0.0], [float(m), np.inf]),
        maxfev=20000,
    )
    return float(a * prob(n_target, u / m))


def main() -> None:
    print(
        "| data set | attack | queries | main success | exchangeable control | extrapolated control | "
        "same-size control |\n|---|---|---|---|---|---|---|"
    )
    for ds, (n, m) in (("breast_cancer", (200, 50)), ("adult", (3000, 600))):
        schema = load_schema(f"schemas/{ds}.yaml")
        rows = read_table(f"bundled:{ds}", schema)[0].sample(frac=1.0, random_state=0).reset_index(drop=True)
        cols = list(schema.columns)
        train, fresh, control = rows.iloc[:n], rows.iloc[n : 2 * n], rows.iloc[len(rows) - m :]
        big = rows.iloc[2 * n : 3 * n] if len(rows) - m >= 3 * n else None
        for n_cols in (1, 3):
            rng = np.random.default_rng(0)
            queries = (
                A.univariate_queries(fresh, cols) if n_cols == 1 else A.multivariate_queries(fresh, cols, 3, 300, rng)
            )[:300]
            a = np.array([A._matches(column_arrays(train, cols), q).sum() for q in queries])
            mask = np.array([A._matches(column_arrays(control, cols), q) for q in queries])
            k = len(queries)
            same = (
                "–"
                if big is None
                else f"{np.mean([A._matches(column_arrays(big, cols), q).sum() == 1 for q in queries]):.3f}"
            )
            print(
                f"| {ds} ({n} / {m}) | {'univariate' if n_cols == 1 else 'multivariate'} | {k} | "
                f"{(a == 1).mean():.3f} | {A.exchangeable_successes(a, mask.sum(1), n, m) / k:.3f} | "
                f"{extrapolated(mask, n, rng) / k:.3f} | {same} |"
            )


if __name__ == "__main__":
    main()
