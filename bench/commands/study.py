"""`biobench study run|status|report STUDY.toml`: a whole study (pretraining -> evaluation -> analyses -> report)
from one file (bench/api/study.py; docs/STUDIES.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from biobench.api.study import load_study
from biobench.api.study_inputs import check_inputs
from biobench.api.study_plan import plan_lines, study_plan
from biobench.api.study_report import difference_rows, write_report
from biobench.api.study_run import (
    SlurmSettings,
    check_nothing_conflicts,
    describe,
    run_local,
    study_status,
    submit_slurm,
)
from biobench.errors import ConfigError
from biobench.ranges import finite_number
from biobench.runtime import launch
from biobench.runtime.device import resolve_device
from biobench.runtime.launch import add_launcher_arguments


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("study", description=__doc__ + " Steps: each [[pretrain]], each model of each [[eval]], "
                                   "each [[analysis]]; [[compare]] tables go into the report.")
    sub = parser.add_subparsers(dest="study_command", metavar="COMMAND", required=True)
    p = sub.add_parser("run", help="run every step not done yet, here or as SLURM jobs with dependencies",
                       description="Run every step of the study not done yet: here, each as a child process after the "
                       "steps it needs (--jobs at once), or with --launcher slurm as SLURM jobs with afterok "
                       "dependencies (eval steps as arrays that claim their runs), then return. Done is read from "
                       "what each step writes, so a rerun skips it.")
    p.add_argument("study", type=Path, metavar="STUDY.toml", help="the study file (docs/STUDIES.md)")
    p.add_argument("--out", type=Path, help="the study folder (default: the file's `out`, else its name beside it)")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="local: steps at once, each after those it "
                   "needs (default: 2 on a CPU with 2+ cores, 1 with a GPU)")
    p.add_argument("--threads", type=int, default=None, help="local: CPU threads per step (default: cores / jobs)")
    p.add_argument("--step", action="append", default=[], metavar="ID", help="only these steps (repeatable; "
                   "`--dry-run` lists the ids); what they need must be done")
    p.add_argument("--dry-run", action="store_true", help="list the steps, their commands and dependencies; run nothing")
    add_launcher_arguments(p)
    p.set_defaults(func=run)
    p = sub.add_parser("plan", help="what the study costs: tokens or runs, FLOPs, GPU-hours, wall time, disk",
                       description="Per step and in total: pretraining tokens or fine-tuning runs, training FLOPs "
                       "(6 x parameters x tokens), GPU-hours at the GPU's published dense bf16 peak x an assumed "
                       "MFU, the wall time on --gpus GPUs along the dependency graph (a pretraining on all of them, "
                       "an eval step on up to `workers`), and the disk for checkpoints and token stores "
                       "(bench/api/study_plan.py states the arithmetic). Runs nothing.")
    p.add_argument("study", type=Path, metavar="STUDY.toml", help="the study file (docs/STUDIES.md)")
    p.add_argument("--out", type=Path, help="the study folder, if `run` is given --out")
    p.add_argument("--gpu", choices=("h100", "h200", "a100"), default="h100", help="the GPU the plan is for")
    p.add_argument("--gpus", type=int, default=4, metavar="N", help="GPUs at once (default 4, the paper's)")
    p.add_argument("--mfu", type=float, default=0.40, help="model FLOPs utilisation assumed (default 0.40; "
                   "no GPU measured it here)")
    p.set_defaults(func=plan)
    p = sub.add_parser("status", help="each step: done / running where / waiting on / failed (last log line, retry)",
                       description="Each step's state, read from its outputs, the local records and squeue: done; "
                       "running (where); waiting (on which steps, or SLURM's reason); failed (the last log line and "
                       "the command that retries it); to run.")
    p.add_argument("study", type=Path, metavar="STUDY.toml", help="the study file (docs/STUDIES.md)")
    p.add_argument("--out", type=Path, help="the study folder, if `run` was given --out")
    p.set_defaults(func=status)
    p = sub.add_parser("report", help="the comparisons in the paper's layout (Markdown, LaTeX, CSV) and figures",
                       description="Each [[compare]] table: per task and on the average, each model's mean with its "
                       "95% CI over seeds beside the paper's row, and A - B with its paired-bootstrap CI, p-value "
                       "and the task-level correction (Holm by default), written to <out>/report/ as Markdown, "
                       "LaTeX, CSV and JSON with the analyses' figures (docs/STUDIES.md).")
    p.add_argument("study", type=Path, metavar="STUDY.toml", help="the study file (docs/STUDIES.md)")
    p.add_argument("--out", type=Path, help="the study folder, if `run` was given --out")
    p.set_defaults(func=report)


def _retry(args: argparse.Namespace, slurm: bool = False) -> str:
    out = f" --out {args.out}" if getattr(args, "out", None) else ""
    return f"biobench study run {args.study}{out}" + (" --launcher slurm" if slurm else "")


def run(args: argparse.Namespace) -> int:
    launch.check_options(args)  # --slurm-arg, --time: refused under --dry-run as the submit refuses them
    study = load_study(args.study, args.out)
    known = {s.id for s in study.steps}
    unknown = [s for s in args.step if s not in known]
    if unknown:
        raise ConfigError(f"--step {', '.join(unknown)}: no such step in {args.study} (steps: {', '.join(known)})")
    # every input no step writes (corpora, stores, model folders, task data), all listed at once: nothing starts
    check_inputs(study, _retry(args, args.launcher == "slurm") + (" --dry-run" if args.dry_run else ""))
    if args.dry_run:
        print("\n".join(describe(study)))
        return 0
    check_nothing_conflicts(study)
    if args.launcher == "slurm":
        return _submit(args, study)
    if args.jobs is not None and args.jobs < 1 or args.threads is not None and args.threads < 1:
        raise ConfigError("--jobs and --threads take a positive number")
    import os


    jobs = args.jobs or (1 if not resolve_device(None).startswith("cpu") else min(2, os.cpu_count() or 1))
    outcome = run_local(study, jobs, args.threads, only=set(args.step) or None)
    failed = [s for s, o in outcome.items() if o == "failed"]
    ran = sum(o == "ran" for o in outcome.values())
    done = sum(o == "done" for o in outcome.values())
    print(f"study {study.path.stem}: {ran} step(s) ran, {done} already done"
          + (f", {len(failed)} failed ({', '.join(failed)}): biobench study status {args.study} shows why" if failed
             else ""), file=sys.stderr)
    if study.compares and not failed:
        print(f"report: biobench study report {args.study}" + (f" --out {args.out}" if args.out else ""),
              file=sys.stderr)
    return 1 if failed else 0


def _submit(args: argparse.Namespace, study) -> int:
    settings = SlurmSettings(args.partition, args.account, args.gpus_per_task, args.cpus_per_task,
                             launch.minutes(args.time), args.workers, launch.slurm_args(args.slurm_arg),
                             Path(args.log_dir).resolve() if args.log_dir else None)

    def said(step, job: str, waits: list[str]) -> None:  # as each is accepted: a later refusal leaves it said
        print(f"submitted {step.id}: SLURM job {job}" + (f" (after {', '.join(waits)})" if waits else ""), flush=True)

    submitted = submit_slurm(study, settings, only=set(args.step) or None, submitted_one=said)
    if not submitted:
        print("nothing to submit: every step is done or already queued")
    print(f"progress: biobench study status {args.study}" + (f" --out {args.out}" if args.out else ""))
    return 0


def plan(args: argparse.Namespace) -> int:
    study = load_study(args.study, args.out)
    mfu = finite_number(args.mfu, "--mfu", minimum=0.01, maximum=1.0)
    print("\n".join(plan_lines(study_plan(study, args.gpu, args.gpus, mfu))))
    return 0


def status(args: argparse.Namespace) -> int:
    study = load_study(args.study, args.out)
    states = study_status(study, _retry(args))
    width = max(len(s.step) for s in states)
    for s in states:
        line = f"{s.step:<{width}}  {s.state:<11} {s.detail}"
        if s.retry:
            slurm = (study.out / ".study" / "slurm.json").exists()
            line += f"\n{'':<{width}}  retry: {_retry(args, slurm)}"
        print(line.rstrip())
    done = sum(s.state == "done" for s in states)
    print(f"{done}/{len(states)} step(s) done", file=sys.stderr)
    return 0


def report(args: argparse.Namespace) -> int:
    study = load_study(args.study, args.out)
    if not study.compares and not any(s.analysis == "probe" for s in study.steps):
        raise ConfigError(f"{args.study}: no [[compare]] table and no probe; a report compares two models "
                          "(a = ..., b = ...)")
    data = write_report(study)
    for item in data["comparisons"]:
        header, rows = difference_rows(item)
        print(f"{item['name']}: A = {item['models']['a']['name']}, B = {item['models']['b']['name']}")
        for row in [header, *rows]:
            print("  " + "  ".join(f"{cell:>12}" if i else f"{cell:<18}" for i, cell in enumerate(row)).rstrip())
    for row in data["probes"]:
        print(f"probe {row['probe']}: {row['model']} on {row['task']}: "
              + (f"{row['summary']['mean']:.2f}" if row["summary"] else "–") + f" ({row['seeds_done']}/{row['seeds']} seeds)")
    folder = study.out / "report"
    print(f"wrote {folder / 'report.md'}, report.tex, report.csv, report.json"
          + (f" and {len(data['figures'])} figure(s)" if data["figures"] else ""))
    return 0
