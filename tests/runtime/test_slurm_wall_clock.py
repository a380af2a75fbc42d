"""Issue 48 on the real one-node SLURM cluster of tests/slurm_cluster.py: the submitit launcher at a real `--time`
limit, an element's eval killed with `kill -9`, `scancel` of eval and pretraining jobs, a run too long for its
job's life, and `first_host` against `scontrol show hostnames`.

Every wait is for observable state (a claim on disk, a line in a log, a job state), never for a fixed time: the
tests share two cores with other work. The controller checks time limits every ~30 s, so the real time limit
test allows for it (a warning up to 30 s early)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import predictions_by_run as _predictions
from tests.support import pretrain_args as _pretrain_args
from tests.support import pretrain_corpus as _corpus
from tests.support import slurm_toy_grid as _toy_grid

EVAL_ARGS = ["--device", "cpu", "--threads", "1", "--no-progress"]


def _wait_for(condition, timeout: float, what: str, logs=lambda: "", cluster=None, job: int | None = None):
    """Poll `condition` until it holds; fail at once (with `logs`) when `job` has finished meanwhile."""
    from tests.slurm_cluster import FINISHED

    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {logs()}"
        if cluster is not None and job is not None:
            states = cluster.states(job)
            assert not states or not all(s in FINISHED for s in states) or condition(), \
                f"job {job} ended {states} before {what}: {logs()}"
        time.sleep(0.2)
    return found


def _held_claim(results: Path, restart: str | None = None):
    """The holder of a claim held by an array element or a job (of restart `restart` when given), else None."""
    from biobench.eval.claims import read_claim

    for claim in results.glob("*/*/seed-*.claim"):
        info = read_claim(claim.with_suffix(".json"))
        if info is not None and info.held and info.holder and info.holder.slurm_job_id is not None \
                and (restart is None or (info.holder.slurm_restart_count or "0") == restart):
            return info.holder
    return None


def _launch(cluster, grid: Path, log_dir: Path, workers: int, time_limit: str, *extra: str) -> int:
    env = {**cluster.env, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "biobench.cli", "eval", "--config", str(grid), *EVAL_ARGS,
                           "--launcher", "slurm", "--workers", str(workers), "--partition", "debug",
                           "--gpus-per-task", "0", "--cpus-per-task", "1", "--time", time_limit, "--log-dir",
                           str(log_dir), *extra], env=env, cwd=grid.parent, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[3].rstrip(":"))


def _logs(log_dir: Path) -> dict[str, str]:
    return {p.name: p.read_text(errors="replace") for p in sorted(log_dir.glob("*_log.*"))}


def _long_grid(folder: Path, model: Path, seeds: str, epochs: int) -> Path:
    """One classification task of the toy grid, `epochs` long per run (~0.5 s an epoch on one core)."""
    grid = _toy_grid(folder, model, "results", n_train=160)
    text = grid.read_text().replace('tasks = ["toy-cls", "toy-ner"]', 'tasks = ["toy-cls"]')
    text = text.replace('seeds = "42-43"', f'seeds = "{seeds}"').replace("epochs = 2", f"epochs = {epochs}")
    grid.write_text(text)
    return grid


@pytest.mark.slow
def test_launcher_reaches_a_real_time_limit_stops_its_eval_and_requeues(slurm_cluster, tiny_mlm_dir, tmp_path):
    """`--launcher slurm --time 3`: submitit's USR2 warning (90 s before the limit, up to 30 s earlier) reaches
    the element; its eval child (USR2 ignored) is stopped with SIGUSR1 from the main loop, abandons the run in
    flight and releases its claim; submitit requeues the element, whose second life takes that run up again. It
    used to hang in a futex wait until TIMEOUT with 1 of 8 results (issue 48 §1).

    The grid (100 runs of 10 epochs, ~3 s a run at the fastest seen, ~0.3 s an epoch) is far longer than the
    warning's latest time (90 s after the start), so the first life is always warned in mid-run. Once the second
    life has redone the abandoned run, `scancel` ends the job: what is tested is one warning, its requeue and the
    run taken up again, not the rest of a grid (finishing 5 runs of 80 epochs cost 150 s of CPU in the suite)."""
    from biobench.eval.claims import abandoned_count

    grid = _long_grid(tmp_path, tiny_mlm_dir, "42-141", epochs=10)
    log_dir = tmp_path / "logs"
    results = tmp_path / "results"
    job = _launch(slurm_cluster, grid, log_dir, 1, "3")
    logs_text = lambda: "\n".join(_logs(log_dir).values())  # noqa: E731

    def abandoned_run():  # the result path of the run whose claim says: abandoned at the wall clock
        return next((c.with_suffix(".json") for c in results.glob("*/*/seed-*.claim")
                     if abandoned_count(c.with_suffix(".json"))), None)

    run = _wait_for(abandoned_run, 600, "a run abandoned at the wall-clock warning", logs_text, slurm_cluster, job)
    assert not run.exists()
    _wait_for(lambda: "Requeued job" in logs_text(), 120, "submitit's requeue after the warning", logs_text,
              slurm_cluster, job)
    slurm_cluster.client("scontrol", "update", f"JobId={job}", "TimeLimit=15")
    _wait_for(run.exists, 600, f"the second life's redo of {run.name}", logs_text, slurm_cluster, job)
    slurm_cluster.client("scancel", str(job))
    assert slurm_cluster.wait(job, timeout=120) == ["CANCELLED"], logs_text()
    text = logs_text()
    assert "wall-clock warning: stopping biobench" in text, text  # the main loop stopped the child
    assert "SIGUSR1: stopping: the run in flight is abandoned" in text, text
    assert "Requeued job" in text and text.count("Starting with JobEnvironment") == 2, text  # submitit requeued
    assert abandoned_count(run) == 0  # its claim went with its result


@pytest.mark.slow
def test_an_elements_eval_killed_with_sigkill_is_redone_without_a_new_submission(slurm_cluster, slurm_toy_reference,
                                                                                tiny_mlm_dir, tmp_path):
    """`kill -9` of the eval process of the element that trains a run: the other element does every run, that
    one included (its holder is gone: taken at once on this host, after the claim's expiry on another), and
    every result exists once, byte-identical to a sequential run (issue 48 §2: 7 of 8 until a resubmission)."""
    grid = _toy_grid(tmp_path, tiny_mlm_dir, "results", n_train=160)
    log_dir = tmp_path / "logs"
    job = _launch(slurm_cluster, grid, log_dir, 2, "10", "--claim-seconds", "20")
    results = tmp_path / "results"
    holder = _wait_for(lambda: _held_claim(results), 300, "a claim held by an element", lambda: _logs(log_dir),
                       slurm_cluster, job)
    os.kill(holder.pid, signal.SIGKILL)
    states = slurm_cluster.wait(job, timeout=600)
    logs = _logs(log_dir)
    killed = logs[f"{job}_{holder.slurm_array_task_id}_0_log.err"]
    assert "exited with -9" in killed, logs
    assert "COMPLETED" in states, (states, logs)
    assert list(results.glob("*/*/*.claim")) == []
    assert sorted(p.relative_to(results).as_posix() for p in results.glob("*/*/seed-*.json")) == \
        sorted(p.relative_to(slurm_toy_reference).as_posix() for p in slurm_toy_reference.glob("*/*/seed-*.json"))
    assert len(_predictions(results)) == 4 and _predictions(results) == _predictions(slurm_toy_reference)


def _restarts(cluster, job: int) -> int:
    out = cluster.client("scontrol", "show", "job", str(job), check=False).stdout
    field = next((word for word in out.split() if word.startswith("Restarts=")), "Restarts=-1")
    return int(field.split("=")[1])


@pytest.mark.slow
def test_a_run_too_long_for_its_job_is_reported_and_scancel_stops_the_eval_job(slurm_cluster, tiny_mlm_dir,
                                                                              tmp_path):
    """An eval job (`--requeue`, `--time=5`: its time nearly out for the 15-minute rule) is sent the wall-clock
    warning three times while it trains its one long run (`scancel --signal=USR1 --batch`, what
    `--signal=B:USR1@N` sends, at once): each time the run is abandoned, the abandon counted in its claim and
    the job requeued. The fourth life says the run is too long for its job's life, as `--dry-run` does; then
    `scancel` stops the job for good: CANCELLED, no further restart (issue 48 §3-4)."""
    grid = _long_grid(tmp_path, tiny_mlm_dir, "42", epochs=1000)
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "biobench.cli", "eval", "--config", str(grid),
                                                *EVAL_ARGS])
    script = tmp_path / "eval.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --requeue\n#SBATCH --time=5\n#SBATCH --open-mode=append\n"
                      f"export OMP_NUM_THREADS=1\necho start restart=${{SLURM_RESTART_COUNT:-0}}\nexec {command}\n")
    log = tmp_path / "eval.out"
    job = slurm_cluster.sbatch("--chdir", str(tmp_path), "-o", str(log), str(script))
    results = tmp_path / "results"
    text = lambda: log.read_text(errors="replace") if log.exists() else ""  # noqa: E731
    for life in range(3):
        _wait_for(lambda life=life: _held_claim(results, str(life)), 300, f"life {life}'s claim", text,
                  slurm_cluster, job)
        slurm_cluster.client("scancel", "--signal=USR1", "--batch", str(job))
        _wait_for(lambda life=life: f"start restart={life + 1}" in text(), 300, f"restart {life + 1}", text,
                  slurm_cluster, job)
    _wait_for(lambda: _held_claim(results, "3"), 300, "the fourth life's claim", text, slurm_cluster, job)
    assert text().count(f"requeued SLURM job {job}") == 3, text()
    assert "toy-cls seed 42: abandoned 3 times at the wall clock: raise --time or lower the run's length" in text()
    dry = subprocess.run([sys.executable, "-m", "biobench.cli", "eval", "--config", str(grid), "--dry-run"],
                         env=slurm_cluster.env, capture_output=True, text=True, timeout=300)
    assert "tiny · toy-cls seed 42: abandoned 3 times at the wall clock: raise --time or lower the run's " \
           "length" in dry.stdout, dry.stdout + dry.stderr
    slurm_cluster.client("scancel", str(job))
    assert slurm_cluster.wait(job, timeout=120) == ["CANCELLED"], text()
    _wait_for(lambda: "is not requeued: SIGTERM is a cancel" in text(), 60, "eval's last line", text)
    assert _restarts(slurm_cluster, job) == 3 and "start restart=4" not in text(), text()
    assert slurm_cluster.states(job) == ["CANCELLED"]


@pytest.mark.slow
def test_scancel_stops_a_pretraining_job_for_good(slurm_cluster, tmp_path):
    """`scancel` (SIGTERM) of a requeueable pretraining job: it writes its checkpoint, says it is not requeued,
    and the job ends CANCELLED with no restart (it used to requeue itself: issue 48 §3)."""
    corpus = _corpus(tmp_path)
    out = tmp_path / "job"
    command = " ".join(shlex.quote(a) for a in [sys.executable, *_pretrain_args(corpus, out, 400 * 4 * 64, "mlm")])
    script = tmp_path / "pretrain.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --requeue\n#SBATCH --time=5\n#SBATCH --open-mode=append\n"
                      f"export OMP_NUM_THREADS=1\necho start restart=${{SLURM_RESTART_COUNT:-0}}\nexec {command}\n")
    log = tmp_path / "job.out"
    job = slurm_cluster.sbatch("--chdir", str(tmp_path), "-o", str(log), str(script))
    train_log = out / "train_log.jsonl"
    text = lambda: log.read_text(errors="replace") if log.exists() else ""  # noqa: E731
    _wait_for(lambda: train_log.exists() and len(train_log.read_text().splitlines()) >= 3, 300, "training", text,
              slurm_cluster, job)
    slurm_cluster.client("scancel", str(job))
    assert slurm_cluster.wait(job, timeout=120) == ["CANCELLED"], text()
    _wait_for(lambda: "is not requeued: SIGTERM is a cancel" in text(), 60, "pretrain's last line", text)
    assert _restarts(slurm_cluster, job) == 0 and "start restart=1" not in text(), text()
    assert slurm_cluster.states(job) == ["CANCELLED"]


@pytest.mark.slow
def test_scancel_of_a_launcher_array_says_cancel_in_every_elements_log(slurm_cluster, tiny_mlm_dir, tmp_path):
    """`scancel` of an `eval --launcher slurm` array while both elements train: both end CANCELLED, and each
    element's logs say cancel (eval's line and the launcher's), never that submitit requeues it, and hold no
    traceback (issue 57 §7: each element said "requeued by submitit" and its .err ended in submitit's traceback
    of the RuntimeError raised for the child's exit code)."""
    grid = _long_grid(tmp_path, tiny_mlm_dir, "42-43", epochs=1000)
    log_dir = tmp_path / "logs"
    results = tmp_path / "results"
    job = _launch(slurm_cluster, grid, log_dir, 2, "10")
    logs_text = lambda: "\n".join(_logs(log_dir).values())  # noqa: E731

    def both_train() -> bool:  # each element's eval holds a claim: both are in a run
        from biobench.eval.claims import read_claim

        elements = set()
        for claim in results.glob("*/*/seed-*.claim"):
            info = read_claim(claim.with_suffix(".json"))
            if info is not None and info.held and info.holder:
                elements.add(info.holder.slurm_array_task_id)
        return len(elements) == 2

    _wait_for(both_train, 300, "both elements training", logs_text, slurm_cluster, job)
    slurm_cluster.client("scancel", str(job))
    assert slurm_cluster.wait(job, timeout=120) == ["CANCELLED", "CANCELLED"], logs_text()
    for element in (0, 1):
        def element_text(element=element) -> str:
            return "".join(_logs(log_dir).get(f"{job}_{element}_0_log.{ext}", "") for ext in ("out", "err"))

        _wait_for(lambda element_text=element_text: "this element is not requeued" in element_text(), 60,
                  f"element {element}'s cancel line", element_text)
        text = element_text()
        assert "is not requeued: SIGTERM is a cancel" in text, text  # eval's own line
        assert "cancelled (SIGTERM: scancel or the scheduler's kill): biobench eval stopped" in text, text
        for wrong in ("requeued by submitit", "Traceback", "Bypassing signal SIGTERM", "completed successfully"):
            assert wrong not in text, (wrong, text)
    assert list(results.glob("*/*/seed-*.json")) == []  # the runs in flight were abandoned, nothing half-written


def test_a_cancel_in_a_launcher_element_says_cancel_and_the_warning_leaves_the_requeue_to_submitit(monkeypatch,
                                                                                                 tmp_path):
    """Inside a `--launcher slurm` element (BIOBENCH_REQUEUED_BY=submitit), SIGTERM is a cancel in eval's and
    pretrain's line too; only the wall-clock warning is left to submitit's requeue (issue 57 §7)."""
    from biobench.runtime import slurm

    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol: nothing may be requeued here
    monkeypatch.setenv("BIOBENCH_REQUEUED_BY", "submitit")
    monkeypatch.setenv("SLURM_JOB_ID", "8")
    monkeypatch.setattr(slurm, "time_left", lambda job=None: 90)
    for signal_name, said in (("SIGTERM", "SLURM job 8 is not requeued: SIGTERM is a cancel (scancel sends SIGTERM)"),
                              ("SIGUSR1", "SLURM job 8 is requeued by submitit (its checkpoint), not here")):
        lines: list[str] = []
        assert slurm.requeue_self(lines.append, signal_name) is False
        assert len(lines) == 1 and lines[0].startswith(said), lines


@pytest.mark.parametrize("nodelist", ["r1i[0-1]n[0-3]", "gpu[07-09,12],cpu01", "node001", "x[009-011]y[1,3]",
                                      "c[1,3-4],d[2]"])
def test_first_host_and_hostnames_match_scontrol_show_hostnames(slurm_cluster, nodelist):
    """MASTER_ADDR is the first host `scontrol show hostnames` gives, on HPE/SGI-style names with several
    bracket groups too (`r1i[0-1]n[0-3]` -> r1i0n0, not r1i0n: issue 48 §5); the parser, used where scontrol is
    missing, expands the whole list as scontrol does."""
    from biobench.training.distributed import expand_hostlist, first_host

    shown = slurm_cluster.client("scontrol", "show", "hostnames", nodelist).stdout.split()
    assert expand_hostlist(nodelist) == shown
    assert first_host(nodelist, env=slurm_cluster.env) == shown[0]
    assert first_host(nodelist, env={"PATH": "/nonexistent"}) == shown[0]  # the parser, without scontrol


def test_the_claim_history_counts_only_wall_clock_abandons(tmp_path):
    """The abandon count reads the released generations marked `abandoned: wall clock` only (a SIGTERM's
    release, a takeover or a live generation do not count)."""
    from biobench.eval.claims import WALL_CLOCK, abandoned_count
    from biobench.runtime import leases
    from biobench.runtime.leases import Holder
    from biobench.store import claim_path

    result = tmp_path / "m" / "t" / "seed-1.json"
    folder = claim_path(result)
    folder.mkdir(parents=True)
    me = Holder("a", "h", 1)
    kinds = [dict(released=True, abandoned=WALL_CLOCK), dict(released=True), dict(released=True, abandoned=WALL_CLOCK),
             {}, dict(released=True, abandoned="other")]
    for n, kind in enumerate(kinds, 1):
        (folder / f"{n:06d}.json").write_bytes(leases.encode(me, time.time(), **kind))
    (folder / "000006.json").write_text("[not a lease")
    assert abandoned_count(result) == 2
    assert abandoned_count(tmp_path / "none.json") == 0


def test_slurm_times_parse_as_sbatch_and_squeue_write_them():
    from biobench.runtime.slurm import seconds

    assert [seconds(t) for t in ("1500", "20:00:00", "1-02:03", "0:30", "59:59", "1-0:0:5", "30:00:00")] == \
        [90000, 72000, 93780, 30, 3599, 86405, 108000]
    assert [seconds(t) for t in ("99:99:99", "1:60", "3-25:00:00", "UNLIMITED", "NOT_SET", "", "1h")] == [None] * 7


@pytest.mark.parametrize(("signal_name", "left", "requeued", "said"), [
    ("SIGUSR1", 90, True, "requeued SLURM job 7_1"),
    ("SIGUSR1", 3600, False, "is not requeued: SIGUSR1 came with 60 min left, not at the wall clock"),
    ("SIGUSR1", None, False, "is not requeued: SIGUSR1 came with no time limit"),
    ("SIGTERM", 90, False, "is not requeued: SIGTERM is a cancel (scancel sends SIGTERM)"),
])
def test_only_the_warning_with_the_time_nearly_out_requeues(monkeypatch, tmp_path, signal_name, left, requeued, said):
    """Issue 48 §3: `scancel` (SIGTERM) used to requeue an eval or pretraining job; now only SIGUSR1 with under
    15 minutes left does (a fake scontrol records the call)."""
    from biobench.runtime import slurm

    calls = tmp_path / "calls"
    (tmp_path / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (tmp_path / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("BIOBENCH_REQUEUED_BY", raising=False)
    for name, value in (("SLURM_JOB_ID", "8"), ("SLURM_ARRAY_JOB_ID", "7"), ("SLURM_ARRAY_TASK_ID", "1")):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(slurm, "time_left", lambda job=None: left)
    lines: list[str] = []
    assert slurm.requeue_self(lines.append, signal_name) is requeued
    assert len(lines) == 1 and said in lines[0], lines
    assert (calls.read_text() == "requeue 7_1\n") if requeued else not calls.exists()
    if requeued:  # SIGTERM (SLURM's answer to the requeue) no longer stops this process...
        assert signal.getsignal(signal.SIGTERM) is slurm._let_sigterm_pass
        # ...but a process started afterwards still stops on it: SIG_IGN would be inherited across exec (a
        # multiprocessing pool started later in the same test process hung in terminate() on that)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        child.terminate()
        assert child.wait(timeout=300) == -signal.SIGTERM
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_a_requeue_whose_sigterm_reaches_scontrol_first_is_still_reported_as_requeued(monkeypatch, tmp_path):
    """SLURM answers an accepted requeue with SIGTERM to every process of the job, scontrol included: under load
    scontrol died before it answered (exit -15) and the accepted requeue was logged as "cannot requeue" (CI, load
    6). The fake scontrol records the call, then gets that SIGTERM; it now ignores it and answers."""
    from biobench.runtime import slurm

    calls = tmp_path / "calls"
    (tmp_path / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {calls}\nkill -TERM $$\nexit 0\n')
    (tmp_path / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("BIOBENCH_REQUEUED_BY", raising=False)
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "19")
    monkeypatch.setattr(slurm, "time_left", lambda job=None: 90)
    lines: list[str] = []
    try:
        assert slurm.requeue_self(lines.append, "SIGUSR1") is True, lines
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert calls.read_text() == "requeue 19\n"
    assert lines == ["requeued SLURM job 19 (scontrol requeue 19): it goes back to the queue and resumes where it "
                     "stopped"]
