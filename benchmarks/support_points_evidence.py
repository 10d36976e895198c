"""Evidence for private support points (thesis ch. 5): docs/support-points.md, docs/img/support-points-gmm.png.

1. §5.7.1 (Figures 5.1-5.2): bounded 2-D Gaussian-mixture data (N = 200, centres in [4σ, 1 − 4σ]², σ = 0.05),
   n = 10 support points Y* (Adam, 300 steps, lr 0.01) and private sets Ỹ for a range of ε: energy distance
   e(X, Ỹ) and e(Ỹ, Y*) against ε (median over repeats), split-R̂ of 4 chains. Then the §5.6 expansions at
   one ε: KDE with the public, the Laplace-MLE and the exponential-mechanism bandwidth, and repeated sampling.
2. §5.7.2 (Figure 5.8): linear regression trained on a synthetic set, MSE on the real held-out fold (target
   scaled to [0, 1] by its bounds), for the full training data, non-private support points, private support
   points and the Laplace-perturbed histogram with (Nα/10)^{2d/(2+d)} bins (Wasserman & Zhou 2010), at
   α ∈ {100, 1000, 10000} and set sizes 5/10/20 % of the training rows; median and IQR over k-fold splits.
   Histograms with more than `--max-bins` cells are omitted, as in the thesis.

3. `--adult` (issue 21: when is it usable?): the generator with its DEFAULT params on Adult (the project's
   reader, schema and keyed split, `generator_runs.py`) for each training size `--adult-rows` and ε in
   `--adult-eps` (δ = 1e-5, fixed noise seed): fit seconds, split-R̂ against `rhat_max` (the `mh_convergence`
   gate), acceptance, and the 1-way / 2-way marginal score of as many sampled rows as training rows
   (`frontier.py`: 500 × (2 − mean L1), numerics in 10 quantile bins of the real training rows). Two
   references per size need no MH: uniform rows on the encoded cube (what a release carries if the chains
   learnt nothing) and ε = inf (the exact support points Y*, the method's ceiling). Rewrites the table
   between `<!-- adult -->` and `<!-- /adult -->` in docs/support-points.md.

    python -m benchmarks.support_points_evidence             # ~5 min on 1 core
    python -m benchmarks.support_points_evidence --folds 5   # the thesis's five folds
    python -m benchmarks.support_points_evidence --adult     # sections 1-2 skipped; ~20 min on 2 shared cores
    python -m benchmarks.support_points_evidence --adult --adult-rows 1000 --adult-eps 1 4 --set steps=40000
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.datasets import load_diabetes, load_wine
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import KFold

from benchmarks.frontier import binned, kway_score
from benchmarks.generator_runs import adult, generator_params, overrides, subsample
from pipelines.data.schema import Schema
from pipelines.data.transform import Encoder
from pipelines.generators.base import Budget
from pipelines.generators.params.support_points import Params
from pipelines.generators.support_points import SupportPoints, support_points
from pipelines.generators.mechanisms.bandwidth import bandwidth_grid, exponential_bandwidth, laplace_bandwidth
from pipelines.stats.energy import energy_distance, energy_sensitivity
from pipelines.generators.mechanisms.energy_sampler import sample_energy_mechanism
from pipelines.privacy.ledger import Ledger

ROOT = Path(__file__).resolve().parents[1]
ADULT_ROWS, ADULT_EPS = [1000, 16000], [1.0, 4.0, 16.0, float("inf")]  # --adult's grid (issue 21)
# Public bounds. Wine: the DESCR summary table's min/max rounded outward. Diabetes (raw units, scaled=False)
# has no published range table: round bounds around the documented variables' observed ranges (evidence only;
# a release takes bounds from a public schema).
BOUNDS = {
    "wine": [
        (11, 15),
        (0.5, 6),
        (1.3, 3.3),
        (10, 30),
        (70, 165),
        (0.9, 4),
        (0.3, 5.1),
        (0.1, 0.7),
        (0.4, 3.6),
        (1, 13),
        (0.4, 1.8),
        (1.2, 4),
        (250, 1700),
    ],
    "diabetes": [
        (18, 80),
        (1, 2),
        (15, 45),
        (60, 135),
        (90, 310),
        (40, 250),
        (20, 100),
        (2, 10),
        (3, 6.5),
        (55, 125),
        (25, 350),
    ],
}


def load(name: str) -> np.ndarray:
    """Rows scaled to [0, 1] by BOUNDS; the last column is the regression target (wine: alcohol)."""
    if name == "wine":
        data = load_wine().data
        data = np.column_stack([data[:, 1:], data[:, 0]])
        bounds = BOUNDS["wine"][1:] + BOUNDS["wine"][:1]
    else:
        d = load_diabetes(scaled=False)
        data, bounds = np.column_stack([d.data, d.target]), BOUNDS["diabetes"]
    lo, hi = np.array(bounds, float).T
    return np.clip((data - lo) / (hi - lo), 0, 1)


def private_set(x: np.ndarray, n: int, eps: float, seed: int, burn: int, steps: int):
    res = sample_energy_mechanism(
        x,
        n,
        eps,
        energy_sensitivity(len(x), x.shape[1], 2.0),
        2.0,
        np.random.default_rng(seed),
        burn_in=burn,
        steps=steps,
        thin=max(1, steps // 100),
    )
    return res.finals[0], res.rhat


def perturbed_histogram(x: np.ndarray, eps: float, size: int, rng: np.random.Generator, max_bins: float):
    """Wasserman & Zhou: m = round((Nα/10)^{2/(2+d)}) equal-width bins per axis of [0, 1]^d, counts + Laplace(1/α)
    (add/remove-one: Δ₁ = 1), clipped at 0; `size` rows drawn ∝ the noisy counts, uniform within the cell."""
    n, d = x.shape
    m = max(1, int(round((n * eps / 10) ** (2 / (2 + d)))))
    if float(m) ** d > max_bins:
        return None, m
    cells = np.ravel_multi_index(tuple(np.minimum((x * m).astype(int), m - 1).T), (m,) * d)
    counts = np.bincount(cells, minlength=m**d) + rng.laplace(0, 1 / eps, m**d)
    weights = np.clip(counts, 0, None)
    picked = rng.choice(m**d, size=size, p=weights / weights.sum())
    return (np.stack(np.unravel_index(picked, (m,) * d), 1) + rng.random((size, d))) / m, m


def mse(train: np.ndarray, test: np.ndarray) -> float:
    model = LinearRegression().fit(train[:, :-1], train[:, -1])
    return float(np.mean((model.predict(test[:, :-1]) - test[:, -1]) ** 2))


def gmm_section(args) -> tuple[list[str], dict]:
    rng = np.random.default_rng(0)
    sigma, n_data, n = 0.05, 200, 10
    centres = rng.uniform(4 * sigma, 1 - 4 * sigma, (4, 2))
    x = np.clip(centres[rng.integers(4, size=n_data)] + sigma * rng.standard_normal((n_data, 2)), 0, 1)
    y_star = support_points(x, n, 2.0, 300, 0.01, 0)
    base = energy_distance(x, y_star)
    lines = [
        "| ε | e(X, Ỹ) median | e(Ỹ, Y*) median | split-R̂ (max) |",
        "|---:|---:|---:|---:|",
        f"| non-private Y* | {base:.5f} | 0 | – |",
    ]
    shown = {}
    for eps in args.gmm_eps:
        runs = [private_set(x, n, eps, 100 + r, args.gmm_burn, args.gmm_steps) for r in range(args.repeats)]
        shown[eps] = runs[0][0]
        lines.append(
            f"| {eps:g} | {np.median([energy_distance(x, y) for y, _ in runs]):.5f} | "
            f"{np.median([energy_distance(y, y_star) for y, _ in runs]):.5f} | "
            f"{max(r for _, r in runs):.3f} |"
        )
    # §5.6 expansions at one ε (the bandwidth mechanisms get 10 % of it, as in params.yaml's share)
    eps, noise = args.expand_eps, np.random.default_rng(7)
    grid = bandwidth_grid(0.01, 0.125, 32)
    y_sp, _ = private_set(x, n, 0.9 * eps, 11, args.gmm_burn, args.gmm_steps)
    bw = {
        "public σ = 0.05": 0.05,
        "Laplace bounded MLE": laplace_bandwidth(x, y_sp, grid, 0.1 * eps, noise)[0],
        "exponential mechanism over the grid": exponential_bandwidth(x, y_sp, grid, 0.1 * eps, noise)[0],
    }
    expand = ["| expansion (ε total) | bandwidth | e(X, 200 expanded rows) |", "|---|---:|---:|"]
    for label, s in bw.items():
        rows = np.clip(y_sp[noise.integers(n, size=n_data)] + s * noise.standard_normal((n_data, 2)), 0, 1)
        expand.append(f"| KDE, {label} ({eps:g}) | {s:.4f} | {energy_distance(x, rows):.5f} |")
    k = 4
    union = np.vstack([private_set(x, n, eps / k, 20 + i, args.gmm_burn, args.gmm_steps)[0] for i in range(k)])
    expand.append(f"| repeated sampling, k = {k} sets of ε/k ({eps:g}) | – | {energy_distance(x, union):.5f} |")
    return lines + [""] + expand, {"x": x, "y_star": y_star, "shown": shown}


def regression_section(args) -> list[str]:
    lines = [
        "| data | α | size | full data | support points | private support points | perturbed histogram (bins/axis) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]

    def fmt(v: list[float]) -> str:
        return "omitted" if not v else f"{np.median(v):.4f} [{np.percentile(v, 25):.4f}, {np.percentile(v, 75):.4f}]"

    for name in args.datasets:
        data = load(name)
        folds = list(KFold(args.folds, shuffle=True, random_state=0).split(data))
        for eps in args.budgets:
            for frac in args.sizes:
                full, sp, psp, hist, bins, rhats = [], [], [], [], None, []
                for f, (tr, te) in enumerate(folds):
                    train, test = data[tr], data[te]
                    n = max(2, int(round(frac * len(train))))
                    full.append(mse(train, test))
                    sp.append(mse(support_points(train, n, 2.0, 300, 0.01, f), test))
                    y, rhat = private_set(
                        train, n, eps, 1000 * f + int(eps), args.burn_per_point * n, args.steps_per_point * n
                    )
                    psp.append(mse(y, test))
                    rhats.append(rhat)
                    h, bins = perturbed_histogram(train, eps, n, np.random.default_rng(f), args.max_bins)
                    if h is not None:
                        hist.append(mse(h, test))
                lines.append(
                    f"| {name} (N = {len(data)}, d = {data.shape[1]}) | {eps:g} | {int(frac * 100)} % | "
                    f"{fmt(full)} | {fmt(sp)} | {fmt(psp)} (R̂ ≤ {max(rhats):.2f}) | {fmt(hist)} ({bins}) |"
                )
                print(lines[-1], flush=True)
    return lines


def adult_fit(
    schema: Schema, train: pd.DataFrame, params: dict[str, Any], epsilon: float, delta: float, seed: int
) -> dict[str, Any]:
    """One support_points release on `train` at (ε, δ) under a throwaway ledger: fit seconds, the
    `mh_convergence` gate's verdict and evidence, and the 1-way / 2-way scores of len(train) sampled rows."""
    encoder = Encoder(schema)
    gen, X = SupportPoints(encoder.layout, params, "cpu"), encoder.encode(train)
    with tempfile.TemporaryDirectory() as tmp:
        session = Ledger(str(Path(tmp) / "ledger.sqlite")).session(
            "bench", "bench", "train@support_points", delta, float("inf")
        )
        start = time.perf_counter()
        gen.fit(X, session, Budget(epsilon, delta))
        fit_s = time.perf_counter() - start
    gates = gen.release_gates(X)
    synth = encoder.decode(gen.sample(len(train), np.random.default_rng(seed)))
    row = {"fit_s": fit_s, **adult_scores(schema, train, synth)}
    if gates:
        evidence = gates[0].evidence
        row.update(
            rhat=evidence["rhat"],
            passed=gates[0].passed,
            rhat_max=evidence["rhat_max"],
            acceptance=float(np.mean(evidence["acceptance"])),
            step=float(np.mean(evidence["step_size"])),
        )
    return row


def adult_scores(schema: Schema, train: pd.DataFrame, synth: pd.DataFrame) -> dict[str, float]:
    """1-way and 2-way scores of `synth` against `train` (`frontier.py`'s bins and score)."""
    real_b, synth_b = binned(train, train, schema), binned(synth, train, schema)
    return {"1-way": kway_score(real_b, synth_b, 1), "2-way": kway_score(real_b, synth_b, 2)}


def adult_section(args) -> tuple[list[str], float, Params]:
    """The `--adult` grid (module docstring, item 3); rows print as they finish. Returns the table's lines, the
    seconds of the whole grid and the generator's params (the defaults with `--set`)."""
    start = time.perf_counter()
    schema, pool, _ = adult(args.seed)
    extra = overrides(None, [f"support_points.{s}" for s in args.set], ["support_points"])["support_points"]
    params = generator_params("support_points", extra, args.seed)
    lines = [
        "| rows N | ε | fit s | split-R̂ | gate | acceptance | 1-way | 2-way |",
        "|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    encoder = Encoder(schema)
    merged = SupportPoints(encoder.layout, params, "cpu").params
    for rows in args.adult_rows:
        train = subsample(pool, rows, args.seed, "--adult-rows")
        noise = np.random.default_rng(args.seed).random((rows, encoder.layout.width))
        uniform = adult_scores(schema, train, encoder.decode(noise))
        lines.append(
            f"| {rows:,} | uniform rows (no data) | – | – | – | – | {uniform['1-way']:.1f} | {uniform['2-way']:.1f} |"
        )
        print(lines[-1], flush=True)
        for eps in args.adult_eps:
            r = adult_fit(schema, train, params, eps, 1e-5, args.seed)
            rhat = f"{r['rhat']:.3f}" if "rhat" in r else "–"
            gate = ("passes" if r["passed"] else f"refuses (> {r['rhat_max']:g})") if "rhat" in r else "none"
            acc = f"{r['acceptance']:.2f} (step {r['step']:.3f})" if "rhat" in r else "–"
            label = "inf (exact Y*, non-private)" if np.isinf(eps) else f"{eps:g}"
            lines.append(
                f"| {rows:,} | {label} | {r['fit_s']:.0f} | {rhat} | {gate} | {acc} | {r['1-way']:.1f} | "
                f"{r['2-way']:.1f} |"
            )
            print(lines[-1], flush=True)
    return lines, time.perf_counter() - start, merged


def write_adult(lines: list[str], seconds: float, params: Params, args, path: Path) -> None:
    """Replace the text between the `<!-- adult -->` markers of `path` with the table and how it was made."""
    cmd = "python -m benchmarks.support_points_evidence --adult"
    if args.adult_rows != ADULT_ROWS:
        cmd += " --adult-rows " + " ".join(map(str, args.adult_rows))
    if args.adult_eps != ADULT_EPS:
        cmd += " --adult-eps " + " ".join(f"{e:g}" for e in args.adult_eps)
    cmd += "".join(f" --set {s}" for s in args.set)
    shown = ", ".join(
        f"{k} {getattr(params, k)}" for k in ("n_points", "chains", "burn_in", "steps", "thin", "rhat_max", "expansion")
    )
    shown += f", calibration.share {params.calibration.share} (pairs: {params.calibration.pairs})"
    body = (
        f"Produced by `{cmd}` on {date.today().isoformat()} in {seconds / 60:.1f} min on {os.cpu_count()} "
        f"shared CPU cores (seed {args.seed}, δ = 1e-5; params: {shown}"
        f"{'' if args.set else ', the defaults'}).\n\n" + "\n".join(lines) + "\n"
    )
    text = path.read_text()
    head, sep, rest = text.partition("<!-- adult -->")
    _, sep2, tail = rest.partition("<!-- /adult -->")
    if not (sep and sep2):
        raise ValueError(
            f"{path}: no <!-- adult --> ... <!-- /adult --> markers for the Adult table; add them "
            f"under the 'When is it usable?' heading"
        )
    path.write_text(head + sep + "\n" + body + sep2 + tail)
    print(f"wrote the Adult table into {path} ({seconds / 60:.1f} min)")


def figure(gmm: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = gmm["shown"]
    fig, axes = plt.subplots(1, len(shown), figsize=(3 * len(shown), 3.2))
    for ax, (eps, y) in zip(np.atleast_1d(axes), shown.items()):
        ax.scatter(*gmm["x"].T, s=6, c="0.7", label="data")
        ax.scatter(*gmm["y_star"].T, s=30, c="tab:green", label="support points Y*")
        ax.scatter(*y.T, s=30, c="tab:red", marker="x", label="private Ỹ")
        ax.set(xlim=(0, 1), ylim=(0, 1), title=f"ε = {eps:g}", xticks=[], yticks=[])
    np.atleast_1d(axes)[0].legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gmm-eps", nargs="+", type=float, default=[1, 10, 100, 1000, 10000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gmm-burn", type=int, default=5000)
    ap.add_argument("--gmm-steps", type=int, default=5000)
    ap.add_argument("--expand-eps", type=float, default=1000.0)
    ap.add_argument("--datasets", nargs="+", default=["diabetes", "wine"])
    ap.add_argument("--budgets", nargs="+", type=float, default=[100, 1000, 10000])
    ap.add_argument("--sizes", nargs="+", type=float, default=[0.05, 0.10, 0.20])
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--burn-per-point", type=int, default=100)
    ap.add_argument("--steps-per-point", type=int, default=100)
    ap.add_argument("--max-bins", type=float, default=2e7)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "support-points.md")
    ap.add_argument("--adult", action="store_true", help="only the Adult grid (item 3), written into --out")
    ap.add_argument("--adult-rows", nargs="+", type=int, default=ADULT_ROWS)
    ap.add_argument("--adult-eps", nargs="+", type=float, default=ADULT_EPS, help="inf: exact Y*, non-private")
    ap.add_argument("--seed", type=int, default=0, help="--adult: split, subsample, noise and sampling seed")
    ap.add_argument("--set", nargs="*", default=[], help="--adult: support_points params as KEY=VALUE (YAML)")
    args = ap.parse_args()
    if args.adult:
        write_adult(*adult_section(args), args=args, path=args.out)
        return
    start = time.perf_counter()
    gmm_lines, gmm = gmm_section(args)
    print("\n".join(gmm_lines), flush=True)
    figure(gmm, ROOT / "docs" / "img" / "support-points-gmm.png")
    reg_lines = regression_section(args)
    elapsed = time.perf_counter() - start
    cmd = "python -m benchmarks.support_points_evidence" + ("" if args.folds == 3 else f" --folds {args.folds}")
    text = TEMPLATE.format(
        cmd=cmd,
        minutes=elapsed / 60,
        repeats=args.repeats,
        folds=args.folds,
        gmm="\n".join(gmm_lines),
        reg="\n".join(reg_lines),
        expand_eps=args.expand_eps,
        burn=args.gmm_burn,
        steps=args.gmm_steps,
        bpp=args.burn_per_point,
        spp=args.steps_per_point,
    )
    out = args.out.read_text() if args.out.exists() else ""
    marker = "<!-- evidence -->"
    head = out.split(marker)[0] if marker in out else ""
    args.out.write_text(head + marker + "\n" + text)
    print(f"wrote {args.out} in {elapsed / 60:.1f} min")


TEMPLATE = """## Evidence

Produced by `{cmd}` ({minutes:.1f} min on 1 core; `OMP_NUM_THREADS=1`).

### Bounded 2-D Gaussian mixture (§5.7.1, Figures 5.1-5.2)

N = 200 rows from four clusters (σ = 0.05, centres in [4σ, 1 − 4σ]²), n = 10. Private sets: 4 chains,
{burn} burn-in + {steps} steps each; medians over {repeats} independent releases per ε. e is the energy
distance of eq. 5.5 (p = 2).

{gmm}

The §5.6 rows use one private set of 0.9ε and a bandwidth release of 0.1ε (bounds [0.01, 0.125], a 32-point
grid); the repeated-sampling row releases k sets of ε/k each.

![private support points against ε](img/support-points-gmm.png)

Grey: data; green: support points Y*; red: one private set Ỹ per ε.

### Regression (§5.7.2, Figure 5.8)

Linear regression trained on each synthetic set, MSE on the real held-out fold (target scaled to [0, 1]);
median [IQR] over {folds} folds (the thesis: five). Wine: alcohol regressed on the other 12 measurements.
Private support points: 4 chains of {bpp}·n burn-in + {spp}·n steps; the largest split-R̂ over the folds is
shown. Perturbed histogram: (Nα/10)^{{2d/(2+d)}} cells, Laplace(1/α) per cell; omitted above 2·10⁷ cells.

{reg}

Reading the default run (all seeds fixed, so a re-run reproduces it):
- On the mixture, e(X, Ỹ) falls with ε towards e(X, Y*), and e(Ỹ, Y*) with it: Figure 5.2's behaviour.
- Where both exist (α = 100 on diabetes, α ≤ 1000 on wine), private support points have the lower median MSE
  in 8 of 9 cells and are on par in the ninth (diabetes, 20 %). The histogram does not fit in memory at the
  larger budgets, as in the thesis.
- At α ≥ 1000 the regression runs' chains have not converged within 200·n steps (split-R̂ up to ~2.5): the
  `mh_convergence` gate (`rhat_max` 1.05) would refuse those releases. The thesis's chains are longer
  (burn-in 5000, thinning 2000); so are the mixture runs above, whose R̂ stays near the bound.
- With n ≤ d + 1 points (wine at 5 % and 10 %: 7 and 12 points for 12 features and an intercept) least squares
  on the set alone (nearly) interpolates, so every set-based method is erratic there; compare at 20 %.
"""

if __name__ == "__main__":
    main()
