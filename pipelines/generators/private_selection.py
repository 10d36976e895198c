"""Private selection from private candidates (`release.select: private`): the best of a random number of trials.

Liu & Talwar 2019 ("Private selection from private candidates", STOC) and Papernot & Steinke 2022
("Hyperparameter tuning with Rényi differential privacy", ICLR), Algorithm 1 with the truncated negative binomial
of shape η = 0 (the logarithmic law, whose Theorem 2 cost is the smallest of the family at a given mean):

    T ~ Logarithmic(γ), E[T] = μ, on {1, 2, ...}            (drawn exactly and secretly: mechanisms/repeat_select.py)
    for t = 1..T:  k_t ~ w                                   (exactly; w public: `candidate_weights`)
                   G_t = candidate k_t trained on D at ε_g   (its own plan and mechanisms)
                   s_t = q(D; S_t) + Lap_ℤ(Δ/ε_s)            (S_t: n̂ rows of G_t, pipelines/marginal/score.py:
                                                              marginal error + |W| x real rows S_t mislabels)
    publish G_t* for t* = argmin_t s_t; nothing else (not T, not the other trials, not their scores).

The candidates' weights w are public and fixed before any row is read: with `favour_rule` (the default) the public
rule's choice among them (pipelines/selection.py, the first in its order) runs in half the trials and the others
share the other half, so the generator the sweep found best on most tables is tried in a run with probability
1 − E[2^−T] = 1 − ln(1 − (1 − γ)/2)/ln γ = 0.71 at μ = 3, not 0.56 as under uniform weights with three candidates
(1 − E[(2/3)^T]; when it is never tried, the best of the others is published); `favour_rule: false` draws them
uniformly.

Privacy (`RepeatAndSelectEvent`, pipelines/privacy/accountant.py `selection_rdp`). One trial Q is a mixture with
public weights w_k of "train candidate k, then score it": each component is the composition of the candidate's
planned events and the score's discrete Laplace, and the mixture's RDP at each order is at most the largest
component's (joint quasi-convexity of Rényi divergence). Papernot & Steinke's Theorem 2 bounds the RDP of
publishing the best of T trials from Q's RDP curve; the ledger records that one event, planned before any row is
read (`_plan`: the per-trial ε x, ε_g = (1 − score_share)·x and ε_s = score_share·x, is the largest for which the
selection's RDP-converted ε at δ, an upper bound on the ledger's PLD figure, is within the budget). The number of
trials is the only data-independent cost driver: the expected training time is μ times a candidate's.

`trials: each` runs every candidate once instead, in order, at the same per-candidate split, and publishes the one
with the lowest noisy score (`repeat_select.best_of_each`; ties: the earlier). Nothing is random but the noise, so
its guarantee is the plain composition of every candidate's planned events and its score's discrete Laplace (no
theorem beyond composition: the argmin and the winner's table are post-processing of the K private outputs), fixed
before any row is read and charged as those events, which the ledger's PLD composes with the rest of the release.
For a few candidates whose mechanisms compose sub-linearly (Gaussian, zCDP, DP-SGD) this buys more than random
stopping: on the bundled table at ε 0.846 with [aim, mst, pearl] each candidate trains at 0.31 (score_share 0.25),
against a random trial's 0.36, and every candidate is trained, where a random run never tries a given non-favoured
candidate with probability E[(3/4)^T] = 0.53 at μ = 3. For many candidates random stopping costs less: its price
does not grow with K.

This is scikit-learn's meta-estimator shape (GridSearchCV's `best_estimator_`): the selection is one generator
whose fitted state is the winning candidate (`winner`), which it samples from, saves under `selected/` and whose
own release gates it runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from pipelines.config import allocated_section
from pipelines.gates.release import GateResult
from pipelines.generators.base import Budget, PrivateGenerator
from pipelines.generators.registry import load_generator, make_generator
from pipelines.marginal.score import QualityScore
from pipelines.privacy.accountant import epsilon_pld, epsilon_rdp, smallest_satisfying
from pipelines.privacy.events import LOGARITHMIC_SHAPE, Event, NonPrivateEvent, RepeatAndSelectEvent
from pipelines.privacy.noise import Streams
from pipelines.privacy.plan import PrivacyPlan
from pipelines.generators.mechanisms.repeat_select import best_of_each, best_of_trials, trial_law
from pipelines.selection import rule_choice

WINNER_DIR = "selected"  # the winning candidate's own saved model, inside the selection's directory
TRIAL_RTOL = 1e-3  # the per-trial ε is within 0.1 % below the largest the budget allows


@dataclass(frozen=True, kw_only=True)
class SelectionPlan(PrivacyPlan):
    """The selection's plan: its one RepeatAndSelectEvent, the per-trial ε (`trial_epsilon` x: candidates train at
    (1 − score_share)·x, the score is released at score_share·x) and the candidates in event order."""

    trial_epsilon: float
    candidates: tuple[str, ...]
    kind: ClassVar[str] = "private_selection"

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", tuple(self.candidates))  # a JSON list read back (plan_from_dict)


class _Trial:
    """The ledger session a trial's candidate sees: it reserves and records nothing, because the selection's
    plan already reserved the whole selection (one RepeatAndSelectEvent); it keeps what the candidate spent."""

    def __init__(self) -> None:
        self.spent: list[Event] = []

    def reserve(self, events: list[Event]) -> None:
        pass

    def record(self, events: list[Event]) -> list[int]:
        self.spent.extend(events)
        return []


def candidate_weights(candidates: Sequence[str], favour_rule: bool) -> tuple[int, ...]:
    """The trials' public candidate weights (module docstring): K − 1 for the public rule's choice and 1 for each
    other (half the trials to the rule's choice) with `favour_rule`, else 1 each."""
    chosen = rule_choice(candidates)
    return tuple(len(candidates) - 1 if favour_rule and c == chosen and len(candidates) > 1 else 1 for c in candidates)


class PrivateSelection(PrivateGenerator):
    name = "private_selection"

    def build(self) -> None:
        p = self.params
        if not p.candidates:
            raise ValueError(
                "private_selection: no candidates (the pipeline fills them from `generators:`; "
                "a direct use names them in `candidates`)"
            )
        self.candidates: tuple[str, ...] = tuple(p.candidates)
        self.weights = candidate_weights(self.candidates, bool(p.favour_rule))
        self.gamma, self.accounted_mean = trial_law(float(p.mean_trials))  # the sampler's law, its event's mean
        self.score = QualityScore.of(self.table_layout, int(p.score_bins))
        self.winner: PrivateGenerator | None = None
        self.winner_name: str | None = None
        for name in self.candidates:  # each candidate's section checked against the layout now, before any budget
            self._candidate(name, 1.0, 0)

    def _candidate(self, name: str, epsilon: float, trial: int) -> PrivateGenerator:
        """Candidate `name` built from its own section at ε = `epsilon` (a pinned ε there is the selection's to
        set); under a test `noise_seed`, each trial gets its own (else trials of one candidate would repeat)."""
        section = allocated_section(dict((self.params.sections or {}).get(name) or {}), epsilon)
        seed = self.params.noise_seed
        section["noise_seed"] = None if seed is None else int(seed) * 1009 + trial
        return make_generator(name, self.table_layout, section, self.device)

    def _trial_events(self, n_rows: int, x: float, delta: float) -> tuple[tuple[Event, ...], ...]:
        """Each candidate's planned events at per-trial ε x, then its score's event."""
        share = float(self.params.score_share)
        score = self.score.event(share * x)
        return tuple(
            (*self._candidate(c, (1 - share) * x, 0).plan(n_rows, Budget((1 - share) * x, delta)).events, score)
            for c in self.candidates
        )

    def _plan(self, n_rows: int, budget: Budget) -> PrivacyPlan:
        """The largest per-trial ε x (to TRIAL_RTOL) whose selection event costs at most the budget's ε at its δ
        by RDP (`epsilon_rdp`, an upper bound on the ledger's `epsilon_pld`, and far cheaper to evaluate): the
        accountant's false-position search on s = ε/x, the selection's cost decreasing in s. With `trials: each`,
        the largest x whose composition of every candidate's trial events costs at most the budget by the
        ledger's own PLD, and those events are the plan's."""
        if not budget.private:  # ε = ∞ (internal releases, tests): exact scores, every trial non-private
            return SelectionPlan(
                n_rows=n_rows,
                epsilon=math.inf,
                delta=budget.delta,
                trial_epsilon=math.inf,
                events=(NonPrivateEvent("private_selection at epsilon = inf"),),
                candidates=self.candidates,
            )
        if self.params.trials == "each":  # every candidate once: the composition, by the ledger's own PLD

            def composed(x: float) -> list[Event]:
                return [e for trial in self._trial_events(n_rows, x, budget.delta) for e in trial]

            s = smallest_satisfying(
                lambda s: epsilon_pld(composed(budget.epsilon / s), budget.delta),
                budget.epsilon,
                TRIAL_RTOL,
                start=math.sqrt(len(self.candidates)),
            )
            x = budget.epsilon / s
            return SelectionPlan(
                n_rows=n_rows,
                epsilon=budget.epsilon,
                delta=budget.delta,
                events=tuple(composed(x)),
                trial_epsilon=x,
                candidates=self.candidates,
            )

        def event(x: float) -> RepeatAndSelectEvent:
            return RepeatAndSelectEvent(
                self._trial_events(n_rows, x, budget.delta), self.accounted_mean, LOGARITHMIC_SHAPE
            )

        s = smallest_satisfying(
            lambda s: epsilon_rdp([event(budget.epsilon / s)], budget.delta), budget.epsilon, TRIAL_RTOL, start=2.0
        )
        x = budget.epsilon / s
        return SelectionPlan(
            n_rows=n_rows,
            epsilon=budget.epsilon,
            delta=budget.delta,
            events=(event(x),),
            trial_epsilon=x,
            candidates=self.candidates,
        )

    def _fit(self, data: np.ndarray, streams: Streams) -> Sequence[Event]:
        """Algorithm 1 (module docstring; `repeat_select.best_of_trials`): each trial a candidate drawn by its weight
        trained at ε_g and scored at ε_s on n̂ rows it samples; the lowest noisy score wins (`trials: each`: one
        trial per candidate, `best_of_each`). T, the candidates and the score noise come from the `selection`
        stream (CSPRNG); each trial's training noise from the source bound to the trial's index."""
        plan: SelectionPlan = self.privacy
        share, rng = float(self.params.score_share), streams.numpy("selection")
        eps_g, eps_s = (1 - share) * plan.trial_epsilon, share * plan.trial_epsilon

        def trial(t: int, k: int) -> tuple[int, PrivateGenerator]:
            name = self.candidates[k]
            model = self._candidate(name, eps_g, t)
            model.plan(plan.n_rows, Budget(eps_g, plan.delta))
            model.fit(data, _Trial(), None, streams.source.bound(trial=t, candidate=name))
            synthetic = model.sample(plan.n_rows, int(self.params.seed) + t)
            if not plan.private:
                return self.score.value(data, synthetic), model
            return self.score.noisy(data, synthetic, eps_s, rng)[0], model

        if self.params.trials == "each":
            _, k, self.winner = best_of_each(len(self.candidates), trial)
        else:
            _, k, self.winner = best_of_trials(rng, self.gamma, self.weights, trial)
        self.drawn_by = self.winner_name = self.candidates[k]  # which candidate won: part of the DP output
        return list(plan.events)  # the selection's guarantee, whatever T was (trials: each: the composition)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.winner.sample(n, rng)

    def release_gates(self, real_encoded: Any) -> list[GateResult]:
        """The winning candidate's own gates (PPEM's α-LMDP tests, the support points' R̂)."""
        return self.winner.release_gates(real_encoded)

    def _state(self) -> dict[str, Any]:
        return {"winner": self.winner_name}

    def _restore(self, state: dict[str, Any]) -> None:
        self.winner_name = state.get("winner")
        self.drawn_by = self.winner_name or self.name

    def save(self, directory: Path) -> None:
        """The selection's own file (params, plan, the winner's name), and the winner's model under selected/."""
        super().save(directory)
        self.winner.save(Path(directory) / WINNER_DIR)

    @classmethod
    def load(cls, directory: Path, device: str = "cpu") -> "PrivateSelection":
        model = super().load(directory, device)
        model.winner = load_generator(model.winner_name, Path(directory) / WINNER_DIR)
        return model
