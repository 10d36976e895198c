"""Utility of a generator across privacy levels: TSTR AUROC vs train-on-real, per data set and ε.

    python -m benchmarks.utility_sweep                         # dpwgan; breast_cancer and adult, ε ∈ {1, 8, inf}
    python -m benchmarks.utility_sweep --datasets adult --epsilons 1 inf --set steps=2000
    python -m benchmarks.utility_sweep --generator ppem --epsilons 1 inf --delta 0 \
        --set protected='[mean_radius, mean_texture]'         # PPEM, δ = 1/n as in the paper
    python -m benchmarks.utility_sweep --generator dp_auto_gan --datasets adult --epsilons 1 \
        --set autoencoder_steps=2000 steps=1000                # DP-auto-GAN on Adult in a few minutes

For PPEM the α-LMDP gate's KSD statistic and p-value and the MMD p-value are reported too.
`--metrics DIR` adds the DP-auto-GAN paper's evaluation (target accuracy of its Table 2, Wasserstein
scores of Table 3, dimension-wise prediction; evaluate-stage defaults) and writes its PNGs to
DIR/<generator>-<dataset>-eps<ε>/:

    python -m benchmarks.utility_sweep --generator dp_auto_gan --datasets adult --epsilons 0.8 1 1.5 inf \
        --params params/adult-paper.yaml --metrics reports/sweep

Uses the project's own stages (schema validation, split, schema-only encoding, the generator under a
throwaway ledger, decoding, TSTR), so the numbers are what a release would report.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import yaml

from pipelines.data.readers import read_table
from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder, train_holdout_split
from pipelines.data.validation import validate_table
from pipelines.config import Metrics
from pipelines.evaluation.unsupervised import paper_metrics
from pipelines.evaluation.utility import tstr_auroc
from pipelines.generators.base import Budget
from pipelines.generators.registry import make_generator
from pipelines.privacy.ledger import Ledger

ROOT = Path(__file__).resolve().parents[1]


def sweep_one(
    generator: str,
    dataset: str,
    epsilon: float,
    overrides: dict,
    delta: float,
    seed: int,
    metrics_dir: Path | None = None,
) -> dict:
    schema = load_schema(ROOT / "schemas" / f"{dataset}.yaml")
    raw, label = read_table(f"bundled:{dataset}", schema)
    clean, _ = validate_table(raw, schema, label)
    train, holdout = train_holdout_split(clean, 0.2, seed)
    encoder = Encoder(schema)
    gen = make_generator(generator, encoder.layout, {**overrides, "seed": seed}, "auto")
    delta = delta or 1 / len(train)
    with tempfile.TemporaryDirectory() as tmp:
        session = Ledger(str(Path(tmp) / "ledger.sqlite")).session(
            dataset, "sweep", f"train@{generator}", delta, float("inf")
        )
        start = time.perf_counter()
        gen.fit(encoder.encode(train), session, Budget(epsilon, delta))
        seconds = time.perf_counter() - start
    gate = {}
    if hasattr(gen, "alpha_lmdp_gate"):
        ev = gen.alpha_lmdp_gate(encoder.encode(train)).evidence
        gate = {
            "ksd": round(ev["ksd"]["statistic"], 4),
            "p_ksd": round(ev["ksd"]["p_value"], 4),
            "p_mmd": round(ev["mmd"]["p_value"], 4),
        }
    synth = encoder.decode(gen.sample(len(train), seed))
    utility = tstr_auroc(train, synth, holdout, schema.columns, schema.target, seed)
    row = {
        "generator": generator,
        "dataset": dataset,
        "epsilon": epsilon,
        "delta": delta,
        "fit_seconds": round(seconds, 1),
        **gate,
        **{m: {k: round(v, 3) for k, v in r.items() if k in ("tstr", "trtr")} for m, r in utility["models"].items()},
    }
    if metrics_dir is not None:
        row.update(
            paper_summary(
                *paper_metrics(train, synth, holdout, schema, seed, Metrics().model_dump()),
                metrics_dir / f"{generator}-{dataset}-eps{epsilon:g}",
            )
        )
    return row


def paper_summary(metrics: dict, pngs: dict[str, bytes], directory: Path) -> dict:
    """The DP-auto-GAN paper's headline numbers (Tables 2 and 3, Figure 4's summary); PNGs into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, png in pngs.items():
        (directory / f"{name}.png").write_bytes(png)
    acc, pred = metrics["target_accuracy"], metrics["dimension_wise"]["prediction"]["summary"]
    return {
        "target_accuracy": {k: round(acc[k], 4) for k in ("real", "synthetic", "majority_baseline")},
        "wasserstein_score": round(metrics["wasserstein_score"]["score"], 4),
        "pca_score": round(metrics["pca_marginal"]["score"], 4),
        "dimwise_mean_real": round(pred["mean_real"], 3),
        "dimwise_mean_synthetic": round(pred["mean_synthetic"], 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generator", default="dpwgan")
    ap.add_argument("--datasets", nargs="+", default=["breast_cancer", "adult"])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 8.0, float("inf")])
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="generator parameter overrides")
    ap.add_argument("--delta", type=float, default=1e-5, help="0: δ = 1/n (n = training rows)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--params",
        type=Path,
        help="take the generator's section of this params file first "
        "(e.g. params/adult-paper.yaml); --set overrides it",
    )
    ap.add_argument("--metrics", type=Path, metavar="DIR", help="add the DP-auto-GAN paper's metrics; PNGs go here")
    args = ap.parse_args()
    base = {}
    if args.params is not None:
        base = dict(yaml.safe_load(args.params.read_text()).get(args.generator) or {})
        base.pop("epsilon", None)  # --epsilons decides
    overrides = {**base, **{k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in args.set)}}
    for dataset in args.datasets:
        for eps in args.epsilons:
            print(
                json.dumps(sweep_one(args.generator, dataset, eps, overrides, args.delta, args.seed, args.metrics)),
                flush=True,
            )


if __name__ == "__main__":
    main()
