#!/usr/bin/env bash
# One entry point for the two quick-start commands:
#   ./run.sh release   set up (first time) and run a full release of the bundled default data set (dvc repro)
#   ./run.sh test      set up (first time) and run the whole test suite, slow tests included
# Extra arguments go to the underlying command (dvc repro / pytest), e.g. ./run.sh test -m "not slow".
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3.11}
export PREFECT_SERVER_ANALYTICS_ENABLED=false GX_ANALYTICS_ENABLED=false DO_NOT_TRACK=1 DVC_NO_ANALYTICS=1
export PREFECT_HOME=${PREFECT_HOME:-$PWD/.prefect} PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=120
export PATH="$PWD/.venv/bin:$PATH"

setup() {
  # (Re)install when the venv is missing or requirements.lock/pyproject.toml changed since the last install.
  local stamp; stamp=$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
  if [ -x .venv/bin/python ] && [ "$(cat .venv/.installed 2>/dev/null)" = "$stamp" ]; then return; fi
  command -v "$PYTHON" >/dev/null || { echo "error: $PYTHON not found; install Python 3.11 or set PYTHON=/path/to/python3.11" >&2; exit 1; }
  echo "setting up .venv (pinned dependencies from requirements.lock; first time only)..." >&2
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.lock
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
  echo "$stamp" > .venv/.installed
}

cmd=${1:-}; shift || true
case "$cmd" in
  release)
    setup
    git rev-parse --git-dir >/dev/null 2>&1 || { echo "error: run inside the git checkout (dvc repro needs it)" >&2; exit 1; }
    dvc repro "$@"
    echo; cat "releases/$(.venv/bin/python -c 'import yaml;print(yaml.safe_load(open("params.yaml"))["dataset"]["name"])')/latest.json"
    ;;
  test)
    setup
    # the habits CI enforces (pyproject.toml): lint, format and the type-checked modules, before the tests
    ruff check --quiet . && ruff format --check --quiet . && mypy --no-error-summary || exit 1
    # one pytest-xdist worker per core (SYNTHRELEASE_TEST_WORKERS overrides; 0 = in this process)
    set +e; pytest -n "${SYNTHRELEASE_TEST_WORKERS:-auto}" --dist worksteal "$@"; rc=$?; set -e
    [ "$rc" -eq 5 ] && { echo "no tests were collected" >&2; exit 1; }
    exit "$rc"
    ;;
  *) sed -n '2,6p' "$0"; exit 2 ;;
esac
