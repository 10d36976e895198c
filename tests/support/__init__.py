"""What the tests share, imported as `from support.project import make_root` (tests/ is on sys.path: pytest's
rootdir conftest, tests/conftest.py, in its default import mode). No test module imports another test module
(tests/test_imports.py): a helper, constant or fixture two test modules use lives here. Nothing here is collected
as a test: no module is named test_*.py and no function or class test_*.

  project.py       the project builder of the end-to-end tests (make_root, run_stages, sh, env, ledger_rows, SMALL)
  ledger.py        FakeSession, the one in-memory ledger session, and its Refused
  generators.py    MIXED and its rows, the contract's TINY configurations, GuardedData, the CSPRNG-draw checks
  marginal.py      the marginal methods' toy LAYOUT, its rows and their encoded table on disk
  calibration.py   the marginal calibration's cliques and tables on MIXED
  evaluation.py    DEPENDENT and its rows, their shuffle, RowsModel
  config.py        a minimal root with edited params (root_with) and its ledger's row count
  operations.py    concurrent reservations, a one-generator configuration, a real Prefect server and its API
  privacy_unit.py  the visits schema with a declared privacy unit, its rows and key
  report.py        the release summary fixture, its steward's form, the Chromium to render a report with
"""
