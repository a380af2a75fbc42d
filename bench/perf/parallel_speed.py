"""Runs per hour of `biobench eval --parallel N` for N = 1, 2, 4 on the same grid, on the same machine, in one
run of this script (and `auto` on a GPU: as many as its memory fits).

Each arm is a whole `biobench eval` command in a fresh process with a fresh results folder, so what is timed
is what a user waits for: model loading, every child's start-up, feature building, training and evaluation of
every run of the grid. The arms share the CPU threads given (`--threads`, default all cores): N = 1 trains
each run with all of them, N = 4 four runs with a quarter each. The arms also check each other: the number of
runs finished and, when every arm gives a run the same number of threads, byte-identical predictions (on a
CPU, a different thread count may change float sums, hence predictions: reported, not failed).

    .venv/bin/python -m biobench.perf.parallel_speed --quick       # all-MiniLM-L6-v2, gad + ncbi-disease
    .venv/bin/python -m biobench.perf.parallel_speed --device cuda --arms 1,2,4,auto --model DrBERT --tasks diamed
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from biobench.perf.perf_common import (
    base_parser,
    environment,
    finish,
    offline_environment,
    print_table,
    safe_ratio,
    script,
)
from biobench.runtime.device import resolve_device

QUICK = {"seeds": "1-2", "limit_train": 100, "epochs": 1, "max_length": 64}
FULL = {"seeds": "1-4", "limit_train": 1000, "epochs": 2, "max_length": 128}


def parse_args(argv: list[str] | None = None):
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="alias, hub id or local model folder")
    parser.add_argument("--tasks", default="gad,ncbi-disease", help="comma-separated task ids")
    parser.add_argument("--arms", default="1,2,4", help="comma-separated --parallel values (numbers or auto)")
    parser.add_argument("--seeds", help=f"seeds of the grid (default: {QUICK['seeds']})")
    parser.add_argument("--limit-train", type=int, help="train examples per run (default: quick 100, else 1000)")
    parser.add_argument("--epochs", type=int, help="epochs per run (default: quick 1, else 2)")
    parser.add_argument("--max-length", type=int, help="max tokens per input (default: quick 64, else 128)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of every arm (interleaved); medians reported")
    parser.add_argument("--data-dir", help="task data folder (default: $BIOBENCH_DATA)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds an arm may take before it counts failed")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    for name, value in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    from biobench.parallel import parallel_value

    try:
        args.arm_values = [parallel_value(a) for a in args.arms.split(",") if a.strip()]
    except Exception as err:  # argparse.ArgumentTypeError
        parser.error(f"--arms: {err}")
    return args


def eval_command(args, parallel: int | str, results: Path, threads: int) -> list[str]:
    command = [sys.executable, "-m", "biobench.cli", "eval", "--model", args.model, "--tasks", args.tasks,
               "--seeds", args.seeds, "--epochs", str(args.epochs), "--limit-train", str(args.limit_train),
               "--max-length", str(args.max_length), "--results", str(results), "--no-progress", "--json",
               "--threads", str(threads), "--parallel", str(parallel)]
    if args.device not in (None, "", "auto"):
        command += ["--device", args.device]
    if args.data_dir:
        command += ["--data-dir", args.data_dir]
    return command


def predictions_digest(results: Path) -> dict[str, str]:
    """sha256 of every predictions file of the arm, by its path in the results folder."""
    return {str(p.relative_to(results)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(results.rglob("*.predictions.jsonl"))}


def run_arm(args, parallel: int | str, threads: int, workdir: Path) -> dict[str, Any]:
    """One `biobench eval --parallel N` of the whole grid into a fresh folder: wall time and runs finished."""
    results = Path(tempfile.mkdtemp(prefix=f"parallel-{parallel}-", dir=workdir))
    started = time.perf_counter()
    done = subprocess.run(eval_command(args, parallel, results, threads), capture_output=True, text=True,
                          timeout=args.timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall = time.perf_counter() - started
    arm: dict[str, Any] = {"parallel": parallel, "rc": done.returncode, "wall_s": round(wall, 2)}
    if done.returncode != 0:
        arm["error"] = done.stderr.strip().splitlines()[-3:]
        return arm
    summary = json.loads(done.stdout)
    arm["runs"] = sum(r["status"] == "done" for r in summary["runs"])
    arm["runs_per_hour"] = round(arm["runs"] / wall * 3600, 1)
    arm["predictions"] = predictions_digest(results)
    arm["chosen"] = next((line for line in done.stderr.splitlines() if "at once" in line), "")
    return arm


def summarize(arms: dict[str, list[dict[str, Any]]], threads: int) -> list[dict[str, Any]]:
    """One row per arm: medians over repeats, runs/hour against --parallel 1, the prediction check."""
    from biobench.parallel import thread_share

    base = arms.get("1")
    rows = []
    for name, repeats in arms.items():
        good = [a for a in repeats if a["rc"] == 0]
        row: dict[str, Any] = {"parallel": name, "repeats": len(repeats), "ok": len(good)}
        if good:
            row["wall_s"] = statistics.median(a["wall_s"] for a in good)
            row["runs"] = good[0]["runs"]
            row["runs_per_hour"] = statistics.median(a["runs_per_hour"] for a in good)
            row["threads_per_run"] = thread_share(threads, int(name)) if name.isdigit() else None
            row["chosen"] = good[0]["chosen"]
            if base and base[0]["rc"] == 0:
                row["predictions_identical_to_1"] = good[0]["predictions"] == base[0]["predictions"]
        rows.append(row)
    one = next((r for r in rows if r["parallel"] == "1"), {})
    for row in rows:
        row["speedup"] = safe_ratio(row.get("runs_per_hour"), one.get("runs_per_hour"))
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    offline_environment()
    import torch

    device = resolve_device(args.device)
    threads = args.threads or torch.get_num_threads()
    arms: dict[str, list[dict[str, Any]]] = {str(a): [] for a in args.arm_values}
    with tempfile.TemporaryDirectory(prefix="parallel-speed-") as workdir:
        for repeat in range(args.repeats):
            for value in args.arm_values:
                print(f"[repeat {repeat + 1}/{args.repeats}] --parallel {value} ...", flush=True)
                arms[str(value)].append(run_arm(args, value, threads, Path(workdir)))
                last = arms[str(value)][-1]
                print(f"  {last.get('runs', 0)} run(s) in {last['wall_s']:.1f} s" + (
                    f"; failed: {last['error']}" if last["rc"] else ""), flush=True)
    rows = summarize(arms, threads)
    print_table(rows, [("parallel", "--parallel", ""), ("ok", "ok", "d"), ("runs", "runs", "d"),
                       ("wall_s", "wall s", ".1f"), ("runs_per_hour", "runs/hour", ",.0f"),
                       ("speedup", "vs 1", ".2f"), ("threads_per_run", "threads/run", "d"),
                       ("predictions_identical_to_1", "same preds", "")])
    for row in rows:
        if row.get("chosen"):
            print(f"--parallel {row['parallel']}: {row['chosen']}")
    report = {"script": "parallel_speed", "setup": {k: getattr(args, k) for k in (
        "model", "tasks", "seeds", "limit_train", "epochs", "max_length", "repeats")} | {"threads": threads},
        "arms": arms, "rows": rows, "environment": environment(device)}
    for arm in (a for repeats in arms.values() for a in repeats):
        arm.pop("predictions", None)  # compared above; the JSON keeps the figures
    best = max((r for r in rows if r["parallel"] != "1" and r.get("speedup")), key=lambda r: r["speedup"],
               default={})
    if best:
        print(f"best: --parallel {best['parallel']}, {best['speedup']:.2f}x the runs/hour of --parallel 1")
    return finish(report, args.out, best.get("speedup"))


if __name__ == "__main__":
    raise SystemExit(script(main))
