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

import contextlib
import io
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
from biobench.runtime.paths import UNSAFE_TEXT
from biobench.runtime.slurm import seconds

SLURM_ARG = re.compile(r"([A-Za-z][A-Za-z0-9_-]{0,40})=([^\x00-\x1f]{0,200})")
MAX_WORKERS = 10_000
MAX_PER_TASK = 10_000  # --gpus-per-task, --cpus-per-task, --array-parallelism: far above any real node
# squeue's states of a job that is queued or running: one in them is not submitted again (issue 57 §4)
STATES_RUNNING = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STAGE_OUT"})
STATES_WAITING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING"})
SLURM_CLIENT_TIMEOUT_S = 30  # squeue and scontrol hang while the controller is unreachable
# what the launcher sets itself (its own flags, or what the array needs); `--slurm-arg` may not change them
RESERVED = {"array": "--workers/--array-parallelism", "signal": "the launcher (submitit's USR2 warning)",
            "output": "--log-dir", "error": "--log-dir", "open_mode": "the launcher (append, for requeues)",
            "time": "--time", "partition": "--partition", "account": "--account", "job_name": "the launcher",
            "gpus_per_task": "--gpus-per-task", "cpus_per_task": "--cpus-per-task", "nodes": "the launcher (1)",
            "ntasks_per_node": "the launcher (1)", "wrap": "the launcher", "requeue": "the launcher",
            "no_requeue": "the launcher"}
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
    """A SLURM time limit (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]; runtime.slurm.seconds, the one parser) ->
    whole minutes (at least 1). A field out of range (99:99:99) is refused, as sbatch would."""
    total = seconds(text) if len(text) <= 40 else None
    if total is None:
        raise ConfigError(f"--time {text[:40]!r}: give HH:MM:SS, D-HH:MM:SS or minutes (minutes and seconds "
                          "under 60), e.g. --time 20:00:00 or --time 1500")
    if total <= 0 or total > 365 * 86400:
        raise ConfigError(f"--time {text!r}: give a limit from a minute to a year")
    return max(1, total // 60)


def check_text(value: object, what: str) -> str:
    """The one check of a value that reaches a batch script or a path (a flag, a folder, a grid file's name,
    a command-line word): no control or bidirectional characters (runtime.paths.UNSAFE_TEXT, the one set every
    text check refuses); ConfigError naming the flag otherwise, in words that say why it matters here."""
    # a newline in `--account`, `--log-dir` or a grid file's name became a line of the batch script submitit
    # writes (sbatch stops reading `#SBATCH` there, dropping --array and --time; the line ran as a command)
    text = str(value)
    if UNSAFE_TEXT.search(text):
        raise ConfigError(f"{what} {text[:80]!r} holds a control character (a newline, tab, escape ...), which "
                          "would become a line of the job's batch script: give it without")
    return text


# sbatch options that are whole options of their own while also the start of a reserved one (--gpus, --ntasks)
SBATCH_PREFIX_OPTIONS = {"gpus", "ntasks"}


def _reserved(key: str) -> str | None:
    """The reserved option `key` means to sbatch, which takes any unique start of a long option as the option
    (`arr=0-2` is --array): a key that starts a reserved name is refused unless it is an option of its own."""
    if key in RESERVED:
        return key
    if key in SBATCH_PREFIX_OPTIONS:
        return None
    return next((name for name in RESERVED if name.startswith(key)), None)


def slurm_args(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        check_text(value, "--slurm-arg")
        match = SLURM_ARG.fullmatch(value)
        if not match:
            raise ConfigError(f"--slurm-arg {value!r}: give KEY=VALUE, e.g. --slurm-arg qos=long")
        key = match[1].replace("-", "_").lower()
        reserved = _reserved(key)
        if reserved:
            raise ConfigError(f"--slurm-arg {value!r}: {match[1]} is set by {RESERVED[reserved]}; it cannot be "
                              "overridden here")
        out[key] = match[2]
    return out


def check_options(args: Any) -> None:
    """The launcher's options (add_launcher_arguments) checked as the submit checks them, without SLURM: also under
    --dry-run, which used to pass `--slurm-arg output=/etc/cron.d/x` that the real submit refuses (issue 58)."""
    minutes(args.time)
    slurm_args(args.slurm_arg)
    for flag in ("partition", "account", "log_dir"):
        if getattr(args, flag, None) is not None:
            check_text(getattr(args, flag), f"--{flag.replace('_', '-')}")


def sbatch_error(text: str) -> str:
    """sbatch's own reason out of submitit's error (which also repeats the command and its output): the
    `sbatch: error:` lines, joined in one line; the whole text, shortened, when there is none."""
    said = [line.split("error:", 1)[1].strip() for line in text.splitlines() if "sbatch: error:" in line]
    return " ".join(" ".join(said or text.split()).split())[:300]


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


def max_array_size() -> int | None:
    """The cluster's MaxArraySize (`scontrol show config`; an array's indices run below it), None when scontrol
    does not answer."""
    if shutil.which("scontrol") is None:
        return None
    try:
        done = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True,
                              timeout=SLURM_CLIENT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"^MaxArraySize\s*=\s*(\d{1,9})\s*$", done.stdout, re.MULTILINE)
    return int(found[1]) if done.returncode == 0 and found else None


def check_counts(workers: int, gpus_per_task: int | None, cpus_per_task: int | None,
                 array_parallelism: int | None = None) -> None:
    """Every count of a launch, checked before anything is submitted (issue 57 §4: `--workers -1` was a
    traceback after two of a study's jobs were submitted, `--workers 2000` a refusal from sbatch after two):
    --workers from 1 to MAX_WORKERS and within the cluster's MaxArraySize, the per-task counts from 0 to
    MAX_PER_TASK. ConfigError naming the flag otherwise."""
    if not 1 <= workers <= MAX_WORKERS:
        raise ConfigError(f"--workers {workers}: give 1 to {MAX_WORKERS}")
    for flag, count in (("--gpus-per-task", gpus_per_task), ("--array-parallelism", array_parallelism),
                        ("--cpus-per-task", cpus_per_task)):
        if count is not None and not 0 <= count <= MAX_PER_TASK:
            raise ConfigError(f"{flag} {count}: give a number from 0 to {MAX_PER_TASK}")
    limit = max_array_size()
    if limit is not None and workers > limit:
        raise ConfigError(f"--workers {workers}: this cluster's MaxArraySize is {limit} (scontrol show config), so "
                          f"an array holds at most {limit} elements: give --workers {limit} or fewer")


def job_state(job: str) -> str:
    """'STATE REASON' of a job (the first element of an array that is not finished, else the first that failed,
    else the first), '' when squeue does not know it (finished long ago, no SLURM here)."""
    if not job or shutil.which("squeue") is None:
        return ""
    try:
        done = subprocess.run(["squeue", "-h", "-t", "all", "-j", str(job), "-o", "%T|%R|%i"], capture_output=True,
                              text=True, timeout=SLURM_CLIENT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    rows = [line.split("|") for line in done.stdout.splitlines() if line.count("|") == 2]
    if done.returncode != 0 or not rows:
        return ""
    live = [r for r in rows if r[0] in STATES_RUNNING | STATES_WAITING]
    failed = [r for r in rows if r[0] not in STATES_RUNNING | STATES_WAITING | {"COMPLETED"}]
    state, reason, _ = (live or failed or rows)[0]
    return f"{state} {reason}".strip()


def is_live(job: str) -> bool:
    """The job (an array: any element) is queued or running now."""
    return job_state(job).split(" ")[0] in STATES_RUNNING | STATES_WAITING


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
    # requeues at the time limit before submitit gives up and the job ends FAILED (submitit's default: 3)
    max_timeouts: int = 3


try:  # the `slurm` extra; without it this module still imports, and submit() says what to install
    from submitit.helpers import Checkpointable as _Checkpointable
except ImportError:  # pragma: no cover - depends on the extra
    _Checkpointable = object  # type: ignore[assignment,misc]


def _ignore_warning() -> None:
    """In the eval child, before it execs: ignore submitit's warning signal (SIGUSR2). submitit asks for
    `--signal=USR2@90` without `B:`, so SLURM sends it to every process of the step; the child, which has no
    handler for it, died at once without releasing its claim (issue 48). The parent stops the child instead."""
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


class CommandWorker(_Checkpointable):
    """One array element: run the biobench command line `argv` with the submitting environment's python (which
    submitit records), as a child process. On the time-limit warning (SIGUSR2, which submitit asks SLURM for)
    this process only sets a flag (a signal handler must not wait: Popen's wait lock may be held by the main
    loop, which is what hung the job in issue 48); the main loop then sends the child SIGUSR1, eval's wall-clock
    warning (the run in training abandoned, its claim released, the abandon counted), waits for it, and hands
    over to submitit's own handler, which calls `checkpoint`, requeues the element with `scontrol requeue` and
    exits; the claims make the rerun resume. submitit requeues an element after at most `max_num_timeout`
    time limits (`SlurmLaunch.max_timeouts`: 3, or a study step's lives - 1). SIGTERM (`scancel`) reaches the
    child directly: eval stops without requeuing and the job ends CANCELLED; this process says the element was
    cancelled, waits for the child and exits with its status (no error, so no traceback in the element's log).
    A child, not a call in this process: the signals stay submitit's here and eval's there."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = list(argv)
        self.child: subprocess.Popen | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"argv": self.argv, "child": None}

    def __call__(self) -> int:
        # submitit owns the wall clock here: eval must not requeue the element a second time (runtime.slurm)
        env = {**os.environ, "BIOBENCH_REQUEUED_BY": "submitit"}
        warned: list[int] = []
        cancelled: list[int] = []
        submitits = signal.getsignal(signal.SIGUSR2)
        signal.signal(signal.SIGUSR2, lambda signum, frame: warned.append(signum))
        # SIGTERM is `scancel` (or the scheduler's final kill), which SLURM sends the child too: a cancel, said
        # so here instead of submitit's "Bypassing signal SIGTERM", and no error raised for the child's exit
        # code (issue 57: each cancelled element's .err ended in a submitit traceback)
        submitits_term = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, lambda signum, frame: cancelled.append(signum))
        try:
            self.child = subprocess.Popen([sys.executable, "-m", "biobench.cli", *self.argv], env=env,
                                          preexec_fn=_ignore_warning)
            code = None
            while code is None and not warned and not cancelled:
                try:
                    code = self.child.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    pass
            if warned:
                self._stop_child()
            elif cancelled or code == -signal.SIGTERM:
                code = self._child_cancelled(code)
                print(f"cancelled (SIGTERM: scancel or the scheduler's kill): biobench {' '.join(self.argv[:1])} "
                      f"stopped with exit code {code}; this element is not requeued", flush=True)
                # SystemExit, not an error (submitit logs an exception's traceback) nor a return (it logs "Job
                # completed successfully"): submitit lets it pass and the process ends with the child's status
                raise SystemExit(code if code > 0 else 128 + signal.SIGTERM)
        finally:
            signal.signal(signal.SIGUSR2, submitits)
            signal.signal(signal.SIGTERM, submitits_term)
        if warned and callable(submitits):
            submitits(warned[0], None)  # checkpoint, `scontrol requeue`, exit: submitit's, now outside a handler
        self.child = None
        if code:
            raise RuntimeError(f"biobench {' '.join(self.argv[:1])} exited with {code}; see this log")
        return code or 0

    def _child_cancelled(self, code: int | None) -> int:
        """The child's exit code once it has stopped on the cancel SLURM sent it too (STOP_WAIT_S at most, then
        killed): a cancel waits for nothing of ours, SLURM's SIGKILL follows after KillWait anyway."""
        child, self.child = self.child, None
        if child is None:
            return code or 0
        try:
            return child.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            return child.wait()

    def _stop_child(self) -> None:
        """Ask the child to stop at the wall clock (SIGUSR1) and wait for it, in the main loop, STOP_WAIT_S at
        most (submitit's warning comes 90 s before the limit), then kill it."""
        child = self.child
        if child is None or child.poll() is not None:
            return
        print(f"wall-clock warning: stopping biobench (pid {child.pid}) with SIGUSR1 before the requeue", flush=True)
        child.send_signal(signal.SIGUSR1)
        try:
            child.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """submitit's checkpoint, called after the child has stopped (`__call__`); never blocks."""
        child, self.child = self.child, None
        if child is not None and child.poll() is None:  # not expected: the main loop stopped it first
            child.send_signal(signal.SIGUSR1)
        return super().checkpoint(*args, **kwargs)


def submit(launch: SlurmLaunch) -> str:
    """Submit the array; returns the array's job id. The log folder gets launch.json (the command, python,
    biobench, settings and `record`)."""
    submitit = import_submitit()
    for what, value in (("--partition", launch.partition), ("--account", launch.account),
                        ("--log-dir", launch.log_dir), ("the job name", launch.name), ("python", sys.executable),
                        *(("the command line", word) for word in launch.argv),
                        *((f"--slurm-arg {key}", f"{key}={value}") for key, value in launch.extra.items())):
        if value is not None:
            check_text(value, what)
    check_slurm(launch.partition)
    check_writable(launch.log_dir, "--log-dir")
    before = set(launch.log_dir.iterdir())
    try:
        executor = submitit.AutoExecutor(folder=str(launch.log_dir), cluster="slurm",  # submitit adds %A_%a
                                         slurm_max_num_timeout=launch.max_timeouts)
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
        with contextlib.redirect_stderr(io.StringIO()):  # submitit prints sbatch's stderr itself; we say it once
            jobs = executor.submit_array([CommandWorker(launch.argv) for _ in range(launch.workers)])
    except Exception as err:  # submitit raises its own errors for a refused sbatch
        for leftover in set(launch.log_dir.iterdir()) - before:  # its pickles: nothing was submitted
            if leftover.is_file() and not leftover.is_symlink():
                leftover.unlink(missing_ok=True)
        raise ConfigError(f"sbatch refused the array: {sbatch_error(str(err))}") from None
    job_id = str(jobs[0].job_id).split("_")[0]
    from importlib.metadata import PackageNotFoundError, version

    try:
        biobench_version = version("biobench")
    except PackageNotFoundError:
        biobench_version = "unknown"
    record = {"job_id": job_id, "workers": launch.workers, "argv": ["biobench", *launch.argv],
              "python": sys.executable, "biobench": biobench_version,
              "biobench_path": str(Path(__file__).resolve().parents[1]), "submitted": time.time(),
              "sbatch": settings, "max_num_timeout": launch.max_timeouts, **launch.record}
    (launch.log_dir / "launch.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    return job_id


def log_files(log_dir: Path, job: str, workers: int) -> str:
    """Where the submitted workers' logs are, as the commands print it: submitit names an array's logs
    `<job>_<element>_0_log.out`, but one worker is submitted as a plain job (no array), logged as
    `<job>_0_log.out` (issue 62 item 6: `--workers 1` printed the array's pattern, a file that never exists)."""
    return f"{log_dir}/{job}_0_log.out" if workers == 1 else f"{log_dir}/{job}_<element>_0_log.out"
