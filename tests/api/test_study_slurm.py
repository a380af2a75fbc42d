"""`biobench study run --launcher slurm` on the real one-node SLURM of tests/slurm_cluster.py: each step a job
submitted through the submitit launcher, the evaluations and the analysis held by `afterok` until the
pretrainings they read have ended; a pretraining warned of its wall clock in mid-run checkpoints, is requeued
and resumes; `study status` while they wait and after; the results read the final weights."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import TINY_STUDY as TINY
from tests.support import TRANSPLANT_PROBES


def _job_times(cluster, job: str) -> tuple[str, str]:
    out = cluster.client("scontrol", "show", "job", job, "-o", check=False).stdout
    start = re.search(r"StartTime=(\S+)", out)
    end = re.search(r"EndTime=(\S+)", out)
    return (start[1] if start else ""), (end[1] if end else "")


def _restarts(cluster, job: str) -> int:
    found = re.search(r"Restarts=(\d+)", cluster.client("scontrol", "show", "job", job, "-o", check=False).stdout)
    return int(found[1]) if found else -1


@pytest.mark.slow
def test_tiny_study_on_slurm_runs_its_steps_after_what_they_need(slurm_cluster, tmp_path):
    env = {**slurm_cluster.env, "OMP_NUM_THREADS": "1"}
    path = tmp_path / "study.toml"
    # the detour run long enough to be requeued in the middle of its training (~520 optimiser steps of 256 tokens,
    # the warning sent at step 50: 470 steps to spare, ~13 s at the fastest seen; at 400K tokens its second life
    # trained 45 s of CPU for nothing) and a layer transplant with linear probes (Table 3's steps), each job after
    # the ones it reads
    path.write_text(TINY.replace('tokens = "12K"', 'tokens = "120K"', 1) + TRANSPLANT_PROBES, encoding="utf-8")

    def biobench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "biobench.cli", *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)

    t0 = time.monotonic()
    submitted = biobench("study", "run", str(path), "--launcher", "slurm", "--partition", "debug",
                         "--gpus-per-task", "0", "--cpus-per-task", "1", "--time", "5")
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    jobs = dict(re.findall(r"submitted (\S+): SLURM job (\d+)", submitted.stdout))
    assert list(jobs) == ["pretrain/detour", "pretrain/mlm", "eval/cls/detour", "eval/cls/mlm", "analysis/cka-final",
                          "analysis/trajectory", "analysis/transplant-low", "analysis/probe-mlm",
                          "analysis/probe-transplant-low"]
    assert f"submitted eval/cls/detour: SLURM job {jobs['eval/cls/detour']} (after pretrain/detour: job {jobs['pretrain/detour']})" \
        in submitted.stdout
    assert submitted.stdout.splitlines()[-1] == f"progress: biobench study status {path}"
    # while the pretrainings run, the steps that read them wait on them (SLURM's reason: Dependency)
    deps = slurm_cluster.client("squeue", "-h", "-j", jobs["analysis/cka-final"], "-o", "%E|%r", check=False).stdout
    assert f"afterok:{jobs['pretrain/detour']}" in deps and f"afterok:{jobs['pretrain/mlm']}" in deps, deps
    probe_deps = slurm_cluster.client("squeue", "-h", "-j", jobs["analysis/probe-transplant-low"], "-o", "%E",
                                      check=False).stdout
    assert f"afterok:{jobs['analysis/transplant-low']}" in probe_deps, probe_deps
    graph = slurm_cluster.client("squeue", "-h", "-t", "all", "-o", "%i|%j|%T|%E|%r", check=False).stdout
    print("job graph at submit:\n" + graph)
    during = biobench("study", "status", str(path))
    print("status during:\n" + during.stdout)
    assert during.returncode == 0, during.stderr
    rows = {line.split()[0]: line for line in during.stdout.splitlines() if line and not line.startswith(" ")}
    assert re.search(r"\s(running|waiting)\s", rows["pretrain/detour"]), during.stdout
    assert re.search(r"\swaiting\s+SLURM job \d+ PENDING \(Dependency\), on pretrain/detour",
                     rows["eval/cls/detour"]), during.stdout  # the detour job has barely started

    # the wall clock in mid-run: the warning SLURM sends a step's job before its limit (submitit's `--signal=
    # USR2@90`, to the job's processes) sent now; `--time 5` puts the job past submitit's guaranteed wall time
    # from its start, so the warning is a time-out to it, as at the real limit. The launcher's worker stops the
    # pretraining with SIGUSR1 (the wall-clock warning biobench pretrain knows), which writes its checkpoint;
    # submitit requeues the job, which resumes from it; the steps that read it wait for its second end.
    log = tmp_path / "study" / "runs" / "detour" / "train_log.jsonl"
    deadline = time.monotonic() + 300
    while not (log.exists() and log.read_text().count("\n") >= 50):
        assert time.monotonic() < deadline and "FAILED" not in slurm_cluster.states(int(jobs["pretrain/detour"]))
        time.sleep(0.2)
    slurm_cluster.client("scancel", "--signal=USR2", jobs["pretrain/detour"])
    for job in jobs.values():
        assert slurm_cluster.wait(int(job), timeout=900) == ["COMPLETED"], \
            {p.name: p.read_text()[-1500:] for p in (tmp_path / "study" / "slurm").rglob("*_log.*")}
    wall = time.monotonic() - t0
    pretrain_log = "".join(p.read_text() for p in (tmp_path / "study" / "slurm" / "pretrain--detour").glob("*_log.*"))
    for said in ("this job is timed-out",  # submitit, on the warning
                 "wall-clock warning: stopping biobench",  # the launcher's worker, to its pretraining child
                 "SIGUSR1: stopping after this step to save a resumable checkpoint", "interrupted; kept ",
                 "is requeued by submitit (its checkpoint), not here", "Requeued job",
                 "SLURM job restart 1: resuming from", "resuming from"):
        assert said in pretrain_log, (said, pretrain_log[-4000:])
    assert _restarts(slurm_cluster, jobs["pretrain/detour"]) == 1
    # each eval started only after its pretraining ended, and read its final weights
    for run in ("detour", "mlm"):
        _, pretrain_end = _job_times(slurm_cluster, jobs[f"pretrain/{run}"])
        eval_start, _ = _job_times(slurm_cluster, jobs[f"eval/cls/{run}"])
        assert pretrain_end and eval_start >= pretrain_end, (pretrain_end, eval_start)
    from biobench.store import iter_results

    results = tmp_path / "study" / "results"
    final = {run: str(tmp_path / "study" / "runs" / run / "final") for run in ("detour", "mlm")}
    records = [r for _, r in iter_results(results)]
    assert len(records) == 8 and {r.model["source"] for r in records} == set(final.values())
    assert {r.model["lineage"]["phase"] for r in records} == {"final"}

    after = biobench("study", "status", str(path))
    print("status after:\n" + after.stdout)
    assert [line.split()[1] for line in after.stdout.splitlines() if line.strip()] == ["done"] * 9, after.stdout
    assert "2/2 seeds done" in next(line for line in after.stdout.splitlines()
                                    if line.startswith("analysis/probe-transplant-low"))
    _, transplant_end = _job_times(slurm_cluster, jobs["analysis/transplant-low"])
    probe_start, _ = _job_times(slurm_cluster, jobs["analysis/probe-transplant-low"])
    assert transplant_end and probe_start >= transplant_end, (transplant_end, probe_start)
    again = biobench("study", "run", str(path), "--launcher", "slurm", "--partition", "debug", "--gpus-per-task", "0")
    assert again.returncode == 0 and again.stdout.startswith("nothing to submit"), again.stdout
    print(f"tiny study on the local SLURM: {wall:.0f} s from submit to the last job's end")


@pytest.mark.slow
def test_a_step_cancelled_because_its_need_was_says_so_and_each_step_gets_its_lives(slurm_cluster, tmp_path):
    """Issue 60 item 3: the eval of a pretraining that was cancelled is cancelled by SLURM (kill_on_invalid_dep)
    with no reason of its own; `study status` says which need did not finish. The study's `lives` (and a
    [[pretrain]] table's own) reach submitit as its requeue budget (max_num_timeout = lives - 1). Minimal work:
    the pretraining is cancelled as soon as it is submitted."""
    import json

    from tests.support import study_pretrain

    env = {**slurm_cluster.env, "OMP_NUM_THREADS": "1"}
    path = tmp_path / "study.toml"
    path.write_text("lives = 6\n" + study_pretrain("a", extra="lives = 2")
                    + '\n[[eval]]\nname = "cls"\ntasks = ["demo-cls"]\nseeds = "42"\nmodels = [{ model = "run:a/final" }]\n',
                    encoding="utf-8")

    def biobench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "biobench.cli", *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)

    submitted = biobench("study", "run", str(path), "--launcher", "slurm", "--partition", "debug",
                         "--gpus-per-task", "0", "--cpus-per-task", "1", "--time", "5")
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    jobs = dict(re.findall(r"submitted (\S+): SLURM job (\d+)", submitted.stdout))
    slurm_cluster.client("scancel", jobs["pretrain/a"])
    for job in jobs.values():
        assert slurm_cluster.wait(int(job), timeout=300) == ["CANCELLED"]
    launched = {step: json.loads((tmp_path / "study" / "slurm" / step.replace("/", "--") / "launch.json").read_text())
                for step in jobs}
    assert launched["pretrain/a"]["max_num_timeout"] == 1 and launched["eval/cls/a"]["max_num_timeout"] == 5
    status = biobench("study", "status", str(path))
    assert status.returncode == 0, status.stderr
    rows = {line.split()[0]: line for line in status.stdout.splitlines() if line and not line.startswith(" ")}
    assert re.search(rf"\sfailed\s+SLURM job {jobs['pretrain/a']} CANCELLED", rows["pretrain/a"]), status.stdout
    assert f"cancelled   SLURM job {jobs['eval/cls/a']} cancelled before it started: pretrain/a did not finish" \
        in rows["eval/cls/a"], status.stdout
    assert status.stdout.count("retry: biobench study run") == 2


# ---------------------------------------------------------------- submissions happen once (issue 57 §4)
# the jobs of these tests never run: `begin` holds them PENDING an hour, and each test cancels what it submitted
HELD = ["--slurm-arg", "begin=now+1hour"]
SLURM_FLAGS = ["--launcher", "slurm", "--partition", "debug", "--gpus-per-task", "0", "--cpus-per-task", "1",
               "--time", "5"]


def _study(tmp_path: Path, env: dict[str, str]):
    path = tmp_path / "study.toml"
    path.write_text(TINY, encoding="utf-8")

    def biobench(*args: str, path_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "biobench.cli", "study", "run", str(path), *args],
                              env=path_env or env, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    return path, biobench


def _study_jobs(cluster) -> list[tuple[str, str]]:
    """(job name, job id) of every study job queued or running on the cluster."""
    out = cluster.client("squeue", "-h", "-o", "%j|%i", check=False).stdout
    return sorted(tuple(line.split("|")) for line in out.splitlines() if line.startswith("study-"))


def _cancel(cluster, jobs) -> None:
    if jobs:
        cluster.client("scancel", *jobs, check=False)


@pytest.mark.slow
def test_a_refused_submission_is_recorded_and_the_rerun_submits_only_what_is_missing(slurm_cluster, tmp_path):
    """sbatch accepts the study's first job and refuses the second (a wrapper in front of the real sbatch): the
    first is recorded in .study/slurm.json and said on stdout, the refusal is one line; the rerun (sbatch
    accepting again) submits the other steps only, the evaluation of the first waiting on its recorded job:
    one live job per step, never two (issue 57 §4: the rerun submitted both pretrainings again)."""
    assert _study_jobs(slurm_cluster) == []
    wrapper = tmp_path / "bin"
    wrapper.mkdir()
    (wrapper / "sbatch").write_text(f"#!/bin/sh\nn=$(cat {tmp_path}/calls 2>/dev/null || echo 0)\n"
                                    f"echo $((n + 1)) > {tmp_path}/calls\n"
                                    f'[ "$n" -eq 0 ] && exec {shutil.which("sbatch")} "$@"\n'
                                    "echo 'sbatch: error: Batch job submission failed: refused by the test' >&2\n"
                                    "exit 1\n")
    (wrapper / "sbatch").chmod(0o755)
    env = {**slurm_cluster.env, "OMP_NUM_THREADS": "1"}
    path, biobench = _study(tmp_path, env)
    jobs: list[str] = []
    try:
        first = biobench(*SLURM_FLAGS, *HELD, path_env={**env, "PATH": f"{wrapper}:{env['PATH']}"})
        assert first.returncode == 2, first.stderr[-2000:]
        assert first.stderr == "error: sbatch refused the array: Batch job submission failed: refused by the test\n"
        submitted = re.findall(r"submitted (\S+): SLURM job (\d+)", first.stdout)
        assert [step for step, _ in submitted] == ["pretrain/detour"], first.stdout
        detour_job = submitted[0][1]
        jobs.append(detour_job)
        record = json.loads((tmp_path / "study" / ".study" / "slurm.json").read_text())
        assert list(record) == ["pretrain/detour"] and record["pretrain/detour"]["job"] == detour_job
        assert _study_jobs(slurm_cluster) == [("study-pretrain-detour", detour_job)]

        again = biobench(*SLURM_FLAGS, *HELD)
        assert again.returncode == 0, again.stderr[-2000:]
        resubmitted = dict(re.findall(r"submitted (\S+): SLURM job (\d+)", again.stdout))
        jobs += resubmitted.values()
        assert list(resubmitted) == ["pretrain/mlm", "eval/cls/detour", "eval/cls/mlm", "analysis/cka-final",
                                     "analysis/trajectory"], again.stdout
        assert f"submitted eval/cls/detour: SLURM job {resubmitted['eval/cls/detour']} (after pretrain/detour: " \
               f"job {detour_job})" in again.stdout
        names = [name for name, _ in _study_jobs(slurm_cluster)]
        assert sorted(names) == sorted(f"study-{step.replace('/', '-')}" for step in
                                       ["pretrain/detour", *resubmitted]), names  # each step once
        record = json.loads((tmp_path / "study" / ".study" / "slurm.json").read_text())
        assert record["pretrain/detour"]["job"] == detour_job and len(record) == 6

        third = biobench(*SLURM_FLAGS, *HELD)  # all queued: nothing again
        assert third.returncode == 0 and third.stdout.startswith("nothing to submit"), third.stdout
        assert len(_study_jobs(slurm_cluster)) == 6
    finally:
        _cancel(slurm_cluster, jobs)


@pytest.mark.slow
def test_every_flag_is_checked_before_the_first_submission_and_step_submits_one_step(slurm_cluster, tmp_path):
    """`--workers -1` and `--workers 2000` (over the cluster's MaxArraySize, 1001 by default) are one line each
    and submit nothing (they were a traceback, and sbatch's refusal, after two pretrainings were submitted);
    `--step pretrain/detour` submits that step alone (it submitted every step); `--step eval/cls/mlm`, whose
    pretraining is neither done nor queued, is refused in one line; `--step eval/cls/detour` waits on the
    queued pretraining."""
    assert _study_jobs(slurm_cluster) == []
    env = {**slurm_cluster.env, "OMP_NUM_THREADS": "1"}
    _path, biobench = _study(tmp_path, env)
    jobs: list[str] = []
    try:
        for workers, said in (("-1", "error: --workers -1: give 1 to 10000\n"),
                              ("2000", "error: --workers 2000: this cluster's MaxArraySize is 1001 (scontrol show "
                                       "config), so an array holds at most 1001 elements: give --workers 1001 or "
                                       "fewer\n")):
            refused = biobench(*SLURM_FLAGS, *HELD, "--workers", workers)
            assert refused.returncode == 2 and refused.stderr == said, refused.stderr[-2000:]
            assert "submitted" not in refused.stdout and _study_jobs(slurm_cluster) == []
            assert not (tmp_path / "study" / ".study" / "slurm.json").exists()

        one = biobench(*SLURM_FLAGS, *HELD, "--step", "pretrain/detour")
        assert one.returncode == 0, one.stderr[-2000:]
        submitted = re.findall(r"submitted (\S+): SLURM job (\d+)", one.stdout)
        jobs += [job for _, job in submitted]
        assert [step for step, _ in submitted] == ["pretrain/detour"], one.stdout
        assert [name for name, _ in _study_jobs(slurm_cluster)] == ["study-pretrain-detour"]

        orphan = biobench(*SLURM_FLAGS, *HELD, "--step", "eval/cls/mlm")
        assert orphan.returncode == 2 and orphan.stderr == (
            "error: --step eval/cls/mlm needs pretrain/mlm, which is neither done nor queued: add --step "
            "pretrain/mlm, or run it first\n"), orphan.stderr[-2000:]
        after = biobench(*SLURM_FLAGS, *HELD, "--step", "eval/cls/detour")
        assert after.returncode == 0, after.stderr[-2000:]
        jobs += re.findall(r"SLURM job (\d+) \(after", after.stdout)
        assert re.fullmatch(rf"submitted eval/cls/detour: SLURM job \d+ \(after pretrain/detour: job {jobs[0]}\)",
                            after.stdout.splitlines()[0]), after.stdout
        assert len(_study_jobs(slurm_cluster)) == 2
    finally:
        _cancel(slurm_cluster, jobs)
