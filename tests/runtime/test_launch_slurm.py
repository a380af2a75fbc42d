"""`biobench eval --config G --launcher slurm` on the real one-node SLURM cluster of tests/slurm_cluster.py: the
array that submitit writes and submits, not a batch script of ours (that path is tests/runtime/test_slurm.py).

The cluster has no slurmdbd, hence no `sacct`; submitit polls `sacct` only when asked for a job's state, which
neither the submit nor this test does: the test reads the elements' states with `squeue -t all` (finished jobs
stay visible for MinJobAge, one hour, see tests/slurm_cluster.py)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.support import predictions_by_run as _predictions
from tests.support import slurm_toy_grid as _toy_grid


@pytest.mark.slow
def test_launcher_slurm_array_with_a_forced_requeue_matches_a_sequential_run(slurm_cluster, slurm_toy_reference,
                                                                            tiny_mlm_dir, tmp_path):
    """`--launcher slurm --workers 2` submits a 2-element array (printing its id, the log folder and the progress
    command) that drains a 2-task x 2-seed grid with run claims; the element training a run is requeued with
    `scontrol requeue` (eval in it abandons the run and releases its claim; submitit's element runs again). Every
    result exists once, predictions are byte-identical to a sequential --no-claims run (conftest's
    slurm_toy_reference, shared with tests/runtime/test_slurm.py), no claim is left."""
    from biobench.eval.claims import read_claim

    env = {**slurm_cluster.env, "OMP_NUM_THREADS": "1"}
    eval_args = ["--device", "cpu", "--threads", "1", "--no-progress"]
    grid = _toy_grid(tmp_path, tiny_mlm_dir, "results", n_train=160)
    log_dir = tmp_path / "logs"
    submitted = subprocess.run([sys.executable, "-m", "biobench.cli", "eval", "--config", str(grid), *eval_args,
                                "--launcher", "slurm", "--workers", "2", "--partition", "debug", "--gpus-per-task",
                                "0", "--cpus-per-task", "1", "--time", "10", "--log-dir", str(log_dir)],
                               env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    lines = submitted.stdout.splitlines()
    assert lines[0].startswith("submitted SLURM array ") and "2 worker(s)" in lines[0], submitted.stdout
    job = int(lines[0].split()[3].rstrip(":"))
    assert lines[1] == (f"logs: {log_dir}/{job}_<element>_0_log.out and .err (launch.json and the resolved "
                        "grid.toml beside them)")
    assert lines[2] == f"progress: biobench eval --config {log_dir / 'grid.toml'} --dry-run"
    assert (log_dir / "launch.json").exists()

    results = tmp_path / "results"
    deadline = time.monotonic() + 180
    holder = None
    while holder is None:  # a run is claimed by an element's eval: it trains
        assert time.monotonic() < deadline and "FAILED" not in slurm_cluster.states(job), \
            {p.name: p.read_text() for p in log_dir.glob("*_log.*")}
        for claim in results.glob("*/*/seed-*.claim"):
            info = read_claim(claim.with_suffix(".json"))
            if info is not None and info.held and info.holder and info.holder.slurm_array_task_id is not None:
                holder = info.holder
                break
        time.sleep(0.05)
    element = holder.slurm_array_task_id
    slurm_cluster.client("scontrol", "requeue", f"{job}_{element}")
    states = slurm_cluster.wait(job, timeout=600)
    logs = {p.name: p.read_text() for p in sorted(log_dir.glob("*_log.*"))}
    assert states == ["COMPLETED", "COMPLETED"], logs
    requeued = logs[f"{job}_{element}_0_log.err"] + logs[f"{job}_{element}_0_log.out"]
    assert "abandoned" in requeued, logs  # eval stopped the run in training
    assert requeued.count("Starting with JobEnvironment") == 2, logs  # then submitit ran the element again
    assert list(results.glob("*/*/*.claim")) == []
    assert sorted(p.relative_to(results).as_posix() for p in results.glob("*/*/seed-*.json")) == \
        sorted(p.relative_to(slurm_toy_reference).as_posix() for p in slurm_toy_reference.glob("*/*/seed-*.json"))
    assert len(_predictions(results)) == 4 and _predictions(results) == _predictions(slurm_toy_reference)


def test_sbatch_options_of_their_own_are_not_taken_for_the_reserved_ones_they_start():
    """`--gpus` and `--ntasks` are sbatch options, not starts of --gpus-per-task / --ntasks-per-node; a key that
    only starts a reserved option is refused (the command-line cases: tests/eval/test_claims.py)."""
    from biobench.errors import ConfigError
    from biobench.runtime.launch import slurm_args

    assert slurm_args(["gpus=2", "ntasks=1", "qos=long"]) == {"gpus": "2", "ntasks": "1", "qos": "long"}
    for value in ("gpus-per=2", "ntasks-per-n=2", "req=1", "job-n=x"):
        with pytest.raises(ConfigError, match="cannot be overridden"):
            slurm_args([value])


@pytest.mark.slow
def test_a_grid_already_queued_is_not_submitted_again_and_workers_beyond_max_array_size_is_one_line(
        slurm_cluster, tiny_mlm_dir, tmp_path):
    """`eval --launcher slurm` (issue 57 §4): `--workers 2000`, over the cluster's MaxArraySize (1001 by default),
    is one line before anything is written or submitted; a rerun of a launch whose array is still queued submits
    nothing (one line naming the array); once that array is cancelled, the same command submits again. The
    array never runs: `begin` holds it PENDING."""
    env = {**slurm_cluster.env, "OMP_NUM_THREADS": "1"}
    grid = _toy_grid(tmp_path, tiny_mlm_dir, "results", n_train=16)

    def launch(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "biobench.cli", "eval", "--config", str(grid), "--device", "cpu",
                               "--launcher", "slurm", "--partition", "debug", "--gpus-per-task", "0",
                               "--cpus-per-task", "1", "--time", "5", "--slurm-arg", "begin=now+1hour", *extra],
                              env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    too_many = launch("--workers", "2000")
    assert too_many.returncode == 2 and too_many.stderr == (
        "error: --workers 2000: this cluster's MaxArraySize is 1001 (scontrol show config), so an array holds at "
        "most 1001 elements: give --workers 1001 or fewer\n"), too_many.stderr
    assert not (tmp_path / "biobench-slurm").exists()
    first = launch("--workers", "2")
    assert first.returncode == 0, first.stderr[-2000:]
    job = first.stdout.split()[3].rstrip(":")
    try:
        assert set(slurm_cluster.states(int(job))) == {"PENDING"}
        again = launch("--workers", "2")
        assert again.returncode == 2 and again.stderr.startswith(
            f"error: {grid.resolve()} is already submitted as SLURM array {job} (PENDING"), again.stderr
        assert again.stderr.endswith(f"(`scancel {job}` first to replace it)\n") and again.stderr.count("\n") == 1
        assert len(list((tmp_path / "biobench-slurm").glob("*/launch.json"))) == 1  # nothing written either
    finally:
        slurm_cluster.client("scancel", job, check=False)
    slurm_cluster.wait(int(job), timeout=60)
    replaced = launch("--workers", "2")
    assert replaced.returncode == 0, replaced.stderr[-2000:]
    slurm_cluster.client("scancel", replaced.stdout.split()[3].rstrip(":"), check=False)
