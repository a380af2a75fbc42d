"""biobench under a real scheduler: the one-node SLURM cluster of tests/slurm_cluster.py (Debian's 22.05,
started by the `slurm_cluster` fixture; skipped with the reason where it cannot run)."""

from __future__ import annotations

import sys


def test_cluster_runs_a_batch_job_and_a_two_task_step(slurm_cluster, tmp_path):
    script = tmp_path / "hello.sbatch"
    script.write_text("#!/bin/bash\nsrun -n 2 bash -c 'echo task $SLURM_PROCID of $SLURM_NTASKS local $SLURM_LOCALID'"
                      " | sort\n")
    job = slurm_cluster.sbatch("-n", "2", "--chdir", str(tmp_path), "-o", str(tmp_path / "out-%j.txt"), str(script))
    assert slurm_cluster.wait(job, timeout=60) == ["COMPLETED"]
    assert (tmp_path / f"out-{job}.txt").read_text().splitlines() == ["task 0 of 2 local 0", "task 1 of 2 local 1"]


def test_cluster_jobs_see_this_python(slurm_cluster, tmp_path):
    """A job runs with the submitter's environment (sbatch's default --export=ALL): the same interpreter."""
    job = slurm_cluster.sbatch("--chdir", str(tmp_path), "-o", str(tmp_path / "py.txt"),
                               "--wrap", f"{sys.executable} -c 'import sys; print(sys.executable)'")
    assert slurm_cluster.wait(job, timeout=60) == ["COMPLETED"]
    assert (tmp_path / "py.txt").read_text().strip() == sys.executable
