"""What a process needs to know about the SLURM job it runs in, and how it asks SLURM to run it again.

Why a function of its own: eval (a run cut by the wall clock) and pretrain (a checkpoint written on SIGUSR1)
both end the same way inside a job — `scontrol requeue $SLURM_JOB_ID`, so the job goes back to the queue and
resumes from its results or checkpoint without anyone watching (the job must be requeueable: `#SBATCH
--requeue`, or the cluster's JobRequeue=1). One home, so both say the same things when it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable
from types import FrameType
from typing import Any

REQUEUE_TIMEOUT_S = 60.0  # scontrol hangs while the controller is unreachable
_JOB_ID = re.compile(r"\d{1,20}")
# The wall-clock warning the docs configure (`#SBATCH --signal=B:USR1@N`): the one signal after which a job
# requeues itself. SIGTERM is what `scancel` (and the scheduler's final kill) sends: a job stops on it and stays
# stopped (issue 48: SIGTERM used to requeue, so `scancel` could not end a job).
WARNING_SIGNAL = "SIGUSR1"
# ...and only when the job's time is nearly out: the warning N seconds before the limit arrives up to 30 s
# early (the controller checks limits every 30 s), so 15 minutes covers any `@N` up to 14 minutes; a USR1 sent
# by hand to a job with hours left stops it without a requeue.
NEAR_END_S = 15 * 60
_TIME = re.compile(r"(?:(\d{1,4})-)?(\d{1,7})(?::(\d{1,2}))?(?::(\d{1,2}))?")


def seconds(text: str) -> int | None:
    """A SLURM time (what `--time` takes and `squeue -o %L` prints: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM,
    D-HH:MM:SS) in seconds; None for text that is none of these (UNLIMITED, NOT_SET, INVALID) or has a field
    out of range (99:99:99)."""
    match = _TIME.fullmatch(text.strip())
    if not match:
        return None
    days_text, a_text, b_text, c_text = match.groups()
    a = int(a_text)  # always there: the pattern requires it
    if days_text is None and b_text is None:
        return a * 60  # minutes
    if days_text is None and c_text is None:
        return None if int(b_text) >= 60 else a * 60 + int(b_text)  # MM:SS
    mins, secs = int(b_text or 0), int(c_text or 0)
    if mins >= 60 or secs >= 60 or (days_text is not None and a >= 24):
        return None
    return int(days_text or 0) * 86400 + a * 3600 + mins * 60 + secs


def time_left(job: str | None = None) -> int | None:
    """Seconds this job (an array element: `requeue_target`) has left before its time limit, from `squeue -h
    -o %L`; None outside a job, for a job without a limit (UNLIMITED), or when squeue does not answer."""
    job = job or requeue_target()
    squeue = shutil.which("squeue")
    if job is None or squeue is None:
        return None
    try:
        done = subprocess.run([squeue, "-h", "-j", job, "-o", "%L"], capture_output=True, text=True,
                              timeout=REQUEUE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split()
    return seconds(lines[0]) if done.returncode == 0 and len(lines) == 1 else None


def job_id() -> str | None:
    """$SLURM_JOB_ID when this process runs inside a SLURM job (an array element has its own), else None."""
    value = os.environ.get("SLURM_JOB_ID", "").strip()
    return value if _JOB_ID.fullmatch(value) else None


def requeue_target() -> str | None:
    """What `scontrol requeue` must name to put back this job and nothing else: `<array job id>_<task id>` for
    an array element, else $SLURM_JOB_ID. Why not always $SLURM_JOB_ID: one element of an array carries the
    array's own id as its SLURM_JOB_ID (measured on SLURM 22.05: elements 0 and 1 of array 7 had job ids 8 and
    7), and `scontrol requeue 7` requeues every element of the array, killing the others' runs in flight."""
    job = job_id()
    array = os.environ.get("SLURM_ARRAY_JOB_ID", "").strip()
    task = os.environ.get("SLURM_ARRAY_TASK_ID", "").strip()
    if job is not None and _JOB_ID.fullmatch(array) and _JOB_ID.fullmatch(task):
        return f"{array}_{task}"
    return job


SignalHandler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def ignore_sigterm() -> SignalHandler:
    """Let SIGTERM pass without stopping this process (main thread only: elsewhere signal handlers cannot be set)
    and return the handler it replaced, for restore_sigterm; None when it could not be set. A handler that does
    nothing, not SIG_IGN: an ignored signal stays ignored across exec, so every process started afterwards (a
    tokenizer pool, a child command) could not be stopped with SIGTERM either; a Python handler is reset in
    them (a test suite's multiprocessing pool hung on exactly that, waiting for workers deaf to terminate())."""
    try:
        return signal.signal(signal.SIGTERM, _let_sigterm_pass)
    except ValueError:  # not the main thread
        return None


def _let_sigterm_pass(signum: int, frame: FrameType | None) -> None:
    """SIGTERM after this job asked to be requeued: SLURM stopping it; the process is already on its way out."""


def restore_sigterm(previous: SignalHandler) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


def requeue_self(log: Callable[[str], None], signal_name: str | None = WARNING_SIGNAL) -> bool:
    """Inside a SLURM job stopped by `signal_name`, `scontrol requeue` of this job (this element of an array:
    `requeue_target`) and say so in one line; True when SLURM accepted. Only the wall-clock warning
    (WARNING_SIGNAL) with the job's time nearly out (NEAR_END_S) requeues: SIGTERM is a cancel (`scancel`) and
    a USR1 with hours left is a person's stop; both say in one line that the job is not requeued.
    Outside a job (no SLURM_JOB_ID) nothing happens (False). A failure (no scontrol, a job that is not
    requeueable, a controller that does not answer) is one line, never an exception: the caller is stopping."""
    job = requeue_target()
    if job is None:
        return False
    # the signal first: a cancel is a cancel in a `--launcher slurm` element too (issue 57: a scancelled array
    # said in every element's log that submitit would requeue it)
    if signal_name != WARNING_SIGNAL:
        log(f"SLURM job {job} is not requeued: {signal_name or 'a stop'} is a cancel (scancel sends SIGTERM); "
            f"only the wall-clock warning {WARNING_SIGNAL} (#SBATCH --signal=B:USR1@N) requeues")
        return False
    if os.environ.get("BIOBENCH_REQUEUED_BY") == "submitit":  # a `--launcher slurm` worker: submitit requeues it
        log(f"SLURM job {job} is requeued by submitit (its checkpoint), not here")
        return False
    left = time_left(job)
    if left is None or left > NEAR_END_S:
        shown = "no time limit (or squeue did not answer)" if left is None else f"{left // 60} min left"
        log(f"SLURM job {job} is not requeued: {signal_name} came with {shown}, not at the wall clock "
            f"(a requeue needs under {NEAR_END_S // 60} min left)")
        return False
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        log(f"cannot requeue SLURM job {job}: no scontrol on PATH; resubmit the job to resume")
        return False
    # SLURM answers an accepted requeue by sending SIGTERM to the whole job at once, often before scontrol has
    # returned here. The caller is stopping anyway; with SIGTERM at its default (the stop handler restored it
    # after the first signal) the job died before it wrote the line that says it was requeued and what was
    # kept (seen in CI: one life in three lost both lines). So SIGTERM is let pass from here on (ignore_sigterm);
    # SLURM's SIGKILL after KillWait stays the backstop. A requeue that fails gives the previous handler back.
    previous_term = ignore_sigterm()
    # scontrol itself is one of the job's processes, so that SIGTERM reached it too: under load it died before it
    # answered (exit -15) and a requeue SLURM had accepted was reported as failed (CI, load 6: "cannot requeue
    # ... exit code -15" beside slurmstepd's "CANCELLED ... DUE TO JOB REQUEUE"). A shell ignores SIGTERM and
    # execs scontrol, which keeps SIG_IGN across the exec (no preexec_fn: this process has threads).
    shell = shutil.which("sh")
    argv = [shell, "-c", 'trap "" TERM; exec "$0" requeue "$1"', scontrol, job] if shell else [scontrol, "requeue", job]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=REQUEUE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        restore_sigterm(previous_term)
        log(f"cannot requeue SLURM job {job}: {type(err).__name__}: {err}; resubmit the job to resume")
        return False
    if done.returncode != 0:
        restore_sigterm(previous_term)
        why = " ".join((done.stderr or done.stdout).split())[:300] or f"exit code {done.returncode}"
        if done.returncode < 0:  # killed all the same (SIGKILL): SLURM may have taken the requeue before
            why = (f"scontrol was stopped by signal {-done.returncode} before it answered (SLURM stops a job's "
                   "processes when it requeues it: if the job comes back to the queue, it resumes)")
        log(f"cannot requeue SLURM job {job}: scontrol said: {why} (is the job submitted with --requeue?); "
            "resubmit the job to resume")
        return False
    log(f"requeued SLURM job {job} (scontrol requeue {job}): it goes back to the queue and resumes where it stopped")
    return True


def restart_count() -> int:
    """How many times SLURM started this job before ($SLURM_RESTART_COUNT: 0 at the first start, 1 after one
    requeue); 0 outside a job. `pretrain` resumes on its own when it is above 0."""
    value = os.environ.get("SLURM_RESTART_COUNT", "").strip() if job_id() else ""
    return int(value) if value.isdigit() and len(value) < 6 else 0
