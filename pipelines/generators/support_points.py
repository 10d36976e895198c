"""Private support points (Diesendruck thesis, ../shared/papers/diesendruck-iw-gan-support-points-thesis.txt,
chapter 5; design notes and evidence: docs/support-points.md).

Release (ε-DP, pure). A set Ỹ of n points in the encoded cube [0, 1]^d (numerics scaled by the schema's
bounds, one-hot blocks, binaries: the whole encoded vector lies in the cube) drawn from the exponential
mechanism with score −e(X, Ỹ), the energy distance of eq. 5.5 to the N training rows, and sensitivity
Δ = 2d^{1/p}(2N − 1)/N² (eq. 5.10, derived for add/remove-one in `pipelines.privacy.energy`), sampled by
Metropolis-Hastings (eq. 5.20-5.21, `pipelines.privacy.energy_sampler`). Its density peaks at the support
points Y* = argmin_Y e(X, Y) (eq. 5.6), so the release concentrates on Y* as ε grows (§5.7.1.3).
Departure (docs/architecture.md): Algorithm 1 scores against the support points, −e(Ỹ, Y*), with the Δ of
eq. 5.10. Y* is an argmin over all n-point sets and one record can move all of it: with n = 1, d = 1,
p = 1, Y* is the median, and X = {0, 0, 1} → {0, 1, 1} moves it from 0 to 1, changing e(Ỹ, Y*) by 2 > Δ = 10/9
(`tests/test_support_points.py`). The score against the rows themselves is the one whose sensitivity
eq. 5.7-5.10 derives (§5.3.4); with incremental updates a step costs O((N + n)·d), not the O((N + n)²·d)
that motivated §5.4.

Expansion to a full table (§5.6, `expansion`):
- `kde_public`: KDE (eq. 5.37) around Ỹ with the public `bandwidth` (no further access to the rows);
- `kde_laplace`: KDE with the bounded MLE bandwidth + Laplace noise (one LaplaceEvent);
- `kde_exponential`: KDE with a bandwidth drawn by the exponential mechanism over a grid, likelihood as
  score (one PureEpsilonEvent);
- `repeat`: k = `repeats` independent private sets (k PureEpsilonEvents, k·ε_each in total, §5.6.2); sampling
  draws rows from their union.
The bandwidth mechanisms get `bandwidth_share` of ε; the support-point releases share the rest equally
(basic composition, the thesis's kα; the ledger's PLD accountant reports the tighter total).
Sampled rows are projected onto the layout (numerics into [0, 1], one-hot blocks to their argmax, binaries
to 0/1), the decoder's own rule, so `Encoder.decode` maps them to rows that satisfy the schema.

epsilon: inf releases the exact support points Y* (Adam on eq. 5.5, §5.7.1.2) as a NonPrivateEvent.
Convergence (§5.5): `chains` ≥ 4 chains from uniform random starts; the `mh_convergence` gate refuses the
release when the rank-normalised split-R̂ of their energy traces exceeds `rhat_max`. The guarantee stated is
that of the exact exponential mechanism; the traces are computed from the rows and are outside it.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.data.layout import Layout
from pipelines.errors import ParamError
from pipelines.generators.base import Budget, BudgetSession, check_encoded, merge_params, reserve_plan
from pipelines.generators.persistence import load_model, save_model
from pipelines.privacy.bandwidth import (bandwidth_grid, exponential_bandwidth, laplace_bandwidth,
                                         laplace_bandwidth_event, mle_bandwidth)
from pipelines.privacy.energy import check_norm, energy_sensitivity
from pipelines.privacy.energy_sampler import sample_energy_mechanism
from pipelines.privacy.events import Event, NonPrivateEvent, PureEpsilonEvent, event_to_dict
from pipelines.privacy.gates import GateResult
from pipelines.privacy.noise import numpy_noise_rng
from pipelines.progress import report

DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,                  # total ε of every release below; "inf" releases the exact support points
    "delta": 1e-5,                   # used only when fit() gets no budget
    "n_points": 20,                  # n, points per private set (§5.7.2: 5-20 % of N)
    "norm": 2.0,                     # p of the energy distance, in [1, 2]; the thesis uses 2
    "chains": 4,                     # MH chains from uniform random starts (§5.5); >= 4
    "burn_in": 5000,                 # MH steps with step-size adaptation (§5.7.1.3: 5000)
    "steps": 10000,                  # MH steps after burn-in, step size frozen
    "thin": 10,                      # keep every thin-th energy for the R̂ diagnostic
    "target_acceptance": 0.3,        # §5.7.1.3
    "rhat_max": 1.05,                # the gate's bound on split-R̂
    "expansion": "kde_public",       # kde_public | kde_laplace | kde_exponential | repeat (§5.6)
    "bandwidth": 0.05,               # kde_public: the public bandwidth, in encoded units
    "bandwidth_bounds": [0.01, 0.125],  # kde_laplace / kde_exponential: public [σ_lo, σ_hi] (§5.7.1.5: (0, 1/8])
    "bandwidth_grid": 32,            # grid size for the bounded MLE and the exponential mechanism
    "bandwidth_share": 0.1,          # kde_laplace / kde_exponential: the bandwidth's share of ε
    "repeats": 1,                    # repeat: k private sets
    "support_steps": 300,            # epsilon: inf, Adam steps for Y* (§5.7.1.2: 300, lr 0.01)
    "lr": 0.01,
    "seed": 0,                       # sampling from the released model; Y*'s initialisation
    "noise_seed": None,              # DP randomness: None = OS entropy. An integer is for tests only: a
                                     # published noise seed lets anyone replay the chains and voids the guarantee.
}
EXPANSIONS = ("kde_public", "kde_laplace", "kde_exponential", "repeat")


def check_params(params: dict[str, Any]) -> None:
    """The value ranges of a `support_points:` section over DEFAULTS (ParamError, a ValueError, naming the key)."""
    p = params
    try:
        check_norm(p["norm"])
    except ValueError as e:
        raise ParamError("support_points.norm", f"is refused: {e}") from None
    if p["expansion"] not in EXPANSIONS:
        raise ParamError("support_points.expansion", f"must be one of {list(EXPANSIONS)}, got {p['expansion']!r}")
    for key in ("n_points", "chains", "burn_in", "steps", "thin", "repeats", "bandwidth_grid", "support_steps"):
        least = 0 if key == "burn_in" else 1
        if isinstance(p[key], bool) or not isinstance(p[key], int) or p[key] < least:
            raise ParamError(f"support_points.{key}", f"must be an integer >= {least}, got {p[key]!r}")
    if p["chains"] < 4:
        raise ParamError("support_points.chains", f"must be >= 4 (§5.5: the split-R̂ gate compares several chains "
                         f"from random starts), got {p['chains']}")
    if p["steps"] < 4 * p["thin"]:
        raise ParamError("support_points.steps", f"must be at least 4·thin (R̂ needs >= 4 draws per chain), got "
                         f"steps = {p['steps']}, thin = {p['thin']}")
    if not float(p["bandwidth"]) > 0:
        raise ParamError("support_points.bandwidth", f"must be > 0, got {p['bandwidth']}")
    lo, hi = (float(v) for v in p["bandwidth_bounds"])
    if not 0 < lo < hi:
        raise ParamError("support_points.bandwidth_bounds", f"must be [lower, upper] with 0 < lower < upper, "
                         f"got {p['bandwidth_bounds']}")
    for key, low, high in (("bandwidth_share", 0, 1), ("target_acceptance", 0, 1)):
        if not low < float(p[key]) < high:
            raise ParamError(f"support_points.{key}", f"must lie strictly between {low} and {high}, got {p[key]}")
    if not float(p["rhat_max"]) > 1:
        raise ParamError("support_points.rhat_max", f"must exceed 1, got {p['rhat_max']}")


def project_to_layout(x: np.ndarray, layout: Layout) -> np.ndarray:
    """Rows in the encoded domain: numerics clipped into [0, 1], binaries thresholded at 0.5, one-hot blocks
    set to their argmax (the decoder's rule, `Encoder.decode`), float32."""
    out = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    for b in layout.blocks:
        if b.kind == "binary":
            out[:, b.start] = out[:, b.start] >= 0.5
        elif b.kind == "categorical":
            block = np.zeros((len(out), b.width))
            block[np.arange(len(out)), out[:, b.start:b.stop].argmax(1)] = 1.0
            out[:, b.start:b.stop] = block
    return out.astype(np.float32)


def support_points(x: np.ndarray, n_points: int, p: float, steps: int, lr: float, seed: int) -> np.ndarray:
    """Y* = argmin_Y e_{N,n}(X, Y) (eq. 5.6) by Adam (§5.7.1.2), kept in [0, 1]^d; starts at n seeded rows of X
    (sampled with replacement when n > N). Non-private: a function of the rows."""
    import torch
    p = check_norm(p)
    rng = np.random.default_rng(seed)
    xt = torch.as_tensor(np.asarray(x, dtype=np.float64))
    y = torch.nn.Parameter(xt[rng.choice(len(xt), n_points, replace=n_points > len(xt))].clone())
    opt = torch.optim.Adam([y], lr=lr)

    def mean_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # mean ‖a_i − b_j‖_p; cdist's gradient is 0 at a_i = b_j (the diagonal of Y − Y)
        return torch.cdist(a, b, p=p).mean()

    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        (2 * mean_distance(xt, y) - mean_distance(y, y)).backward()   # eq. 5.5 without the constant X–X term
        opt.step()
        with torch.no_grad():
            y.clamp_(0.0, 1.0)
        report("support_points:optimise", step + 1, steps)
    return y.detach().numpy()


class SupportPoints:
    """Private support points generator (module docstring). `params`: the params.yaml section."""

    name = "support_points"

    def __init__(self, layout: Layout, params: dict | None = None, device: str = "cpu") -> None:
        self.layout, self.device = layout, device
        self.params = merge_params(self.name, DEFAULTS, params, phases=())
        check_params(self.params)
        self.points: np.ndarray | None = None     # the release: (k·n, d) in [0, 1]^d
        self.bandwidth: float | None = None
        self.diagnostics: dict[str, Any] = {}
        self.privacy: dict[str, Any] | None = None  # set by plan()

    @property
    def repeats(self) -> int:
        return int(self.params["repeats"]) if self.params["expansion"] == "repeat" else 1

    # -- privacy plan ------------------------------------------------------------------------
    def plan(self, n_rows: int, budget: Budget) -> list[Event]:
        """Data-independent: k exponential-mechanism events of ε_each and, for kde_laplace / kde_exponential,
        the bandwidth event of ε·bandwidth_share. Σ ε = budget.epsilon. ε = inf: one NonPrivateEvent."""
        if n_rows < 1:
            raise ValueError(f"support_points needs at least one training row, got {n_rows}")
        p, k = self.params, self.repeats
        expansion, dim = p["expansion"], self.layout.width
        sensitivity = energy_sensitivity(n_rows, dim, float(p["norm"]))
        if budget.private:
            share = float(p["bandwidth_share"]) if expansion in ("kde_laplace", "kde_exponential") else 0.0
            eps_each, eps_bw = budget.epsilon * (1 - share) / k, budget.epsilon * share
            planned: list[Event] = [PureEpsilonEvent(eps_each, "exponential") for _ in range(k)]
            if expansion == "kde_laplace":
                planned.append(laplace_bandwidth_event(*(float(v) for v in p["bandwidth_bounds"]), eps_bw))
            elif expansion == "kde_exponential":
                planned.append(PureEpsilonEvent(eps_bw, "exponential"))
        else:
            eps_each = eps_bw = None
            planned = [NonPrivateEvent("epsilon: inf (support_points: exact support points Y* and bandwidth MLE)")]
        self.privacy = {"n_rows": n_rows, "epsilon": budget.epsilon, "delta": budget.delta, "dim": dim,
                        "norm": float(p["norm"]), "sensitivity": sensitivity, "epsilon_per_set": eps_each,
                        "epsilon_bandwidth": eps_bw if expansion in ("kde_laplace", "kde_exponential") else 0.0,
                        "sets": k, "expansion": expansion, "events": [event_to_dict(e) for e in planned]}
        return planned

    # -- release -----------------------------------------------------------------------------
    def fit(self, X: Any, session: BudgetSession, budget: Budget | None = None) -> None:
        """Reserve the plan, then draw the private set(s) and bandwidth and record them. X is not read before
        reserve()."""
        planned = reserve_plan(self, len(X), session, budget)
        data = np.asarray(X, dtype=np.float64)
        self._check(data)
        if not math.isfinite(self.privacy["epsilon"]):
            self._fit_exact(data)
            session.record(planned)
            return
        session.record(self._release(data))

    def _check(self, data) -> None:
        check_encoded(self.name, self.layout, data, ", where eq. 5.10's sensitivity does not hold")

    def _release(self, data: np.ndarray) -> list[Event]:
        """The k private sets (one MH run with max(chains, k) chains; chains 0..k−1 are released), then the
        bandwidth. Returns the events actually spent."""
        p, priv = self.params, self.privacy
        rng = numpy_noise_rng(p["noise_seed"], "support_points")
        k = priv["sets"]
        result = sample_energy_mechanism(
            data, int(p["n_points"]), priv["epsilon_per_set"], priv["sensitivity"], priv["norm"], rng,
            chains=max(int(p["chains"]), k), burn_in=int(p["burn_in"]), steps=int(p["steps"]), thin=int(p["thin"]),
            target_acceptance=float(p["target_acceptance"]), phase="support_points:mh", n_ref=priv["n_rows"])
        self.points = result.finals[:k].reshape(-1, data.shape[1])
        self.diagnostics = {"rhat": result.rhat, "ess_bulk": result.ess, "chains": int(result.trace.shape[0]),
                            "draws_per_chain": int(result.trace.shape[1]),
                            "acceptance": result.acceptance.round(4).tolist(),
                            "step_size": result.step_size.round(6).tolist()}
        spent: list[Event] = [PureEpsilonEvent(priv["epsilon_per_set"], "exponential") for _ in range(k)]
        grid = self._grid()
        if p["expansion"] == "kde_laplace":
            self.bandwidth, event = laplace_bandwidth(data, self.points, grid, priv["epsilon_bandwidth"], rng)
            spent.append(event)
        elif p["expansion"] == "kde_exponential":
            self.bandwidth, event = exponential_bandwidth(data, self.points, grid, priv["epsilon_bandwidth"], rng)
            spent.append(event)
        else:
            self.bandwidth = float(p["bandwidth"])
        return spent

    def _fit_exact(self, data: np.ndarray) -> None:
        """epsilon: inf: the exact support points Y* and, for the KDE modes that estimate it, the bounded MLE."""
        p = self.params
        self.points = support_points(data, int(p["n_points"]), float(p["norm"]), int(p["support_steps"]),
                                     float(p["lr"]), int(p["seed"]))
        self.bandwidth = (mle_bandwidth(data, self.points, self._grid())
                          if p["expansion"] in ("kde_laplace", "kde_exponential") else float(p["bandwidth"]))
        self.diagnostics = {}

    def _grid(self) -> np.ndarray:
        lo, hi = (float(v) for v in self.params["bandwidth_bounds"])
        return bandwidth_grid(lo, hi, int(self.params["bandwidth_grid"]))

    # -- gates -------------------------------------------------------------------------------
    def release_gates(self, real_encoded: np.ndarray) -> list[GateResult]:
        """§5.5: refuse the release when the split-R̂ of the chains' energy traces exceeds `rhat_max` (no gate
        for epsilon: inf, which has no chains; the ledger gate handles non-private releases)."""
        if not self.diagnostics:
            return []
        bound = float(self.params["rhat_max"])
        rhat = float(self.diagnostics["rhat"])
        passed = bool(math.isfinite(rhat) and rhat <= bound)
        return [GateResult("mh_convergence", passed, {
            **self.diagnostics, "rhat_max": bound,
            "refused_because": [] if passed else [
                f"the MH chains disagree: split-R̂ = {rhat:.4f} > rhat_max = {bound} (run more burn_in/steps)"],
            "guarantee": (f"ε-DP of the exact exponential mechanism π_X(Ỹ) ∝ exp(−ε·e(X, Ỹ)/(2Δ)) over sets of "
                          f"{self.params['n_points']} points in [0, 1]^{self.layout.width}, ε = "
                          f"{self.privacy['epsilon_per_set']:.6g} per set, Δ = {self.privacy['sensitivity']:.6g} "
                          f"(eq. 5.10). The released set is the final state of a finite Metropolis-Hastings chain, "
                          f"whose law approximates π_X; R̂ is evidence of convergence, not a proof of it."),
            "outside_dp": ("support_points MH convergence gate: split-R̂, ESS, acceptance rates and adapted step "
                           "sizes of the chains' energy traces e(X, Ỹ_t), computed from the real training rows "
                           "during training"),
        })]

    # -- sampling and persistence ------------------------------------------------------------
    def sample(self, n: int, seed: int) -> np.ndarray:
        """n encoded rows (float32, layout order): KDE draws ỹ_j + σz, j uniform, z ~ N(0, I) (eq. 5.37), or for
        `repeat` rows of the union of the private sets; then `project_to_layout`. Post-processing only."""
        if self.points is None:
            raise RuntimeError("support_points: sample() before fit() or load()")
        rng = np.random.default_rng(seed)
        rows = self.points[rng.integers(len(self.points), size=n)]
        if self.params["expansion"] != "repeat":
            rows = rows + self.bandwidth * rng.standard_normal(rows.shape)
        return project_to_layout(rows, self.layout)

    def save(self, directory: Path) -> None:
        """support_points.json: params, layout, privacy plan, the released points and bandwidth, diagnostics."""
        save_model(directory, self, {}, points=None if self.points is None else self.points.tolist(),
                   bandwidth=self.bandwidth, diagnostics=self.diagnostics)

    @classmethod
    def load(cls, directory: Path, device: str = "cpu") -> "SupportPoints":
        return load_model(cls, directory, device, cls._restore_release)

    @staticmethod
    def _restore_release(model: "SupportPoints", meta: dict[str, Any]) -> None:
        """The saved release: points, bandwidth and the chains' diagnostics."""
        model.points = None if meta["points"] is None else np.asarray(meta["points"], dtype=np.float64)
        model.bandwidth = meta["bandwidth"]
        model.diagnostics = meta["diagnostics"]
