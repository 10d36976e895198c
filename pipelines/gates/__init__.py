"""Every release gate, each a `release.Gate` (a rule turning one measurement into GateResults, declaring whether
its bit is within the DP guarantee), and the policy that decides publication from their results (`policy.decide`).

- ``ledger``: the recorded ε against the lifetime budget, and the ledger's integrity (public metadata only);
- ``release_test``: the DP release test's bit (the test itself: pipelines/privacy/release_test.py);
- ``ppem``, ``support_points``: a generator's own gates, which it returns from `release_gates`;
- ``risk``: the privacy-risk gates over the attacks' results (the attacks and their bounds:
  pipelines/evaluation/attacks);
- ``utility``: the utility policy over the verdict (pipelines/evaluation/verdict.py);
- ``evaluation``: the risk and utility gates over evaluate's metrics.json, or their failure where it did not run;
- ``weights``: the importance weights' PSIS k̂ gate (the weight stage's).
The gates' measurements stay with the code that computes them; only thresholds, pass/fail and evidence live here."""
