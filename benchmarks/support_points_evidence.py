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

    python benchmarks/support_points_evidence.py             # ~5 min on 1 core
    python benchmarks/support_points_evidence.py --folds 5   # the thesis's five folds
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes, load_wine
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import KFold

from pipelines.generators.support_points import support_points
from pipelines.privacy.bandwidth import bandwidth_grid, exponential_bandwidth, laplace_bandwidth
from pipelines.privacy.energy import energy_distance, energy_sensitivity
from pipelines.privacy.energy_sampler import sample_energy_mechanism

ROOT = Path(__file__).resolve().parents[1]
# Public bounds. Wine: the DESCR summary table's min/max rounded outward. Diabetes (raw units, scaled=False)
# has no published range table: round bounds around the documented variables' observed ranges (evidence only;
# a release takes bounds from a public schema).
BOUNDS = {
    "wine": [(11, 15), (0.5, 6), (1.3, 3.3), (10, 30), (70, 165), (0.9, 4), (0.3, 5.1), (0.1, 0.7), (0.4, 3.6),
             (1, 13), (0.4, 1.8), (1.2, 4), (250, 1700)],
    "diabetes": [(18, 80), (1, 2), (15, 45), (60, 135), (90, 310), (40, 250), (20, 100), (2, 10), (3, 6.5),
                 (55, 125), (25, 350)],
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
    res = sample_energy_mechanism(x, n, eps, energy_sensitivity(len(x), x.shape[1], 2.0), 2.0,
                                  np.random.default_rng(seed), burn_in=burn, steps=steps, thin=max(1, steps // 100))
    return res.finals[0], res.rhat


def perturbed_histogram(x: np.ndarray, eps: float, size: int, rng: np.random.Generator, max_bins: float):
    """Wasserman & Zhou: m = round((Nα/10)^{2/(2+d)}) equal-width bins per axis of [0, 1]^d, counts + Laplace(1/α)
    (add/remove-one: Δ₁ = 1), clipped at 0; `size` rows drawn ∝ the noisy counts, uniform within the cell."""
    n, d = x.shape
    m = max(1, int(round((n * eps / 10) ** (2 / (2 + d)))))
    if float(m) ** d > max_bins:
        return None, m
    cells = np.ravel_multi_index(tuple(np.minimum((x * m).astype(int), m - 1).T), (m,) * d)
    counts = np.bincount(cells, minlength=m ** d) + rng.laplace(0, 1 / eps, m ** d)
    weights = np.clip(counts, 0, None)
    picked = rng.choice(m ** d, size=size, p=weights / weights.sum())
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
    lines = ["| ε | e(X, Ỹ) median | e(Ỹ, Y*) median | split-R̂ (max) |", "|---:|---:|---:|---:|",
             f"| non-private Y* | {base:.5f} | 0 | – |"]
    shown = {}
    for eps in args.gmm_eps:
        runs = [private_set(x, n, eps, 100 + r, args.gmm_burn, args.gmm_steps) for r in range(args.repeats)]
        shown[eps] = runs[0][0]
        lines.append(f"| {eps:g} | {np.median([energy_distance(x, y) for y, _ in runs]):.5f} | "
                     f"{np.median([energy_distance(y, y_star) for y, _ in runs]):.5f} | "
                     f"{max(r for _, r in runs):.3f} |")
    # §5.6 expansions at one ε (the bandwidth mechanisms get 10 % of it, as in params.yaml's share)
    eps, noise = args.expand_eps, np.random.default_rng(7)
    grid = bandwidth_grid(0.01, 0.125, 32)
    y_sp, _ = private_set(x, n, 0.9 * eps, 11, args.gmm_burn, args.gmm_steps)
    bw = {"public σ = 0.05": 0.05,
          "Laplace bounded MLE": laplace_bandwidth(x, y_sp, grid, 0.1 * eps, noise)[0],
          "exponential mechanism over the grid": exponential_bandwidth(x, y_sp, grid, 0.1 * eps, noise)[0]}
    expand = ["| expansion (ε total) | bandwidth | e(X, 200 expanded rows) |", "|---|---:|---:|"]
    for label, s in bw.items():
        rows = np.clip(y_sp[noise.integers(n, size=n_data)] + s * noise.standard_normal((n_data, 2)), 0, 1)
        expand.append(f"| KDE, {label} ({eps:g}) | {s:.4f} | {energy_distance(x, rows):.5f} |")
    k = 4
    union = np.vstack([private_set(x, n, eps / k, 20 + i, args.gmm_burn, args.gmm_steps)[0] for i in range(k)])
    expand.append(f"| repeated sampling, k = {k} sets of ε/k ({eps:g}) | – | {energy_distance(x, union):.5f} |")
    return lines + [""] + expand, {"x": x, "y_star": y_star, "shown": shown}


def regression_section(args) -> list[str]:
    lines = ["| data | α | size | full data | support points | private support points | "
             "perturbed histogram (bins/axis) |", "|---|---:|---:|---:|---:|---:|---:|"]

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
                    y, rhat = private_set(train, n, eps, 1000 * f + int(eps), args.burn_per_point * n,
                                          args.steps_per_point * n)
                    psp.append(mse(y, test))
                    rhats.append(rhat)
                    h, bins = perturbed_histogram(train, eps, n, np.random.default_rng(f), args.max_bins)
                    if h is not None:
                        hist.append(mse(h, test))
                lines.append(f"| {name} (N = {len(data)}, d = {data.shape[1]}) | {eps:g} | {int(frac * 100)} % | "
                             f"{fmt(full)} | {fmt(sp)} | {fmt(psp)} (R̂ ≤ {max(rhats):.2f}) | {fmt(hist)} ({bins}) |")
                print(lines[-1], flush=True)
    return lines


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
    args = ap.parse_args()
    start = time.perf_counter()
    gmm_lines, gmm = gmm_section(args)
    print("\n".join(gmm_lines), flush=True)
    figure(gmm, ROOT / "docs" / "img" / "support-points-gmm.png")
    reg_lines = regression_section(args)
    elapsed = time.perf_counter() - start
    cmd = "python benchmarks/support_points_evidence.py" + ("" if args.folds == 3 else f" --folds {args.folds}")
    text = TEMPLATE.format(cmd=cmd, minutes=elapsed / 60, repeats=args.repeats, folds=args.folds,
                           gmm="\n".join(gmm_lines), reg="\n".join(reg_lines), expand_eps=args.expand_eps,
                           burn=args.gmm_burn, steps=args.gmm_steps, bpp=args.burn_per_point,
                           spp=args.steps_per_point)
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
