"""PEARL on Adult: Table 2's 10-classifier TSTR (ROC, PRC) per ε, with and without critic; and the cost of
the release and of training against k and n (appendix F).

    python -m benchmarks.pearl_utility                                  # ε ∈ {0.2, 1, 10, inf}, critic on and off
    python -m benchmarks.pearl_utility --epsilons 1 --critic on --set steps=2000
    python -m benchmarks.pearl_utility --timing                         # release / training seconds vs k and n

The project's own route (schema validation, seeded split, schema-only encoding, a throwaway ledger,
decoding); 11,000 synthetic rows as in the paper (§5.2). Run with OMP_NUM_THREADS=1 on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from pipelines.data.readers import read_table
from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder, train_holdout_split
from pipelines.data.validation import validate_table
from pipelines.evaluation.classifiers import tstr_classifiers
from pipelines.generators.base import Budget
from pipelines.generators.pearl import PEARL
from pipelines.privacy.ledger import Ledger

ROOT = Path(__file__).resolve().parents[1]


def prepared(dataset: str, seed: int):
    schema = load_schema(ROOT / "schemas" / f"{dataset}.yaml")
    raw, label = read_table(f"bundled:{dataset}", schema)
    train, holdout = train_holdout_split(validate_table(raw, schema, label)[0], 0.2, seed)
    return schema, Encoder(schema), train, holdout


def fitted(encoder: Encoder, X: np.ndarray, epsilon: float, delta: float, params: dict) -> tuple[PEARL, float]:
    gen = PEARL(encoder.layout, params, "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        session = Ledger(str(Path(tmp) / "ledger.sqlite")).session("bench", "bench", "train@pearl", delta, float("inf"))
        start = time.perf_counter()
        gen.fit(X, session, Budget(epsilon, delta))
    return gen, time.perf_counter() - start


def utility(args: argparse.Namespace, overrides: dict) -> None:
    schema, encoder, train, holdout = prepared(args.dataset, args.seed)
    X = encoder.encode(train)
    for eps in args.epsilons:
        for critic in {"on": [True], "off": [False], "both": [True, False]}[args.critic]:
            params = {"noise_seed": args.seed, **overrides, "critic": critic, "seed": args.seed}  # not a release
            gen, seconds = fitted(encoder, X, eps, args.delta, params)
            synth = encoder.decode(gen.sample(args.synthetic_rows, args.seed))
            table = tstr_classifiers(
                train, synth, holdout, schema.columns, schema.target, args.seed, args.max_train_rows
            )
            print(
                json.dumps(
                    {
                        "dataset": args.dataset,
                        "epsilon": str(eps),
                        "delta": args.delta,
                        "critic": critic,
                        "fit_seconds": round(seconds, 1),
                        "length_scale": round(gen.length_scale, 4),
                        "average": {k: {m: round(v, 3) for m, v in r.items()} for k, r in table["average"].items()},
                        "models": {
                            n: {k: round(r[k]["roc"], 3) for k in ("tstr", "trtr")} for n, r in table["models"].items()
                        },
                        "n_train_real": table["n_train_real"],
                        "n_synth": table["n_synth"],
                    }
                ),
                flush=True,
            )


def timing(args: argparse.Namespace, overrides: dict) -> None:
    """Release seconds (pairwise distances O(n²d) + embedding O(nkd)) and training seconds per step (O(Bkd),
    independent of n: post-processing) on seeded subsets of the training split."""
    _, encoder, train, _ = prepared(args.dataset, args.seed)
    X = encoder.encode(train)
    rng = np.random.default_rng(args.seed)
    for n in args.n_rows:
        rows = X[rng.choice(len(X), min(n, len(X)), replace=False)]
        for k in args.frequencies:
            gen, release = fitted(encoder, rows, 1.0, args.delta, {**overrides, "frequencies": k, "steps": 0})
            gen.params = gen.params.model_copy(update={"steps": args.timing_steps})
            start = time.perf_counter()
            gen._train()
            per_step = (time.perf_counter() - start) / args.timing_steps
            print(
                json.dumps(
                    {
                        "n": len(rows),
                        "k": k,
                        "release_seconds": round(release, 2),
                        "train_seconds_per_step": round(per_step, 4),
                        "train_seconds_8000_steps": round(8000 * per_step, 1),
                    }
                ),
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="adult")
    ap.add_argument("--epsilons", nargs="+", type=float, default=[0.2, 1.0, 10.0, float("inf")])
    ap.add_argument("--critic", choices=["on", "off", "both"], default="both")
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--synthetic-rows", type=int, default=11000)
    ap.add_argument("--max-train-rows", type=int, default=None, help="cap on each classifier training table")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="pearl parameter overrides")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timing", action="store_true", help="appendix F: cost vs k and n instead of utility")
    ap.add_argument("--frequencies", nargs="+", type=int, default=[100, 300, 1000, 3000])
    ap.add_argument("--n-rows", nargs="+", type=int, default=[5000, 10000, 20000, 40000])
    ap.add_argument("--timing-steps", type=int, default=50)
    args = ap.parse_args()
    overrides = {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in args.set)}
    (timing if args.timing else utility)(args, overrides)


if __name__ == "__main__":
    main()
