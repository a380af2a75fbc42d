#!/usr/bin/env bash
# Sets up the environment and runs the whole test suite (fast + slow + browser + the one-node SLURM cluster).
# Both cores, four pytest-xdist workers (one math thread each): much of the suite's time is spent waiting on
# SLURM's clock, a claim or a server (and a SLURM job's CPU is not a worker's), and the other workers train
# meanwhile. Measured on a fresh clone alone on the 2-core machine (issue 61): pytest 617-642 s with four workers,
# the cores 94-95% busy (from /proc/stat), against 900-1,005 s with three on the last stop's code (which also
# trained docs/API.md's seed 43, ~60 CPU-s; not rerun with three). The tests that share the browser or a costly
# fixture run in one worker (tests/conftest.py: pytest_collection_modifyitems), the long ones are handed out
# first. Quick loop while developing: .venv/bin/pytest -m "not slow" -n 3
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install_browser.sh || echo "note: chromium not installed; the browser test will be skipped"
bash scripts/install_slurm.sh || echo "note: SLURM not installed; the one-node cluster tests will be skipped"
.venv/bin/ruff check .
# This machine's environment sets PYTHONDONTWRITEBYTECODE=1: every process of the suite (four workers, a few
# hundred eval, SLURM and server subprocesses) then compiles biobench's modules and pytest rewrites the test modules
# again. Compiled once here, they are read back (0.3 s an eval subprocess; __pycache__ is ignored by git).
unset PYTHONDONTWRITEBYTECODE
set +e
.venv/bin/python -m pytest -n 4 --dist loadgroup --no-loadscope-reorder --durations=20 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "no tests collected"; exit 1; fi
exit "$rc"
