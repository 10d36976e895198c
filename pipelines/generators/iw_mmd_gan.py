"""Importance-weighted MMD-GAN (Diesendruck thesis, ../shared/papers/diesendruck-iw-gan-support-points-thesis.txt:
chapter 3, and chapter 4's MMD-GAN architecture; design notes and evidence: docs/iw-mmd-gan.md).

Goal (§3.2): samples from a target P given training rows from a modified M·P, by weighting every real-data term
of the loss with w(x) ∝ 1/M(x) (`iw_weights`: class rebalancing to target proportions, or a regressor
fitted on a public labelled file, §3.3.3), using one of Table 3.1's estimators (`iw_estimators`):
uniform (eq. 3.2), iw (eq. 3.3), sniw (eq. 3.5), miw (eq. 3.4), id (§3.2.5).

Two modes, chosen by ε:

* ε = inf (NON-PRIVATE, planned as a NonPrivateEvent; `privacy["non_private"]` is true in the saved model):
  - kernel `adversarial` (default): MMD-GAN (Li et al. 2017) as in chapter 4: the kernel is a Gaussian mixture on
    the codes of an autoencoder (encoder and decoder 3×100 ELU, bottleneck 64) that the discriminator trains to
    maximise the weighted MMD² (weighted 0.1 in its loss) while reconstructing real and generated rows; the
    generator (3×100 ELU) minimises the weighted MMD² of the codes. RMSProp, learning rate 1e-3. With w ≡ 1 this
    is chapter 4's non-private baseline.
  - kernel `fixed`: §3.3.1's setting, a fixed Gaussian mixture kernel on the rows (no discriminator).
  Every estimator is available; the rows are read at every step.
* ε finite (PRIVATE): the rows enter only through ONE Gaussian release of the importance-weighted random-feature
  kernel mean embedding (`pipelines.privacy.weighted_embedding`; Δ₂ = w_max·√(2k) for sniw, w_max·√k for iw and
  uniform), σ calibrated by the PLD accountant. The generator then minimises the random-feature MMD²
  (1/k)‖μ̃_P − mean_j φ(G(z_j))‖² to the released μ̃_P: post-processing. Available: uniform, iw (public
  normaliser n), sniw (noisy weight total); miw and id need the rows at every step and are refused, as is the
  adversarial kernel (its encoder would be trained on the rows).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from pipelines import progress
from pipelines.data.layout import Layout
from pipelines.errors import ParamError
from pipelines.generators.base import Budget, BudgetSession, check_encoded, merge_params, reserve_plan
from pipelines.generators.heads import OutputHeads
from pipelines.generators.iw_weights import WeightFunction, category_codes, weight_function
from pipelines.generators.iw_estimators import (check_estimator, duplicate_indices, weighted_mean,
                                                weighted_mmd2)
from pipelines.generators.networks import elu, mlp
from pipelines.generators.persistence import load_model, save_model
from pipelines.generators.sampling import sample_rows
from pipelines.privacy.accountant import calibrate_noise_scale
from pipelines.privacy.embeddings import cf_features
from pipelines.privacy.events import Event, NonPrivateEvent, event_to_dict
from pipelines.privacy.noise import numpy_noise_rng
from pipelines.privacy.weighted_embedding import (mean_embedding, random_frequencies, release_weighted_embedding,
                                                  weighted_embedding_event)

DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,                 # finite: one private embedding release; "inf": NON-PRIVATE MMD-GAN
    "delta": 1e-5,                  # used only when fit() gets no budget
    "estimator": "sniw",            # uniform | iw | sniw | miw | id (Table 3.1); private: uniform, iw, sniw
    "weights": None,                # null (w ≡ 1) | {rebalance: {...}} | {regressor: {file}} (iw_weights.py)
    "w_max": None,                  # clip weights to [0, w_max]; null: the weight function's own public bound
    "groups": 8,                    # miw: groups per batch (App. A.3.2: a batch of 128 in 8 groups of 16)
    "kernel": "auto",               # auto (adversarial if ε = inf, else random features) | adversarial | fixed
    "bandwidths": [0.5, 1.0, 2.0],  # fixed / random-feature Gaussian mixture on encoded rows (public, not from data)
    "code_bandwidths": [1.0, 2.0, 4.0, 8.0, 16.0],  # adversarial: mixture on the codes (Li et al. 2017)
    "frequencies": 200,             # k random features of the private release (DP noise in the MMD² grows with k)
    "steps": 500,                   # generator iterations
    "n_critic": 5,                  # adversarial: discriminator iterations per generator iteration (Li et al.)
    "batch_size": 128,
    "lr": 1e-3,                     # RMSProp, generator and discriminator (chapter 4)
    "mmd_weight": 0.1,              # weight of the MMD² in the discriminator loss (chapter 4)
    "latent_dim": 10,
    "hidden": [100, 100, 100],      # generator, encoder and decoder widths, ELU (chapter 4)
    "code_dim": 64,                 # bottleneck (chapter 4)
    "gumbel_tau": 0.2,              # temperature of the relaxed binary / categorical output heads
    "seed": 0,                      # initialisation, frequencies, batches, sampling (public)
    "noise_seed": None,             # DP noise: None = OS entropy; an integer is for tests only
}
PRIVATE_ESTIMATORS = ("uniform", "iw", "sniw")


def check_params(params: dict[str, Any]) -> None:
    """The value ranges of an `iw_mmd_gan:` section over DEFAULTS (ParamError, a ValueError, naming the key)."""
    check_estimator(params["estimator"], params["groups"])
    if params["kernel"] not in ("auto", "adversarial", "fixed"):
        raise ParamError("iw_mmd_gan.kernel", f"must be auto, adversarial or fixed, got {params['kernel']!r}")
    if params["estimator"] == "uniform" and params["weights"] is not None:
        raise ParamError("iw_mmd_gan.weights", "is set, but estimator 'uniform' ignores iw_mmd_gan.weights; set "
                         "weights: null or pick an importance-weighted estimator (iw, sniw, miw, id)")
    w_max = params["w_max"]
    if w_max is not None and not (float(w_max) > 0 and math.isfinite(float(w_max))):
        raise ParamError("iw_mmd_gan.w_max", f"must be null or positive and finite, got {w_max}")
    for key, least in (("steps", 0), ("batch_size", 2), ("frequencies", 1)):
        if int(params[key]) < least:
            raise ParamError(f"iw_mmd_gan.{key}", f"must be >= {least}, got {params[key]}")
FakeSampler = Callable[[int, torch.Generator], torch.Tensor]


class Generator(nn.Module):
    """z ~ N(0, I) → ELU MLP → one output head per layout block (`heads.OutputHeads`)."""

    def __init__(self, layout: Layout, latent_dim: int, hidden: list[int], tau: float) -> None:
        super().__init__()
        self.heads = OutputHeads(layout, tau)
        self.net = mlp([latent_dim, *hidden, layout.width], elu)
        self.latent_dim = latent_dim

    def forward(self, n: int, generator: torch.Generator) -> torch.Tensor:
        z = torch.randn(n, self.latent_dim, generator=generator, device=generator.device)
        return self.heads(self.net(z), self.heads.uniforms(n, generator))


class Autoencoder(nn.Module):
    """MMD-GAN's discriminator: encoder width → hidden → code_dim, decoder back (ELU)."""

    def __init__(self, width: int, hidden: list[int], code_dim: int) -> None:
        super().__init__()
        self.encoder = mlp([width, *hidden, code_dim], elu)
        self.decoder = mlp([code_dim, *reversed(hidden), width], elu)


class RandomFeatureTarget(nn.Module):
    """The private mode's frequencies ω (k, d) and the released (post-processed) mean embedding μ̃_P (2k,)."""

    def __init__(self, freqs: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("freqs", freqs.float())
        self.register_buffer("embedding", torch.zeros(2 * freqs.shape[0]))


def train_weighted_mmd(sample_fake: FakeSampler, parameters: list[nn.Parameter], real: torch.Tensor,
                       w: torch.Tensor, estimator: str, *, steps: int, batch_size: int, lr: float,
                       bandwidths: list[float], groups: int, seed: int, autoencoder: Autoencoder | None = None,
                       n_critic: int = 5, mmd_weight: float = 0.1, label: str = "iw_mmd_gan") -> None:
    """Non-private training with Table 3.1's `estimator` on real rows `real` (weights `w`).

    Fixed kernel (`autoencoder` None): each step minimises weighted_mmd2(x_batch, G(z)) under the Gaussian mixture
    `bandwidths`, over `parameters` (the generator's). Adversarial (MMD-GAN): each generator step follows
    `n_critic` discriminator steps minimising  weighted_mean(‖x − dec(enc x)‖²) + mean ‖y − dec(enc y)‖²
    − mmd_weight·MMD²_w(enc x, enc y), and the generator minimises MMD²_w(enc x, enc G(z)); kernels on the codes
    use `bandwidths`. Real batches are drawn without replacement, from the ⌈w⌉-duplicated rows for `id`."""
    device = real.device
    rng = torch.Generator(device=device).manual_seed(seed)
    pool = torch.as_tensor(duplicate_indices(w.cpu().numpy()) if estimator == "id" else np.arange(len(real)),
                           device=device)
    b = min(batch_size, len(pool))

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        idx = pool[torch.randperm(len(pool), generator=rng, device=device)[:b]]
        return real[idx], w[idx]

    def mmd2(x: torch.Tensor, y: torch.Tensor, wx: torch.Tensor) -> torch.Tensor:
        return weighted_mmd2(estimator, x, y, wx, bandwidths, groups, rng)

    opt_g = torch.optim.RMSprop(parameters, lr=lr)
    opt_d = torch.optim.RMSprop(autoencoder.parameters(), lr=lr) if autoencoder is not None else None
    log = progress.TrainingLog(label, steps)
    for step in range(1, steps + 1):
        if autoencoder is not None:
            for _ in range(n_critic):
                x, wx = batch()
                with torch.no_grad():
                    y = sample_fake(b, rng)
                hx, hy = autoencoder.encoder(x), autoencoder.encoder(y)
                recon = (weighted_mean(estimator, (autoencoder.decoder(hx) - x).pow(2).sum(1), wx)
                         + (autoencoder.decoder(hy) - y).pow(2).sum(1).mean())
                opt_d.zero_grad(set_to_none=True)
                (recon - mmd_weight * mmd2(hx, hy, wx)).backward()
                opt_d.step()
        x, wx = batch()
        y = sample_fake(b, rng)
        if autoencoder is not None:
            x, y = autoencoder.encoder(x), autoencoder.encoder(y)
        loss = mmd2(x, y, wx)
        opt_g.zero_grad(set_to_none=True)
        loss.backward()
        opt_g.step()
        if log.step(step):
            log.line(step, f"  {estimator} MMD² {loss.item():.5f}")


def train_embedding_matching(sample_fake: FakeSampler, parameters: list[nn.Parameter], target: torch.Tensor,
                             freqs: torch.Tensor, *, steps: int, batch_size: int, lr: float, seed: int,
                             label: str = "iw_mmd_gan") -> None:
    """Private mode's post-processing: minimise the random-feature MMD² (1/k)‖μ̃_P − mean_j φ(G(z_j))‖²."""
    rng = torch.Generator(device=target.device).manual_seed(seed)
    opt = torch.optim.RMSprop(parameters, lr=lr)
    k = freqs.shape[0]
    log = progress.TrainingLog(label, steps)
    for step in range(1, steps + 1):
        loss = (target - cf_features(sample_fake(batch_size, rng), freqs).mean(0)).pow(2).sum() / k
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if log.step(step):
            log.line(step, f"  random-feature MMD² {loss.item():.5f}")


class IWMMDGAN:
    """Importance-weighted MMD-GAN (module docstring). `params`: the params.yaml section; DEFAULTS fill gaps."""

    name = "iw_mmd_gan"

    def __init__(self, layout: Layout, params: dict | None = None, device: str = "cpu") -> None:
        self.layout, self.device = layout, device
        self.params = merge_params(self.name, DEFAULTS, params, phases=())
        p = self.params
        check_params(p)
        self._weight_fn: WeightFunction | None = None
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(p["seed"]))
            self.generator = Generator(layout, int(p["latent_dim"]), list(p["hidden"]),
                                       float(p["gumbel_tau"])).to(device)
            self.autoencoder = Autoencoder(layout.width, list(p["hidden"]), int(p["code_dim"])).to(device)
        freqs = random_frequencies(int(p["frequencies"]), layout.width, list(p["bandwidths"]), int(p["seed"]) + 1)
        self.target = RandomFeatureTarget(freqs).to(device)
        self.privacy: dict[str, Any] | None = None  # set by plan()

    @property
    def weight_fn(self) -> WeightFunction:
        """The public weight function (built on first use: a loaded model never needs it)."""
        if self._weight_fn is None:
            self._weight_fn = weight_function(self.params["weights"], self.layout, int(self.params["seed"]))
        return self._weight_fn

    @property
    def w_max(self) -> float:
        """The weights' public bound: the weight function's own, lowered to the `w_max` parameter if given."""
        cap = self.params["w_max"]
        return min(self.weight_fn.bound, math.inf if cap is None else float(cap))

    @property
    def networks(self) -> dict[str, nn.Module]:
        return {"generator": self.generator, "autoencoder": self.autoencoder, "target": self.target}

    # -- privacy plan ------------------------------------------------------------------------
    def plan(self, n_rows: int, budget: Budget) -> list[Event]:
        """One GaussianEvent (the weighted embedding, z from the PLD accountant) if ε is finite, else one
        NonPrivateEvent; refuses estimator/kernel combinations that cannot be private. Data-independent."""
        p, est = self.params, self.params["estimator"]
        k, self_normalised = int(p["frequencies"]), est == "sniw"
        if n_rows < 2:
            raise ValueError(f"iw_mmd_gan needs at least 2 training rows, got {n_rows}")
        if budget.private:
            if est not in PRIVATE_ESTIMATORS:
                raise ValueError(f"iw_mmd_gan.estimator '{est}' needs the training rows at every step and has no "
                                 f"private release; with a finite epsilon use one of {PRIVATE_ESTIMATORS} (the "
                                 f"duplicated embedding of 'id' is 'sniw' with weights ⌈w⌉), or set epsilon: inf "
                                 f"(non-private, released only when privacy.internal_release is true)")
            if p["kernel"] == "adversarial":
                raise ValueError("iw_mmd_gan.kernel 'adversarial' trains the MMD-GAN encoder on the rows and has no "
                                 "private release; with a finite epsilon use kernel: auto or fixed (random features "
                                 "of the fixed Gaussian mixture), or set epsilon: inf")
            w_max = self.w_max if est != "uniform" else 1.0
            z = calibrate_noise_scale(budget.epsilon, budget.delta,
                                      lambda s: [weighted_embedding_event(k, self_normalised, n_rows, w_max, s)])
            planned: list[Event] = [weighted_embedding_event(k, self_normalised, n_rows, w_max, z)]
            kernel = "random_features"
        else:
            kernel = "adversarial" if p["kernel"] == "auto" else p["kernel"]
            z, w_max = 0.0, self.w_max
            planned = [NonPrivateEvent(f"epsilon: inf (iw_mmd_gan: {est} estimator, {kernel} kernel, rows read at "
                                       f"every step)")]
        self.privacy = {"n_rows": n_rows, "epsilon": budget.epsilon, "delta": budget.delta,
                        "non_private": not budget.private, "estimator": est, "kernel": kernel, "frequencies": k,
                        "w_max": w_max, "noise_multiplier": z,
                        "weights": {"kind": self.weight_fn.kind, **self.weight_fn.info},
                        "events": [event_to_dict(e) for e in planned]}
        return planned

    # -- training ----------------------------------------------------------------------------
    def fit(self, X: Any, session: BudgetSession, budget: Budget | None = None) -> None:
        """Reserve the plan, then (private) release the weighted embedding, record it and train on it, or
        (non-private) train on the rows and record. X is not read before reserve()."""
        planned = reserve_plan(self, len(X), session, budget)
        data = np.asarray(X, dtype=np.float32)
        self._check(data)
        priv, p = self.privacy, self.params
        w = torch.as_tensor(np.ones(len(data)) if priv["estimator"] == "uniform"
                            else np.minimum(self.weight_fn(data), priv["w_max"]), device=self.device)  # float64
        real = torch.as_tensor(data, device=self.device)
        del data
        if not priv["non_private"]:
            self_normalised = priv["estimator"] == "sniw"
            sums, event = release_weighted_embedding(real.double(), w, self.target.freqs.double(),
                                                     self_normalised, priv["w_max"], priv["noise_multiplier"],
                                                     numpy_noise_rng(p["noise_seed"], "iw_mmd_gan embedding"),
                                                     n=priv["n_rows"])
            del real, w
            self.target.embedding.copy_(torch.as_tensor(mean_embedding(sums, priv["n_rows"], self_normalised),
                                                        dtype=torch.float32))
            session.record([event])
            self._train_private()
            return
        self.generator.train()
        adversarial = priv["kernel"] == "adversarial"
        train_weighted_mmd(self.generator, list(self.generator.parameters()), real, w.float(), priv["estimator"],
                           steps=int(p["steps"]), batch_size=int(p["batch_size"]), lr=float(p["lr"]),
                           bandwidths=list(p["code_bandwidths"] if adversarial else p["bandwidths"]),
                           groups=int(p["groups"]), seed=int(p["seed"]) + 2,
                           autoencoder=self.autoencoder if adversarial else None, n_critic=int(p["n_critic"]),
                           mmd_weight=float(p["mmd_weight"]))
        self.generator.eval()
        session.record(planned)

    def _train_private(self) -> None:
        p = self.params
        self.generator.train()
        train_embedding_matching(self.generator, list(self.generator.parameters()), self.target.embedding,
                                 self.target.freqs, steps=int(p["steps"]), batch_size=int(p["batch_size"]),
                                 lr=float(p["lr"]), seed=int(p["seed"]) + 2)
        self.generator.eval()

    def _check(self, data) -> None:
        check_encoded(self.name, self.layout, data)

    # -- sampling and persistence ------------------------------------------------------------
    def sample(self, n: int, seed: int) -> np.ndarray:
        """n encoded rows (float32, in [0, 1]); binaries thresholded at 0.5 and categorical blocks one-hot at their
        argmax (exact samples of the relaxed heads' Bernoulli / categorical distributions)."""
        self.generator.eval()
        out = sample_rows(n, self.layout.width, seed, self.device, self.generator)
        for b in self.layout.blocks:
            if b.kind in ("binary", "categorical"):
                codes = category_codes(out, b)
                out[:, b.start:b.stop] = codes[:, None] if b.kind == "binary" else np.eye(b.width)[codes]
        return out.astype(np.float32)

    def save(self, directory: Path) -> None:
        """Write generator.pt, autoencoder.pt, target.pt (frequencies and the DP release) and iw_mmd_gan.json;
        the JSON's privacy.non_private labels a non-private model."""
        save_model(directory, self, self.networks,
                   non_private=bool(self.privacy and self.privacy["non_private"]))

    @classmethod
    def load(cls, directory: Path, device: str = "cpu") -> "IWMMDGAN":
        return load_model(cls, directory, device)
