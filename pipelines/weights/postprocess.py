"""Post-processing of estimated log-weights (paper §3.5): beta calibration on a public calibration set,
tempering, Pareto-smoothed importance sampling with its k̂ diagnostic, and the effective sample size;
`calibrate` and `released_weights` chain them as the weight stage does.

Everything here is a function of already-private weights (or classifier scores) and public data, so it
costs no budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from sklearn.linear_model import LogisticRegression

from pipelines.data.schema import Schema
from pipelines.data.transform import Encoder
from pipelines.errors import InputError

MIN_PSIS_WEIGHTS = 20


def temper(log_w: np.ndarray, tau: float) -> np.ndarray:
    """w^τ for τ ∈ [0, 1] (§3.5): τ = 0 gives uniform weights, τ = 1 leaves them unchanged."""
    if not 0 <= tau <= 1:
        raise ValueError(f"tempering τ must lie in [0, 1], got {tau}")
    return tau * np.asarray(log_w, dtype=float)


def psis(log_w: np.ndarray) -> tuple[np.ndarray, float]:
    """Pareto-smoothed log-weights (normalised: logsumexp = 0) and the shape estimate k̂ (Vehtari et al.),
    by arviz's maintained implementation (`az.psislw`, r_eff = 1: the synthetic rows are i.i.d.).

    k̂ < 0.5: finite variance; 0.5-0.7: usable; > 0.7: the importance-sampling estimate is unreliable
    (PSIS guidance, and the paper's release criterion). Fewer than MIN_PSIS_WEIGHTS weights leave no tail to
    fit (arviz fits the largest min(0.2 N, 3√N)): then the weights are only normalised and k̂ = inf.
    """
    import arviz as az

    log_w = np.asarray(log_w, dtype=float)
    if len(log_w) < MIN_PSIS_WEIGHTS:
        return log_w - logsumexp(log_w), math.inf
    smoothed, khat = az.psislw(log_w, reff=1.0)
    return np.asarray(smoothed, dtype=float), float(khat)


def mean_one(log_w: np.ndarray) -> np.ndarray:
    """Self-normalised weights with mean 1 over the rows (Σ w = N): the released `weight` column's scale."""
    log_w = np.asarray(log_w, dtype=float)
    return np.exp(log_w - (logsumexp(log_w) - math.log(len(log_w))))


def effective_sample_size(weights: np.ndarray) -> float:
    """Kish's ESS = (Σ w)² / Σ w²: N for uniform weights, 1 when one weight dominates."""
    w = np.asarray(weights, dtype=float)
    return float(w.sum() ** 2 / np.square(w).sum())


@dataclass(frozen=True)
class BetaCalibration:
    """Beta calibration (Kull et al. 2017): p' = σ(a ln s − b ln(1 − s) + c) of a score s ∈ (0, 1), a, b ≥ 0."""

    a: float
    b: float
    c: float

    def __call__(self, logit: np.ndarray) -> np.ndarray:
        """Calibrated logit of p' for the classifier logit σ⁻¹(s) (eq. 1's log-odds)."""
        logit = np.asarray(logit, dtype=float)
        log_s, log_1ms = -np.logaddexp(0, -logit), -np.logaddexp(0, logit)
        return self.a * log_s - self.b * log_1ms + self.c

    def to_dict(self) -> dict[str, float]:
        return {"a": self.a, "b": self.b, "c": self.c}


def fit_beta_calibration(logit_real: np.ndarray, logit_synthetic: np.ndarray) -> BetaCalibration:
    """Fit the map on PUBLIC labelled scores: the classifier's logits on the public real calibration rows
    (label 1) and on synthetic rows (label 0). Logistic regression on (ln s, −ln(1 − s)); a coefficient
    that comes out negative is dropped and the fit repeated (Kull et al., §3.2), so the map is monotone.
    The calibrated odds include the calibration set's class ratio, which the caller removes."""
    logits = np.r_[np.asarray(logit_real, float), np.asarray(logit_synthetic, float)]
    y = np.r_[np.ones(len(logit_real)), np.zeros(len(logit_synthetic))]
    feats = np.column_stack([-np.logaddexp(0, -logits), np.logaddexp(0, logits)])  # ln s, −ln(1−s)
    keep = [0, 1]
    while True:
        model = LogisticRegression(C=1e6, max_iter=10_000).fit(feats[:, keep], y) if keep else None
        coef = dict(zip(keep, model.coef_[0])) if model is not None else {}
        negative = [j for j, v in coef.items() if v < 0]
        if not negative:
            break
        keep = [j for j in keep if j not in negative]
    if model is None:
        p = y.mean()
        return BetaCalibration(0.0, 0.0, float(math.log(p / (1 - p))))
    return BetaCalibration(float(coef.get(0, 0.0)), float(coef.get(1, 0.0)), float(model.intercept_[0]))


def calibrated_log_weights(
    calibration: BetaCalibration, logit: np.ndarray, n_cal_real: int, n_cal_synthetic: int
) -> np.ndarray:
    """log w = calibrated logit − log(n_real/n_synthetic) of the calibration set (eq. 1)."""
    return calibration(logit) - math.log(n_cal_real / n_cal_synthetic)


def calibrate(
    logit: Callable[[np.ndarray], np.ndarray], calibration_rows: np.ndarray, synthetic: np.ndarray
) -> tuple[np.ndarray, BetaCalibration]:
    """Calibrated log-weights of the `synthetic` rows (eq. 1) and the fitted map: beta calibration of the
    classifier `logit` on the encoded PUBLIC real calibration rows (label 1) and the synthetic rows (label 0)."""
    fitted = fit_beta_calibration(logit(calibration_rows), logit(synthetic))
    return calibrated_log_weights(fitted, logit(synthetic), len(calibration_rows), len(synthetic)), fitted


def released_weights(log_w: np.ndarray, tau: float, smooth: bool, n_rows: int) -> tuple[np.ndarray, float, np.ndarray]:
    """(w, k̂, column): the log-weights of the first len(log_w) synthetic rows tempered by τ, Pareto-smoothed
    when `smooth` (k̂ is computed either way), scaled to mean 1; and the released `weight` column of `n_rows`
    rows, NaN beyond the rows an output-noised estimator released."""
    log_w = temper(log_w, tau)
    smoothed, khat = psis(log_w)
    w = mean_one(smoothed if smooth else log_w)
    column = np.full(n_rows, np.nan)
    column[: len(w)] = w
    return w, khat, column


def calibration_rows(path: Path, sch: Schema) -> np.ndarray:
    """The public calibration file's real rows (`weights.calibration`), encoded; an InputError names the file when
    it is missing or does not fit the schema."""
    if not path.exists():
        raise InputError(
            "the public calibration file does not exist.",
            file=str(path),
            fix="point weights.calibration at a CSV/Parquet of public real rows, or set it to null.",
        )
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    try:
        return Encoder(sch).encode(frame)
    except ValueError as e:
        raise InputError(
            f"the calibration rows do not fit the public schema ({e}).",
            file=str(path),
            fix="validate the calibration file against the schema.",
        ) from e
