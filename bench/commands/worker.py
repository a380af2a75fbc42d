"""`biobench worker`: run the evaluation requests of a queue and publish their results."""

from __future__ import annotations

import argparse
from pathlib import Path

from biobench.errors import ConfigError
from biobench.eval.parallel import parallel_value
from biobench.ranges import finite_number
from biobench.runtime import launch
from biobench.runtime.launch import add_launcher_arguments
from biobench.runtime.memory import add_max_model_gb_argument, operator_limit_gb
from biobench.runtime.paths import HF_DATASETS
from biobench.service.queue import MAX_LEASE_S
from biobench.service.queue_storage import open_storage

EPILOG = """examples:
  biobench worker --queue queue/ --results results/ --once
  biobench worker --queue hf://datasets/my-org/requests --results hf://datasets/my-org/results --max-hours 23"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "worker", description="Claim the oldest pending request atomically (a lease renewed while it runs), run `biobench "
        "eval` for it, publish the results, and mark it finished or failed with the last lines of its log. A "
        "request whose worker died is resumed by the next worker once the lease expires; finished runs are "
        "skipped by their run keys.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--queue", required=True, metavar="Q", help="queue: a folder or hf://datasets/ORG/NAME")
    p.add_argument("--results", required=True, metavar="R", help="results: a folder or hf://datasets/ORG/NAME")
    p.add_argument("--once", action="store_true", help="run one request (or none) and exit")
    p.add_argument("--max-hours", type=float, metavar="H", help="stop claiming after H hours (default: run until "
                   "stopped, polling an empty queue)")
    p.add_argument("--request-hours", type=float, default=48.0, metavar="H", help="stop a request's eval after H "
                   "hours and fail it in one line (finished runs are kept; default 48)")
    p.add_argument("--data-dir", metavar="DIR", help="task data folder (default: $BIOBENCH_DATA)")
    p.add_argument("--device", help="cuda, cuda:1, cpu (default: cuda when available)")
    p.add_argument("--parallel", type=parallel_value, nargs="?", const="auto", default=None, metavar="N",
                   help="each request's runs up to N at once (eval's --parallel; alone or 'auto': as many as fit "
                   "the GPU)")

    add_max_model_gb_argument(p)
    p.add_argument("--lease-seconds", type=float, default=600.0, help="a claim expires this long after its last "
                   "renewal")
    p.add_argument("--renew-seconds", type=float, default=60.0, help="renew the claim this often")
    p.add_argument("--poll-seconds", type=float, default=30.0, help="look for new requests this often")
    p.add_argument("--dry-run", metavar="DIR", help="hub queue/results: work in DIR and record the hub operations "
                   "in DIR/operations.jsonl instead of committing")
    add_launcher_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # lazy: loads pandas
    from biobench.service.worker import WorkerConfig, run_worker

    finite_number(args.lease_seconds, "--lease-seconds", positive=True, maximum=MAX_LEASE_S)
    finite_number(args.renew_seconds, "--renew-seconds", positive=True)
    finite_number(args.poll_seconds, "--poll-seconds", positive=True, maximum=24 * 3600)
    if args.max_hours is not None:
        finite_number(args.max_hours, "--max-hours", positive=True, maximum=24 * 365)
    finite_number(args.request_hours, "--request-hours", positive=True, maximum=24 * 365)

    max_model_gb = operator_limit_gb(args.max_model_gb)  # checked before the first claim, like the rest
    if args.renew_seconds >= args.lease_seconds:
        raise ConfigError(f"--renew-seconds ({args.renew_seconds:g}) must be below --lease-seconds "
                          f"({args.lease_seconds:g}), or a running request looks abandoned")
    if args.launcher == "slurm":
        return launch_workers(args)
    if args.workers is not None:  # it was ignored without a word (issue 62 item 6): one worker runs here
        raise ConfigError(f"--workers {args.workers} goes with --launcher slurm (elements of a SLURM array); here "
                          "one worker runs: start more processes for more")
    dry = Path(args.dry_run) if args.dry_run else None
    storage = open_storage(args.queue, dry_run=dry / "queue" if dry and args.queue.startswith(HF_DATASETS) else None)
    config = WorkerConfig(
        results=args.results, data_dir=args.data_dir, lease_s=args.lease_seconds, renew_s=args.renew_seconds,
        poll_s=args.poll_seconds, once=args.once, max_hours=args.max_hours, request_hours=args.request_hours,
        device=args.device,
        parallel=args.parallel, max_model_gb=max_model_gb,
        results_dry_run=dry / "results" if dry and args.results.startswith(HF_DATASETS) else None)
    run_worker(storage, config)
    return 0


def launch_workers(args: argparse.Namespace) -> int:
    """`worker --launcher slurm`: --workers queue workers as one SLURM array (each claims requests by lease)."""
    from datetime import UTC, datetime

    for what, value in (("--queue", args.queue), ("--results", args.results), ("--account", args.account),
                        ("--partition", args.partition), ("--log-dir", args.log_dir), ("--data-dir", args.data_dir)):
        if value is not None:
            launch.check_text(value, what)  # a newline there became a line of the batch script (issue 51 item 9)
    workers = 8 if args.workers is None else args.workers  # `--workers 0` is refused, not read as the default
    if not 1 <= workers <= launch.MAX_WORKERS:
        raise ConfigError(f"--workers {workers}: give 1 to {launch.MAX_WORKERS}")
    time_min, extra = launch.minutes(args.time), launch.slurm_args(args.slurm_arg)
    launch.import_submitit()
    launch.check_slurm(args.partition)
    launch.check_counts(workers, args.gpus_per_task, args.cpus_per_task, args.array_parallelism)
    for what, where in (("--queue", args.queue), ("--results", args.results)):
        if not where.startswith(HF_DATASETS):
            launch.check_writable(Path(where).resolve(), what)
    argv = ["worker", "--queue", _absolute(args.queue), "--results", _absolute(args.results),
            "--max-hours", str(args.max_hours if args.max_hours else max(time_min / 60 - 0.25, 0.1)),
            "--lease-seconds", str(args.lease_seconds), "--renew-seconds", str(args.renew_seconds),
            "--poll-seconds", str(args.poll_seconds)]
    for flag, value in (("--data-dir", args.data_dir and str(Path(args.data_dir).resolve())),
                        ("--device", args.device), ("--parallel", args.parallel),
                        ("--max-model-gb", args.max_model_gb)):
        if value:
            argv += [flag, str(value)]
    argv += ["--once"] if args.once else []
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    log_dir = Path(args.log_dir or Path("biobench-slurm") / f"worker-{stamp}").resolve()
    job = launch.submit(launch.SlurmLaunch(argv, workers, log_dir, "biobench-worker", args.partition, args.account,
                                           args.gpus_per_task, args.cpus_per_task, time_min,
                                           args.array_parallelism, extra))
    print(f"submitted SLURM array {job}: {workers} queue worker(s) on {args.queue}")
    print(f"logs: {launch.log_files(log_dir, job, workers)} and .err")
    print(f"progress: biobench queue --queue {args.queue} list")
    return 0


def _absolute(where: str) -> str:
    return where if where.startswith(HF_DATASETS) else str(Path(where).resolve())
