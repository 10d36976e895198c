"""Empirical audits of the unit-level guarantee (privacy unit of K = 3 rows) on the real code paths: each mechanism
of tests/audit_cases_unit.py run by the project's own function on D and D' = D + one unit, its claim the unit-level ε
the ledger records. The Clopper-Pearson lower bound on ε (pipelines.privacy.audit) stays below the claim at the
planned noise and exceeds it at the power check's noise (half, unless the case documents a sensitivity bound its
pair cannot attain); where the pair attains the unit's sensitivity, the bound at the planned noise also exceeds the
row-level ε of the same noise (what accounting for one row would have claimed).

Claims and lower bounds (95 % confidence; runs per data set at 1× / at the power scale):
  case                               claim  row-level  runs           at 1×   at the power scale
  prepare row count                  1.000  0.333      1,000 / 2,000  0.828   1.801 (×0.5)
  prepare row-loss stop bit          1.000  0.333      1,000 / 2,000  0.700   1.570 (×0.5)
  release test bit                   1.000  0.333      1,000 / 2,000  0.645   1.818 (×0.5)
  MST 2-way measurement (zCDP)       1.476  0.273      2,000 / 20,000 0.489   2.327 (×0.5)
  MST selection                      1.233  0.411      2,000 / 20,000 0.658   2.115 (×0.5)
  PEARL CF embedding                 1.260  0.284      1,000 / 2,000  0.490   1.857 (×0.5)
  weights output_lapl                1.020  0.340      1,000 / 2,000  0.240   1.598 (×0.25)
  support_points Laplace bandwidth   1.511  0.504      1,000 / 2,000  0.319   2.593 (×1/6)
  AIM 1-way measurement (zCDP)       1.442  0.266      2,000 / 20,000 0.541   2.474 (×0.5)
  calibration marginals (zCDP)       1.526  0.284      2,000 / 2,000  0.702   2.974 (×0.35)
  private selection quality score    1.262  0.421      1,000 / 2,000  0.938   2.151 (×0.5)
  support_points exponential (MH)    1.511  0.504      1,000 / 2,000  0.024   2.167 (×0.1)
"""

from __future__ import annotations

import math

import pytest

import audit_cases_unit as cases_unit
from audit_cases_release import pure
from pipelines.privacy.audit import epsilon_lower_bound
from pipelines.privacy.unit import unit_event

CASES = cases_unit.CASES


@pytest.mark.slow
def test_each_claim_is_the_unit_event_the_ledger_records():
    """The claim is the ε of the event the owner reserves and records, and that event is the unit conversion of the
    row-level one (pipelines/privacy/unit.py), at the δ the case states; the unit costs more than the row."""
    assert {c.audit.owner for c in CASES} >= {
        "prepare:row_count",
        "prepare:row_loss",
        "check:release_test",
        "mst",
        "aim",
        "calibration",
        "private_selection",
        "pearl",
        "weights:output_lapl",
        "support_points",
    }
    assert {(c.audit.owner, c.audit.event_index) for c in CASES if c.audit.owner == "support_points"} == {
        ("support_points", 0),
        ("support_points", 1),
    }
    for c in CASES:
        ledger, row = c.ledger(), c.row_event()
        assert ledger == unit_event(row, cases_unit.K), c.audit.id
        assert c.audit.delta == (0.0 if pure(ledger) else cases_unit.DELTA), c.audit.id
        claim, row_claim = c.audit.claimed_epsilon, cases_unit.claimed(row)
        assert math.isclose(claim, cases_unit.claimed(ledger)) and 1.0 <= claim <= 2.0, (c.audit.id, claim)
        assert claim > 1.2 * row_claim, (c.audit.id, claim, row_claim)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.audit.id for c in CASES])
def test_unit_audit_lower_bound_below_the_unit_claim_and_detects_less_noise(case):
    audit, (runs, power_runs) = case.audit, case.runs
    power = audit.power_noise_scale
    at_plan = epsilon_lower_bound(audit.scores(False, 1.0, runs), audit.scores(True, 1.0, runs), audit.delta)
    at_power = epsilon_lower_bound(
        audit.scores(False, power, power_runs), audit.scores(True, power, power_runs), audit.delta
    )
    row_claim = cases_unit.claimed(case.row_event())
    print(
        f"UNIT AUDIT {audit.id}: claimed {audit.claimed_epsilon:.3f} (row-level {row_claim:.3f}), lower bound "
        f"{at_plan:.3f}, at noise ×{power:.3g} {at_power:.3f}"
    )
    assert at_plan < audit.claimed_epsilon
    assert at_power > audit.claimed_epsilon
    if case.tight:
        assert at_plan > row_claim
