"""DVC re-runs a budget-spending stage only for a change to its data or its method.

Stage params come from dvc.yaml itself (tasks.common.STAGE_PARAMS), so the hashes every artefact carries
cover exactly what DVC tracks; moving the ledger, changing the device or the orchestration must not re-run
(and so re-charge) train@gen."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml

from pipelines.config import parse_params
from tasks import common
from support.project import copy_root, ledger_rows, sh

PROJECT = Path(__file__).resolve().parents[1]
SPENDING = ("prepare", "train", "weight")  # stages that reserve ledger events
NOT_THE_METHOD = (
    "privacy",
    "privacy.ledger",
    "privacy.lifetime_epsilon",
    "privacy.noise_key_file",
    "device",
    "orchestration",
)


def test_stage_params_are_read_from_dvc_yaml():
    stages = yaml.safe_load((PROJECT / "dvc.yaml").read_text())["stages"]
    # the stages track keys of the params stage's resolved file; budget tracks all of it (every section shapes
    # the allocation): absent, so hashes() takes it all
    resolved = "data/params.yaml"
    whole = {n for n, st in stages.items() if {resolved: None} in (st.get("do", st).get("params") or [])}
    assert whole == {"budget"} and set(common.STAGE_PARAMS) == set(stages) - whole
    assert stages["params"]["outs"] == [resolved] and "params.yaml" in stages["params"]["deps"]
    for name, stage in stages.items():
        if name not in whole:
            entries = stage.get("do", stage).get("params") or [{resolved: []}]
            assert len(entries) == 1 and list(common.STAGE_PARAMS[name]) == entries[0][resolved], name
    for name in SPENDING:
        assert not set(common.STAGE_PARAMS[name]) & set(NOT_THE_METHOD), name
    assert {"dataset", "privacy.delta", "privacy.internal_release", common.ITEM} <= set(common.STAGE_PARAMS["train"])


def test_train_hash_ignores_the_ledger_device_and_budget_but_not_the_method():
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())

    class Schema:
        def hash(self) -> str:
            return "s"

    def train_hash(p: dict) -> str:
        return common.hashes(parse_params(p), "train", Schema(), "dpwgan")["params"]

    base = train_hash(params)
    moved = {
        **params,
        "device": "cuda",
        "orchestration": {"task_runner": "dask"},
        "privacy": {
            **params["privacy"],
            "ledger": "postgresql+psycopg://steward@db/ledger",
            "lifetime_epsilon": 99.0,
            "noise_key_file": "/secure/key",
        },
    }
    assert train_hash(moved) == base
    assert train_hash({**params, "privacy": {**params["privacy"], "delta": 1e-6}}) != base
    assert train_hash({**params, "dpwgan": {**params["dpwgan"], "epsilon": 2.0}}) != base
    assert train_hash({**params, "ppem": {"epsilon": 2.0}}) == base  # another generator's section
    assert (
        common.hashes(parse_params(params), "evaluate", Schema())["params"]
        == common.hashes(parse_params(moved), "evaluate", Schema())["params"]
    )


@pytest.mark.slow
def test_moving_the_ledger_and_changing_device_spends_nothing(released_project, tmp_path):
    """A project released by `dvc repro` of one small generator, then the steward moves the ledger (copying the
    file), switches device, orchestration and the lifetime budget: a second `dvc repro` adds no ledger row, and
    the gate checks the chain against the head the release recorded."""
    root = copy_root(released_project, tmp_path)
    rows = ledger_rows(root)
    assert [r[1:] for r in rows if r[1] == "train@dpwgan"] == (  # DP-SGD, then the calibration's Gaussian
        [("train@dpwgan", "planned")] * 2 + [("train@dpwgan", "spent")] * 2
    )
    head = json.loads((root / "releases/breast_cancer/latest.json").read_text())["ledger_head"]
    assert head["seq"] == len(rows)

    moved = root / "vault" / "ledger.sqlite"
    moved.parent.mkdir()
    shutil.copy(root / "ledger" / "privacy.sqlite", moved)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["privacy"]["ledger"] = "vault/ledger.sqlite"
    params["privacy"]["lifetime_epsilon"] = 9.0
    params["device"] = "auto"
    params.setdefault("orchestration", {})["max_workers"] = 1
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    again = sh(["dvc", "repro"], root)
    out = again.stdout + again.stderr
    # budget re-runs on any params change (it tracks all of params.yaml), but an unchanged allocation retrains
    # nothing and spends nothing
    assert "Running stage 'budget'" in out and "Running stage 'train@dpwgan'" not in out, out[-3000:]
    assert "Running stage 'prepare'" not in out, out[-3000:]
    assert ledger_rows(root) == rows  # the old file: untouched
    with sqlite3.connect(moved) as con:
        assert con.execute("SELECT seq, stage, status FROM privacy_events ORDER BY seq").fetchall() == rows
    checks = json.loads((root / "reports/breast_cancer/dpwgan/checks.json").read_text())
    ledger_gate = next(g for g in checks["gates"] if g["name"] == "ledger")
    assert ledger_gate["passed"] and ledger_gate["evidence"]["expected_head"] == head  # re-run for the budget
    verified = json.loads(sh(["synthrelease", "ledger", "verify"], root).stdout)
    assert verified["rows"] == len(rows) and verified["expected_head_from"] == "releases/breast_cancer/latest.json"

    # a code edit re-trains (and re-charges) only where the edited file is code the stage runs
    def changed_after_editing(*files: str) -> set[str]:
        for f in files:
            (root / f).write_text((root / f).read_text() + "\n# an edit\n")
        sh(["dvc", "repro", "code"], root)
        return set(json.loads(sh(["dvc", "status", "--json"], root).stdout))

    assert not {"train@dpwgan", "prepare"} & changed_after_editing(
        "pipelines/evaluation/attacks/gates.py", "pipelines/generators/ppem.py", "pipelines/generators/aim.py"
    )
    assert "train@dpwgan" in changed_after_editing("pipelines/generators/base.py")
