"""Evidence for DP importance weights (Ghalebikesabi et al.): writes the result tables of
docs/importance-weights.md (between its RESULTS markers).

    python -m benchmarks.importance_weights                   # all four experiments (~15 min on 1 core)
    python -m benchmarks.importance_weights --only gmm bayes  # a subset: gmm | bayes | table1 | audit

- gmm: §4.1's 5×5 Gaussian grid (σ = 0.05) against a mixture-of-uniforms SDGP; weighted W₁ to held-out
  real rows for no / true / each estimator's weights, weights at ε = 3 (half of the paper's ε = 6).
- bayes: §4.3's Bayesian logistic regression, synthetic rows from γ p_G + (1 − γ) p_D; Mahalanobis distance
  of the IW posterior mean to the real posterior mean, no / true / estimated weights.
- table1: breast cancer and Adult, DP-WGAN at ε = 3 plus weights at ε = 3 (ε = 6 in all, δ = 1e-5):
  Table 1's WST, MMD, SVM / RF / MLP AUROC for each estimator.
- audit: Clopper-Pearson lower bounds on ε of output_lapl and output_norm at the claimed noise and at half.
Reduced sizes (stated in the page) keep each experiment to a few minutes on one core.
"""

from __future__ import annotations

import argparse
import math
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import multivariate_normal

from pipelines.data.layout import Block, Layout
from pipelines.data.readers import read_table
from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder, train_holdout_split
from pipelines.data.validation import validate_table
from pipelines.evaluation import weighted
from pipelines.evaluation.utility import _labels, featurise
from pipelines.generators.base import Budget
from pipelines.generators.registry import make_generator
from pipelines.privacy.accountant import epsilon_pld
from pipelines.privacy.audit import epsilon_lower_bound
from pipelines.privacy.events import GaussianEvent, LaplaceEvent
from pipelines.privacy.ledger import Ledger
from pipelines.weights import estimators, logistic, postprocess
from pipelines.weights.discriminator import critic_log_weights

ROOT = Path(__file__).resolve().parents[1]

DOC = ROOT / "docs" / "importance-weights.md"
DELTA = 1e-5
EPS_WEIGHTS = 3.0


def weights_for(
    estimator: str, real: np.ndarray, syn: np.ndarray, layout: Layout, settings: dict, seed: int
) -> tuple[np.ndarray, int, float]:
    """(mean-one weights of the first N_S synthetic rows, N_S, PSIS k̂) at ε = EPS_WEIGHTS."""
    s = {**settings, "seed": seed, "noise_seed": 1000 + seed}
    plan = estimators.plan(estimator, s, layout, len(real), len(syn), EPS_WEIGHTS, DELTA)
    log_w, _ = estimators.estimate(plan, s, real, syn)
    _, khat = postprocess.psis(log_w)
    return postprocess.mean_one(log_w), plan.n_released, khat


# -- §4.1 Gaussian mixture ---------------------------------------------------------------------------------

GRID = np.array([(a, b) for a in range(-2, 3) for b in range(-2, 3)], dtype=float)
LOW, HIGH = -3.0, 3.0  # public bounds: encoded x = (x − LOW)/(HIGH − LOW)
# SDGP: ½ U([−2.5, 2.5]²) + ½ U([−2.5, 0] × [−2.5, 2.5]): over-weights the left half of the grid.
BOXES = ((np.array([-2.5, -2.5]), np.array([2.5, 2.5])), (np.array([-2.5, -2.5]), np.array([0.0, 2.5])))


def gmm_sample(n: int, rng: np.random.Generator) -> np.ndarray:
    return GRID[rng.integers(0, 25, n)] + 0.05 * rng.normal(size=(n, 2))


def gmm_density(x: np.ndarray) -> np.ndarray:
    d2 = ((x[:, None, :] - GRID[None]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * 0.05**2)).mean(1) / (2 * math.pi * 0.05**2)


def uniform_mixture_sample(n: int, rng: np.random.Generator) -> np.ndarray:
    which = rng.integers(0, 2, n)
    lo, hi = np.array([b[0] for b in BOXES])[which], np.array([b[1] for b in BOXES])[which]
    return lo + (hi - lo) * rng.uniform(size=(n, 2))


def uniform_mixture_density(x: np.ndarray) -> np.ndarray:
    return sum(0.5 * np.all((x >= lo) & (x <= hi), 1) / np.prod(hi - lo) for lo, hi in BOXES)


def gmm_experiment(seeds: int, n: int) -> str:
    layout = Layout((Block("x1", "continuous", 0, 1), Block("x2", "continuous", 1, 2)))
    enc = lambda x: (np.clip(x, LOW, HIGH) - LOW) / (HIGH - LOW)  # noqa: E731
    names = ["none", "true weights", "logreg", "beta_noised", "output_lapl", "output_norm", "mlp", "priv_mlp"]
    results = {k: [] for k in names}
    released = {}
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        real, test, syn = gmm_sample(n, rng), gmm_sample(n, rng), uniform_mixture_sample(n, rng)
        results["none"].append(weighted.weighted_wasserstein1(enc(syn), None, enc(test)))
        results["true weights"].append(
            weighted.weighted_wasserstein1(enc(syn), gmm_density(syn) / uniform_mixture_density(syn), enc(test))
        )
        for est in names[2:]:
            w, n_s, _ = weights_for(est, enc(real), enc(syn), layout, {"epochs": 5, "lr": 0.01}, seed)
            released[est] = n_s
            results[est].append(weighted.weighted_wasserstein1(enc(syn)[:n_s], w, enc(test)))
    lines = ["| weights | N_S | weighted W₁ (mean ± sd over seeds) | paper Table 3 WST |", "|---|---|---|---|"]
    paper = {
        "none": "0.1376",
        "true weights": "0.0036",
        "logreg": "0.0682",
        "beta_noised": "0.0682",
        "priv_mlp": "0.0207",
    }
    for k in names:
        v = np.array(results[k])
        lines.append(f"| {k} | {released.get(k, n)} | {v.mean():.4f} ± {v.std():.4f} | {paper.get(k, '–')} |")
    return "\n".join(lines)


# -- §4.3 Bayesian logistic regression ---------------------------------------------------------------------

P_D = multivariate_normal([-1.25, 1.25], [[1, 0.5], [0.5, 1]])
P_G = multivariate_normal([2, -2.5], [[4, 0.2], [0.2, 4]])
TH_D, TH_G = np.array([1.5, 1.0, 2.5]), np.array([-1.5, 1.0, -2.5])


def bayes_draw(n: int, gamma: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    from_g = rng.uniform(size=n) < gamma
    x = np.where(from_g[:, None], P_G.rvs(n, random_state=rng), P_D.rvs(n, random_state=rng))
    design = np.hstack([np.ones((n, 1)), x])
    y = rng.uniform(size=n) < 1 / (1 + np.exp(-np.sum(design * np.where(from_g[:, None], TH_G, TH_D), 1)))
    return design, y.astype(int)


def bayes_experiment(seeds: int, n: int, gammas: list[float]) -> str:
    layout = Layout(tuple(Block(c, "continuous", i, i + 1) for i, c in enumerate(("x1", "x2", "y"))))
    enc = lambda d, y: np.column_stack([(np.clip(d[:, 1:], -10, 10) + 10) / 20, y])  # noqa: E731
    names = ["none", "true weights", "beta_noised", "output_norm", "priv_mlp"]
    lines = ["| γ | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for gamma in gammas:
        res = {k: [] for k in names}
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            xr, yr = bayes_draw(n, 0.0, rng)
            xs, ys = bayes_draw(n, gamma, rng)
            real_post = weighted.iw_bayes_logistic(xr, yr, None, 10.0)

            def lik(x, y, th):
                p = 1 / (1 + np.exp(-(x @ th)))
                return np.where(y == 1, p, 1 - p)

            p_d = P_D.pdf(xs[:, 1:]) * lik(xs, ys, TH_D)
            true_w = p_d / (gamma * P_G.pdf(xs[:, 1:]) * lik(xs, ys, TH_G) + (1 - gamma) * p_d)
            for k in names:
                if k == "none":
                    w, m = None, n
                elif k == "true weights":
                    w, m = true_w, n
                else:
                    w, m, _ = weights_for(k, enc(xr, yr), enc(xs, ys), layout, {"epochs": 5, "lr": 0.01}, seed)
                post = weighted.iw_bayes_logistic(xs[:m], ys[:m], w, 10.0)
                res[k].append(weighted.mahalanobis(post.mean, real_post))
        lines.append(
            f"| {gamma} | " + " | ".join(f"{np.mean(res[k]):.2f} ± {np.std(res[k]):.2f}" for k in names) + " |"
        )
    return "\n".join(lines)


# -- Table 1: breast cancer and Adult with DP-WGAN ---------------------------------------------------------


def table1(dataset: str, wgan: dict, mlp: dict, seed: int) -> str:
    schema = load_schema(ROOT / "schemas" / f"{dataset}.yaml")
    raw, label = read_table(f"bundled:{dataset}", schema)
    train, holdout = train_holdout_split(validate_table(raw, schema, label)[0], 0.2, seed)
    encoder = Encoder(schema)
    x_train = encoder.encode(train).astype(float)
    gen = make_generator("dpwgan", encoder.layout, {**wgan, "seed": seed, "noise_seed": 2000 + seed}, "cpu")
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        session = Ledger(str(Path(tmp) / "l.sqlite")).session("bench", "bench", "train@dpwgan", DELTA, math.inf)
        gen.fit(x_train.astype(np.float32), session, Budget(EPS_WEIGHTS, DELTA))
    train_s = time.perf_counter() - t
    synth = encoder.decode(gen.sample(len(train), seed))
    x_syn = encoder.encode(synth).astype(float)
    x_hold = encoder.encode(holdout).astype(float)
    col = next(c for c in schema.columns if c.name == schema.target)
    f_syn, y_syn = featurise(synth, schema.columns, schema.target), _labels(synth, col, "synthetic")
    f_test, y_test = featurise(holdout, schema.columns, schema.target), _labels(holdout, col, "holdout")
    cap = 2000
    rng = np.random.default_rng(seed)
    hold_rows = np.sort(rng.choice(len(x_hold), min(cap, len(x_hold)), replace=False))
    critic = lambda rows: gen.critic(torch.as_tensor(rows, dtype=torch.float32)).detach().double().numpy()  # noqa: E731
    rows = []
    for est in (
        "none",
        "logreg",
        "beta_noised",
        "output_lapl",
        "output_norm",
        "mlp",
        "priv_mlp",
        "discriminator",
        "priv_mlp + PSIS",
    ):
        t = time.perf_counter()
        try:
            if est == "none":
                w, n_s, khat = None, len(x_syn), float("nan")
            elif est == "discriminator":
                lw = critic_log_weights(critic(x_syn), 1.0)
                w, n_s, khat = postprocess.mean_one(lw), len(x_syn), postprocess.psis(lw)[1]
            elif est == "priv_mlp + PSIS":
                s = {**mlp, "seed": seed, "noise_seed": 1000 + seed}
                plan = estimators.plan("priv_mlp", s, encoder.layout, len(x_train), len(x_syn), EPS_WEIGHTS, DELTA)
                lw, _ = estimators.estimate(plan, s, x_train, x_syn)
                smoothed, khat = postprocess.psis(lw)
                w, n_s = postprocess.mean_one(smoothed), len(x_syn)
            else:
                w, n_s, khat = weights_for(est, x_train, x_syn, encoder.layout, mlp, seed)
        except ValueError as e:
            rows.append(f"| {est} | – | – | – | – | – | – | – | – | refused: {e} |")
            continue
        if n_s < 2:  # a single released weight: no weighted sample to analyse
            rows.append(f"| {est} | {n_s} | – | – | – | – | – | – | – | too few weights to analyse |")
            continue
        keep = np.sort(rng.choice(n_s, min(cap, n_s), replace=False))
        sub = None if w is None else w[keep]
        auroc = weighted.weighted_auroc(f_syn[keep], y_syn[keep], sub, f_test, y_test, seed)
        wst = weighted.weighted_wasserstein1(x_syn[keep], sub, x_hold, cap, seed)
        mmd = weighted.weighted_mmd2(x_syn[keep], sub, x_hold[hold_rows])
        ess = n_s if w is None else postprocess.effective_sample_size(w)
        fmt = lambda v: "–" if v is None else f"{v:.4f}"  # noqa: E731
        rows.append(
            f"| {est} | {n_s} | {ess:.0f} | {khat:.2f} | {wst:.4f} | {mmd:.4f} | {fmt(auroc['svm'])} | "
            f"{fmt(auroc['random_forest'])} | {fmt(auroc['mlp'])} | {time.perf_counter() - t:.1f} s |"
        )
    head = (
        f"{dataset}: {len(train)} train / {len(holdout)} holdout rows; DP-WGAN ε = 3 trained in {train_s:.0f} s "
        f"({wgan}); weights ε = 3 (priv_mlp {mlp}).\n\n"
        "| weights | N_S | ESS | k̂ | WST ↓ | MMD ↓ | SVM ↑ | RF ↑ | MLP ↑ | time |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    return head + "\n" + "\n".join(rows)


# -- audits ------------------------------------------------------------------------------------------------


def audit_experiment() -> str:
    rng, n = np.random.default_rng(0), 200_000
    lines = [
        "| mechanism | claimed ε (PLD) | lower bound, claimed noise | lower bound, half the noise |",
        "|---|---|---|---|",
    ]
    delta_w = 0.1
    _, _, lap = logistic.output_laplace_plan(1.0, delta_w, 1, 0.5)
    _, _, gau = logistic.output_gaussian_plan(1.0, DELTA, delta_w, 1, 10.0)
    for name, fn, event, half in (
        ("output_lapl", logistic.laplace_log_weights, lap, LaplaceEvent(lap.scale / 2, lap.l1_sensitivity)),
        ("output_norm", logistic.gaussian_log_weights, gau, GaussianEvent(gau.sigma / 2, gau.l2_sensitivity)),
    ):
        bounds = [
            epsilon_lower_bound(fn(np.zeros(n), e, rng), fn(np.full(n, delta_w), e, rng), DELTA) for e in (event, half)
        ]
        lines.append(f"| {name} | {epsilon_pld([event], DELTA):.3f} | {bounds[0]:.3f} | {bounds[1]:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=["gmm", "bayes", "table1", "audit"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.only:
        t = time.perf_counter()
        if name == "gmm":
            body = gmm_experiment(seeds=5, n=2000)
        elif name == "bayes":
            body = bayes_experiment(seeds=3, n=2000, gammas=[0.0, 0.25, 0.5, 0.75, 1.0])
        elif name == "table1":
            body = (
                table1("breast_cancer", {"epochs": 60}, {"epochs": 10}, 0)
                + "\n\n"
                + table1("adult", {"epochs": 2, "batch_size": 256}, {"epochs": 2, "batch_size": 512}, 0)
            )
        else:
            body = audit_experiment()
        body += f"\n\n(run time {time.perf_counter() - t:.0f} s on 1 core)"
        text = DOC.read_text()
        pattern = re.compile(rf"(<!-- RESULTS {name} -->\n).*?(<!-- /RESULTS {name} -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"{DOC} has no '<!-- RESULTS {name} -->' block")
        text = pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)
        DOC.write_text(text)
        print(f"{name}: done in {time.perf_counter() - t:.0f} s\n{body}", flush=True)


if __name__ == "__main__":
    main()
