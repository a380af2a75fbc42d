#!/usr/bin/env bash
# Sets up the environment and runs the offline demo on the embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/biobench demo "$@"
