"""Runs per hour of `biobench eval --parallel N` for N = 1, 2, 4 on the same grid, on the same machine, in one
run of this script (and `auto` on a GPU: as many as its memory fits).

Each arm runs the grid as `biobench eval --parallel N` does, in a fresh process with a fresh results folder, so
what is timed is what a user waits for: planning, model loading, every child's start-up, feature building,
training and evaluation of every run of the grid (dev and test cut to --limit-eval examples, so that a CPU run
takes minutes). The arms share the CPU threads given (`--threads`, default all cores): N = 1 trains
each run with all of them, N = 4 four runs with a quarter each. The arms also check each other: the number of
runs finished and, when every arm gives a run the same number of threads, byte-identical predictions (on a
CPU, a different thread count may change float sums, hence predictions: reported, not failed).

    .venv/bin/python -m biobench.perf.parallel_speed --quick       # all-MiniLM-L6-v2, gad + ncbi-disease
    .venv/bin/python -m biobench.perf.parallel_speed --device cuda --arms 1,2,4,auto --model DrBERT --tasks diamed
"""

from __future__ import annotations

import hashlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from biobench.eval.parallel import execute_parallel, parallel_value, thread_share
from biobench.eval.runner import Execution, execute, plan_grid
from biobench.perf.perf_common import (
    arm_flag,
    base_parser,
    environment,
    finish,
    init_arm,
    offline_environment,
    print_table,
    run_isolated,
    safe_ratio,
    script,
)
from biobench.ranges import parse_ranges
from biobench.runtime.device import resolve_device
from biobench.tasks.loading import load_task
from biobench.tasks.registry import get_spec

QUICK = {"seeds": "1-2", "limit_train": 100, "epochs": 1, "max_length": 64, "limit_eval": 100}
FULL = {"seeds": "1-4", "limit_train": 1000, "epochs": 2, "max_length": 128, "limit_eval": None}


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
    parser.add_argument("--limit-eval", type=int, help="dev and test examples per task (default: quick 100, else all)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    for name, value in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    try:
        args.arm_values = [parallel_value(a) for a in args.arms.split(",") if a.strip()]
    except Exception as err:  # argparse.ArgumentTypeError
        parser.error(f"--arms: {err}")
    return args


def arm_setup(args, parallel: int | str, threads: int) -> dict[str, Any]:
    return {"parallel": parallel, "threads": threads, "device": args.device, "model": args.model,
            "tasks": [t.strip() for t in args.tasks.split(",") if t.strip()], "seeds": args.seeds,
            "overrides": {"epochs": args.epochs, "limit_train": args.limit_train, "max_length": args.max_length},
            "limit_eval": args.limit_eval, "data_dir": args.data_dir}


def predictions_digest(results: Path) -> dict[str, str]:
    """sha256 of every predictions file of the arm, by its path in the results folder."""
    return {str(p.relative_to(results)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(results.rglob("*.predictions.jsonl"))}


def measure_arm(setup: dict[str, Any]) -> dict[str, Any]:
    """One arm, in its own fresh process: plan the grid into a fresh folder and run it as `eval --parallel N`
    does (runner.execute for 1, parallel.execute_parallel otherwise). The clock covers planning, model
    loading (once per process: every child loads its own) and every run. Dev and test are cut to
    `limit_eval` examples (a fixed subset; the run keys do not know, which only matters in this folder)."""
    import copy

    import torch

    # lazy: loads torch
    from biobench.eval.finetune import train_subset

    init_arm(setup["threads"])
    limit = setup["limit_eval"]

    def loader(spec):
        data = copy.copy(load_task(spec, setup["data_dir"]))
        data.splits = {name: examples if name == "train" else train_subset(examples, limit)
                       for name, examples in data.splits.items()}
        return data

    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"parallel-{setup['parallel']}-") as folder:
        started = time.perf_counter()
        plan = plan_grid(setup["model"], [get_spec(t) for t in setup["tasks"]], loader, folder,
                         seeds=parse_ranges(setup["seeds"], "--seeds", minimum=None), overrides=setup["overrides"])
        if setup["parallel"] == 1:
            execute(plan, device=setup["device"], progress=False, log=lines.append)
        else:
            execute_parallel(plan, setup["parallel"], Execution(device=setup["device"]), threads=setup["threads"],
                             log=lines.append, progress=False)
        wall = time.perf_counter() - started
        runs = sum(r.status == "done" for r in plan.runs)
        return {"parallel": setup["parallel"], "rc": 0, "wall_s": round(wall, 2), "runs": runs,
                "runs_per_hour": round(runs / wall * 3600, 1), "predictions": predictions_digest(Path(folder)),
                "chosen": next((line for line in lines if "at once" in line), ""),
                "torch_threads": torch.get_num_threads()}


def run_arm(args, parallel: int | str, threads: int) -> dict[str, Any]:
    try:
        return run_isolated(measure_arm, arm_setup(args, parallel, threads))
    except Exception as err:  # one failed arm is reported, the others still measured
        return {"parallel": parallel, "rc": 1, "wall_s": 0.0, "error": f"{type(err).__name__}: {err}"}


def summarize(arms: dict[str, list[dict[str, Any]]], threads: int) -> list[dict[str, Any]]:
    """One row per arm: medians over repeats, runs/hour against --parallel 1, the prediction check."""
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
    for repeat in range(args.repeats):
        for value in args.arm_values:
            print(f"[repeat {repeat + 1}/{args.repeats}] --parallel {value} ...", flush=True)
            arms[str(value)].append(run_arm(args, value, threads))
            last = arms[str(value)][-1]
            print(f"  {last.get('runs', 0)} run(s) in {last['wall_s']:.1f} s" + (
                f"; failed: {last['error']}" if last["rc"] else "") + f" {arm_flag(last)}".rstrip(), flush=True)
    rows = summarize(arms, threads)
    print_table(rows, [("parallel", "--parallel", ""), ("ok", "ok", "d"), ("runs", "runs", "d"),
                       ("wall_s", "wall s", ".1f"), ("runs_per_hour", "runs/hour", ",.0f"),
                       ("speedup", "vs 1", ".2f"), ("threads_per_run", "threads/run", "d"),
                       ("predictions_identical_to_1", "same preds", "")])
    for row in rows:
        if row.get("chosen"):
            print(f"--parallel {row['parallel']}: {row['chosen']}")
    report = {"script": "parallel_speed", "setup": {k: getattr(args, k) for k in (
        "model", "tasks", "seeds", "limit_train", "epochs", "max_length", "limit_eval", "repeats")} | {"threads": threads},
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
