"""The public bundle holds nothing computed from real rows.

A canary: one real row gets a value no generator produces to 6 digits; after every stage has run on a
temporary root, no file of releases/<ds>/<id>/ may contain it, as decimal text (several roundings) or as
float64/float32 bytes. The steward report, which may show real-row statistics, lives under reports/ and is
labelled INTERNAL at its head and foot. A unit test feeds the public renderer a summary full of real-data
metrics and checks that none of them reaches the page.
"""

from __future__ import annotations

import base64
import json
import re
import struct

import pandas as pd
import pytest

from pipelines.config import load_params
from pipelines.reporting.report import INTERNAL, public_html, public_markdown, render_html
from tasks import common
from support.project import make_root, run_stages

CANARY_COLUMN, CANARY_ROW, CANARY = "mean_radius", 7, 12.345678  # inside the schema bounds [5, 30]
NEEDLES = [b"12.345678", b"12.34568", b"12.3457", struct.pack("<d", CANARY), struct.pack("<f", CANARY)]
# a synthetic table's decoded cells are searched for the canary at full precision only: ~13,000 DP-generated cells
# print "12.3457" by chance now and then (a mean_texture of 12.3457706 rounds to it), which is no leak
CELL_NEEDLES = [b"12.345678", struct.pack("<d", CANARY), struct.pack("<f", CANARY)]
PUBLIC_FILES = {"synthetic.parquet", "manifest.json", "report.html", "report.md", "synthetic_marginals.png"}
RUN_FILES = {"comparison.html", "comparison.md"}  # the run's public comparison page
TSTR = 0.987654321  # a distinctive real-data metric


def test_public_report_drops_every_real_data_metric():
    summary = {
        "dataset": "toy",
        "generator": "dpwgan",
        "release_id": "dpwgan-0123456789ab",
        "rows": 10,
        "privacy": {
            "epsilon_generator": 1.25,
            "delta": 1e-5,
            "secret_real_count": 424242,
            "ledger_rows": [{"seq": 1, "stage": "train@dpwgan", "real_mean": 31.4159}],
        },
        "gates": [
            {
                "name": "membership_inference",
                "passed": True,
                "evidence": {"auc_lower": 0.7777777},
                "data_dependent": True,
            },
            {"name": "ledger", "passed": True, "evidence": {"epsilon_total_pld": 1.25}, "data_dependent": False},
        ],
        "utility": {"models": {"logistic_regression": {"tstr": TSTR, "trtr": 0.8765432}}},
        "fidelity": {"x": {"metric": "w1", "value": 0.5555555}},
        "metrics": {"privacy_risk": {"membership": {"domias": {"auc": 0.6666666}}}},
        "validation": {"rows_in": 571, "rows_dropped": 2},
        "weights": {"khat": 0.4321, "ess": 87.5, "analysis": {"w1_holdout": 0.1234567}},
        "synthetic_summary": {"rows": 10, "numeric": {"x": {"mean": 0.25}}, "categorical": {}},
        "hashes": {"schema": "sha256:ab", "params": "sha256:cd"},
        "plots": {"pca_2way": b"\x89PNG real rows", "synthetic_marginals": b"\x89PNG synthetic"},
    }
    for page in (public_html(summary), public_markdown(summary)):
        for leaked in (
            "0.9877",
            "0.8765",
            "0.7778",
            "0.5556",
            "0.6667",
            "424242",
            "31.42",
            "571",
            "0.1235",
            "Privacy risk",
            "TSTR",
            "Share this report only",
            INTERNAL,
        ):
            assert leaked not in page, leaked
        for shown in (
            "1.25",
            "1e-05",
            "0.4321",
            "87.5",
            "membership_inference",
            "PASS",
            "yes: pass/fail bit only",
            "sha256:ab",
            "train@dpwgan",
        ):
            assert shown in page, shown
    html = public_html(summary)
    images = [base64.b64decode(i) for i in re.findall(r'src="data:image/png;base64,([^"]+)"', html)]
    assert images == [b"\x89PNG synthetic"]  # the real-row plot is dropped
    steward = render_html(summary)  # the internal report shows them, labelled at head and foot
    assert "0.9877" in steward and steward.count(INTERNAL) >= 3


@pytest.mark.slow
def test_canary_real_value_never_reaches_the_public_bundle(tmp_path, bc_raw):
    from tasks.check import check
    from tasks.evaluate import evaluate
    from tasks.release import release
    from tasks.train import train
    from tasks.weight import weight

    root = make_root(
        tmp_path,
        {
            "dataset": {"source": "raw.csv"},
            "generators": ["dpwgan"],
            "dpwgan": {"steps": 20},
            "weights": {"generators": ["dpwgan"]},
            "release": {"select": "all", "test_epsilon": 0.1, "non_dp_gates": "advise"},
            "evaluate": {"kway_subsets": 10, "ot_max_rows": 200, "attacks": {"n_attacks": 100}},
        },
    )
    raw = bc_raw.copy()
    raw.loc[raw.index[CANARY_ROW], CANARY_COLUMN] = CANARY
    raw.to_csv(root / "raw.csv", index=False)
    run_stages(root, "budget")
    params = load_params(root / "params.yaml")
    train(params, "dpwgan", "canary", root)
    evaluate(params, "dpwgan", root)
    weight(params, "dpwgan", "canary", root)
    check(params, "dpwgan", root)
    index = release(params, root)

    validated = pd.read_parquet(root / "data/raw/breast_cancer/validated.parquet")
    assert (validated[CANARY_COLUMN] == CANARY).sum() == 1  # the canary survived validation: a real row's value
    [entry] = index["released"]
    bundle, run = root / entry["path"], root / index["comparison"]["public"]
    assert {f.name for f in bundle.iterdir()} == PUBLIC_FILES
    links = re.findall(r"\]\(([^)]+\.png)\)", (bundle / "report.md").read_text())
    assert all((bundle / link).is_file() for link in links), links  # report.md links only files of its bundle
    assert run.parent == root / "releases/breast_cancer/runs" and {f.name for f in run.iterdir()} == RUN_FILES
    for f in [*bundle.iterdir(), *run.iterdir()]:
        data, cells = f.read_bytes(), b""
        if f.suffix == ".parquet":  # Parquet pages are compressed: search the decoded cells too, as text and bytes
            table = pd.read_parquet(f)
            numeric = table.select_dtypes("number").to_numpy(dtype=float)
            cells = table.to_csv(float_format="%.10g").encode() + numeric.tobytes() + numeric.astype("<f4").tobytes()
        for needle in NEEDLES:
            assert needle not in data, (f.name, needle)
        for needle in CELL_NEEDLES:
            assert needle not in cells, (f.name, "cells", needle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["noise_seed_used"] == [] and manifest["noise_seed_statement"] is None  # keyed noise only
    # every event of the run (prepare's row-loss test, the generator, the weights, the release test) within the
    # release ε: the budget stage divided it with prepare's part pinned
    privacy = manifest["privacy"]
    assert privacy["epsilon_allocated"]["prepare"] == 0.05 and privacy["release_epsilon"] == 1.0
    assert 0.99 < privacy["epsilon_dataset_total"] <= privacy["release_epsilon"]
    assert privacy["unit"] == "row" and "a person with k rows" in privacy["unit_statement"]  # what one ε protects
    assert all(set(g) == {"name", "passed", "data_dependent"} for g in manifest["gates"])
    # every public bit DP (release.non_dp_gates: advise): the ledger gate, the DP release test and the DP weights' k̂;
    # no row-reading gate, no verdict word, nothing outside the guarantee
    assert [(g["name"], g["data_dependent"]) for g in manifest["gates"]] == [
        ("ledger", False),
        ("release_test", False),
        ("importance_weights", False),
    ]
    assert manifest["utility_verdict"] is None and manifest["computed_from_real_data_outside_dp_guarantee"] == []
    assert manifest["every_public_value_private"] and "DP release test" in manifest["statement"]
    checks = json.loads((root / "reports/breast_cancer/dpwgan/checks.json").read_text())
    tested = {g["name"]: g for g in checks["gates"]}["release_test"]["evidence"]
    assert checks["deciding_gates"] == ["ledger", "release_test"] and len(checks["gates"]) > 3
    assert manifest["privacy"]["release_test"]["ledger_rows"] == tested["ledger_row_ids"]
    assert set(tested["ledger_row_ids"]) <= set(manifest["privacy"]["ledger_rows"])

    page = (bundle / "report.html").read_text()
    metrics = json.loads((root / "reports/breast_cancer/dpwgan/metrics.json").read_text())
    tstr = f"{metrics['utility']['models']['logistic_regression']['tstr']:.4g}"
    assert "Share this report only" not in page and INTERNAL not in page and "TSTR" not in page
    assert page.count("data:image/png") == 1  # the synthetic-only marginals
    assert "Privacy unit" in page and "a person with k rows in the table is protected only at about k" in page

    steward = root / index["steward_reports"]["dpwgan"]
    assert steward.parts[len(root.parts)] == "reports" and (steward / "steward_report.html").exists()
    html, md = (steward / "steward_report.html").read_text(), (steward / "steward_report.md").read_text()
    assert html.count(INTERNAL) >= 3 and md.count(INTERNAL) >= 2
    assert html.index(INTERNAL) < html.index("<h1>") and html.rindex(INTERNAL) > html.rindex("</table>")
    assert tstr in html and tstr in md  # the real-data evaluation is the steward's
    assert not any(p.name.startswith("steward") for p in (root / "releases").rglob("*"))
    compared = root / index["comparison"]["steward"]
    assert (
        compared.parts[len(root.parts)] == "reports" and INTERNAL in (compared / "steward_comparison.html").read_text()
    )
    assert (
        "TSTR" not in (run / "comparison.html").read_text()
        and "TSTR" in (compared / "steward_comparison.md").read_text()
    )

    # a second release of the same run writes nothing new: the same files, byte for byte
    written = {
        f: f.read_bytes()
        for d in ("releases", "reports/breast_cancer/steward")
        for f in (root / d).rglob("*")
        if f.is_file()
    }
    assert release(params, root) == index
    assert {
        f: f.read_bytes()
        for d in ("releases", "reports/breast_cancer/steward")
        for f in (root / d).rglob("*")
        if f.is_file()
    } == written

    assert_non_dp_gates_publish_nothing(params, root)

    # check@dpwgan again on the same table and rows: the bit already paid for, no new ledger row
    seqs = [r["seq"] for r in common.ledger(params, root).rows("breast_cancer")]
    again = {g["name"]: g for g in check(params, "dpwgan", root)["gates"]}["release_test"]
    assert (
        again["evidence"]["reused"]
        and again["passed"] == {g["name"]: g for g in checks["gates"]}["release_test"]["passed"]
    )
    assert [r["seq"] for r in common.ledger(params, root).rows("breast_cancer")] == seqs


def releases_tree(root) -> dict:
    return {f.relative_to(root): f.read_bytes() for f in (root / "releases").rglob("*") if f.is_file()}


def assert_non_dp_gates_publish_nothing(params, root) -> None:
    """Flip each gate that reads real rows outside DP (every gate but the ledger gate and the DP release test), of
    a released and of a refused table, and change its reason text: no byte under releases/ may change (latest.json,
    the bundle, the run's comparison page and the run id naming it), since under `non_dp_gates: advise` those bits
    decide nothing and reach only the steward report."""
    import shutil
    from tasks.release import release

    path = root / "reports/breast_cancer/dpwgan/checks.json"
    original = json.loads(path.read_text())
    non_dp = [g["name"] for g in original["gates"] if g["name"] not in ("ledger", "release_test")]
    assert {"membership_inference", "utility"} <= set(non_dp) and len(non_dp) >= 5
    for refused in (False, True):
        base = json.loads(json.dumps(original))
        if refused:  # the DP release test said no: the table is refused by a deciding gate
            next(g for g in base["gates"] if g["name"] == "release_test")["passed"] = False
            base["passed"] = False
        trees = []
        for flipped in [None, *non_dp]:
            checks = json.loads(json.dumps(base))
            for g in checks["gates"]:
                if g["name"] == flipped:
                    g["passed"] = not g["passed"]
                    g["evidence"] = {**g["evidence"], "reason": f"canary reason of {flipped}", "verdict": "weak"}
            path.write_text(json.dumps(checks))
            shutil.rmtree(root / "releases")
            index = release(params, root)
            trees.append(releases_tree(root))
            if refused:
                assert index["released"] == [] and index["refused"] == [
                    {"generator": "dpwgan", "failed_gates": ["release_test"], "reasons": []}
                ]
            else:
                assert index["refused"] == [] and len(index["released"]) == 1
        assert all(t == trees[0] for t in trees[1:]), refused
        assert not any(b"canary reason" in data for data in trees[-1].values())
    path.write_text(json.dumps(original))
    shutil.rmtree(root / "releases")
    release(params, root)
