"""Shared fixtures: the two public schemas and their bundled raw tables (read once per session).

Determinism: every test runs with ONE thread (torch intra- and inter-op, OpenMP, MKL, OpenBLAS, set
here before torch or NumPy is imported, and inherited by the stages the tests start as subprocesses),
so that float reductions, hence every trained network and every number a test asserts on, do not
depend on the machine's core count. Together with the seeded streams of pipelines/privacy/noise.py
(noise_seed in tests; ε = inf derives its streams from the public seed) a test gives the same numbers
on every run.

Parallel runs (`./run.sh test` runs pytest-xdist with one worker per core): each worker gets its own Prefect
home (`<PREFECT_HOME>-<worker>`), so that two in-process Prefect runs never share one SQLite database.
"""

from __future__ import annotations

import os
import sys

THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
for _name in THREAD_ENV:
    os.environ[_name] = "1"
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("PREFECT_HOME"):
    os.environ["PREFECT_HOME"] = f"{os.environ['PREFECT_HOME']}-{os.environ['PYTEST_XDIST_WORKER']}"

from pathlib import Path  # noqa: E402

import absl.logging  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from pipelines.data.readers import read_table  # noqa: E402
from pipelines.data.schema import Schema, load_schema  # noqa: E402

# dp_accounting imports absl, whose log handler keeps the sys.stderr of the moment (under pytest: a capture file)
# and closes it when Prefect's logging setup (dictConfig, at `import prefect`) clears the handlers; pytest then
# fails the running test on its closed capture file. absl never closes the process's own stderr.
absl.logging.get_absl_handler().python_handler.stream = sys.__stderr__

torch.set_num_threads(1)
torch.set_num_interop_threads(1)

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


@pytest.fixture(scope="session")
def adult_schema() -> Schema:
    return load_schema(SCHEMAS / "adult.yaml")


@pytest.fixture(scope="session")
def bc_schema() -> Schema:
    return load_schema(SCHEMAS / "breast_cancer.yaml")


@pytest.fixture(scope="session")
def adult_raw(adult_schema: Schema) -> pd.DataFrame:
    return read_table("bundled:adult", adult_schema)[0]


@pytest.fixture(scope="session")
def bc_raw(bc_schema: Schema) -> pd.DataFrame:
    return read_table("bundled:breast_cancer", bc_schema)[0]


@pytest.fixture(scope="session")
def released_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A released project (`support.operations.build_released`), built once per test run and shared by every xdist
    worker (their base temporary directories have one parent); a test works on its own `support.project.copy_root`."""
    from support.operations import build_released
    from support.project import built_once

    base = tmp_path_factory.getbasetemp()
    return built_once(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base, "released", build_released)


# fixtures that train a model, run stages or sample a table, shared by a module's tests: a test that uses one is
# an integration test (the unit subset, -m "not slow and not integration", leaves them out)
TRAINING_FIXTURES = {"cancer_verdicts", "fitted", "summary", "prepared", "trained"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if TRAINING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
