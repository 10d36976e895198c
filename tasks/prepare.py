"""Stage 2: seeded train/holdout split and schema-only encoding into Parquet + column layout."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from prefect import task

from pipelines.data.transform import Encoder, train_holdout_split
from pipelines.io import atomic_dir, write_json, write_parquet
from tasks import common
from tasks.artifacts import publish


def encoded_column_names(encoder: Encoder) -> list[str]:
    names = []
    for b in encoder.layout.blocks:
        if b.kind == "categorical":
            names += [f"{b.column}={c}" for c in encoder.schema.column(b.column).categories]
        else:
            names.append(b.column)
    return names


@task(name="prepare")
def prepare(params: dict[str, Any], root: Path = Path(".")) -> dict[str, Any]:
    p, sch = common.paths(params, root), common.schema(params, root)
    ds = params["dataset"]
    clean = pd.read_parquet(p.validated)
    train, holdout = train_holdout_split(clean, float(ds["holdout_fraction"]), int(ds["split_seed"]))
    encoder = Encoder(sch)
    encoded = pd.DataFrame(encoder.encode(train), columns=encoded_column_names(encoder))
    summary = {"rows_train": len(train), "rows_holdout": len(holdout), "width": encoder.layout.width,
               "layout": encoder.layout.to_dict(), "hashes": common.hashes(params, "prepare", sch)}
    with atomic_dir(p.prepared) as out:
        write_parquet(out / "train.parquet", train)
        write_parquet(out / "holdout.parquet", holdout)
        write_parquet(out / "train_encoded.parquet", encoded)
        write_json(out / "layout.json", summary)
    publish(f"{p.dataset}-prepare", markdown=(
        f"## Prepared `{p.dataset}`\n\ntrain rows: {len(train)}, holdout rows: {len(holdout)}, "
        f"encoded width: {encoder.layout.width}"))
    return summary
