"""The private selection's score share (`private_selection.score_share`, docs/selection.md): for each share s, the
per-candidate ε the plan gives (training at (1 − s)·x, the score at s·x), every candidate fitted at it on a
project's prepared rows, its table's noise-free quality score q and its TSTR AUROC and 2-way score, and then what
the selection publishes in expectation under the score's discrete Laplace noise.

    python -m benchmarks.product --data <csv> --schema <yaml> --set dataset.columns=schema --seeds 0 \
        --until prepare --keep <dir>
    python -m benchmarks.select_share --root <dir>/seed-0 --epsilon 0.86 --shares 0.25 0.1 0.05 --draws 8 \
        --json <out.json>
    python -m benchmarks.select_share --summarize <out.json> ...

`--epsilon` is the selection's ε (a release at ε = 1 gives it about 0.86; the rest goes to the release test and
the weights). The plan is `PrivateSelection.plan` on the project's layout and n̂ (`trials: each`, the candidates
of `--candidates`). Draw d fits every candidate with noise seed 100 + d and samples n̂ rows with seed 0; the
scores are `QualityScore.value` (pipelines/marginal/score.py), the AUROC the project's TSTR classifiers on the
holdout, the 2-way score `frontier.kway_score` against the training rows. The published table's expected
measures weigh each candidate by its probability of the lowest noisy score, q_k + Lap_ℤ(Δ/(s·x)) with ties to the
earlier candidate as in `repeat_select.best_of_each`, estimated from 200,000 seeded draws of the noise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from benchmarks.frontier import binned, kway_score
from benchmarks.select_sweep import Session, kept_project, shape, tstr_auroc
from pipelines.data.transform import Encoder
from pipelines.generators.base import Budget
from pipelines.generators.params.private_selection import Params
from pipelines.generators.registry import make_generator
from pipelines.marginal.score import QualityScore

NOISE_DRAWS = 200_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".")
    ap.add_argument("--epsilon", type=float, default=0.86, help="the selection's ε")
    ap.add_argument("--shares", nargs="+", type=float, default=[0.25, 0.1, 0.05])
    ap.add_argument("--candidates", nargs="+", default=["aim", "mst"])
    ap.add_argument("--draws", type=int, default=8)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--summarize", type=Path, nargs="+", help="print the markdown table of these --json files")
    args = ap.parse_args()
    if args.summarize:
        print(summary([json.loads(f.read_text()) for f in args.summarize]))
        return
    config, sch, layout, table, train, holdout = kept_project(Path(args.root))
    data = np.asarray(table)
    real = binned(train, train, sch)
    delta = config.privacy.delta
    section = {
        **config.generator("private_selection"),
        "candidates": args.candidates,
        "sections": {c: config.generator(c) for c in args.candidates},
    }
    score = QualityScore.of(layout, Params.model_validate(section).score_bins)
    rows: list[dict] = []
    for share in args.shares:
        selection = make_generator(
            "private_selection", layout, {**section, "score_share": share, "epsilon": args.epsilon}, "cpu"
        )
        x = selection.plan(len(data), Budget(args.epsilon, delta)).trial_epsilon
        eps_g, scale = (1 - share) * x, score.sensitivity / (share * x)
        print(
            f"share {share}: per-candidate ε {x:.4f}, training {eps_g:.4f}, score noise scale {scale:.1f}", flush=True
        )
        for draw in range(args.draws):
            row = {"share": share, "x": x, "eps_g": eps_g, "scale": scale, "draw": draw}
            for c in args.candidates:
                model = make_generator(
                    c, layout, {**config.generator(c), "epsilon": eps_g, "noise_seed": 100 + draw}, "cpu"
                )
                model.fit(table, Session(), Budget(eps_g, delta))
                encoded = model.sample(len(data), 0)
                synth = Encoder(sch).decode(encoded)
                row[c] = {
                    "q": score.value(data, encoded),
                    "auc": tstr_auroc(synth, holdout, sch),
                    "2way": kway_score(real, binned(synth, train, sch), 2, None),
                }
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:  # after each draw: an interrupted run keeps what it measured
                args.json.write_text(
                    json.dumps(
                        {
                            "command": " ".join(sys.argv),
                            "shape": shape(sch, len(data)),
                            "epsilon": args.epsilon,
                            "candidates": args.candidates,
                            "rows": rows,
                        },
                        indent=1,
                    )
                    + "\n"
                )


def win_probabilities(scores: list[int], scale: float, rng: np.random.Generator) -> np.ndarray:
    """P(candidate k has the lowest noisy score), q_k + Lap_ℤ(scale) (the difference of two geometric draws), ties
    to the earlier candidate (np.argmin's first index, as `best_of_each`)."""
    p = 1 - np.exp(-1 / scale)
    noise = rng.geometric(p, (NOISE_DRAWS, len(scores))) - rng.geometric(p, (NOISE_DRAWS, len(scores)))
    wins = np.argmin(np.asarray(scores) + noise, axis=1)
    return np.bincount(wins, minlength=len(scores)) / NOISE_DRAWS


def summary(runs: list[dict]) -> str:
    """Markdown: per table and share, the training ε, how often the first candidate wins, and the published
    table's expected 2-way score and AUROC (LR / RF / GBM) beside the first candidate's own, means over draws."""
    lines = [
        "| table (n̂) | share | training ε | first wins | published: 2-way, AUROC LR / RF / GBM | "
        "first candidate alone |",
        "|---|---|---|---|---|---|",
    ]
    rng = np.random.default_rng(0)
    for run in runs:
        for share in dict.fromkeys(r["share"] for r in run["rows"]):
            rows = [r for r in run["rows"] if r["share"] == share]
            won, published, alone = [], [], []
            for r in rows:
                w = win_probabilities([r[c]["q"] for c in run["candidates"]], r["scale"], rng)
                measures = np.array([[r[c]["2way"], *r[c]["auc"]] for c in run["candidates"]])
                won.append(w[0])
                published.append(w @ measures)
                alone.append(measures[0])
            pub, own = np.mean(published, axis=0), np.mean(alone, axis=0)
            lines.append(
                f"| {run['shape']['dataset']} ({run['shape']['rows_public']}) | {share:g} | "
                f"{rows[0]['eps_g']:.3f} | {np.mean(won):.2f} | {pub[0]:.1f}, "
                f"{' / '.join(f'{v:.3f}' for v in pub[1:])} | {own[0]:.1f}, "
                f"{' / '.join(f'{v:.3f}' for v in own[1:])} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
