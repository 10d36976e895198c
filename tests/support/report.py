"""The release reports' test material: a complete release summary from a real small evaluation (the fixture
`summary`), its steward's form, and how to find the headless Chromium that renders a report."""

from __future__ import annotations

import os
import shutil
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from pipelines.config import Scorecard
from pipelines.data.schema import Column
from pipelines.reporting import plots
from pipelines.gates.risk import risk_gates
from pipelines.evaluation.attacks.suite import privacy_risk
from pipelines.reporting.report import PUBLIC_PLOTS
from pipelines.evaluation.scorecard import scorecard
from pipelines.reporting.synthetic_summary import summarise_synthetic
from sections import attack_settings as settings, thresholds

COLUMNS = (
    Column("x1", "continuous", 0.0, 1.0),
    Column("x2", "continuous", 0.0, 1.0),
    Column("b", "binary", categories=("no", "yes")),
    Column("c", "categorical", categories=("low", "mid", "high")),
)
PNG = b"\x89PNG\r\n\x1a\n"


def table(n: int, seed: int) -> pd.DataFrame:
    """`n` seeded rows of COLUMNS, x1, b and c moving with one latent."""
    rng = np.random.default_rng(seed)
    z = rng.random(n)
    return pd.DataFrame(
        {
            "x1": np.clip(z + rng.normal(0, 0.1, n), 0, 1),
            "x2": rng.random(n),
            "b": np.where(z + rng.normal(0, 0.2, n) > 0.5, "yes", "no"),
            "c": np.array(["low", "mid", "high"])[np.minimum((z * 3).astype(int), 2)],
        }
    )


@pytest.fixture(scope="module")
def summary() -> dict:
    """A complete release summary: the keys tasks/release.py passes, from a real (small) evaluation."""
    train, holdout, synth = table(150, 0), table(80, 1), table(150, 2)
    schema = SimpleNamespace(columns=COLUMNS, target="b", target_positive=None)
    k = {
        **Scorecard().model_dump(),
        "mmd_permutations": 50,
        "range_queries": 100,
        "ot_max_rows": 200,
        "kway_bins": 10,
        "classifier_max_rows": 200,
    }
    risk = privacy_risk(train, synth, holdout, schema, settings({"n_attacks": 100, "bootstrap": 50}, schema), 0)
    metrics = {
        "scorecard": scorecard(train, synth, holdout, schema, 0, k),
        "privacy_risk": risk,
        "kway_marginal": {"mean_tv": 0.25, "holdout_reference_mean_tv": 0.2},
        "wasserstein_score": {"score": 0.8, "holdout_reference_score": 0.85},
        "pca_marginal": {"score": 0.9, "holdout_reference_score": 0.95},
    }
    gates = [{"name": "ledger", "passed": True, "evidence": {"epsilon_total_pld": 3.0}}] + [
        g.to_dict() for g in risk_gates(risk, thresholds(None))
    ]
    return {
        "dataset": "toy",
        "generator": "dpwgan",
        "release_id": "dpwgan-0123456789ab",
        "rows": 150,
        "guarantee": "differentially private",
        "audience": "public",
        "privacy": {
            "epsilon_generator": 1.0,
            "epsilon_dataset_total": 2.0,
            "epsilon_dataset_total_rdp": 2.2,
            "delta": 1e-5,
            "lifetime_budget": 10.0,
            "release_epsilon": 1.0,
            "epsilon_allocated": {"dpwgan": 0.7, "weights": 0.5},
            "epsilon_lifetime_spent": 2.0,
            "epsilon_lifetime_remaining": 8.0,
            "events": [{"kind": "poisson_gaussian", "noise_multiplier": 1.1, "sample_rate": 0.1, "steps": 40}],
            "ledger_rows": [{"seq": 1, "stage": "train@dpwgan"}],
        },
        "gates": gates,
        "fidelity": {"x1": {"metric": "w1", "value": 0.01}},
        "fidelity_summary": {"mean_tv": 0.02, "max_tv": 0.03, "mean_w1": 0.01, "max_w1": 0.01},
        "utility": {
            "target": "b",
            "positive_class": "yes",
            "n_train_real": 200,
            "n_synth": 200,
            "n_test": 120,
            "models": {"logistic_regression": {"tstr": 0.8, "trtr": 0.85, "gap": 0.05}},
        },
        "hashes": {"schema": "s", "params": "p"},
        "metrics": metrics,
        "libraries": {"torch": "2.0"},
        "synthetic_summary": summarise_synthetic(synth, COLUMNS),
        "weights": {"estimator": "priv_mlp", "epsilon": 1.0, "khat": 0.3, "ess": 120.5, "label": "DP"},
        "plots": {
            "marginals_1way": plots.marginal_histograms(train, synth, COLUMNS),
            "membership_roc": plots.roc_curves(
                {"DOMIAS": risk["membership"]["domias"], "DCR": risk["membership"]["dcr"]}, "Membership"
            ),
            "synthetic_marginals": plots.marginal_histograms(None, synth, COLUMNS),
        },
    }


def steward(summary: dict) -> dict:
    """The steward's summary: its plots draw real rows (the public figure is the public report's)."""
    return {**summary, "plots": {k: v for k, v in summary["plots"].items() if k not in PUBLIC_PLOTS}}


CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=5000",
]


def chromium_binary() -> str:
    """Debian's chromium; the test is skipped with the reason where it is missing, failed under .ci/run."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("SYNTHRELEASE_REQUIRE_BROWSER") == "1":
            pytest.fail(
                "Chromium is not installed: run .ci/run (it installs Debian's chromium) or "
                "`apt-get install -y chromium`."
            )
        pytest.skip("Chromium is not installed (CI installs it via .ci/run)")
    return chromium
