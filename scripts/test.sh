#!/usr/bin/env bash
# Sets up the environment and runs the whole test suite (fast + slow + browser + the one-node SLURM cluster).
# Quick loop while developing: .venv/bin/pytest -m "not slow"
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install_browser.sh || echo "note: chromium not installed; the browser test will be skipped"
bash scripts/install_slurm.sh || echo "note: SLURM not installed; the one-node cluster tests will be skipped"
.venv/bin/ruff check .
set +e
.venv/bin/python -m pytest --durations=20 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "no tests collected"; exit 1; fi
exit "$rc"
