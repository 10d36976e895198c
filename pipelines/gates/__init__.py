"""Release gates: functions of (model, data, ledger) returning pass/fail and evidence (`release`); the DP release
test is a mechanism (pipelines/privacy/release_test.py), the privacy-risk gates live with the attacks
(pipelines/evaluation/attacks/gates.py)."""
