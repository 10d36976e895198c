"""A configuration, or one params.yaml section, built from a raw mapping as the stages read it from `Config`
(pipelines/config.py: types, defaults and ranges), for tests of the functions that take one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.config import Config, merged, parse_params, read_params, section
from pipelines.evaluation.attacks import suite

PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"


def configured(overrides: dict[str, Any]) -> Config:
    """The bundled params.yaml with `overrides` deep-merged over it, checked as `load_params` checks a file."""
    return parse_params(merged(read_params(PARAMS), overrides))


def thresholds(raw: dict[str, Any] | None) -> dict[str, float]:
    """`risk_gates:` as check@gen passes it to `attacks.gates.risk_gates`."""
    return section("risk_gates", raw).model_dump()


def utility_settings(raw: dict[str, Any] | None) -> dict[str, Any]:
    """`utility_gate:` as the baseline and check stages pass it to `verdict`."""
    return section("utility_gate", raw).model_dump()


def attack_settings(raw: dict[str, Any] | None, schema: Any) -> dict[str, Any]:
    """`evaluate.attacks:` as the baseline stage resolves it against the schema (`suite.settings`)."""
    return suite.settings(section("evaluate.attacks", raw), schema)
