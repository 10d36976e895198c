"""The likelihood-ratio classifier MLP trained with the relaxed DP-SGD of Algorithm 1 (priv_mlp), or
without privacy (mlp: C = ∞, σ = 0, the same loop). Paper §3.4, Algorithm 1, Proposition 2.

Algorithm 1. Private rows x_1..x_{N_D} (label 1) and public synthetic rows (label 0, already private as
post-processing of the generator). Each step draws a Poisson lot: every row, private or synthetic, is
included independently with probability q = L/(N_D + N_G). The gradient is

    ḡ_t = ( Σ_{i ∈ lot, private} clip_C(g_i) + N(0, σ²C² I) + Σ_{j ∈ lot, synthetic} clip_C(g_j) ) / (q (N_D + N_G))

(one Gaussian draw for the lot, as in Abadi et al.; the divisor is the public expected lot size).

Proposition 2, derived for the ledger's relation (add/remove one PRIVATE row x*). Fix the parameters
θ_t (a function of earlier, already-accounted outputs). The synthetic rows, their labels and their lot
membership are identical under D and D' = D ∪ {x*}, so their clipped sum S_syn is the same vector
under both; the private sum differs only by x*'s term, present with probability q, and that term has
norm ≤ C after clipping. So the step's output is M(D) + S_syn with M the Poisson-subsampled Gaussian
mechanism on the private rows (sensitivity C, noise σC, inclusion probability q); adding the same
data-independent vector to both outputs is post-processing. Hence T steps are exactly
PoissonGaussianEvent(σ, q, T), which the PLD accountant composes (tighter than the moments accountant).
What this needs and what it does not:
  - the private rows' gradients must be clipped, and the sampling probability that matters is the
    private row's inclusion probability q = L/(N_D + N_G) (the synthetic rows do not dilute it: q is
    a property of the sampler, not of the lot's composition);
  - the synthetic rows' gradients need NOT be clipped for privacy (they are identical in both
    neighbours). We clip them to C anyway, as the paper does, so that each class's rows pull with
    comparable force (paper: "otherwise their influence will be over-proportional");
  - the noise must NOT depend on the realised number of private rows in the lot (Algorithm 1 as
    printed adds N(0, σ²C²) per private example, a noise variance that reveals the private lot size);
    one draw per lot, as here, is what the subsampled-Gaussian analysis assumes;
  - the lot's randomness (which private rows are drawn) must be secret: it comes from the noise
    generator (OS entropy), not the public seed.
The paper's per-lot claim "(ε, δ)-DP with σ = √(2 log(1.25/δ))/ε" is the classical Gaussian mechanism
bound (Dwork & Roth Thm. A.1, valid for ε < 1), and "O(qε) w.r.t. the data set" is amplification by
subsampling, ε' = log(1 + q(e^ε − 1)) with δ' = qδ; tests/test_weights.py checks both against the PLD
of PoissonGaussianEvent(σ, q, 1) and audits one step empirically.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from pipelines.generators.networks import initialise
from pipelines.io import MatrixFile, blockwise
from pipelines.privacy.dpsgd import Rng, clip_and_noise, clip_per_example, per_example_grads, poisson_sample, summed


def classifier(width: int, hidden: list[int]) -> nn.Sequential:
    """Logit network: Linear → ReLU blocks ("two dense layers and ReLU", §4), then Linear → 1."""
    layers: list[nn.Module] = []
    for a, b in zip([width, *hidden[:-1]], hidden):
        layers += [nn.Linear(a, b), nn.ReLU()]
    layers.append(nn.Linear(hidden[-1] if hidden else width, 1))
    return nn.Sequential(*layers)


def _lot_loss(forward, x: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """Σ_rows cross-entropy: −log σ(f(x)) for a private row (label 1), −log(1 − σ(f(x))) for a synthetic one (0)."""
    return nn.functional.softplus((1 - 2 * label) * forward(x).squeeze(-1)).sum()


def relaxed_dpsgd_gradient(
    model: nn.Module,
    real: torch.Tensor,
    synthetic: torch.Tensor,
    clip_norm: float,
    noise_multiplier: float,
    expected_lot: float,
    noise: Rng,
    draws: int | None = None,
) -> dict[str, torch.Tensor]:
    """ḡ_t of Algorithm 1 for one lot (module docstring): private terms through `clip_and_noise`
    (sensitivity C, noise σC), synthetic terms clipped to C and added without noise; both from one pass over the
    lot. `draws` repeats the noise draw (audits)."""
    b = real.shape[0]
    label = torch.cat([real.new_ones(b), synthetic.new_zeros(synthetic.shape[0])])
    rows = clip_per_example(per_example_grads(model, _lot_loss, torch.cat([real, synthetic]), label), clip_norm)
    private = clip_and_noise(rows.select(slice(0, b)), clip_norm, noise_multiplier, expected_lot, noise, draws=draws)
    public = summed(rows.select(slice(b, None)))
    return {k: private[k] + public[k] / expected_lot for k in private}


def train_classifier(
    real: np.ndarray | MatrixFile,
    synthetic: np.ndarray | MatrixFile,
    params: Any,
    sample_rate: float,
    steps: int,
    noise_multiplier: float,
    clip_norm: float,
    noise: Rng,
    device: str = "cpu",
    n_real: int | None = None,
) -> nn.Module:
    """`steps` lots of Algorithm 1 with SGD at `params.lr`; returns the logit network f (eval mode).

    Lots are Poisson-sampled over the actual rows; the divisor is the data-independent expected lot size
    q·(N_D + N_G) with N_D = `n_real`, the public training row count n̂ (None: len(real), when it is public).
    Each lot's rows are taken from `real` and `synthetic` (arrays, or `io.MatrixFile`s read by row from disk: the
    same rows, so the same steps) as float32.

    Private lots and noise use `noise` (secret); the synthetic lots and initialisation use params.seed.
    """
    seed = int(params.seed)
    model = initialise(classifier(real.shape[1], list(params.hidden)), seed).to(device)
    public = np.random.default_rng(seed + 1)  # the synthetic lots: public rows, a public seed
    expected = sample_rate * ((len(real) if n_real is None else n_real) + len(synthetic))
    opt = torch.optim.SGD(model.parameters(), lr=float(params.lr), momentum=float(params.momentum))
    named = dict(model.named_parameters())

    def lot(rows: np.ndarray | MatrixFile, generator: Rng | np.random.Generator) -> torch.Tensor:
        taken = rows.take(poisson_sample(len(rows), sample_rate, generator).cpu().numpy(), axis=0)
        return torch.as_tensor(taken, dtype=torch.float32, device=device)

    for _ in range(steps):
        lot_real, lot_syn = lot(real, noise), lot(synthetic, public)
        grads = relaxed_dpsgd_gradient(model, lot_real, lot_syn, clip_norm, noise_multiplier, expected, noise)
        for name, p in named.items():
            p.grad = grads[name]
        opt.step()
    return model.eval()


def logits(model: nn.Module, rows: np.ndarray | MatrixFile, device: str = "cpu") -> np.ndarray:
    """f(x) of every row, a block of rows at a time (`io.blockwise`): memory of one block, whatever the rows."""

    def score(block: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return model(torch.as_tensor(block, dtype=torch.float32, device=device)).squeeze(-1).cpu().double().numpy()

    return blockwise(score, rows)
