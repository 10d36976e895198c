"""Stage weight@gen (after evaluate@gen, before release): DP importance weights for the synthetic rows.

Reads the released synthetic table (public: post-processing of the DP generator) and, for estimators that
need them, the private prepared training rows; reserves the estimator's ledger events BEFORE reading a
private row (the plan uses only row counts and params). Writes data/weights/<ds>/<gen>.parquet (one
`weight` column aligned with the synthetic rows; null beyond the N_S rows an output-noised estimator may
release) and reports/<ds>/<gen>/weights.json (estimator, ε, ledger rows, ESS, k̂, weighted analyses and
the weight gate). Design and derivations: pipelines/weights/, docs/importance-weights.md.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect import task

from pipelines.config import Paths
from pipelines.data.layout import Layout
from pipelines.data.transform import Encoder
from pipelines.errors import InputError
from pipelines.evaluation import weighted
from pipelines.evaluation.utility import _labels, featurise
from pipelines.generators.base import finite_json
from pipelines.io import read_json, sha256_file, write_json, write_parquet
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.gates import GateResult
from pipelines.weights import estimators, postprocess
from pipelines.weights.discriminator import critic_scorer
from tasks import common
from tasks.artifacts import publish
from tasks.train import EncodedTable

STAGE_DEFAULTS: dict[str, Any] = {
    "estimator": "priv_mlp",
    "generators": ["dpwgan"],
    "epsilon": 1.0,
    "khat_bound": 0.7,
    "tempering": 1.0,
    "psis": True,
    "calibration": None,
    "analysis_max_rows": 2000,
    "prior_variance": 10.0,
}
OUTSIDE_DP = ("weighted analyses in weights.json (weighted Wasserstein-1 and MMD against the real holdout, "
              "AUROC on the real holdout of classifiers fitted with the weights, Bayesian logistic-regression "
              "posterior distance to the real training rows' posterior) computed on real rows")


def weights_path(p: Paths, generator: str) -> Path:
    return p.root / "data" / "weights" / p.dataset / f"{generator}.parquet"


def report_path(p: Paths, generator: str) -> Path:
    return p.metrics(generator).parent / "weights.json"


def settings(params: dict[str, Any]) -> dict[str, Any]:
    """The `weights:` section over STAGE_DEFAULTS and the estimator DEFAULTS; every bad value is an
    InputError naming the key and the fix."""
    section = params.get("weights") or {}
    unknown = sorted(set(section) - set(STAGE_DEFAULTS) - set(estimators.DEFAULTS))
    if unknown:
        raise InputError(f"unknown keys {unknown} in 'weights:'.", file="params.yaml",
                         fix=f"use only {sorted(set(STAGE_DEFAULTS) | set(estimators.DEFAULTS))}.")
    s = {**STAGE_DEFAULTS, **estimators.DEFAULTS, **section}
    if s["estimator"] not in estimators.ESTIMATORS:
        raise InputError(f"weights.estimator {s['estimator']!r} is not implemented.", file="params.yaml",
                         fix=f"use one of {', '.join(estimators.ESTIMATORS)}.")
    if not isinstance(s["generators"], list) or any(g not in params["generators"] for g in s["generators"]):
        raise InputError(f"weights.generators must be a list of generators from 'generators', got "
                         f"{s['generators']!r}.", file="params.yaml", fix="e.g. 'generators: [dpwgan]' or [].")
    try:
        s["epsilon"], s["khat_bound"], s["tempering"] = (float(s["epsilon"]), float(s["khat_bound"]),
                                                          float(s["tempering"]))
    except (TypeError, ValueError) as e:
        raise InputError(f"weights.epsilon, khat_bound and tempering must be numbers ({e}).", file="params.yaml",
                         fix="e.g. 'epsilon: 1.0', 'khat_bound: 0.7', 'tempering: 1.0'.") from e
    if not s["epsilon"] > 0:
        raise InputError(f"weights.epsilon must be positive, got {s['epsilon']}.", file="params.yaml",
                         fix="set 'weights.epsilon: 1.0'.")
    if not 0 <= s["tempering"] <= 1:
        raise InputError(f"weights.tempering must lie in [0, 1], got {s['tempering']}.", file="params.yaml",
                         fix="set 'weights.tempering: 1.0' (no tempering).")
    if s["calibration"] is not None and s["estimator"] in ("output_lapl", "output_norm"):
        raise InputError(f"weights.calibration needs the classifier's scores on the calibration rows; "
                         f"{s['estimator']} privatises only the released weights, so scoring other rows would "
                         f"leak the non-private classifier.", file="params.yaml",
                         fix="set 'weights.calibration: null' or use priv_mlp, beta_noised or discriminator.")
    return s


def _calibrate(s: dict[str, Any], sch: Any, logit: Any, synthetic: np.ndarray) -> tuple[np.ndarray, dict]:
    """Beta calibration on the public calibration file (real rows, label 1) and the synthetic rows (label 0)."""
    path = Path(s["calibration"])
    if not path.exists():
        raise InputError("the public calibration file does not exist.", file=str(path),
                         fix="point weights.calibration at a CSV/Parquet of public real rows, or set it to null.")
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    try:
        cal = Encoder(sch).encode(frame)
    except ValueError as e:
        raise InputError(f"the calibration rows do not fit the public schema ({e}).", file=str(path),
                         fix="validate the calibration file against the schema.") from e
    fitted = postprocess.fit_beta_calibration(logit(cal), logit(synthetic))
    log_w = postprocess.calibrated_log_weights(fitted, logit(synthetic), len(cal), len(synthetic))
    return log_w, {"file": str(path), "rows": len(cal), **fitted.to_dict()}


def analyses(sch: Any, synth: pd.DataFrame, w: np.ndarray, train: pd.DataFrame, holdout: pd.DataFrame,
             s: dict[str, Any], seed: int) -> dict[str, Any]:
    """The paper's Table 1 columns and §4.3's posterior distance, weighted and unweighted (outside DP)."""
    cap, rng = s["analysis_max_rows"], np.random.default_rng(seed)
    enc = Encoder(sch)
    xs, xh = enc.encode(synth).astype(float), enc.encode(holdout).astype(float)
    keep = np.sort(rng.choice(len(xs), min(cap, len(xs)), replace=False))
    hold = np.sort(rng.choice(len(xh), min(cap, len(xh)), replace=False))
    out: dict[str, Any] = {}
    for label, ww in (("weighted", w), ("unweighted", None)):
        sub = None if ww is None else ww[keep]
        out[label] = {"wasserstein1": weighted.weighted_wasserstein1(xs[keep], sub, xh, cap, seed),
                      "mmd2": weighted.weighted_mmd2(xs[keep], sub, xh[hold])}
    if sch.target is not None:
        col = next(c for c in sch.columns if c.name == sch.target)
        x, y = featurise(synth.iloc[keep], sch.columns, sch.target), _labels(synth.iloc[keep], col, "synthetic")
        x_test, y_test = featurise(holdout, sch.columns, sch.target), _labels(holdout, col, "real holdout")
        x_real, y_real = featurise(train, sch.columns, sch.target), _labels(train, col, "real training")
        design = lambda a: np.hstack([np.ones((len(a), 1)), a])  # noqa: E731
        real_post = weighted.iw_bayes_logistic(design(x_real), y_real, None, s["prior_variance"])
        for label, ww in (("weighted", w[keep]), ("unweighted", None)):
            if np.unique(y_test).size > 1:
                out[label]["auroc"] = weighted.weighted_auroc(x, y, ww, x_test, y_test, seed)
            post = weighted.iw_bayes_logistic(design(x), y, ww, s["prior_variance"])
            out[label]["posterior_mahalanobis"] = weighted.mahalanobis(post.mean, real_post)
    return {**out, "rows": {"synthetic": len(keep), "holdout": len(xh)}, "outside_dp": OUTSIDE_DP}


@task(name="weight")
def weight(params: dict[str, Any], generator: str, run_id: str | None = None,
           root: Path = Path(".")) -> dict[str, Any]:
    p, sch = common.paths(params, root), common.schema(params, root)
    s, priv = settings(params), params["privacy"]
    if generator not in s["generators"]:
        raise InputError(f"generator '{generator}' is not in weights.generators {s['generators']}.",
                         file="params.yaml", fix=f"add it to 'weights.generators' or do not run weight@{generator}.")
    delta, internal = float(priv["delta"]), bool(priv.get("internal_release", False))
    layout = Layout.from_dict(read_json(p.prepared / "layout.json")["layout"])
    synth = pd.read_parquet(p.synthetic(generator))
    synthetic = Encoder(sch).encode(synth).astype(float)
    table = EncodedTable(p.prepared / "train_encoded.parquet")  # len() = public n̂: no row read
    try:
        plan = estimators.plan(s["estimator"], s, layout, len(table), len(synthetic), s["epsilon"], delta)
    except ValueError as e:
        raise InputError(f"weights.estimator: {e}.", file="params.yaml",
                         fix="see the estimator's limits in docs/importance-weights.md.") from e
    run_id = run_id or f"cli-{uuid.uuid4().hex[:12]}"
    led = common.ledger(params, root)
    session = led.session(p.dataset, run_id, f"weight@{generator}", delta, float(priv["lifetime_epsilon"]),
                          internal=internal)
    if plan.events:
        session.reserve(plan.events)  # refused here, before any private row is read
    real = np.asarray(table, dtype=float) if plan.estimator in estimators.READS_PRIVATE_ROWS else None
    critic = critic_scorer(generator, p.model(generator)) if plan.estimator == "discriminator" else None
    log_w, logit = estimators.estimate(plan, s, real, synthetic, critic)
    if plan.events:
        session.record(plan.events)
    calibration = None
    if s["calibration"] is not None:
        log_w, calibration = _calibrate(s, sch, logit, synthetic[:plan.n_released])
    log_w = postprocess.temper(log_w, s["tempering"])
    smoothed, khat = postprocess.psis(log_w)
    w = postprocess.mean_one(smoothed if s["psis"] else log_w)
    column = np.full(len(synthetic), np.nan)
    column[:plan.n_released] = w
    row_ids = list(session.reservation.row_ids) + list(session.row_ids) if plan.events else []
    eps = epsilon_pld(plan.events, delta)
    private = plan.private
    gate = GateResult("importance_weights", bool(khat <= s["khat_bound"]) and (private or internal), {
        "khat": khat, "khat_bound": s["khat_bound"], "private": private, "internal_release": internal,
        "label": "DP" if private else ("NON-PRIVATE (internal release only)" if internal else "NON-PRIVATE: refused"),
        "refused_because": [why for bad, why in (
            (khat > s["khat_bound"], f"PSIS k̂ = {khat:.3g} > {s['khat_bound']}: the synthetic distribution misses "
                                     f"regions of the real one; importance-weighted estimates are unreliable"),
            (not private and not internal, f"{plan.estimator} is not differentially private (set "
                                           f"privacy.internal_release: true for an internal release only)")) if bad]})
    test = pd.read_parquet(p.prepared / "holdout.parquet")
    train = pd.read_parquet(p.prepared / "train.parquet")
    sub = synth.iloc[:plan.n_released]
    report = {
        "generator": generator, "dataset": p.dataset, "estimator": plan.estimator, "plan": plan.to_dict(),
        "epsilon": eps, "delta": delta, "ledger_row_ids": row_ids, "run_id": run_id,
        "n_synthetic": len(synthetic), "n_released": plan.n_released,
        "ess": postprocess.effective_sample_size(w), "khat": khat, "tempering": s["tempering"], "psis": s["psis"],
        "calibration": calibration, "gate": gate.to_dict(),
        "analysis": analyses(sch, sub, w, train, test, s, int(s["seed"])),
        "hashes": {**common.hashes(params, "weight", sch, generator)},
    }
    path = weights_path(p, generator)
    write_parquet(path, pd.DataFrame({"weight": column}))
    report["hashes"]["weights"] = sha256_file(path)  # the release stage depends on reports/<ds>, hence on this
    write_json(report_path(p, generator), finite_json(report))
    publish(f"{p.dataset}-{generator}-weights", markdown=(
        f"## Importance weights for `{generator}`: {'PASSED' if gate.passed else 'REFUSED'}\n\n"
        f"{plan.estimator}, ε = {eps:.4g}, ESS = {report['ess']:.1f} of {plan.n_released}, "
        f"k̂ = {khat:.3g} (bound {s['khat_bound']})"))
    return report


def for_release(params: dict[str, Any], generator: str, root: Path) -> dict[str, Any] | None:
    """What the release stage needs of a generator's weights, or None when weights are not configured for it
    (then the release has no weight column): the gate result, the manifest entry and the weights file."""
    if generator not in settings(params)["generators"]:
        return None
    p = common.paths(params, root)
    report = read_json(report_path(p, generator))
    path = weights_path(p, generator)
    if sha256_file(path) != report["hashes"]["weights"]:
        raise InputError("the weights file does not match its report (a partial or stale run).", file=str(path),
                         fix=f"re-run 'synthrelease stage weight --generator {generator}'.")
    gate = report["gate"]
    return {"passed": gate["passed"], "gate": gate, "path": path, "hash": report["hashes"]["weights"],
            "outside_dp": report["analysis"]["outside_dp"],
            "manifest": {"estimator": report["estimator"], "epsilon": report["epsilon"], "delta": report["delta"],
                         "ledger_rows": report["ledger_row_ids"], "run_id": report["run_id"],
                         "events": report["plan"]["events"], "n_released": report["n_released"],
                         "ess": report["ess"], "khat": report["khat"], "khat_bound": gate["evidence"]["khat_bound"],
                         "tempering": report["tempering"], "psis": report["psis"],
                         "calibration": report["calibration"], "label": gate["evidence"]["label"]}}


def write_weighted_table(synthetic: Path, weights: Path, out: Path) -> None:
    """The released table: the synthetic rows with the `weight` column joined on row position."""
    table, w = pd.read_parquet(synthetic), pd.read_parquet(weights)
    if len(table) != len(w):
        raise InputError(f"the weights file has {len(w)} rows for {len(table)} synthetic rows.", file=str(weights),
                         fix="re-run the weight stage after the evaluate stage.")
    if "weight" in table.columns:
        raise InputError("the synthetic table already has a 'weight' column.", file=str(synthetic),
                         fix="rename that schema column; 'weight' is reserved for importance weights.")
    write_parquet(out, table.assign(weight=w["weight"].to_numpy()))
