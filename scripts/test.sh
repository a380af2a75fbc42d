#!/usr/bin/env bash
# Sets up the environment and runs the whole test suite (fast + slow + browser + the one-node SLURM cluster).
# Both cores (pytest-xdist): the tests that share the SLURM cluster, the browser or a costly fixture run in one
# worker (tests/conftest.py: pytest_collection_modifyitems), the slow ones are handed out first.
# Quick loop while developing: .venv/bin/pytest -m "not slow" -n 2
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install_browser.sh || echo "note: chromium not installed; the browser test will be skipped"
bash scripts/install_slurm.sh || echo "note: SLURM not installed; the one-node cluster tests will be skipped"
.venv/bin/ruff check .
set +e
.venv/bin/python -m pytest -n 2 --dist loadgroup --no-loadscope-reorder --durations=20 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "no tests collected"; exit 1; fi
exit "$rc"
