"""The utility verdict of one synthetic table: *fit*, *weak* or *inverted* for the schema's task, and what each word
means to the `utility` release gate (`REASONS`; pipelines/gates/utility.py applies params.yaml `utility_gate`'s policy
to it, docs/privacy-risk.md).

Two references a steward can read without statistics:
- **chance**: a classifier whose test AUROC is 0.5 has learnt nothing about the target;
- **independent marginals**: a table whose every column is drawn independently from the *exact* training
  1-way marginals (``independent_marginals``). It has every column's distribution right and no relationship
  between columns at all, so a table that does not beat it models nothing beyond the marginals.
  (The exact marginals, not DP ones: this baseline feeds only the steward-side verdict, costs no ε, and the
  exact reference is the stricter question; docs/architecture.md, departures.)

The verdict, on the real holdout rows:
- **inverted**: for every model of ``utility.MODELS`` fitted on the table (train on synthetic, test on real),
  the one-sided upper confidence bound of the AUROC at `confidence` lies below 0.5 (DeLong et al. 1988
  variance). An intersection-union test (every model must be below): its level is that of each test, no
  multiplicity correction; a model fitted on such a table predicts the opposite of the truth. Where the
  features track the target closely (breast cancer), even a table with no relationship at all can land here
  (a classifier fitted on it is a random function whose sign is random); the harm to an analyst is the same.
- **fit**: the table beats the baseline on the target task (for some model, the lower bound of AUROC_table
  minus the mean AUROC of R baseline tables, with the baseline draws' spread, is above 0), on the features'
  associations with the target (some feature's correlation with the target is reproduced measurably better than
  by the baseline: ``association_comparison``, the claim with power where a classifier fitted on a
  relationship-free table scores far from 0.5 by chance) or on 2-way fidelity (the lower bound of mean 2-way
  TV_baseline − TV_table against the holdout, bootstrap standard error over all three tables' rows, is above 0).
  These M + 2 claims are Bonferroni-corrected, each one-sided at level α/(M + 2), α = 1 − `confidence`: a table
  that models nothing beyond its marginals is called fit by chance with probability at most about α (the bounds
  are normal, Student or bootstrap approximations). A claim alone is not enough: the table must also be
  *sound*, every model's AUROC lower bound above 0.5 (classifiers fitted on it beat chance on real rows) and no
  feature's association with the target distorted (reproduced measurably worse than by independent columns, by
  more than `association_tolerance`: ``association_comparison``). Soundness only removes tables from "fit", so
  the false-fit rate stays at most about α; it keeps "fit" from a table that reproduces some associations and
  inverts others (PEARL at ε 0.4 on the bundled table reproduced 6 features' associations, distorted 4,
  and its forest scored AUROC 0.07). Measured on the bundled table: 0 of 40 independent-marginals tables and a
  table with the target inverted are called fit; AIM's table at ε ≈ 0.96 (TSTR AUROC ≥ 0.93) is
  (tests/test_utility_verdict.py).
- **weak**: neither inverted nor fit. The margin is the confidence bound itself: "not better" means the
  improvement is within what the sampling noise of the holdout and of both tables produces.
Everything here reads real rows (training marginals, holdout): steward evidence; a public manifest shows the
verdict word alone, declared data-dependent, and only under `release.non_dp_gates: refuse`.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.stats import norm, rankdata
from scipy.stats import t as student_t

from pipelines.evaluation.marginals import cell_codes
from pipelines.evaluation.utility import _labels, capped, feature_names, featurise

SECTION = "utility_gate"
BASELINE = (
    "every column drawn independently from the exact 1-way marginals of the real training rows "
    "(resampled training values): right marginals, no relationship between columns"
)
OUTSIDE_DP = (
    "utility verdict: TSTR AUROC on real holdout rows, 2-way TV and the features' correlations with the "
    "target against real holdout rows, and a baseline drawn from the real training rows' exact marginals"
)
# the conditions whose failure makes a table weak, as its verdict's `failed_claims` names them (in the reports'
# words: report_words.claim_words, and what to try for each: report_words.claim_advice)
CLAIMS = {
    "baseline": "no assessed comparison beats the independent-marginals baseline",
    "chance": "some model's AUROC lower bound is at or below 0.5",
    "distorted": "some feature's association with the target is distorted",
}
REASONS = {
    "inverted": "models fitted on this table predict the opposite of the truth on real rows (AUROC clearly below 0.5)",
    "weak": "this table is not measurably better than independent columns drawn from the real 1-way "
    "marginals (on the target task, on the features' associations with the target or on 2-way "
    "fidelity), or a model fitted on it is not measurably better than chance on real rows, or it "
    "distorts a feature's association with the target beyond what independent columns would",
}


def independent_marginals(train: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """`n` rows whose columns are drawn independently, each from the training rows' own values (with
    replacement): a sample of the product of the exact 1-way marginals."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({c: train[c].to_numpy()[rng.integers(0, len(train), n)] for c in train.columns})


def baseline_tables(
    train: pd.DataFrame, n: int, seed: int, draws: int, max_rows: int | None = None
) -> dict[str, pd.DataFrame]:
    """`draws` independent-marginals tables of `n` rows (at most `max_rows`: the utility's row cap, which would
    cut them to that many anyway), {"baseline_<r>": table}, seeded by (seed, r)."""
    n = n if max_rows is None else min(n, max_rows)
    return {f"baseline_{r}": independent_marginals(train, n, seed * 1000 + r) for r in range(draws)}


def delong(y: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """AUROCs of the k score vectors `scores` (k × rows) for labels `y` (0/1) and their k × k covariance
    (DeLong, DeLong & Clarke-Pearson 1988, eq. 4-5, midrank form of Sun & Xu 2014): V10_i = share of
    negatives below positive i (ties ½), V01_j = share of positives above negative j; AUROC = mean V10,
    Cov = S10/m + S01/n with S the sample covariances of the placements over the m positives, n negatives."""
    scores = np.atleast_2d(np.asarray(scores, dtype=float))
    pos, neg = scores[:, y == 1], scores[:, y == 0]
    m, n = pos.shape[1], neg.shape[1]
    if m < 2 or n < 2:
        raise ValueError(f"DeLong's variance needs at least 2 rows of each class, got {m} positive, {n} negative")
    both = rankdata(np.hstack([pos, neg]), axis=1)
    v10 = (both[:, :m] - rankdata(pos, axis=1)) / n
    v01 = 1 - (both[:, m:] - rankdata(neg, axis=1)) / m
    return v10.mean(axis=1), np.atleast_2d(np.cov(v10)) / m + np.atleast_2d(np.cov(v01)) / n


def task_comparison(scored: dict, z_inverted: float, beats_level: float) -> dict:
    """Per model: the table's AUROC, its DeLong SE and bounds (AUROC ± z_inverted·SE); the mean AUROC
    ā and standard deviation s_b of the same model fitted on R independent-marginals tables; and the lower
    bound of the excess Δ = AUROC − ā, Δ − t·√(s_b²(1 + 1/R) + SE²), t the one-sided Student quantile at
    `beats_level` with R − 1 degrees of freedom (a prediction interval for one more model-free table).

    The baseline's spread is measured, not modelled: a classifier fitted on a table with no relationship is
    a random function of the features, and where features are strongly correlated with the target (breast
    cancer) its test AUROC ranges far from 0.5 (0.65-0.90 for a random forest over draws), far beyond the
    test-set noise alone. `beats_chance`: every model's lower bound is above 0.5 (an intersection-union test,
    the mirror of `inverted`). `scored` is ``utility.target_scores`` with the "tstr" (table) and "baseline_<r>" sets."""
    if "skipped" in scored:
        return {"skipped": scored["skipped"]}
    y = scored["y_test"]
    if min(int(y.sum()), int(len(y) - y.sum())) < 2:
        return {"skipped": "the real test set has fewer than 2 rows of a target class"}
    models = {}
    for model, by_set in scored["scores"].items():
        base = [by_set[k] for k in by_set if k.startswith("baseline_")]
        auc, cov = delong(y, np.vstack([by_set["tstr"], *base]))
        se, draws = math.sqrt(max(cov[0, 0], 0.0)), len(base)
        t = float(student_t.ppf(beats_level, draws - 1))
        mean, spread = float(auc[1:].mean()), float(auc[1:].std(ddof=1))
        excess = float(auc[0]) - mean
        models[model] = {
            "auroc": float(auc[0]),
            "auroc_se": se,
            "auroc_upper_bound": float(auc[0]) + z_inverted * se,
            "auroc_lower_bound": float(auc[0]) - z_inverted * se,
            "baseline_auroc": mean,
            "baseline_auroc_sd": spread,
            "baseline_draws": draws,
            "excess": excess,
            "excess_lower_bound": excess - t * math.sqrt(spread**2 * (1 + 1 / draws) + se**2),
        }
    return {
        "target": scored["target"],
        "models": models,
        "reference": "real holdout rows",
        "inverted": all(m["auroc_upper_bound"] < 0.5 for m in models.values()),
        "beats_chance": all(m["auroc_lower_bound"] > 0.5 for m in models.values()),
        "beats_baseline": any(m["excess_lower_bound"] > 0 for m in models.values()),
    }


def _pair_cells(frame: pd.DataFrame, columns: Sequence[Any], bins: int) -> tuple[sparse.csr_matrix, np.ndarray]:
    """(rows × cells) indicator of each row's cell in every 2-way histogram (cells of ``cell_codes``, all
    column pairs side by side), and where each pair's cells start."""
    coded = [cell_codes(frame, col, bins) for col in columns]
    pairs = list(combinations(range(len(columns)), 2))
    sizes = np.array([coded[i][1] * coded[j][1] for i, j in pairs])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    cells = np.column_stack([start + coded[i][0] * coded[j][1] + coded[j][0] for start, (i, j) in zip(starts, pairs)])
    rows = np.repeat(np.arange(len(frame)), len(pairs))
    return sparse.csr_matrix((np.ones(cells.size), (rows, cells.ravel())), shape=(len(frame), int(sizes.sum()))), starts


def _mean_tv(p: np.ndarray, q: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Mean over pairs of ½ Σ_cells |p − q| for each row of histograms p, q (resamples × cells)."""
    return 0.5 * np.add.reduceat(np.abs(p - q), starts, axis=1).mean(axis=1)


def two_way_comparison(
    synth: pd.DataFrame,
    baseline: pd.DataFrame,
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    bins: int,
    resamples: int,
    z: float,
    seed: int,
    chunk: int = 25,
) -> dict:
    """Mean 2-way marginal TV (all column pairs, numeric columns in `bins` schema-bound bins) of the table and
    of the baseline against the holdout, their difference d = TV_baseline − TV_table, its bootstrap standard
    error (every resample redraws the rows of all three tables) and the lower bound d − z·SE."""
    columns = list(columns)
    if len(columns) < 2:
        return {"skipped": f"the schema has {len(columns)} column(s); no 2-way marginal"}
    rng = np.random.default_rng(seed)
    (h, starts), (s, _), (b, _) = (_pair_cells(f, columns, bins) for f in (holdout, synth, baseline))

    def hist(a: sparse.csr_matrix, weights: np.ndarray) -> np.ndarray:
        return np.asarray((a.T @ weights.T).T) / a.shape[0]

    def point(a: sparse.csr_matrix) -> np.ndarray:
        return hist(a, np.ones((1, a.shape[0])))

    table, base = _mean_tv(point(s), point(h), starts)[0], _mean_tv(point(b), point(h), starts)[0]
    diffs = []
    for done in range(0, resamples, chunk):
        k = min(chunk, resamples - done)
        w = {
            name: np.stack(
                [np.bincount(rng.integers(0, a.shape[0], a.shape[0]), minlength=a.shape[0]) for _ in range(k)]
            ).astype(float)
            for name, a in (("h", h), ("s", s), ("b", b))
        }
        ph = hist(h, w["h"])
        diffs.append(_mean_tv(hist(b, w["b"]), ph, starts) - _mean_tv(hist(s, w["s"]), ph, starts))
    se = float(np.std(np.concatenate(diffs), ddof=1))
    improvement = float(base - table)
    return {
        "pairs": len(starts),
        "bins": bins,
        "reference": "real holdout rows",
        "mean_tv": float(table),
        "baseline_mean_tv": float(base),
        "improvement": improvement,
        "improvement_se": se,
        "improvement_lower_bound": improvement - z * se,
        "beats_baseline": improvement - z * se > 0,
    }


def _associations(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The signed Pearson correlation of every feature column of `x` with the 0/1 labels `y`, under each row of
    weights `w` (resamples × rows; a row of ones is the point estimate): resamples × features. A column constant
    under the weights (no variance) has correlation 0."""
    total = w.sum(axis=1, keepdims=True)
    mean_x, mean_y = (w @ x) / total, (w @ y)[:, None] / total
    cov = (w @ (x * y[:, None])) / total - mean_x * mean_y
    var = np.clip((w @ (x * x)) / total - mean_x**2, 0.0, None) * np.clip(mean_y * (1 - mean_y), 0.0, None)
    return np.divide(cov, np.sqrt(var), out=np.zeros_like(cov), where=var > 1e-18)


def association_comparison(
    synth: pd.DataFrame,
    baseline: pd.DataFrame,
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    target: str | None,
    resamples: int,
    level: float,
    seed: int,
    tolerance: float,
    chunk: int = 25,
    positive: str | int | None = None,
) -> dict:
    """Which features' associations with the target the table reproduces, against the baseline.

    For a table T, c_T,j is the signed correlation of feature j (``utility.featurise``: each numeric column scaled
    to its schema bounds, each category one-hot) with the target indicator; c_H,j the real holdout's. Feature j's
    improvement over the independent-marginals baseline B (c_B ≈ 0) is d_j = |c_B,j − c_H,j| − |c_T,j − c_H,j|:
    about |c_H,j| when the table reproduces the association, about 0 when it has none, negative when it inverts
    it. Its standard error SE_j is the bootstrap's (every resample redraws the rows of all three tables). The
    claim "the table reproduces a real association with the target" holds when some d_j − z·SE_j > 0, z the
    one-sided normal quantile at 1 − (1 − `level`)/p over the p features (Bonferroni: a table with no relationship
    to the target passes with probability at most 1 − `level`). Feature j is *distorted* when d_j + z·SE_j < 0
    and d_j < −`tolerance`: the table's association is measurably further from the real one than no association
    at all, and by more than `tolerance` (an inverted or exaggerated relationship, which would mislead an analyst
    of that feature; a table as good as the real rows shows it with probability at most 1 − `level`, the tolerance
    only removing features). Without the tolerance, a weak association a little exaggerated is "distorted" once
    the tables are large enough to measure it: AIM's table of a 16,000-row Adult extract at ε = 1 (GBM AUROC 0.90)
    had Protective-serv (2 % of the rows) at +0.07 against −0.03 in the 801 holdout rows, d_j = −0.066, bound
    −0.001, and was called weak for it; five times the rows of the same model made four such features
    (docs/privacy-risk.md), so the verdict turned weak as the table grew while the model stayed the same. The
    tolerance applies to the estimate d_j, not to the bound: a small table's wide intervals do not hide a material
    distortion (a real +0.09 turned into −0.30 on 455 rows, docs/privacy-risk.md: d_j about −0.3) behind it. 0.1
    is Cohen's "small" correlation. Unlike a classifier's AUROC, whose spread over relationship-free tables is wide
    where the features track the target closely (a classifier fitted on such a table is a random function of them,
    of random sign), d_j's null spread is the correlations' sampling noise alone. Also reported: how many features
    beat the baseline and how many are distorted, each distorted feature (`distorted`, most distorted first: its
    name, ``utility.feature_names``, c_H,j as "real", c_T,j as "synthetic", d_j and its upper bound), the feature
    of the smallest bound d_j + z·SE_j (`worst_feature`, its index, with its name, bound and d_j), and the
    root-mean-square distance √(mean_j (c_T,j − c_H,j)²) of the table and of the baseline. The target reads 1 for
    ``utility.positive_class`` (`positive`: the schema's `target_positive`)."""
    col = next((c for c in columns if c.name == target), None)
    if col is None or col.kind not in ("categorical", "binary"):
        return {"skipped": "the schema declares no categorical target"}
    frames = {"h": holdout, "s": synth, "b": baseline}
    data = {k: (featurise(f, columns, target), _labels(f, col, k, positive).astype(float)) for k, f in frames.items()}
    if any(np.unique(y).size < 2 for y in (data["h"][1], data["b"][1])):
        return {"skipped": "the real holdout or the baseline has a single target class"}
    rng = np.random.default_rng(seed)

    def improvement(w: dict[str, np.ndarray]) -> np.ndarray:
        h = _associations(*data["h"], w["h"])
        return np.abs(_associations(*data["b"], w["b"]) - h) - np.abs(_associations(*data["s"], w["s"]) - h)

    point = {k: np.ones((1, len(data[k][1]))) for k in data}
    d = improvement(point)[0]
    draws = []
    for done in range(0, resamples, chunk):
        k = min(chunk, resamples - done)
        draws.append(
            improvement(
                {
                    name: np.stack(
                        [np.bincount(rng.integers(0, len(y), len(y)), minlength=len(y)) for _ in range(k)]
                    ).astype(float)
                    for name, (_, y) in data.items()
                }
            )
        )
    se = np.std(np.concatenate(draws), axis=0, ddof=1)
    p = len(d)
    z = float(norm.ppf(1 - (1 - level) / p))
    bounds = d - z * se
    c = {k: _associations(*data[k], point[k])[0] for k in data}
    rms = {k: float(np.sqrt(np.mean((c[k] - c["h"]) ** 2))) for k in ("s", "b")}
    best, worst = int(np.argmax(bounds)), int(np.argmin(d + z * se))
    names, upper = feature_names(columns, target), d + z * se
    distorted = np.flatnonzero((upper < 0) & (d < -tolerance))
    return {
        "features": p,
        "reference": "real holdout rows",
        "z": z,
        "distance": rms["s"],
        "baseline_distance": rms["b"],
        "features_beating_baseline": int((bounds > 0).sum()),
        "features_worse_than_baseline": len(distorted),
        "distorted": [
            {
                "feature": names[j],
                "real": float(c["h"][j]),
                "synthetic": float(c["s"][j]),
                "improvement": float(d[j]),
                "upper_bound": float(upper[j]),
            }
            for j in distorted[np.argsort(d[distorted], kind="stable")]
        ],
        "tolerance": tolerance,
        "worst_feature": worst,
        "worst_feature_name": names[worst],
        "worst_upper_bound": float(upper[worst]),
        "worst_improvement": float(d[worst]),
        "best_feature": best,
        "best_improvement": float(d[best]),
        "best_improvement_se": float(se[best]),
        "improvement_lower_bound": float(bounds[best]),
        "beats_baseline": bool(bounds[best] > 0),
    }


def utility_verdict(
    scored: dict,
    synth: pd.DataFrame,
    baselines: dict[str, pd.DataFrame],
    holdout: pd.DataFrame,
    columns: Sequence[Any],
    bins: int,
    s: dict[str, Any],
    seed: int,
    max_rows: int | None = None,
) -> dict:
    """The verdict (module docstring) from `scored` (``utility.target_scores`` of {"tstr": synth, "trtr": ...,
    **baselines}, `baselines` from ``baseline_tables``, both at the row cap `max_rows`) and the 2-way and
    association comparisons against the first baseline table, on the same seeded samples of at most `max_rows`
    rows of each table (``utility.capped``: their bootstrap errors are those of the samples); "not_assessed"
    when neither comparison applies. A weak verdict lists in `failed_claims` which of its conditions (`CLAIMS`)
    made it weak; the associations read the target's positive class as `scored` did."""
    alpha = 1 - s["confidence"]
    target = None if "skipped" in scored else scored["target"]
    claims = (0 if target is None else len(scored["scores"]) + 1) + (len(list(columns)) >= 2)
    level = 1 - alpha / max(claims, 1)
    z_beats = float(norm.ppf(level))
    task = task_comparison(scored, float(norm.ppf(s["confidence"])), level)
    synth, holdout = capped(synth, max_rows, seed), capped(holdout, max_rows, seed)
    first = capped(next(iter(baselines.values())), max_rows, seed)
    pairs = two_way_comparison(synth, first, holdout, columns, bins, s["bootstrap"], z_beats, seed)
    associations = (
        association_comparison(
            synth,
            first,
            holdout,
            columns,
            target,
            s["bootstrap"],
            level,
            seed,
            s["association_tolerance"],
            positive=scored["positive_class"],
        )
        if target is not None
        else {"skipped": scored["skipped"]}
    )
    assessed = [c for c in (task, pairs, associations) if "skipped" not in c]
    fails = {
        "baseline": not any(c["beats_baseline"] for c in assessed),
        "chance": not task.get("beats_chance", True),
        "distorted": bool(associations.get("features_worse_than_baseline", 0)),
    }
    failed = [claim for claim in CLAIMS if fails[claim]]
    verdict = "not_assessed" if not assessed else "inverted" if task.get("inverted") else "weak" if failed else "fit"
    return {
        "verdict": verdict,
        "failed_claims": failed if verdict == "weak" else [],
        "confidence": s["confidence"],
        "family_claims": claims,
        "z_fit": z_beats,
        "baseline": BASELINE,
        "task": task,
        "two_way": pairs,
        "associations": associations,
        "outside_dp": OUTSIDE_DP,
    }
