"""Stage 2: the DP row-loss test, the keyed train/holdout split, the public training row count n̂ and encoding.

First, whether the release goes on at all: the DP row-loss test on validation's counts (`check_row_loss`,
pipelines/privacy/row_loss.py), charged to the ledger, stops the run when the noisy count of rows validation
dropped or clipped clearly exceeds `dataset.max_dropped_fraction`.

The split puts each row on a side that is a function of that row and a secret key alone
(`pipelines.data.transform.train_holdout_split`); with a declared privacy unit, each unit's rows on the side of
the unit's keyed pseudonym (`pipelines.data.units.unit_holdout`). The key (`tasks.common.split_key`) is derived from
the steward's noise
key when there is one, else it is a random 256-bit salt created once per data set and kept with the internal
artefacts (`tasks.common.salt_path`), never in git or in a release bundle.

The training row count is private under add/remove-one, so every plan, sample rate q = B/n and divisor
downstream uses n̂ (pipelines/privacy/row_count.py): the schema's documented count scaled by
(1 − holdout_fraction), checked against a noisy count recorded in the ledger (the run stops when they
disagree), or the noisy count itself. layout.json carries n̂ as `rows_public` with its source.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.config import Config, Paths
from pipelines.data import units
from pipelines.data.schema import Schema
from pipelines.data.transform import Encoder, train_holdout_split
from pipelines.data.validation import row_loss_summary
from pipelines.errors import InputError
from pipelines.io import atomic_dir, read_json, sha256_file, sha256_text, write_json, write_parquet
from pipelines.privacy.ledger import LedgerSession
from pipelines.privacy.noise import NoiseSource, binding_facts
from pipelines.privacy.paid import Binding, Receipt, paid
from pipelines.privacy.row_count import noisy_count, public_row_count
from pipelines.privacy.row_loss import RowLoss, row_loss_test
from tasks import common
from tasks.artifacts import publish


def row_loss_path(p: Paths) -> Path:
    """The row-loss test prepare paid for, with what it was computed from: beside the row count, not a DVC output,
    so that a re-run on the same rows reuses the bit instead of spending again."""
    return p.row_count.with_name(f"{p.dataset}.row_loss.json")


def check_row_loss(ctx: common.StageContext) -> dict[str, Any]:
    """The DP row-loss test (pipelines/privacy/row_loss.py) on validation's counts, paid once per validated table,
    report and setting (`paid`); an InputError (after the spend is recorded, before anything else is written) when
    it stops. The exact counts go to the steward's console and error message only; what decides is the noisy bit."""
    p, sch, ds, priv = ctx.paths, ctx.schema, ctx.config.dataset, ctx.config.privacy
    if not p.validation_report.exists():
        raise InputError(
            "validation's report is missing.",
            file=str(p.validation_report),
            fix="run the validate stage first: `synthrelease stage validate` (`dvc repro` runs it).",
        )
    report = read_json(p.validation_report)
    epsilon = priv.row_loss_epsilon
    counts = {k: report[k] for k in ("rows_in", "rows_dropped", "rows_clipped")}  # what the test reads
    inputs = sha256_text(
        json.dumps(
            {
                "validated": _file_hash(p),
                "counts": counts,
                "max_dropped_fraction": ds.max_dropped_fraction,
                "epsilon": epsilon,
                **common.unit_facts(sch),
            },
            sort_keys=True,
        )
    )

    def test(session: LedgerSession, noise: NoiseSource) -> RowLoss:
        return row_loss_test(
            session,
            epsilon,
            lambda: (counts["rows_dropped"] + counts["rows_clipped"], counts["rows_in"]),
            ds.max_dropped_fraction,
            noise,
            sch.max_rows,
        )

    binding = prepare_noise(ctx, "prepare:row_loss", inputs, epsilon)
    receipt = Receipt(
        row_loss_path(p),
        inputs,
        lambda t, session: {"inputs": inputs, **t.to_dict(), "ledger_row_ids": list(session.row_ids)},
    )
    result = paid(ctx.ledger, ctx.account("prepare", "prepare"), binding, test, receipt=receipt).value
    if result["stop"]:
        raise InputError(
            f"the DP row-loss test stopped the release: {row_loss_summary(report)}, and the noisy count of rows lost "
            "beyond "
            f"dataset.max_dropped_fraction = {ds.max_dropped_fraction:g} exceeds its margin of "
            f"{result['margin']:.0f} rows (ε = {epsilon:g}, recorded in the ledger; these exact counts are for the "
            "steward only). The rows a policy drops are rarely a random sample, so a release of the rest would "
            "misdescribe the table; nothing was written.",
            file=str(p.validation_report),
            fix="give those columns their documented domain in the schema (bounds, every category, a documented "
            "'unknown' code), correct the source table, or, once you have checked that losing these rows "
            "does not bias the table, raise dataset.max_dropped_fraction (validation.json lists the counts).",
        )
    return result


def prepare_noise(ctx: common.StageContext, stage: str, inputs: str, epsilon: float) -> Binding:
    """The noise binding of one of prepare's paid steps (noise stage `<ds>/<stage>`): its `inputs` hash, the stage's
    params and schema hashes and ε; `dataset.noise_seed` when set (tests, audits)."""
    priv = ctx.config.privacy
    return Binding(
        ctx.noise_key,
        f"{ctx.paths.dataset}/{stage}",
        lambda: inputs,
        binding_facts(ctx.hashes("prepare"), epsilon, priv.delta),
        ctx.config.dataset.noise_seed,
    )


def prepare(config: Config, root: Path = Path("."), run_id: str | None = None) -> dict[str, Any]:
    """The prepare stage (module docstring); writes data/prepared/<ds>/ and returns layout.json's content."""
    return run(common.StageContext(config, root, run_id))


def run(ctx: common.StageContext, generator: str | None = None) -> dict[str, Any]:
    """`prepare` in its stage context (`generator` unused: one prepare stage per data set)."""
    config, p, sch = ctx.config, ctx.paths, ctx.schema
    ds, priv = config.dataset, config.privacy
    loss = check_row_loss(ctx)  # the first private step: nothing else is read if it stops
    holdout_fraction = ds.holdout_fraction
    key, key_source = common.split_key(config, ctx.root)
    rows: dict[str, int] = {}
    counted: list[int] = []  # the count's ledger rows
    with atomic_dir(p.prepared) as out:  # nothing is in place unless every step below succeeds

        def count_rows() -> int:  # the private step: called after the count's reservation, when there is one
            rows.update(zip(("train", "holdout"), write_split(config, p, sch, key, out)))
            return rows["train"]

        def noisy() -> int:
            """The noisy training count: the one an earlier run paid for on the same rows, split and ε while its
            ledger rows stand (a re-run, e.g. after a code edit or a refused check, spends nothing), else a new
            one (`paid`)."""
            epsilon = priv.row_count_epsilon
            inputs = sha256_text(
                json.dumps(
                    {
                        "validated": _file_hash(p),
                        "split": hashlib.sha256(key).hexdigest(),
                        "holdout_fraction": holdout_fraction,
                        "epsilon": epsilon,
                        **common.unit_facts(sch),
                    },
                    sort_keys=True,
                )
            )
            count = paid(
                ctx.ledger,
                ctx.account("prepare", "prepare"),
                prepare_noise(ctx, "prepare", inputs, epsilon),
                lambda session, noise: noisy_count(session, epsilon, count_rows, noise, sch.max_rows),
                receipt=Receipt(
                    p.row_count,
                    inputs,
                    lambda n, session: {"inputs": inputs, "noisy": n, "ledger_row_ids": list(session.row_ids)},
                ),
            ).value
            counted.extend(count["ledger_row_ids"])
            return int(count["noisy"])

        n_rows, n_rows_source = public_row_count(
            sch,
            noisy,
            holdout_fraction,
            priv.row_count_epsilon,
            ds.max_dropped_fraction,
            priv.row_loss_epsilon,
            str(p.schema),
        )
        if not rows:
            count_rows()
        layout = Encoder(sch).layout
        summary = {
            "rows_train": rows["train"],
            "rows_holdout": rows["holdout"],
            "rows_public": n_rows,
            "rows_public_source": n_rows_source,
            "ledger_row_ids": counted,
            "row_loss": {"ledger_row_ids": loss["ledger_row_ids"], "epsilon": loss["epsilon"]},
            "split": {
                "rule": "holdout iff HMAC-SHA256(key, row) / 2^64 < holdout_fraction"
                if sch.unit is None
                else f"holdout iff HMAC-SHA256(key, {sch.unit.column} pseudonym) / 2^64 < holdout_fraction "
                f"(whole units; at most {sch.max_rows} rows per unit)",
                "holdout_fraction": holdout_fraction,
                "key": key_source,
            },
            "width": layout.width,
            "layout": layout.to_dict(),
            "hashes": ctx.hashes("prepare"),
        }
        write_json(out / "layout.json", summary)
    publish(
        f"{p.dataset}-prepare",
        markdown=(  # steward-facing Prefect artefact (actual counts are internal)
            f"## Prepared `{p.dataset}`\n\ntrain rows: {rows['train']}, holdout rows: {rows['holdout']}, "
            f"public training row count n̂ = {n_rows} ({n_rows_source}), encoded width: {layout.width}"
        ),
    )
    return summary


def write_split(config: Config, p: Paths, sch: Schema, key: bytes, out: Path) -> tuple[int, int]:
    """The keyed split of the validated rows (`transform.train_holdout_split`) written to `out`: train.parquet,
    holdout.parquet and train_encoded.parquet (the training rows encoded); returns (training rows, holdout rows).
    In this process, or in parts on a Dask cluster with `orchestration.task_runner: dask`
    (pipelines/data/out_of_core.py): the same bytes."""
    fraction = config.dataset.holdout_fraction
    if config.orchestration.task_runner == "dask":
        from pipelines.data import out_of_core

        return out_of_core.split(p.validated, sch, key, fraction, config.orchestration, out)
    validated = pd.read_parquet(p.validated)
    if units.UNIT_COLUMN in validated:  # whole units on one side (pipelines/data/units.py)
        holdout_rows = units.unit_holdout(validated.pop(units.UNIT_COLUMN).to_numpy(), fraction, key)
        train = validated[~holdout_rows].reset_index(drop=True)
        holdout = validated[holdout_rows].reset_index(drop=True)
    else:
        train, holdout = train_holdout_split(validated, fraction, key, sch.names)
    encoder = Encoder(sch)
    write_parquet(out / "train.parquet", train)
    write_parquet(out / "holdout.parquet", holdout)
    write_parquet(out / "train_encoded.parquet", pd.DataFrame(encoder.encode(train), columns=encoder.column_names()))
    return len(train), len(holdout)


def _file_hash(p: Paths) -> str:
    """sha256 of the validated table (keys the count's noise to this data when a steward key is set)."""
    return sha256_file(p.validated)
