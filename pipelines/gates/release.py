"""What a release gate is (`Gate`) and what it returns (`GateResult`): every gate of pipelines/gates/ is a `Gate`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R", "GateResult", "list[GateResult]")


@dataclass(frozen=True)
class GateResult:
    """One gate's outcome as checks.json lists it: its name, pass/fail and the evidence a steward reads."""

    name: str
    passed: bool
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Gate(Generic[P, R]):
    """A release gate: the rule that turns one measurement (computed elsewhere: the ledger's totals, a test's
    p-values, the attacks' risks) into the GateResults named `names` (in the order it returns them), thresholds and
    evidence included. `dp`: its bit is within the DP guarantee (it reads only the ledger's public metadata, or it is
    the output of a DP mechanism charged to the ledger), so it decides publication whatever `release.non_dp_gates`
    says (`policy.decide`); every other gate reads real rows outside DP."""

    names: tuple[str, ...]
    dp: bool
    rule: Callable[P, R]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.rule(*args, **kwargs)


def gate(*names: str, dp: bool = False) -> Callable[[Callable[P, R]], Gate[P, R]]:
    """Declare a function a `Gate` returning the results `names` (`dp`: `Gate`'s docstring)."""

    def declare(rule: Callable[P, R]) -> Gate[P, R]:
        return Gate(names, dp, rule)

    return declare
