"""Private support points (Diesendruck thesis, ../shared/papers/diesendruck-iw-gan-support-points-thesis.txt,
chapter 5; design notes and evidence: docs/support-points.md).

Release (a heuristic ε: the exact mechanism is pure ε-DP, the released sample is not exact). A set Ỹ of n points
in the encoded cube [0, 1]^d (numerics scaled by the schema's bounds, one-hot blocks, binaries: the whole encoded
vector lies in the cube) drawn from the exponential mechanism with score −e(X, Ỹ), the energy distance of
eq. 5.5 to the N training rows, and sensitivity Δ = 2d^{1/p}(2N − 1)/N² (eq. 5.10, derived for add/remove-one in
`pipelines.stats.energy`), sampled by Metropolis-Hastings (eq. 5.20-5.21,
`pipelines.generators.mechanisms.energy_sampler`) and
recorded as `PureEpsilonEvent(ε, MCMC_EXPONENTIAL)`: the exact mechanism's ε, which holds only for an exact sample,
while the released set is the last state of a finite chain with no proven mixing bound. Every release says so
(`outside_dp.MCMC_HEURISTIC`, the ledger gate's label), and `release.select: auto` / `private` refuse to pick it
unless `accept_heuristic` is true (pipelines/selection.py). Its density peaks at the support points
Y* = argmin_Y e(X, Y) (eq. 5.6), so the release concentrates on Y* as ε grows (§5.7.1.3).
Departure (docs/architecture.md): Algorithm 1 scores against the support points, −e(Ỹ, Y*), with the Δ of
eq. 5.10. Y* is an argmin over all n-point sets and one record can move all of it: with n = 1, d = 1,
p = 1, Y* is the median, and X = {0, 0, 1} → {0, 1, 1} moves it from 0 to 1, changing e(Ỹ, Y*) by 2 > Δ = 10/9
(`tests/test_support_points.py`). The score against the rows themselves is the one whose sensitivity
eq. 5.7-5.10 derives (§5.3.4); with incremental updates a step costs O((N + n)·d), not the O((N + n)²·d)
that motivated §5.4.

Expansion to a full table (§5.6, `expansion`):
- `kde_public`: KDE (eq. 5.37) around Ỹ with the public `bandwidth` (no further access to the rows);
- `kde_laplace`: KDE with the bounded MLE bandwidth + discrete Laplace noise on a lattice (one DiscreteLaplaceEvent);
- `kde_exponential`: KDE with a bandwidth drawn by the exponential mechanism over a grid, likelihood as
  score (one PureEpsilonEvent);
- `repeat`: k = `repeats` independent private sets (k PureEpsilonEvents, k·ε_each in total, §5.6.2); sampling
  draws rows from their union.
The bandwidth mechanisms get `bandwidth_share` of ε; the support-point releases share the rest equally
(basic composition, the thesis's kα; the ledger's PLD accountant reports the tighter total).
Sampled rows are projected onto the layout (numerics into [0, 1], one-hot blocks to their argmax, binaries
to 0/1), the decoder's own rule, so `Encoder.decode` maps them to rows that satisfy the schema.

epsilon: inf releases the exact support points Y* (Adam on eq. 5.5, §5.7.1.2) as a NonPrivateEvent.
Convergence (§5.5): `chains` ≥ 4 chains from uniform random starts; the `mh_convergence` gate fails when the
rank-normalised split-R̂ of their energy traces exceeds `rhat_max`. It reads real rows outside DP, so it refuses the
release only under `release.non_dp_gates: refuse` (under the default `advise` it is a steward's finding), and a
passing R̂ is evidence of convergence, not a proof: the guarantee stays heuristic either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.mechanisms.bandwidth import (
    bandwidth_grid,
    exponential_bandwidth,
    laplace_bandwidth,
    laplace_bandwidth_event,
    mle_bandwidth,
)
from pipelines.stats.energy import check_norm, energy_sensitivity
from pipelines.generators.mechanisms.energy_sampler import sample_energy_mechanism
from pipelines.privacy.events import MCMC_EXPONENTIAL, Event, NonPrivateEvent, PureEpsilonEvent
from pipelines.gates.release import GateResult
from pipelines.gates.support_points import mh_convergence_gate
from pipelines.privacy.noise import Streams
from pipelines.privacy.plan import PrivacyPlan
from pipelines.progress import report


@dataclass(frozen=True, kw_only=True)
class SupportPointsPlan(PrivacyPlan):
    """The release's spend: `sets` (k) exponential-mechanism sets of `epsilon_per_set` each, scored with the
    sensitivity Δ = 2d^{1/p}(2n̂ − 1)/n̂² of eq. 5.10 (d = `dim`, p = `norm`), and the bandwidth mechanism's
    `epsilon_bandwidth` (0 unless kde_laplace / kde_exponential). ε = inf: `epsilon_per_set` is None, and so is
    `epsilon_bandwidth` for the KDE modes that estimate a bandwidth."""

    dim: int
    norm: float
    sensitivity: float
    epsilon_per_set: float | None
    epsilon_bandwidth: float | None
    sets: int
    expansion: str
    kind: ClassVar[str] = "support_points"


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
        (2 * mean_distance(xt, y) - mean_distance(y, y)).backward()  # eq. 5.5 without the constant X–X term
        opt.step()
        with torch.no_grad():
            y.clamp_(0.0, 1.0)
        report("support_points:optimise", step + 1, steps)
    return y.detach().numpy()


class SupportPoints(PrivateGenerator):
    """Private support points generator (module docstring). `params`: the params.yaml section over
    `pipelines.generators.params.support_points.Params`."""

    name = "support_points"
    input_note = ", where eq. 5.10's sensitivity does not hold"

    def build(self) -> None:
        self.points: np.ndarray | None = None  # the release: (k·n, d) in [0, 1]^d
        self.bandwidth: float | None = None
        self.diagnostics: dict[str, Any] = {}

    @property
    def repeats(self) -> int:
        return int(self.params.repeats) if self.params.expansion == "repeat" else 1

    # -- privacy plan ------------------------------------------------------------------------
    def _plan(self, n_rows: int, budget: Budget) -> SupportPointsPlan:
        """Data-independent: k exponential-mechanism events of ε_each and, for kde_laplace / kde_exponential,
        the bandwidth event of ε·bandwidth_share. Σ ε = budget.epsilon. ε = inf: one NonPrivateEvent."""
        p, k = self.params, self.repeats
        expansion, dim = p.expansion, self.layout.width
        kde_bandwidth = expansion in ("kde_laplace", "kde_exponential")
        if budget.private:
            share = float(p.bandwidth_share) if kde_bandwidth else 0.0
            eps_each, eps_bw = budget.epsilon * (1 - share) / k, budget.epsilon * share
            planned: list[Event] = [PureEpsilonEvent(eps_each, MCMC_EXPONENTIAL) for _ in range(k)]
            if expansion == "kde_laplace":
                planned.append(laplace_bandwidth_event(*(float(v) for v in p.bandwidth_bounds), eps_bw))
            elif expansion == "kde_exponential":
                planned.append(PureEpsilonEvent(eps_bw, "exponential"))
        else:
            eps_each = eps_bw = None
            planned = [NonPrivateEvent("epsilon: inf (support_points: exact support points Y* and bandwidth MLE)")]
        return SupportPointsPlan(
            n_rows=n_rows,
            epsilon=budget.epsilon,
            delta=budget.delta,
            events=tuple(planned),
            dim=dim,
            norm=float(p.norm),
            sensitivity=energy_sensitivity(n_rows, dim, float(p.norm)),
            epsilon_per_set=eps_each,
            epsilon_bandwidth=eps_bw if kde_bandwidth else 0.0,
            sets=k,
            expansion=expansion,
        )

    # -- release -----------------------------------------------------------------------------
    def _fit(self, data: np.ndarray, streams: Streams) -> Sequence[Event]:
        """The private set(s) and bandwidth (`_release`), or for ε = inf the exact support points; the events
        actually spent."""
        data = data.astype(np.float64)
        if not self.privacy.private:
            self._fit_exact(data)
            return self.privacy.events
        return self._release(data, streams.numpy(self.name))

    def _release(self, data: np.ndarray, rng: np.random.Generator) -> list[Event]:
        """The k private sets (one MH run with max(chains, k) chains; chains 0..k−1 are released), then the
        bandwidth, all drawn from the noise stream `rng`. Returns the events actually spent."""
        p, plan = self.params, self.privacy
        k = plan.sets
        result = sample_energy_mechanism(
            data,
            int(p.n_points),
            plan.epsilon_per_set,
            plan.sensitivity,
            plan.norm,
            rng,
            chains=max(int(p.chains), k),
            burn_in=int(p.burn_in),
            steps=int(p.steps),
            thin=int(p.thin),
            target_acceptance=float(p.target_acceptance),
            phase="support_points:mh",
            n_ref=plan.n_rows,
        )
        self.points = result.finals[:k].reshape(-1, data.shape[1])
        self.diagnostics = {
            "rhat": result.rhat,
            "ess_bulk": result.ess,
            "chains": int(result.trace.shape[0]),
            "draws_per_chain": int(result.trace.shape[1]),
            "acceptance": result.acceptance.round(4).tolist(),
            "step_size": result.step_size.round(6).tolist(),
        }
        spent: list[Event] = [PureEpsilonEvent(plan.epsilon_per_set, MCMC_EXPONENTIAL) for _ in range(k)]
        grid = self._grid()
        if p.expansion == "kde_laplace":
            self.bandwidth, event = laplace_bandwidth(data, self.points, grid, plan.epsilon_bandwidth, rng)
            spent.append(event)
        elif p.expansion == "kde_exponential":
            self.bandwidth, event = exponential_bandwidth(data, self.points, grid, plan.epsilon_bandwidth, rng)
            spent.append(event)
        else:
            self.bandwidth = float(p.bandwidth)
        return spent

    def _fit_exact(self, data: np.ndarray) -> None:
        """epsilon: inf: the exact support points Y* and, for the KDE modes that estimate it, the bounded MLE."""
        p = self.params
        self.points = support_points(
            data, int(p.n_points), float(p.norm), int(p.support_steps), float(p.lr), int(p.seed)
        )
        self.bandwidth = (
            mle_bandwidth(data, self.points, self._grid())
            if p.expansion in ("kde_laplace", "kde_exponential")
            else float(p.bandwidth)
        )
        self.diagnostics = {}

    def _grid(self) -> np.ndarray:
        lo, hi = (float(v) for v in self.params.bandwidth_bounds)
        return bandwidth_grid(lo, hi, int(self.params.bandwidth_grid))

    # -- gates -------------------------------------------------------------------------------
    def release_gates(self, real_encoded: Any) -> list[GateResult]:
        """§5.5: fail when the split-R̂ of the chains' energy traces exceeds `rhat_max` (it decides publication
        only under `release.non_dp_gates: refuse`; no gate for epsilon: inf, which has no chains; the ledger gate
        handles non-private releases): `gates.support_points.mh_convergence_gate`."""
        if not self.diagnostics:
            return []
        return [
            mh_convergence_gate(
                self.diagnostics,
                self.params.rhat_max,
                self.params.n_points,
                self.layout.width,
                self.privacy.epsilon_per_set,
                self.privacy.sensitivity,
            )
        ]

    # -- sampling and persistence ------------------------------------------------------------
    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n rows: KDE draws ỹ_j + σz, j uniform, z ~ N(0, I) (eq. 5.37), or for `repeat` rows of the union of
        the private sets (`sample` projects them onto the layout). Post-processing only."""
        if self.points is None:
            raise RuntimeError("support_points: sample() before fit() or load()")
        rows = self.points[rng.integers(len(self.points), size=n)]
        if self.params.expansion != "repeat":
            rows = rows + self.bandwidth * rng.standard_normal(rows.shape)
        return rows

    def _state(self) -> dict[str, Any]:
        """The release: the points, the bandwidth and the chains' diagnostics (for the gate)."""
        return {
            "points": None if self.points is None else self.points.tolist(),
            "bandwidth": self.bandwidth,
            "diagnostics": self.diagnostics,
        }

    def _restore(self, state: dict[str, Any]) -> None:
        self.points = None if state["points"] is None else np.asarray(state["points"], dtype=np.float64)
        self.bandwidth = state["bandwidth"]
        self.diagnostics = state["diagnostics"]
