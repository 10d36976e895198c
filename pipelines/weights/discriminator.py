"""Weights from an already-released GAN critic (paper §3.4, "Discriminator weights of GANs"): post-processing
of a DP model, so no privacy budget and no ledger event.

Which generators offer one, and the mapping from critic output to a density ratio:

- A classifier discriminator D(x) = σ(d(x)) (the paper's DPGAN / PATE-GAN): eq. (1) gives
  log w(x) = d(x) − log(N_D/N_G) at the optimum. None of this project's generators has one.
- `dpwgan`'s WGAN-GP critic D (pipelines.generators.wgan) is not a probability: it maximises
  E_{p_D}[D] − E_{p_G}[D] over (approximately, by the gradient penalty) 1-Lipschitz D. We use
  log w(x) = D(x)/T − log mean_j exp(D(x_j)/T), i.e. w ∝ exp(D/T) self-normalised over the synthetic
  rows, with T = `critic_temperature`. Why: the Donsker-Varadhan dual of KL(p_D ‖ p_G),
  sup_f E_{p_D}[f] − log E_{p_G}[e^f], is maximised exactly by f* = log(p_D/p_G) + c; its objective
  equals the WGAN critic objective E_{p_D}[f] − E_{p_G}[f] up to the cumulant term log E e^f − E f
  (= Var_{p_G}(f)/2 + …), so a WGAN critic is the DV-optimal log-ratio only to first order, and only
  within the Lipschitz class (Che et al. 2020 use the same p_G·e^{D} correction for WGANs). This is a
  heuristic, not a consistent ratio estimator; the PSIS k̂ gate and the weighted analyses judge it.
- `dp_auto_gan`'s critic scores latent codes through a frozen decoder, `ppem`'s energies are margin-loss
  energies and `pearl` has no discriminator on rows: none maps to p_D/p_G on released rows, so the
  `discriminator` estimator refuses them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
from scipy.special import logsumexp

CRITIC_GENERATORS = ("dpwgan",)


def critic_scorer(generator: str, model_dir: Path) -> Callable[[np.ndarray], np.ndarray]:
    """D(x) of `generator`'s released critic on encoded rows, or a ValueError naming the generators
    that have one."""
    if generator not in CRITIC_GENERATORS:
        raise ValueError(
            f"weights.estimator 'discriminator' needs a generator with a WGAN critic on rows "
            f"({', '.join(CRITIC_GENERATORS)}); '{generator}' has none (see "
            f"pipelines/weights/discriminator.py)"
        )
    import torch

    from pipelines.generators.dpwgan import DPWGAN

    critic = DPWGAN.load(Path(model_dir)).critic

    def score(rows: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return critic(torch.as_tensor(rows, dtype=torch.float32)).double().numpy()

    return score


def critic_log_weights(scores: np.ndarray, temperature: float) -> np.ndarray:
    """log w = D/T − log mean exp(D/T) (module docstring): mean-one weights over the scored rows."""
    if not temperature > 0:
        raise ValueError(f"critic_temperature must be positive, got {temperature}")
    z = np.asarray(scores, dtype=float) / temperature
    return z - (logsumexp(z) - np.log(len(z)))
