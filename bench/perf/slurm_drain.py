"""Makespan of a grid of unequal runs drained by a 2-element SLURM array: static shards vs run claims.

The grid is 2 long and 8 short fine-tuning runs (generated demo-cls tasks, one seed each, 1 epoch of a tiny
ModernBERT; the long ones train on --long-train examples, the short ones on --short-train), listed so that the
static split (`--shard $SLURM_ARRAY_TASK_ID/2 --no-claims`, runs i, i+2, ...) gives both long runs to element 0,
as a static split of a real grid does to whichever element draws the 4,000-step NER runs. The claims arm runs
the same array with eval's default: each element claims the next unfinished run. Each arm has its own fresh
results folder; the makespan is the time from `sbatch` to the last element finished, polled every 0.5 s. Both
arms must write the same 10 results with byte-identical predictions (one thread per run: the same kernels).

Needs a running SLURM controller (SLURM_CONF). From a checkout, the tests' one-node cluster (as root):

    .venv/bin/python -m tests.slurm_cluster /tmp/slurm &     # prints: export SLURM_CONF=/tmp/slurm/slurm.conf
    export SLURM_CONF=/tmp/slurm/slurm.conf
    .venv/bin/python -m biobench.perf.slurm_drain
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from biobench.perf.perf_common import (
    ARM_WINDOWS,
    ArmClock,
    CpuWindow,
    base_parser,
    finish,
    print_table,
    safe_ratio,
    script,
)
from biobench.store.record import predictions_path
from biobench.tasks.synthetic import demo_corpus
from biobench.training.presets import build_modernbert_mlm, train_tokenizer

ARMS = {"static": "--shard $SLURM_ARRAY_TASK_ID/2 --no-claims", "claims": ""}
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def task_order(long_ids: list[str], short_ids: list[str]) -> list[str]:
    """L1 S1 L2 S2 S3 ...: the runs at even positions (static element 0) include both long ones."""
    order = [long_ids[0], short_ids[0], long_ids[1], *short_ids[1:]]
    assert {order[i] for i in range(0, len(order), 2)} >= set(long_ids)
    return order


def write_inputs(root: Path, long_train: int, short_train: int, seed: int = 42) -> list[str]:
    """The tiny model folder and the 10 task files; the task ids in grid order."""

    tokenizer = train_tokenizer(demo_corpus(400), vocab_size=500)
    model = build_modernbert_mlm(tokenizer, "tiny", seed=seed)
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    long_ids, short_ids = ["long-1", "long-2"], [f"short-{i}" for i in range(1, 9)]
    for n, task in enumerate(long_ids + short_ids):
        size = long_train if task.startswith("long") else short_train
        (root / f"{task}.json").write_text(json.dumps({
            "id": task, "lang": "fr", "kind": "classification", "max_length": 64, "protocol": "fr",
            "paper_task": False, "metric": "macro_f1",
            "sources": [{"type": "generated", "generator": "demo-cls",
                         "options": {"seed": seed + n, "n_train": size, "n_dev": 16, "n_test": 32}}]}))
    return task_order(long_ids, short_ids)


def write_grid(root: Path, arm: str, tasks: list[str]) -> Path:
    grid = root / f"grid-{arm}.toml"
    files = ", ".join(json.dumps(f"{t}.json") for t in tasks)
    grid.write_text(f'results = "results-{arm}"\ntask_files = [{files}]\n\n[[grid]]\nname = "drain"\n'
                    f"tasks = {json.dumps(tasks)}\nseeds = \"42\"\noverrides = {{ epochs = 1, batch_size = 16 }}\n"
                    f'models = [{{ model = "model", name = "tiny" }}]\n')
    return grid


def squeue_states(job: int) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-t", "all", "-j", str(job), "-o", "%T"], capture_output=True,
                         text=True, timeout=30).stdout
    return out.split()


def run_arm(root: Path, arm: str, tasks: list[str], timeout: float, device: str = "cpu",
            threads: int = 1) -> dict[str, Any]:
    """One arm as a 2-element array; its makespan, and its disturbance: the jobs' own CPU seconds (bash's
    `times` in each element) against the machine's busy CPU over the arm (perf_common.CpuWindow), since the
    jobs are not children of this process."""
    grid = write_grid(root, arm, tasks)
    command = (f"{shlex.quote(sys.executable)} -m biobench.cli eval --config {shlex.quote(str(grid))} --device "
               f"{shlex.quote(device)} --threads {threads} --no-progress {ARMS[arm]}")
    times = root / f"{arm}-cpu"
    times.mkdir(exist_ok=True)
    load_before = os.getloadavg()[0]
    start = time.monotonic()
    clock = ArmClock(cpu=lambda: 0.0).__enter__()
    wrap = f"OMP_NUM_THREADS={threads} {command}; rc=$?; times > {shlex.quote(str(times))}/$SLURM_ARRAY_TASK_ID; exit $rc"
    submitted = subprocess.run(["sbatch", "--parsable", "--array=0-1", "--chdir", str(root), "-o",
                                str(root / f"{arm}-%A_%a.out"), "--wrap", wrap],
                               capture_output=True, text=True, timeout=30, check=True)
    job = int(submitted.stdout.strip().split(";")[0])
    while True:
        states = squeue_states(job)
        if len(states) == 2 and all(s in FINISHED for s in states):
            break
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{arm}: array {job} still {states} after {timeout:.0f} s")
        time.sleep(0.5)
    makespan = time.monotonic() - start
    clock.__exit__(None, None, None)
    assert clock.window is not None  # set by __exit__
    jobs_cpu = sum(job_cpu_s(path.read_text()) for path in times.iterdir())
    window = CpuWindow(clock.window.wall_s, jobs_cpu, clock.window.machine_busy_s, clock.window.cores)
    ARM_WINDOWS.append((arm, window))
    results = sorted((root / f"results-{arm}").glob("*/*/seed-*.json"))
    claims_left = sorted((root / f"results-{arm}").glob("*/*/*.claim"))
    return {"arm": arm, "job": job, "states": ",".join(sorted(set(states))), "makespan_s": makespan,
            "jobs_cpu_s": jobs_cpu, "disturbance": window.flag or "quiet",
            "results": len(results), "claims_left": len(claims_left), "loadavg_before": load_before,
            "loadavg_after": os.getloadavg()[0],
            "predictions": {p.parent.name: hashlib.sha256(predictions_path(p).read_bytes()).hexdigest()
                            for p in results}}


def job_cpu_s(times_output: str) -> float:
    """The children's user + system seconds from bash's `times` (its second line: '0m12.5s 0m0.8s')."""
    lines = times_output.strip().splitlines()
    total = 0.0
    for field in (lines[1].split() if len(lines) > 1 else []):
        minutes, _, secs = field.rstrip("s").partition("m")
        try:
            total += int(minutes) * 60 + float(secs)
        except ValueError:
            continue
    return total


def main() -> int:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--long-train", type=int, default=3000, help="training examples of each long run")
    parser.add_argument("--short-train", type=int, default=64, help="training examples of each short run")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds an arm may take")
    parser.add_argument("--workdir", type=Path, help="keep the inputs, logs and results here (default: a "
                        "temporary folder, removed)")
    args = parser.parse_args()
    if args.quick:
        args.long_train, args.short_train = 1500, 32
    if not os.environ.get("SLURM_CONF") and not Path("/etc/slurm/slurm.conf").exists():
        print("error: no SLURM cluster: set SLURM_CONF (python -m tests.slurm_cluster DIR starts the tests' "
              "one-node cluster)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="slurm-drain-") as tmp:
        root = args.workdir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        tasks = write_inputs(root, args.long_train, args.short_train, args.seed)
        device = "cpu" if args.device == "auto" else args.device  # the test cluster's node has no GPU
        rows = [run_arm(root, arm, tasks, args.timeout, device, args.threads or 1) for arm in ARMS]
    print(f"grid: 2 long runs ({args.long_train} examples) + 8 short ({args.short_train}), 1 epoch each, "
          "tiny ModernBERT, 2 array elements, one thread each")
    print_table(rows, [("arm", "arm", "s"), ("makespan_s", "makespan s", ".1f"), ("results", "results", "d"),
                       ("claims_left", "claims left", "d"), ("states", "states", "s"),
                       ("jobs_cpu_s", "jobs CPU s", ".1f"), ("disturbance", "disturbance", "s"),
                       ("loadavg_before", "load before", ".2f"), ("loadavg_after", "load after", ".2f")])
    same = rows[0]["predictions"] == rows[1]["predictions"] and all(r["results"] == len(tasks) for r in rows)
    print(f"same {len(tasks)} results with identical predictions in both arms: {same}")
    print(f"/proc/loadavg: {Path('/proc/loadavg').read_text().strip()}")
    report = {"rows": [{k: v for k, v in r.items() if k != "predictions"} for r in rows], "identical": same}
    return finish(report, args.out, safe_ratio(rows[0]["makespan_s"], rows[1]["makespan_s"]) if same else None)


if __name__ == "__main__":
    raise SystemExit(script(main))
