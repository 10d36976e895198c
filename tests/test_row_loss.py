"""The DP row-loss test (pipelines/privacy/row_loss.py): its query, its sensitivity, its stop rates against the exact
discrete Laplace tail, and prepare stopping (or going on) on its bit with the spend in the ledger."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from pipelines.config import load_params
from pipelines.errors import InputError
from pipelines.privacy.events import DiscreteLaplaceEvent
from pipelines.privacy.noise import NoiseSource
from pipelines.privacy.row_count import tail_bound
from pipelines.privacy.row_loss import QUERY, excess, loss_event, row_loss_test
from support.ledger import FakeSession


def test_excess_is_exact_on_the_decimal_fraction():
    assert excess(20, 1000, 0.02) == 0  # 2 % of 1,000 rows tolerates 20 (a float product would give 21)
    assert excess(21, 1001, 0.02) == 0  # ⌈20.02⌉ = 21
    assert excess(21, 1000, 0.02) == 1
    assert excess(0, 569, 0.02) == -12  # ⌈11.38⌉
    assert excess(7, 7, 1.0) == 0 and excess(3, 10, 0.0) == 3


@pytest.mark.integration
@pytest.mark.parametrize("fraction", [0.0, 0.02, 0.1, 1 / 3, 0.5, 1.0])
def test_one_row_moves_the_query_by_at_most_one(fraction):
    """Add one row, lost (b = 1) or kept (b = 0), to every (L, N) with L ≤ N ≤ 400: |Δq| ≤ 1, and both signs and
    zero occur, so Δ₁ = 1 is attained and not loose."""
    moves = {
        excess(lost + b, n + 1, fraction) - excess(lost, n, fraction)
        for n in range(401)
        for lost in range(0, n + 1, 7)
        for b in (0, 1)
    }
    assert moves <= {-1, 0, 1}
    assert moves == ({0, 1} if fraction == 0.0 else {0, -1} if fraction == 1.0 else {-1, 0, 1})


def stop_rate(lost: int, rows_in: int, epsilon: float, runs: int, offset: int) -> float:
    return float(
        np.mean(
            [
                row_loss_test(
                    FakeSession(), epsilon, lambda: (lost, rows_in), 0.02, NoiseSource(None, offset + run)
                ).stop
                for run in range(runs)
            ]
        )
    )


def tail(k: int, epsilon: float) -> float:
    """P(Z ≥ k) for Z ~ Lap_ℤ(1/ε), k ≥ 0: e^{−εk}/(1 + e^{−ε})."""
    return math.exp(-epsilon * k) / (1 + math.exp(-epsilon))


@pytest.mark.slow
def test_neighbours_at_the_threshold_stop_at_the_discrete_laplace_rates():
    """At the default ε = 0.05, D loses exactly enough rows that q = ⌊t⌋ (stop iff Z ≥ 1) and its neighbour D' one
    more lost row (q = ⌊t⌋ + 1: stop iff Z ≥ 0). Over 10,000 seeded runs each the stop rates match the exact tails
    within 4.5 standard errors, their ratio is within e^ε, and a test without noise (rates 0 and 1) fails both."""
    epsilon, rows_in, runs = 0.05, 10_049, 10_000  # ⌈0.02 · 10,049⌉ = ⌈0.02 · 10,050⌉ = 201
    t = math.floor(tail_bound(epsilon))  # 184
    lost = t + math.ceil(0.02 * rows_in)  # q = 184
    rates = [stop_rate(lost, rows_in, epsilon, runs, 0), stop_rate(lost + 1, rows_in + 1, epsilon, runs, 10**6)]
    assert excess(lost, rows_in, 0.02) == t and excess(lost + 1, rows_in + 1, 0.02) == t + 1
    for rate, k in zip(rates, (1, 0)):
        p = tail(k, epsilon)
        assert abs(rate - p) < 4.5 * math.sqrt(p * (1 - p) / runs), (rate, p)
    assert math.exp(-epsilon) - 0.03 < rates[0] / rates[1] < math.exp(epsilon) + 0.03


@pytest.mark.integration
def test_a_table_within_the_share_goes_on_and_one_far_above_stops():
    """q = −t goes on unless Z > 2t, q = 3t stops unless Z ≤ −2t (each P < 10⁻⁸ at ε = 0.05, t = 184.2): every one
    of 1,000 runs goes on, and every one stops; a test that ignored the tolerated share or its margin would not."""
    assert stop_rate(200 - 185, 10_000, 0.05, 1000, 0) == 0.0
    assert stop_rate(200 + 3 * 185, 10_000, 0.05, 1000, 0) == 1.0


def test_the_event_is_reserved_before_the_counts_are_read_and_recorded_after():
    session, read = FakeSession(), []

    def counts():
        read.append(session.calls[:])
        return 3, 100

    result = row_loss_test(session, 0.5, counts, 0.02, NoiseSource(None, 1))
    assert read == [["reserve"]] and session.calls == ["reserve", "record"]
    assert session.reserved == [loss_event(0.5)] == [DiscreteLaplaceEvent(scale=2.0, sensitivity=1, query=QUERY)]
    assert session.recorded == session.reserved
    assert result.margin == pytest.approx(math.log(1e4) / 0.5) and result.to_dict()["epsilon"] == 0.5


@pytest.mark.slow
def test_prepare_stops_on_the_noisy_bit_after_recording_the_spend_and_reuses_it(tmp_path, bc_raw):
    """500 of 569 rows clipped (q = 488, far above the margin of 184): prepare records the row-loss event, writes
    nothing and stops with the steward's counts; a second prepare on the same rows reuses the paid bit (no new
    ledger row). The same table with every value in its domain goes on."""
    from support.project import make_root
    from tasks import common
    from tasks.prepare import prepare
    from tasks.validate import validate

    root = make_root(tmp_path, {"dataset": {"source": "raw.csv"}})
    raw = bc_raw.copy()
    raw.loc[raw.index[:500], "mean_radius"] = 100.0  # above the schema's upper bound: clipped
    raw.to_csv(root / "raw.csv", index=False)
    params = load_params(root / "params.yaml")
    report = validate(params, root)  # validation itself never stops on row loss
    assert report["rows_clipped"] == 500 and (root / "data/raw/breast_cancer/validated.parquet").exists()
    for attempt in range(2):
        with pytest.raises(InputError, match=r"DP row-loss test stopped the release.*clipped 500 of the 569"):
            prepare(params, root)
        spent = [
            json.loads(r["event_json"])
            for r in common.ledger(params, root).rows("breast_cancer")
            if r["status"] == "spent"
        ]
        assert [e["query"] for e in spent] == [QUERY] and spent[0]["scale"] == 20.0
        assert not (root / "data/prepared/breast_cancer").exists()
    bc_raw.to_csv(root / "raw.csv", index=False)
    validate(params, root)
    summary = prepare(params, root)
    assert summary["row_loss"]["epsilon"] == params.privacy.row_loss_epsilon
    assert len([r for r in common.ledger(params, root).rows("breast_cancer") if r["status"] == "spent"]) == 2


@pytest.mark.integration
def test_fatal_policies_are_refused_for_a_public_release(tmp_path):
    """A fatal policy stops a run on one row: refused before anything runs unless the release is internal."""
    from pipelines.data.schema import load_schema
    from tasks import common
    from support.project import PROJECT, make_root

    root = make_root(tmp_path, {})
    text = yaml.safe_load((PROJECT / "schemas/breast_cancer.yaml").read_text())
    text["columns"]["mean_radius"]["on_invalid"] = "fatal"
    path = root / "schemas/breast_cancer.yaml"
    path.write_text(yaml.safe_dump(text, sort_keys=False))
    params = load_params(root / "params.yaml")
    with pytest.raises(InputError, match=r"fatal on 'mean_radius'.*internal releases only"):
        common.check_against_schema(params, load_schema(path))
    internal = params.given | {"privacy": {**params.given["privacy"], "internal_release": True}}
    (root / "params.yaml").write_text(yaml.safe_dump(internal, sort_keys=False))
    common.check_against_schema(load_params(root / "params.yaml"), load_schema(path))
