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
import subprocess
from collections.abc import Callable

REQUEUE_TIMEOUT_S = 60.0  # scontrol hangs while the controller is unreachable
_JOB_ID = re.compile(r"\d{1,20}")


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


def requeue_self(log: Callable[[str], None]) -> bool:
    """Inside a SLURM job, `scontrol requeue` of this job (this element of an array: `requeue_target`) and say so
    in one line; True when SLURM accepted.
    Outside a job (no SLURM_JOB_ID) nothing happens (False). A failure (no scontrol, a job that is not
    requeueable, a controller that does not answer) is one line, never an exception: the caller is stopping."""
    job = requeue_target()
    if job is None:
        return False
    if os.environ.get("BIOBENCH_REQUEUED_BY") == "submitit":  # a `--launcher slurm` worker: submitit requeues it
        log(f"SLURM job {job} is requeued by submitit (its checkpoint), not here")
        return False
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        log(f"cannot requeue SLURM job {job}: no scontrol on PATH; resubmit the job to resume")
        return False
    try:
        done = subprocess.run([scontrol, "requeue", job], capture_output=True, text=True, timeout=REQUEUE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        log(f"cannot requeue SLURM job {job}: {type(err).__name__}: {err}; resubmit the job to resume")
        return False
    if done.returncode != 0:
        why = " ".join((done.stderr or done.stdout).split())[:300] or f"exit code {done.returncode}"
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
