"""Which of the configured generators one release run trains and publishes (params.yaml `release.select`).

- `auto` (the default): a public rule picks ONE generator, which then gets the whole release ε (less the
  importance weights' share). Its inputs are public only (the configured candidates, the public row count n̂ and
  the release ε), so the choice costs no budget and reveals nothing about the rows: it is made by the budget stage
  before any row is read, and `dvc repro` and the Prefect flow make the same one (both call `select`).
- `all`: every configured generator is trained and published, the release ε divided across them
  (params/compare.yaml: for comparing methods, not for a release an analyst uses).
- `private`: differentially private selection among the configured generators (Liu & Talwar 2019; Papernot &
  Steinke 2022): the `private_selection` generator, which must be listed in `generators:` (DVC creates its stages
  from that list), trains a secret random number of candidates, scores each with a DP quality score and publishes
  the best, with the whole release ε (pipelines/generators/private_selection.py). The other generators are its
  candidates (or its section's `candidates:`); their own stages train nothing (params/private.yaml).

`support_points` is never picked silently: its guarantee is heuristic (its release is the last state of a finite
MCMC chain with no proven mixing bound; `outside_dp.MCMC_HEURISTIC`). `auto` refuses to choose it and `private` to
consider it as a candidate, with an InputError before any generator trains, unless its section sets
`accept_heuristic: true`; then, and under `all`, it may be published, labelled heuristic (`refuse_heuristic`).

The rule is the order PREFERENCE: the first candidate in it wins. The order is what was measured, on tables the
project did not tune on, by scoring each published table (train on synthetic, test on real, AUROC of LR / RF /
GBM, and k-way marginal scores; docs/selection.md):
- AIM with the whole ε = 1 gave the best table on the bundled 455-row breast-cancer table (AUROC 0.97 / 0.99 /
  0.96 against ≤ 0.85 for every other generator at an equal share) and on a public 1,000-row credit table
  (0.70 / 0.73 / 0.69, the only one the verdict called fit); on a 16,000-row Adult extract its 1- and 2-way scores
  were within 1 % of the best, its task AUROC within 0.03 of the best;
- MST was level with AIM on Adult's marginals and behind it on the task; it is the fallback when AIM is not a
  candidate (both handle any domain after public binning);
- the deep generators (calibrated) lead on Adult's task at 16,000 rows and trail on 3-way marginals; at a few
  hundred rows each was at chance. Among them the order follows the Adult task scores.
The settings of the chosen generator follow public facts too: AIM's bins and rounds come from n̂·ε
(`pipelines.generators.params.aim.public_settings`, docs/aim-mst.md "Settings"). The sweep over four tables of
different shapes (every generator at ε 0.3 / 0.9 / 3; docs/selection.md, "The sweep") found no public fact (n̂,
columns by kind, ε) separating a shape where another generator wins both the marginals and the task, so the order
stands; `facts` records what a rule reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipelines.config import PARAMS_FILE, SELECTION
from pipelines.errors import InputError
from pipelines.evaluation.outside_dp import MCMC_HEURISTIC
from pipelines.io import read_json

PREFERENCE = ("aim", "mst", "pearl", "dpwgan", "dp_auto_gan", "ppem", "iw_mmd_gan", "support_points", SELECTION)
HEURISTIC = "support_points"  # the generator whose release is not an exact sample of its mechanism


@dataclass(frozen=True)
class Selection:
    """The release's choice: the mode, the configured candidates, the selected generators (in `generators:`
    order) and why (a sentence for the reports); `facts` are the public inputs the rule saw."""

    mode: str
    candidates: tuple[str, ...]
    selected: tuple[str, ...]
    reason: str
    facts: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "candidates": list(self.candidates), "selected": list(self.selected)}


def rule_choice(candidates: Sequence[str]) -> str:
    """The public rule: the first of `candidates` in PREFERENCE (every registered generator is ranked,
    tests/test_selection.py)."""
    return min(candidates, key=PREFERENCE.index)


def refuse_heuristic(accepted: bool, mode: str, considered: Sequence[str]) -> None:
    """An InputError naming `support_points.accept_heuristic` when the selection `mode` (auto: the rule's choice;
    private: the private selection's candidates) would pick or consider `support_points` without that opt-in
    (`accepted`): its guarantee is heuristic (MCMC_HEURISTIC), which a steward accepts explicitly or not at all.
    Public facts only (params), so it is decided before any row is read."""
    if HEURISTIC not in considered or accepted:
        return
    verb = "choose" if mode == "auto" else "consider"
    alternative = (
        f"list a generator before {HEURISTIC} in the rule's order ({', '.join(PREFERENCE)}), e.g. aim, in 'generators'"
        if mode == "auto"
        else f"leave {HEURISTIC} out of the private selection's candidates ('generators', or '{SELECTION}.candidates')"
    )
    raise InputError(
        f"'release.select': {mode} would {verb} {HEURISTIC}, whose guarantee is {MCMC_HEURISTIC}; it is "
        f"not picked unless '{HEURISTIC}.accept_heuristic' is true.",
        file=PARAMS_FILE,
        fix=f"{alternative}, or set '{HEURISTIC}: {{accept_heuristic: true}}' to accept a release labelled heuristic.",
    )


def select(
    mode: str,
    candidates: Sequence[str],
    n_rows: int,
    release_epsilon: float,
    accept_heuristic: bool,
    private_candidates: Sequence[str] = (),
) -> Selection:
    """The generators this release trains (module docstring), from public facts only: `release.select` (`mode`),
    the configured generators (`candidates`), the public training row count `n_rows` (n̂), the release ε,
    `support_points.accept_heuristic` and, for `private`, the private selection's own candidates."""
    candidates = tuple(candidates)
    facts = {"rows_public": int(n_rows), "release_epsilon": release_epsilon}
    if mode == "all":
        return Selection(
            mode,
            candidates,
            candidates,
            "release.select: all: every configured generator, the release ε divided across them",
            facts,
        )
    if mode == "private":
        if SELECTION not in candidates:
            raise InputError(
                f"'release.select': private trains the generator '{SELECTION}', which is not in "
                f"'generators' ({', '.join(candidates)}).",
                file=PARAMS_FILE,
                fix=f"add {SELECTION} to 'generators' (its candidates: the others there, or its "
                "section's 'candidates'), as params/private.yaml does.",
            )
        refuse_heuristic(accept_heuristic, mode, private_candidates)
        return Selection(
            mode,
            candidates,
            (SELECTION,),
            "release.select: private: the private selection "
            "(Papernot & Steinke 2022) chooses among its candidates under differential privacy, with "
            "the whole release ε (less the importance weights' share)",
            facts,
        )
    chosen = rule_choice(candidates)
    refuse_heuristic(accept_heuristic, mode, (chosen,))
    reason = (
        f"release.select: auto: {chosen} is the first of the configured generators in the public rule's "
        f"order ({', '.join(PREFERENCE)}; pipelines/selection.py), and gets the whole release ε (less the "
        "importance weights' share)"
        + (f"; accepted with a heuristic guarantee ({HEURISTIC}.accept_heuristic)" if chosen == HEURISTIC else "")
    )
    return Selection(mode, candidates, (chosen,), reason, facts)


NOT_SELECTED = "selection.json"  # models/<ds>/<gen>/selection.json: train@gen's output for a generator left out


def left_out(allocation: Path) -> dict[str, Any] | None:
    """The budget stage's entry for a generator (or "weights") this release did not select ({"selected": false,
    ...}: its stages spend and publish nothing), read from its allocation file (`Paths.allocation`), or None when it
    is selected, or when no budget stage ran (a pinned part's stage run alone)."""
    entry = read_json(allocation) if allocation.exists() else {}
    return entry if entry.get("selected") is False else None


def not_trained(model: Path) -> dict[str, Any] | None:
    """What train@gen wrote into its model directory `model` for a generator this release did not select
    (`left_out`), else None."""
    path = model / NOT_SELECTED
    return read_json(path) if path.exists() else None


def selected(candidates: Sequence[str], allocation: Callable[[str], Path]) -> list[str]:
    """The generators of `candidates` this release trains and publishes, as the budget stage selected them
    (`allocation(part)`: a part's allocation file, `Paths.allocation`)."""
    return [g for g in candidates if left_out(allocation(g)) is None]
