"""Stage weight@gen (after evaluate@gen, before release): DP importance weights for the synthetic rows.

Reads the released synthetic table (public: post-processing of the DP generator) and, for estimators that
need them, the private prepared training rows; reserves the estimator's ledger events BEFORE reading a
private row (the plan uses only row counts and config). Writes data/weights/<ds>/<gen>.parquet (one
`weight` column aligned with the synthetic rows; null beyond the N_S rows an output-noised estimator may
release) and reports/<ds>/<gen>/weights.json (estimator, ε, ledger rows, ESS, k̂, weighted analyses and
the weight gate). Design and derivations: pipelines/weights/, docs/importance-weights.md.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines.config import Config, Weights
from pipelines.data.encoded import EncodedTable
from pipelines.data.layout import Layout
from pipelines.data.schema import Schema
from pipelines.data.transform import Encoder
from pipelines.errors import InputError
from pipelines.evaluation import weighted
from pipelines.evaluation.outside_dp import UNAVAILABLE, WEIGHTED_ANALYSES, unavailable_reason
from pipelines.generators.persistence import finite_json
from pipelines.io import (
    MatrixFile,
    parquet_matrix_file,
    parquet_take,
    read_json,
    read_parquet_rows,
    sha256_file,
    write_json,
    write_parquet,
)
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.ledger import LedgerSession
from pipelines.privacy.noise import NoiseSource, binding_facts
from pipelines.privacy.paid import Binding, paid
from pipelines.runtime import torch_threads
from pipelines.weights import estimators, postprocess
from pipelines.weights.discriminator import critic_scorer
from pipelines.gates.weights import weight_gate
from tasks import common, unselected
from tasks.artifacts import publish
from tasks.progress import run_logger


def encoded(path: Path, encoder: Encoder, out: Path) -> MatrixFile:
    """The table at `path` encoded (float32, as the prepared rows: torch computes in it, and the logistic estimators
    upcast exactly) into the .npy file `out`, a row group at a time, and read from there by row
    (`io.parquet_matrix_file`)."""
    return parquet_matrix_file(path, encoder.layout.width, encoder.encode, out)


def weight(config: Config, generator: str, run_id: str | None = None, root: Path = Path(".")) -> dict[str, Any]:
    """The weights of `generator`'s synthetic rows (module docstring)."""
    return run(common.StageContext(config, root, run_id), generator)


def run(ctx: common.StageContext, generator: str) -> dict[str, Any]:
    """`weight` in its stage context. The encoded real and synthetic rows go to scratch files under data/prepared/
    for the stage's life and are read from there a lot or a block at a time, so its memory does not grow with the
    tables' rows (the logistic estimators, which fit on every row, excepted)."""
    torch_threads()  # this process's share of its cores (pipelines/runtime.py)
    p = ctx.paths
    skipped = unselected.unweighted(ctx.config, p, generator)  # not selected, or not in weights.generators
    if skipped is not None:
        return skipped
    with tempfile.TemporaryDirectory(prefix=f".weight-{generator}-", dir=p.prepared.parent) as scratch:
        return weigh(ctx, generator, Path(scratch))


def analyses(
    sch: Schema,
    synthetic: Callable[[np.ndarray], pd.DataFrame],
    w: np.ndarray,
    train: pd.DataFrame,
    test: pd.DataFrame,
    s: Weights,
) -> dict[str, Any]:
    """The weighted analyses against the real rows (`weighted.analyses`, steward-only). Where the real rows do not
    allow them (an empty holdout or training side, a degenerate column), weights.json says why
    (`evaluation_unavailable`) and the weights are still released if their gate passes: the real-side analyses
    decide nothing public."""
    try:
        return weighted.analyses(
            sch, synthetic, w, train, test, s.analysis_max_rows, s.prior_variance, s.seed, s.analysis_real_max_rows
        )
    except Exception as e:  # noqa: BLE001 - a failure on the real side never blocks publication
        run_logger().warning(
            "weight: the weighted analyses cannot run on these rows (%s); the steward report says so",
            unavailable_reason(e),
            exc_info=True,
        )
        return {UNAVAILABLE: unavailable_reason(e), "outside_dp": WEIGHTED_ANALYSES}


def weigh(ctx: common.StageContext, generator: str, scratch: Path) -> dict[str, Any]:
    """`run`'s work for a generator it weights, its encoded rows' files in `scratch`; returns weights.json. The
    estimate is the stage's paid step (`paid`): the estimator's events reserved before any private row is read."""
    config, p, sch = ctx.config, ctx.paths, ctx.schema
    s, priv = config.weights, config.privacy
    delta, internal = priv.delta, priv.internal_release
    layout = Layout.from_dict(read_json(p.prepared / "layout.json")["layout"])
    synthetic = encoded(p.synthetic(generator), Encoder(sch), scratch / "synthetic.npy")  # float32, as the real rows
    table = EncodedTable(p.prepared / "train_encoded.parquet")  # len() = public n̂: no row read
    epsilon = common.allocated_epsilon(config, "weights", ctx.root)
    try:
        plan = estimators.unit_plan(
            s.estimator, s.model_dump(), layout, len(table), len(synthetic), epsilon, delta, sch.max_rows
        )
    except ValueError as e:
        raise InputError(
            f"weights.estimator: {e}.",
            file="params.yaml",
            fix="see the estimator's limits in docs/importance-weights.md.",
        ) from e
    account = ctx.account(f"weight@{generator}", "cli")
    inputs = lambda: {
        "train": table.content_hash(),
        "synthetic": sha256_file(p.synthetic(generator)),  # noqa: E731
        "model": sha256_file(p.model(generator) / "privacy.json"),
    }
    binding = Binding(
        ctx.noise_key,
        f"{p.dataset}/weight@{generator}",
        inputs,
        binding_facts(ctx.hashes("weight", generator), epsilon, delta, plan=plan.to_dict()),
    )

    def estimate(session: LedgerSession, noise: NoiseSource) -> tuple[np.ndarray, estimators.Logit | None]:
        real = table.to_file(scratch / "train.npy") if plan.estimator in estimators.READS_PRIVATE_ROWS else None
        critic = critic_scorer(generator, p.model(generator)) if plan.estimator == "discriminator" else None
        return estimators.estimate(plan, s.model_dump(), real, synthetic, critic, noise)

    spends = bool(plan.events)
    done = paid(
        ctx.ledger,
        account,
        binding,
        estimate,
        planned=plan.unit_events if spends else (),
        actual=(lambda _: plan.unit_events) if spends else None,
    )
    log_w, logit = done.value
    row_ids, run_id = done.row_ids, account.run_id
    calibration = None
    if s.calibration is not None:  # public real rows (label 1) against the released synthetic rows (label 0)
        cal_path = Path(s.calibration)
        cal = postprocess.calibration_rows(cal_path, sch)
        log_w, fitted = postprocess.calibrate(logit, cal, synthetic[: plan.n_released])
        calibration = {"file": str(cal_path), "rows": len(cal), **fitted.to_dict()}
    w, khat, column = postprocess.released_weights(log_w, s.tempering, s.psis, len(synthetic))
    eps = epsilon_pld(plan.unit_events, delta)
    gate = weight_gate(khat, s.khat_bound, plan.estimator, plan.private, internal)
    test, train = (
        read_parquet_rows(p.prepared / f"{side}.parquet", s.analysis_real_max_rows, [s.seed, stream])
        for stream, side in enumerate(("holdout", "train"))
    )  # read a row group at a time above the cap
    report = {
        "generator": generator,
        "dataset": p.dataset,
        "estimator": plan.estimator,
        "plan": plan.to_dict(),
        "epsilon": eps,
        "delta": delta,
        "ledger_row_ids": row_ids,
        "run_id": run_id,
        "n_synthetic": len(synthetic),
        "n_released": plan.n_released,
        "ess": postprocess.effective_sample_size(w),
        "khat": khat,
        "tempering": s.tempering,
        "psis": s.psis,
        "calibration": calibration,
        "gate": gate.to_dict(),
        "analysis": analyses(sch, lambda rows: parquet_take(p.synthetic(generator), rows), w, train, test, s),
        "hashes": {**ctx.hashes("weight", generator)},
    }
    path = p.weights(generator)
    write_parquet(path, pd.DataFrame({"weight": column}))
    report["hashes"]["weights"] = sha256_file(path)  # the release stage depends on reports/<ds>, hence on this
    write_json(p.weights_report(generator), finite_json(report))
    publish(
        f"{p.dataset}-{generator}-weights",
        markdown=(
            f"## Importance weights for `{generator}`: {'PASSED' if gate.passed else 'REFUSED'}\n\n"
            f"{plan.estimator}, ε = {eps:.4g}, ESS = {report['ess']:.1f} of {plan.n_released}, "
            f"k̂ = {khat:.3g} (bound {s.khat_bound})"
        ),
    )
    return report
