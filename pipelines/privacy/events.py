"""Typed privacy events: every access to private data is recorded as one of these.

Neighbouring relation (privacy rule 7, docs/architecture.md). A mechanism states its event for add/remove one
record (one row of the bounded, validated table): that is each event's contract below, and what the mechanism's
code derives its sensitivity for. The ledger stores events at the release's privacy unit, add/remove one unit of
at most k rows (`privacy_unit` in the schema; k = 1 without one): `pipelines.privacy.unit.unit_events` converts
every row-level event into the event of the same mechanism under add/remove of k rows, and the accountant composes
what the ledger stores. `PoissonGaussianEvent.group` is the one field that only such a conversion sets.
Each event carries what an accountant needs; sensitivities are derived where the
mechanism is implemented and only the *ratios* (noise multipliers) enter accounting.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields
from typing import ClassVar, Union, get_args


@dataclass(frozen=True)
class PoissonGaussianEvent:
    """DP-SGD: `steps` compositions of the Poisson-subsampled Gaussian mechanism.

    noise_multiplier = noise std / clipping norm (the L2 sensitivity of a clipped-gradient sum
    under add/remove-one), sample_rate = per-record inclusion probability q.

    `group` = k: the neighbours differ by a unit of up to k rows, each row Poisson-sampled independently at rate q
    and clipped on its own, so that j ~ Bin(k, q) of them enter a batch (`pipelines.privacy.unit`). k = 1 (the
    default) is add/remove one record; the field is written to a dict only when k > 1, so row-level events
    serialise as they always have and a dict without it reads as k = 1.
    """

    noise_multiplier: float
    sample_rate: float
    steps: int
    group: int = 1
    kind: ClassVar[str] = "poisson_gaussian"


@dataclass(frozen=True)
class GaussianEvent:
    """One Gaussian mechanism release: noise std `sigma` on a query of L2 sensitivity `l2_sensitivity`.

    `query` (optional, not used in accounting) says what was released and, for a mean, whether its
    denominator is a noisy count or a public row count (privacy rule 7, docs/architecture.md).
    """

    sigma: float
    l2_sensitivity: float
    query: str = ""
    kind: ClassVar[str] = "gaussian"

    @property
    def noise_multiplier(self) -> float:
        return self.sigma / self.l2_sensitivity


@dataclass(frozen=True)
class LaplaceEvent:
    """One Laplace mechanism release: noise scale `scale` on a query of L1 sensitivity `l1_sensitivity`."""

    scale: float
    l1_sensitivity: float
    kind: ClassVar[str] = "laplace"

    @property
    def epsilon(self) -> float:
        return self.l1_sensitivity / self.scale


@dataclass(frozen=True)
class DiscreteGaussianEvent:
    """`count` compositions of the discrete Gaussian mechanism on an integer (lattice) query: noise N_ℤ(0, σ²),
    P(y) ∝ exp(−y²/2σ²) on ℤ with σ = `sigma` in lattice units, drawn exactly (pipelines/privacy/samplers.py).

    Contract: an add/remove neighbour moves at most `count` coordinates of the integer query, each by an integer
    of absolute value ≤ `sensitivity` (a count marginal: one cell by 1; m marginals: count = m). `query` (not used
    in accounting) says what was released and on which lattice. Accounted exactly: the PLD of the 1-D discrete
    Gaussian with shift `sensitivity`, self-composed `count` times; RDP α·count·Δ²/2σ² (CKS20, Prop. 5)."""

    sigma: float
    sensitivity: int = 1
    count: int = 1
    query: str = ""
    kind: ClassVar[str] = "discrete_gaussian"

    @property
    def rho(self) -> float:
        """The zCDP parameter count·Δ²/2σ² (the same as a continuous Gaussian of multiplier σ/Δ)."""
        return self.count * self.sensitivity**2 / (2 * self.sigma**2)


@dataclass(frozen=True)
class DiscreteLaplaceEvent:
    """`count` compositions of the discrete Laplace mechanism on an integer (lattice) query: noise Lap_ℤ(t),
    P(y) ∝ exp(−|y|/t) on ℤ with t = `scale` in lattice units, drawn exactly (pipelines/privacy/samplers.py).

    Contract: an add/remove neighbour moves each of `count` independent blocks of `dims` coordinates by an integer
    vector of L1 norm ≤ `sensitivity`. dims = 1: accounted exactly, the PLD of the 1-D discrete Laplace with shift
    `sensitivity`, self-composed; dims > 1: each block as a generic (sensitivity/t)-DP step (its L1 ball has no
    smaller dominating pair we can prove). Pure ε of the whole event: `epsilon` = count·sensitivity/t."""

    scale: float
    sensitivity: int = 1
    count: int = 1
    dims: int = 1
    query: str = ""
    kind: ClassVar[str] = "discrete_laplace"

    @property
    def epsilon(self) -> float:
        return self.count * self.sensitivity / self.scale


# `PureEpsilonEvent.mechanism` of an ε-bounded-range step (Durfee & Rogers 2019, Def. 3.1): for all neighbours
# D, D' the privacy loss log P_D(y)/P_D'(y) ranges over an interval of length ≤ ε as y varies. The exponential
# mechanism P(r) ∝ exp(ε u_r / 2Δ) over a finite set, sampled exactly, is ε-BR: every log-numerator moves by
# ε(u_r(D) − u_r(D'))/2Δ ∈ [−ε/2, ε/2] and the normaliser is common to all r. ε-BR ⇒ ε-DP and ε-BR ⇒
# ε²/8-zCDP (Cesar & Rogers 2021, Lemma 3.2); the accountant uses both (pipelines/privacy/accountant.py).
BOUNDED_RANGE = "exponential_bounded_range"
# `PureEpsilonEvent.mechanism` of an exponential mechanism whose output is the last state of a finite Markov chain
# (Metropolis-Hastings) with no proven mixing bound: ε is the exact mechanism's, the target the chain approximates,
# and it holds only for an exact sample (`exactly_sampled`). The accountant composes it as a generic ε-DP step.
MCMC_EXPONENTIAL = "exponential_mcmc"
LOGARITHMIC_SHAPE = 0.0  # η of a selection's trial-count law: the logarithmic law (what the selection draws)
GEOMETRIC_SHAPE = 1.0  # η = 1, the geometric law (selections recorded before the logarithmic one)


@dataclass(frozen=True)
class PureEpsilonEvent:
    """Any pure ε-DP step, e.g. the exponential mechanism (`mechanism` names it). `mechanism` =
    BOUNDED_RANGE declares the step ε-bounded-range (an exactly sampled finite exponential mechanism), which
    the accountant may compose more tightly; any other name is treated as a generic ε-DP step. MCMC_EXPONENTIAL
    says the output was not sampled exactly, so the ε is a heuristic label (`exactly_sampled`)."""

    epsilon: float
    mechanism: str = "exponential"
    kind: ClassVar[str] = "pure_epsilon"

    @property
    def bounded_range(self) -> bool:
        return self.mechanism == BOUNDED_RANGE


@dataclass(frozen=True)
class ApproxDPEvent:
    """An (ε, δ)-DP step whose δ is a failure probability of the mechanism itself, not of an accounting
    conversion: partition selection (a noisy count above a threshold releases a key, so a key only the
    neighbour holds appears with probability ≤ δ; pipelines/privacy/partition_selection.py). `mechanism` names
    it. The accountant composes it by its dominating pair, the (ε, δ) randomised response (Kairouz, Oh &
    Viswanath 2015, Thm. 2.1: every (ε, δ)-DP mechanism's privacy region lies inside it); it has no finite RDP."""

    epsilon: float
    delta: float
    mechanism: str = ""
    kind: ClassVar[str] = "approx_dp"


@dataclass(frozen=True)
class ZCDPEvent:
    """A ρ-zCDP guarantee (Bun & Steinke 2016: D_α(M(D) ‖ M(D')) ≤ αρ for every order α > 1, both orders of every
    add/remove neighbouring pair) for a whole sub-computation whose steps are chosen adaptively, e.g. AIM's rounds
    (σ_t annealed from earlier outputs) run under a zCDP privacy filter: every step is ρ_t-zCDP with ρ_t chosen
    from earlier outputs, and the run stops before Σ_t ρ_t would exceed ρ, fixed in advance; the whole run is then
    ρ-zCDP (Feldman & Zrnic 2021, Rényi filter, at every order α; Whitehouse et al. 2023, fully adaptive
    composition). `rho` is the filter's budget (what the plan reserves and the run records), never the realised
    sum. The accountant composes it as RDP α·ρ or through a dominating pair of its privacy profile
    (pipelines/privacy/accountant.py), never as fixed Gaussian or ε-DP steps."""

    rho: float
    mechanism: str = ""
    kind: ClassVar[str] = "zcdp"


@dataclass(frozen=True)
class RepeatAndSelectEvent:
    """Private selection from private candidates (Liu & Talwar 2019; Papernot & Steinke 2022, "Hyperparameter
    tuning with Rényi differential privacy", ICLR): run T trials, T drawn secretly from the truncated negative
    binomial law of shape `shape` (η: 0 the logarithmic law, 1 the geometric) and mean `mean`, each trial one
    candidate chosen at random by public weights and run (its events: `candidates[i]`, the candidate's training and
    its DP quality score), and release only the best trial's output (neither T, nor the other trials, nor their
    scores).

    One trial is a mixture of the candidates with public weights, so its RDP at each order α is at most the
    largest of the candidates' (Rényi divergence is jointly quasi-convex: van Erven & Harremoës 2014, Thm. 13).
    The whole selection is then RDP by Papernot & Steinke's Theorem 2, as dp_accounting 0.6 computes it
    (`_compute_rdp_repeat_and_select`, pipelines/privacy/accountant.py). The selection draws T from the logarithmic
    law exactly (`samplers.logarithmic_trials`) and records the mean that bounds its rational γ from the
    conservative side (`repeat_select.trial_law`), so the accountant's law is the sampler's. Ledger rows written
    before the logarithmic law carry no shape and read back as the geometric law they drew."""

    candidates: tuple[tuple["Event", ...], ...]
    mean: float
    shape: float
    kind: ClassVar[str] = "repeat_and_select"


@dataclass(frozen=True)
class NonPrivateEvent:
    """Data accessed without a DP guarantee (ε = ∞), e.g. a generator trained with epsilon: inf.

    `internal`: made for an internal-only release (params `privacy.internal_release: true`). Such an
    access is recorded like any other but is not composed into the data set's budget for external
    releases (its output never leaves the data holder); without the flag it costs ε = ∞ and is refused.
    """

    reason: str
    internal: bool = False
    kind: ClassVar[str] = "non_private"


Event = Union[
    PoissonGaussianEvent,
    GaussianEvent,
    LaplaceEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    PureEpsilonEvent,
    ZCDPEvent,
    RepeatAndSelectEvent,
    ApproxDPEvent,
    NonPrivateEvent,
]
EVENT_TYPES: dict[str, type] = {t.kind: t for t in get_args(Event)}  # every member of the union, by its kind


def exactly_sampled(event: Event) -> bool:
    """Whether the event's guarantee is proven for the output actually released: False for an exponential mechanism
    sampled by a finite MCMC chain (MCMC_EXPONENTIAL), and for a private selection with such a candidate (its
    guarantee assumes every candidate's); True otherwise."""
    if isinstance(event, RepeatAndSelectEvent):
        return all(exactly_sampled(e) for c in event.candidates for e in c)
    return not (isinstance(event, PureEpsilonEvent) and event.mechanism == MCMC_EXPONENTIAL)


def event_to_dict(event: Event) -> dict:
    """JSON-able form: {'kind': ..., **fields} (a selection's candidates as lists of such dicts; a
    PoissonGaussianEvent's `group` only when it is > 1)."""
    if isinstance(event, RepeatAndSelectEvent):
        return {
            "kind": event.kind,
            "candidates": [[event_to_dict(e) for e in c] for c in event.candidates],
            "mean": event.mean,
            "shape": event.shape,
        }
    out = {"kind": event.kind, **asdict(event)}
    if isinstance(event, PoissonGaussianEvent) and event.group == 1:
        del out["group"]
    return out


def event_from_dict(d: dict) -> Event:
    d = dict(d)
    cls = EVENT_TYPES[d.pop("kind")]
    if cls is RepeatAndSelectEvent:
        return RepeatAndSelectEvent(
            tuple(tuple(event_from_dict(e) for e in c) for c in d["candidates"]),
            float(d["mean"]),
            float(d.get("shape", GEOMETRIC_SHAPE)),
        )
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


def validate_event(event: Event) -> None:
    """Reject events no accountant can compose (non-positive noise, q outside (0, 1], a private selection with a
    candidate whose RDP curve is unknown: DP-SGD at a unit of group > 1 rows, ...)."""
    bad = None
    if isinstance(event, PoissonGaussianEvent):
        if not (event.noise_multiplier > 0 and math.isfinite(event.noise_multiplier)):
            bad = "noise_multiplier must be positive and finite"
        elif not (0 < event.sample_rate <= 1):
            bad = "sample_rate must lie in (0, 1]"
        elif event.steps < 1:
            bad = "steps must be >= 1"
        elif not (isinstance(event.group, numbers.Integral) and event.group >= 1):
            bad = "group must be an integer >= 1"
    elif isinstance(event, GaussianEvent):
        if not (event.sigma > 0 and event.l2_sensitivity > 0):
            bad = "sigma and l2_sensitivity must be positive"
    elif isinstance(event, LaplaceEvent):
        if not (event.scale > 0 and event.l1_sensitivity > 0):
            bad = "scale and l1_sensitivity must be positive"
    elif isinstance(event, PureEpsilonEvent):
        if not (event.epsilon > 0 and math.isfinite(event.epsilon)):
            bad = "epsilon must be positive and finite"
    elif isinstance(event, (DiscreteGaussianEvent, DiscreteLaplaceEvent)):
        width = event.sigma if isinstance(event, DiscreteGaussianEvent) else event.scale
        if not (width > 0 and math.isfinite(width)):
            bad = "sigma / scale must be positive and finite"
        elif not all(
            isinstance(v, numbers.Integral) and int(v) >= 1
            for v in (event.sensitivity, event.count, getattr(event, "dims", 1))
        ):
            bad = "sensitivity, count (and dims) must be integers >= 1"
    elif isinstance(event, ApproxDPEvent):
        if not (event.epsilon > 0 and math.isfinite(event.epsilon) and 0 < event.delta < 1):
            bad = "epsilon must be positive and finite, delta in (0, 1)"
    elif isinstance(event, ZCDPEvent):
        if not (event.rho > 0 and math.isfinite(event.rho)):
            bad = "rho must be positive and finite"
    elif isinstance(event, RepeatAndSelectEvent):
        if not (event.mean >= 1 and math.isfinite(event.mean)):
            bad = "mean must be a finite number >= 1"
        elif event.shape not in (LOGARITHMIC_SHAPE, GEOMETRIC_SHAPE):
            bad = "shape must be 0 (logarithmic) or 1 (geometric), the laws the selection has drawn"
        elif not event.candidates or not all(event.candidates):
            bad = "needs at least one candidate, each with at least one event"
        else:
            for e in (e for c in event.candidates for e in c):
                validate_event(e)
                if isinstance(e, PoissonGaussianEvent) and e.group > 1:
                    bad = (
                        "a candidate holds DP-SGD at a unit of group > 1 rows, whose RDP curve is not available; "
                        "private selection is accounted from each candidate's RDP curve "
                        "(pipelines/privacy/accountant.py, selection_rdp)"
                    )
    if bad:
        raise ValueError(f"invalid {event.kind} event {event}: {bad}")
