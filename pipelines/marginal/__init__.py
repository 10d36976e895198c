"""Marginal-based DP synthesis (MST, AIM) on Private-PGM (`mbi`): schema-only discretisation, Gaussian
measurement of count marginals, exponential-mechanism selection, graphical-model estimation and sampling.

Layout: the public bins are `pipelines.data.bins` (shared with the deep generators); here `measure` (Gaussian
mechanism on counts), `exponential` (the exponential mechanism over marginals' quality scores), `estimate` (mbi
wrappers: estimation, sampling, persistence), `mst` and `aim` (the two mechanisms and their budget plans). Nothing
here imports a generator; `pipelines/generators/mst.py` and `aim.py` wrap these in the generator contract. Design
and derivations: docs/aim-mst.md.
"""
