"""`--launcher slurm`: submit N workers of a biobench command line as one SLURM job array through submitit
(`eval --config G --launcher slurm`, `worker --launcher slurm`), print the job id, the log folder and the
command that shows progress, and return.

Why submitit (the `slurm` extra) rather than sbatch scripts of our own: it writes the batch script, pickles
the call, collects each element's logs, and requeues an element that reaches its time limit through
`Checkpointable.checkpoint()` (it asks SLURM for a warning signal before the limit, `--signal=USR2@90`, then
`scontrol requeue`s the element). The work itself needs no checkpoint: each element runs the same command,
which claims the next unfinished run (bench/eval/claims.py), so a requeued element resumes where the grid is.

Everything a job needs is decided here, at submit time: the grid as resolved now (absolute paths, the command
line's overrides merged) written to the log folder, the python and biobench of this environment, and the
models' revisions (recorded in launch.json). A submit that cannot work fails at once in one line: submitit
missing, no `sbatch` on PATH, a partition `sinfo` does not list, a results folder that is not writable.

In the runtime layer because it knows nothing of biobench but how to start its command line (`python -m
biobench.cli ARGV` in each element); the eval and worker commands decide the ARGV.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError

SLURM_ARG = re.compile(r"([A-Za-z][A-Za-z0-9_-]{0,40})=([^\x00-\x1f]{0,200})")
TIME = re.compile(r"(?:(\d{1,3})-)?(\d{1,3})(?::(\d{1,2}))?(?::(\d{1,2}))?")
MAX_WORKERS = 10_000
STOP_WAIT_S = 60.0  # submitit warns 90 s before the limit: the child gets 60 of them to stop


def add_launcher_arguments(parser: Any) -> None:
    group = parser.add_argument_group("launching workers (--launcher)")
    group.add_argument("--launcher", choices=["local", "slurm"], help="local: --workers runs at once on this "
                       "machine (as --parallel); slurm: submit --workers workers as one SLURM array through "
                       "submitit (pip install biobench[slurm]) and return, each worker claiming the next "
                       "unfinished run")
    group.add_argument("--workers", type=int, default=None, metavar="N", help="how many workers (default 1 for "
                       "local, 8 for slurm)")
    group.add_argument("--partition", metavar="P", help="SLURM partition (checked against sinfo)")
    group.add_argument("--account", metavar="A", help="SLURM account")
    group.add_argument("--gpus-per-task", type=int, default=1, metavar="G", help="GPUs per worker (default 1)")
    group.add_argument("--cpus-per-task", type=int, default=None, metavar="C", help="CPUs per worker")
    group.add_argument("--time", default="20:00:00", metavar="T", help="time limit per array element "
                       "(HH:MM:SS, D-HH:MM:SS or minutes; default 20:00:00): an element that reaches it is "
                       "requeued and resumes")
    group.add_argument("--array-parallelism", type=int, default=None, metavar="K", help="at most K elements "
                       "at once (default: all)")
    group.add_argument("--slurm-arg", action="append", default=[], metavar="KEY=VALUE", help="any other sbatch "
                       "option, e.g. --slurm-arg qos=long --slurm-arg constraint=h100 (repeatable)")
    group.add_argument("--log-dir", metavar="DIR", help="where the jobs' logs, the resolved grid and launch.json "
                       "go (default: ./biobench-slurm/<name>-<UTC time>)")


def minutes(text: str) -> int:
    """A SLURM time limit (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]) -> whole minutes (at least 1)."""
    match = TIME.fullmatch(text.strip())
    if not match:
        raise ConfigError(f"--time {text!r}: give HH:MM:SS, D-HH:MM:SS or minutes, e.g. --time 20:00:00")
    days, a, b, c = (int(g) if g else None for g in match.groups())
    if days is None and b is None:
        total = (a or 0) * 60  # minutes
    elif days is None and c is None:
        total = (a or 0) * 60 + (b or 0)  # MM:SS
    elif days is None:
        total = (a or 0) * 3600 + (b or 0) * 60 + (c or 0)
    else:
        total = days * 86400 + (a or 0) * 3600 + (b or 0) * 60 + (c or 0)
    if total <= 0 or total > 365 * 86400:
        raise ConfigError(f"--time {text!r}: give a limit from a minute to a year")
    return max(1, total // 60)


def slurm_args(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        match = SLURM_ARG.fullmatch(value)
        if not match:
            raise ConfigError(f"--slurm-arg {value!r}: give KEY=VALUE, e.g. --slurm-arg qos=long")
        out[match[1].replace("-", "_")] = match[2]
    return out


def import_submitit() -> Any:
    try:
        import submitit
    except ImportError:
        raise ConfigError("--launcher slurm submits through submitit, which is not installed: "
                          "pip install biobench[slurm]") from None
    return submitit


def check_slurm(partition: str | None) -> None:
    """sbatch on PATH, and the partition one that sinfo lists; ConfigError in one line otherwise."""
    missing = [tool for tool in ("sbatch", "srun") if shutil.which(tool) is None]
    if missing:
        raise ConfigError(f"--launcher slurm: no {' or '.join(missing)} on PATH (submit from a SLURM login node, "
                          "or use --launcher local)")
    if partition is None:
        return
    if shutil.which("sinfo") is None:
        raise ConfigError(f"--partition {partition}: no sinfo on PATH to check it against")
    try:
        done = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ConfigError(f"--partition {partition}: sinfo failed ({type(err).__name__}); is the controller up?") from None
    known = [line.strip().rstrip("*") for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or partition not in known:
        listed = ", ".join(known) or (done.stderr.strip()[:200] or "none")
        raise ConfigError(f"--partition {partition}: not a partition of this cluster (sinfo lists: {listed})")


def check_writable(folder: Path, what: str) -> None:
    """The folder exists (created) and this user may write into it; ConfigError naming it otherwise."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".biobench-write-check-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise ConfigError(f"{what} {folder} is not writable from here ({err.strerror or err}); the jobs could not "
                          "write their results: choose a folder on the shared file system this user may write") from None


@dataclass
class SlurmLaunch:
    """What to submit: `argv` (a biobench command line, without the program name) run by each of `workers`
    array elements, with these sbatch settings."""

    argv: list[str]
    workers: int
    log_dir: Path
    name: str
    partition: str | None = None
    account: str | None = None
    gpus_per_task: int = 1
    cpus_per_task: int | None = None
    time_min: int = 20 * 60
    array_parallelism: int | None = None
    extra: dict[str, str] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)  # written to launch.json beside the logs


try:  # the `slurm` extra; without it this module still imports, and submit() says what to install
    from submitit.helpers import Checkpointable as _Checkpointable
except ImportError:  # pragma: no cover - depends on the extra
    _Checkpointable = object  # type: ignore[assignment,misc]


class CommandWorker(_Checkpointable):
    """One array element: run the biobench command line `argv` with the submitting environment's python (which
    submitit records), as a child process. On the time limit submitit calls `checkpoint`: the child gets
    SIGTERM and stops at a safe point (the run in training abandoned, its claim released), then Checkpointable
    resubmits the same call and submitit requeues the element; the claims make the rerun resume. A child, not a
    call in this process: the signals stay submitit's here and eval's there."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = list(argv)
        self.child: subprocess.Popen | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"argv": self.argv, "child": None}

    def __call__(self) -> int:
        # submitit owns the wall clock here: eval must not requeue the element a second time (runtime.slurm)
        env = {**os.environ, "BIOBENCH_REQUEUED_BY": "submitit"}
        self.child = subprocess.Popen([sys.executable, "-m", "biobench.cli", *self.argv], env=env)
        code = self.child.wait()
        self.child = None
        if code:
            raise RuntimeError(f"biobench {' '.join(self.argv[:1])} exited with {code}; see this log")
        return code

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        child, self.child = self.child, None
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        return super().checkpoint(*args, **kwargs)


def submit(launch: SlurmLaunch) -> str:
    """Submit the array; returns the array's job id. The log folder gets launch.json (the command, python,
    biobench, settings and `record`)."""
    submitit = import_submitit()
    check_slurm(launch.partition)
    check_writable(launch.log_dir, "--log-dir")
    try:
        executor = submitit.AutoExecutor(folder=str(launch.log_dir), cluster="slurm")  # submitit adds %A_%a
    except Exception as err:  # submitit's own checks of the cluster
        raise ConfigError(f"--launcher slurm: {' '.join(str(err).split())[:300]}") from None
    settings: dict[str, Any] = {"name": launch.name, "timeout_min": launch.time_min, "tasks_per_node": 1,
                                "nodes": 1, "slurm_gpus_per_task": launch.gpus_per_task or None,
                                "slurm_array_parallelism": launch.array_parallelism or launch.workers}
    if launch.partition:
        settings["slurm_partition"] = launch.partition
    if launch.account:
        settings["slurm_account"] = launch.account
    if launch.cpus_per_task:
        settings["cpus_per_task"] = launch.cpus_per_task
    if launch.extra:
        settings["slurm_additional_parameters"] = dict(launch.extra)
    executor.update_parameters(**{k: v for k, v in settings.items() if v is not None})
    try:
        jobs = executor.submit_array([CommandWorker(launch.argv) for _ in range(launch.workers)])
    except Exception as err:  # submitit raises its own errors for a refused sbatch
        text = " ".join(str(err).split())[:400]
        raise ConfigError(f"sbatch refused the array: {text}") from None
    job_id = str(jobs[0].job_id).split("_")[0]
    from importlib.metadata import PackageNotFoundError, version

    try:
        biobench_version = version("biobench")
    except PackageNotFoundError:
        biobench_version = "unknown"
    record = {"job_id": job_id, "workers": launch.workers, "argv": ["biobench", *launch.argv],
              "python": sys.executable, "biobench": biobench_version,
              "biobench_path": str(Path(__file__).resolve().parents[1]), "submitted": time.time(),
              "sbatch": settings, **launch.record}
    (launch.log_dir / "launch.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    return job_id
