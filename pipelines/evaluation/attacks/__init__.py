"""Privacy-risk attacks on a released synthetic table S, run against real training rows (members) and real
holdout rows (non-members, and a reference/control set the attacker is assumed to have).

- ``membership``: density-ratio (DOMIAS) and distance-to-closest-record membership inference; AUC with a
  bootstrap interval, TPR at 1 % FPR.
- ``inference``: attribute inference by a classifier fitted on S, against one fitted on holdout rows.
- ``anonymeter``: singling-out, linkability and inference risks with a control set (Giomi et al. 2023).
- ``disclosure``: presence and attribute disclosure (Diesendruck's thesis §4.3), exact-match and
  near-duplicate rates.
- ``gates``: the statistics (family-wise bounds) the release gates of `risk_gates` compare (pipelines/gates/risk.py).

Every attack reads real rows: its numbers are not covered by the DP guarantee (they are evidence for the
privacy officer, and the gates built on them say so).
"""
