#!/usr/bin/env bash
# Prepares .whl/ for bench/perf/gpu_check.sh on a lent GPU machine that has CUDA PyTorch but no network:
# the pure-Python packages biobench needs beyond that image (its transformers is older than biobench's
# floor; seqeval, pytorch-crf and datasets are missing), for CPython 3.12 on x86-64, plus flash-attn when a
# binary wheel exists on the index (PyPI ships its source only, so usually none). Run it here, in the repo
# root, then carry `.whl` with the device call. Each wheel is named with its version; one version each.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> "$(git rev-parse --git-path info/exclude)"
TRANSFORMERS=$("$PY" -c "import transformers; print(transformers.__version__)")
PLAT=(--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --only-binary=:all:)
"$PY" -m pip download -q --no-deps -d .whl "${PLAT[@]}" "transformers==$TRANSFORMERS" pytorch-crf datasets dill \
  "multiprocess" || { echo "pip download failed"; exit 1; }
"$PY" -m pip wheel -q --no-deps -w .whl seqeval  # sdist only on PyPI: build the pure-Python wheel here
"$PY" -m pip download -q --no-deps -d .whl "${PLAT[@]}" flash-attn 2>/dev/null \
  || echo "note: no binary flash-attn wheel on the index; gpu_check.sh will use sdpa"
ls -la .whl
du -sh .whl
