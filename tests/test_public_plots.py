"""The public report's histograms are drawn over the schema's public bins (declared `bins:` edges and `atoms:`,
else the binned layout's equal-width bins over the bounds), and report.md links only the figures bundled with it."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from pipelines.data.bins import column_bins
from pipelines.data.schema import load_schema
from pipelines.reporting.plots import HIST_BINS, histogram_cells, marginal_histograms
from pipelines.reporting.report import public_markdown

SCHEMA = """
name: loans
description: a heavy-tailed loan amount with public bins, an integer age with public bins, a cost with an atom
source: {documentation: "test fixture"}
target: repaid
columns:
  repaid: {kind: binary, categories: ["no", "yes"]}
  amount: {kind: continuous, lower: 0, upper: 1000000, bins: [1000, 5000, 10000, 20000, 40000]}
  age: {kind: integer, lower: 18, upper: 100, bins: [30, 65]}
  cost: {kind: continuous, lower: 0, upper: 100, atoms: [0]}
"""
SYNTH = pd.DataFrame(
    {
        "repaid": ["yes", "no", "yes", "yes", "no", "yes", "yes", "no"],
        "amount": [500.0, 2000.0, 2500.0, 7000.0, 15000.0, 30000.0, 39999.0, 999999.0],
        "age": [18, 29, 30, 40, 64, 65, 80, 100],
        "cost": [0.0, 0.0, 0.0, 3.0, 10.0, 49.0, 51.0, 100.0],
    }
)
FIGURE_LINK = re.compile(r"\]\(([^)]+\.png)\)")


def schema(tmp_path):
    (tmp_path / "loans.yaml").write_text(SCHEMA)
    return load_schema(tmp_path / "loans.yaml")


def test_a_column_with_declared_bins_is_drawn_over_exactly_those_edges(tmp_path):
    sch = schema(tmp_path)
    amount, age, cost = (sch.column(c) for c in ("amount", "age", "cost"))
    assert column_bins(amount, HIST_BINS).edges == (0.0, 1000.0, 5000.0, 10000.0, 20000.0, 40000.0, 1000000.0)
    shares, labels = histogram_cells(SYNTH, amount)
    assert labels == ["[0, 1k)", "[1k, 5k)", "[5k, 10k)", "[10k, 20k)", "[20k, 40k)", "[40k, 1M]"]
    assert shares.tolist() == [1 / 8, 2 / 8, 1 / 8, 1 / 8, 2 / 8, 1 / 8]  # not one bar: the bulk is below 40k
    assert column_bins(age, HIST_BINS).lo == (18, 30, 65)
    shares, labels = histogram_cells(SYNTH, age)
    assert labels == ["18–29", "30–64", "65–100"] and shares.tolist() == [2 / 8, 3 / 8, 3 / 8]
    # no declared edges: the binned layout's HIST_BINS equal-width bins, after the atom's own bin
    shares, labels = histogram_cells(SYNTH, cost)
    assert column_bins(cost, HIST_BINS).edges == tuple(np.linspace(0.0, 100.0, HIST_BINS + 1).tolist())
    assert labels[:3] == ["= 0", "[0, 5)", "[5, 10)"] and labels[-1] == "[95, 100]" and len(labels) == HIST_BINS + 1
    assert shares[[0, 1, 2, 10, 11, HIST_BINS]].tolist() == [3 / 8, 1 / 8, 0.0, 1 / 8, 1 / 8, 1 / 8]
    shares, labels = histogram_cells(SYNTH, sch.column("repaid"))
    assert labels == ["no", "yes", "(outside)"] and shares.tolist() == [3 / 8, 5 / 8, 0.0]


def test_the_public_figure_is_a_function_of_the_synthetic_rows_and_the_schema(tmp_path):
    sch = schema(tmp_path)
    figure = marginal_histograms(None, SYNTH, sch.columns)
    assert figure.startswith(b"\x89PNG\r\n\x1a\n")
    assert figure == marginal_histograms(None, SYNTH.copy(), sch.columns)
    assert figure != marginal_histograms(None, SYNTH.assign(amount=SYNTH["amount"] * 0.5), sch.columns)


def test_report_md_links_only_the_figures_written_in_its_bundle(tmp_path):
    sch = schema(tmp_path)
    summary = {"dataset": "loans", "plots": {"synthetic_marginals": marginal_histograms(None, SYNTH, sch.columns)}}
    for bundled in ((), ("synthetic_marginals",)):
        bundle = tmp_path / f"bundle-{len(bundled)}"
        bundle.mkdir()
        (bundle / "report.md").write_text(public_markdown(summary, bundled))
        for name in bundled:
            (bundle / f"{name}.png").write_bytes(summary["plots"][name])
        links = FIGURE_LINK.findall((bundle / "report.md").read_text())
        assert links == [f"{name}.png" for name in bundled]
        assert all((bundle / link).is_file() for link in links)
