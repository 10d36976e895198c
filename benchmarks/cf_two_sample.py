"""The demonstration of PEARL §4 / appendix C (Figure 2): re-weighting a fixed set of frequencies, without
drawing new ones, raises the power of a characteristic-function two-sample test.

Test: the weighted empirical CFD (eq. 7 with weights w, the objective PEARL's critic maximises),
    T_w = Σ_j w_j |φ̂_X(ω_j) − φ̂_Y(ω_j)|²,
with a permutation null (the pooled sample's labels shuffled; p = (1 + #{T_w^π ≥ T_w}) / (1 + P), an
exact level-α test for any fixed w). Data: P = N(0, I_d) and Q = N(shift·e₁, I_d), n samples each.

Frequency sets (k each, entries N(0, 1); App. C): "unoptimized": every frequency has first coordinate
0 except ω*, which is non-zero only there (ω* = (u, 0, …, 0), the most discriminative direction; the
reading under which the paper's claims hold, docs/pearl.md); "normal": all entries random;
"optimized": the unoptimized set re-weighted onto ω* (App. C's oracle weights). Ours in addition:
"critic": the unoptimized set with the weights of PEARL's parametric critic (`FrequencyCritic`, proposal
N(0, I)), fitted by maximising T_w on an independent pilot sample, then frozen for the tests.
"""

from __future__ import annotations

import numpy as np
import torch

from pipelines.generators.pearl import FrequencyCritic, weighted_cfd
from pipelines.generators.mechanisms.embeddings import cf_features

SETS = ("unoptimized", "normal", "optimized", "critic")


def _features(x: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    return cf_features(torch.as_tensor(x), torch.as_tensor(freqs)).numpy()


def permutation_rejects(
    x: np.ndarray, y: np.ndarray, freqs: np.ndarray, weights: np.ndarray, signs: np.ndarray, alpha: float = 0.05
) -> bool:
    """Reject H₀: P = Q at level α by T_w against its permutation null. `signs` (P, n_x + n_y) holds
    ±1/n per pooled row for each permutation (+ for the rows playing X)."""
    pooled = _features(np.vstack([x, y]), freqs)
    w = np.concatenate([weights, weights])
    observed = (w * (pooled[: len(x)].mean(0) - pooled[len(x) :].mean(0)) ** 2).sum()
    null = ((signs @ pooled) ** 2 * w).sum(1)
    return (1 + np.sum(null >= observed)) / (1 + len(signs)) <= alpha


def appendix_c_frequencies(d: int, k: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The unoptimized and normal frequency sets (k, d) of the module docstring."""
    unoptimized = rng.standard_normal((k, d))
    unoptimized[1:, 0] = 0.0
    unoptimized[0, 1:] = 0.0
    return {"unoptimized": unoptimized, "normal": rng.standard_normal((k, d))}


def critic_weights(x: np.ndarray, y: np.ndarray, freqs: np.ndarray, steps: int = 300, lr: float = 0.01) -> np.ndarray:
    """Lemma 1 weights of the critic's N(0, diag e^{2β}) maximising T_w(x, y) over β from β = 0 (w = 1/k),
    without PEARL's effective-sample-size floor: App. C's optimum is a single frequency."""
    critic = FrequencyCritic(torch.as_tensor(freqs, dtype=torch.float32))
    f = torch.as_tensor(freqs, dtype=torch.float32)
    disc = weighted_cfd(
        cf_features(torch.as_tensor(x, dtype=torch.float32), f).mean(0, keepdim=True),
        cf_features(torch.as_tensor(y, dtype=torch.float32), f).mean(0, keepdim=True),
        torch.ones(1),
    )
    opt = torch.optim.Adam(critic.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        (-(critic.weights() * disc).sum()).backward()
        opt.step()
    return critic.weights().detach().numpy().astype(float)


def rejection_rates(
    d: int,
    k: int = 20,
    n: int = 1000,
    trials: int = 100,
    permutations: int = 200,
    shift: float = 1.0,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, float]:
    """Fraction of `trials` in which each set of `SETS` rejects; one draw of the frequencies and of the
    critic's pilot sample per call, fresh samples (shared by all sets) per trial."""
    rng = np.random.default_rng(seed)
    mean = np.zeros(d)
    mean[0] = shift

    def draw() -> tuple[np.ndarray, np.ndarray]:
        return rng.standard_normal((n, d)), rng.standard_normal((n, d)) + mean

    sets = appendix_c_frequencies(d, k, rng)
    uniform = np.full(k, 1 / k)
    weighted = {
        "unoptimized": (sets["unoptimized"], uniform),
        "normal": (sets["normal"], uniform),
        "optimized": (sets["unoptimized"], np.eye(k)[0]),
        "critic": (sets["unoptimized"], critic_weights(*draw(), sets["unoptimized"])),
    }
    labels = np.concatenate([np.full(n, 1.0 / n), np.full(n, -1.0 / n)])
    hits = dict.fromkeys(SETS, 0)
    for _ in range(trials):
        x, y = draw()
        signs = rng.permuted(np.tile(labels, (permutations, 1)), axis=1)
        for name, (freqs, w) in weighted.items():
            hits[name] += permutation_rejects(x, y, freqs, w, signs, alpha)
    return {name: hits[name] / trials for name in SETS}
