"""Run claims and the one lease mechanism (runtime.leases): atomic claims, takeover of expired ones by exactly one
taker, hostile claim files as one warning line, work stealing across processes with every run done once,
kill -9 then redo, and the wall clock (SIGUSR1/SIGTERM: the run abandoned, its claim released, the job requeued)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from biobench.eval import runner
from biobench.eval.claims import RunClaims, read_claim
from biobench.runtime import leases
from biobench.runtime.leases import FolderLeases, Holder
from biobench.store import claim_path, read_result

from tests.support import DATA, OVERRIDES, spec

OTHER = Holder("node7:4242", "node7", 4242, slurm_job_id="901", slurm_array_job_id="900", slurm_array_task_id="1")


def plant(result: Path, holder: Holder, expires: float, generation: int = 1) -> Path:
    """A claim as another process (on another host) would have written it."""
    folder = claim_path(result)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{generation:06d}.json"
    path.write_bytes(leases.encode(holder, expires))
    return path


# ---------------------------------------------------------------- the lease mechanism
def test_a_lease_is_taken_once_renewed_released_and_taken_again(tmp_path):
    files = FolderLeases(tmp_path)
    me, you = Holder.here("me"), OTHER
    first = leases.acquire(files, "job.claim", me, 60)
    assert first is not None and first.generation == 1
    assert leases.acquire(files, "job.claim", you, 60) is None  # held
    assert leases.renew(files, first, 120) and leases.holds(files, first)
    state = leases.read_state(files, "job.claim")
    assert state.holder == me and state.expires == pytest.approx(time.time() + 120, abs=5)
    assert leases.release(files, first)
    state = leases.read_state(files, "job.claim")
    assert state.released and state.free() and state.generation == 2
    second = leases.acquire(files, "job.claim", you, 60)
    assert second is not None and second.generation == 3
    assert not leases.renew(files, first, 60) and not leases.release(files, first)  # lost: nothing to do


def test_an_expired_lease_is_taken_over_and_its_old_holder_learns_it_lost(tmp_path):
    files = FolderLeases(tmp_path)
    old = leases.acquire(files, "x", OTHER, 60, now=time.time() - 120)  # expired a minute ago
    assert old is not None
    taken = leases.acquire(files, "x", Holder.here(), 60)
    assert taken is not None and taken.generation == 2
    assert not leases.renew(files, old, 60)  # the stalled holder must stop


def test_two_takers_racing_for_an_expired_claim_one_wins(tmp_path):
    files = FolderLeases(tmp_path)
    for round_ in range(30):
        folder = f"run{round_}.claim"
        assert leases.acquire(files, folder, OTHER, 1, now=time.time() - 10) is not None
        barrier, won = threading.Barrier(4), []

        def take(n: int, folder: str = folder, barrier: threading.Barrier = barrier, won: list = won) -> None:
            state = leases.read_state(files, folder)  # every taker sees the same expired generation 1
            barrier.wait()
            lease = leases.acquire(files, folder, Holder(f"taker{n}"), 60, state=state)
            if lease is not None:
                won.append(n)

        threads = [threading.Thread(target=take, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1, f"round {round_}: {won} all took the claim"
        assert sorted(p.name for p in (tmp_path / folder).iterdir()) == ["000001.json", "000002.json"]


def test_a_dead_process_of_this_machine_frees_its_claim_at_once(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        holder = Holder("c", "here", child.pid, machine=Holder.here().machine, started=leases._start_time(child.pid))
        files = FolderLeases(tmp_path)
        assert leases.acquire(files, "r", holder, 600) is not None
        assert leases.acquire(files, "r", Holder.here(), 600) is None  # alive: held
    finally:
        child.kill()
        child.wait()
    assert leases.acquire(files, "r", Holder.here(), 600) is not None  # gone: taken without waiting 600 s


def test_an_earlier_life_of_this_slurm_job_frees_its_claim(tmp_path, monkeypatch):
    files = FolderLeases(tmp_path)
    before = Holder("w", "node1", 10, slurm_job_id="77", slurm_restart_count=None)
    assert leases.acquire(files, "r", before, 600) is not None
    monkeypatch.setenv("SLURM_JOB_ID", "78")
    assert leases.acquire(files, "r", Holder.here(), 600) is None  # another job: held
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    lease = leases.acquire(files, "r", Holder.here(), 600)  # the requeued job itself: its old claim is its own
    assert lease is not None and lease.holder.slurm_job_id == "77" and lease.holder.slurm_restart_count == "1"


HOSTILE = {
    "huge": b"{" + b" " * 10_000 + b"}",
    "not json": b"\x00garbage{",
    "a list": b"[1, 2]",
    "expires a text": json.dumps({"worker": "w", "expires": "tomorrow"}).encode(),
    "expires NaN": b'{"worker": "w", "expires": NaN}',
    "expires Infinity": b'{"worker": "w", "expires": Infinity}',
    "expires 1e400": b'{"worker": "w", "expires": 1e400}',
    "expires in a century": json.dumps({"worker": "w", "expires": time.time() + 3e9}).encode(),
    "pid a text": json.dumps({"worker": "w", "expires": time.time() + 600, "pid": "1"}).encode(),
    "worker with a newline": json.dumps({"worker": "w\n", "expires": time.time() + 600}).encode(),
    "deep": b'{"worker": "w", "expires": 1, "x": ' + b"[" * 100 + b"]" * 100 + b"}",
}


@pytest.mark.parametrize("name", [*HOSTILE, "fifo"])
def test_a_hostile_claim_file_is_one_warning_line_and_counts_as_expired(tmp_path, name):
    result = tmp_path / "m" / "t" / "seed-1.json"
    folder = claim_path(result)
    folder.mkdir(parents=True)
    if name == "fifo":
        os.mkfifo(folder / "000001.json")
    else:
        (folder / "000001.json").write_bytes(HOSTILE[name])
    lines: list[str] = []
    claims = RunClaims(60, warn=lines.append)
    try:
        assert claims.claim(result)  # taken over, without blocking on the FIFO or trusting the file
        assert read_claim(result).holder == claims.holder
        assert not RunClaims(60, holder=OTHER, warn=lines.append).claim(result)
    finally:
        claims.close()
    assert len(lines) == 1, lines
    assert lines[0].startswith("warning: ") and "000001.json" in lines[0] and "treated as expired" in lines[0]
    assert "\n" not in lines[0]


def test_a_symlinked_claim_folder_is_said_in_one_line_unlinked_and_the_run_taken(tmp_path):
    """Issue 51 item 8: a symlink at a claim path parked its run for ever; now the link (never its target) is
    removed with one line, and the claim made in a real folder."""
    result = tmp_path / "m" / "t" / "seed-1.json"
    result.parent.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    claim_path(result).symlink_to(elsewhere)
    assert "is a symlink, not a claim folder" in read_claim(result).problem  # what --dry-run shows
    lines: list[str] = []
    claims = RunClaims(60, warn=lines.append)
    try:
        assert claims.claim(result)
    finally:
        claims.close()
    assert len(lines) == 1 and "is a symlink, not a claim folder; removed" in lines[0], lines
    assert not list(elsewhere.iterdir()) and claim_path(result).is_dir() and not claim_path(result).is_symlink()


@pytest.mark.parametrize("junk", ["file", "fifo"])
def test_junk_at_a_claim_path_is_reported_cleared_and_the_run_done(tiny_mlm_dir, tmp_path, junk, capsys):
    """Issue 51 item 8: a plain file (or FIFO) named seed-N.claim: --dry-run says so beside the run, eval says
    so in one line, removes it and does the run (it used to exit 0 saying other processes were finishing it)."""
    from biobench import cli
    from biobench.runtime.ownership import mark_created

    results = mark_created(tmp_path / "results", "results")  # a results folder of biobench's, junk in it
    args = ["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1", "--results",
            str(results), "--epochs", "1", "--limit-train", "16", "--max-length", "32", "--device", "cpu",
            "--no-progress"]
    from biobench.api.evaluation import plan_evaluation

    run = plan_evaluation(str(tiny_mlm_dir), "demo-cls", seeds="1", results=results,
                          overrides={"epochs": 1, "limit_train": 16, "max_length": 32}).grid[0]
    run.path.parent.mkdir(parents=True, exist_ok=True)
    junk_path = claim_path(run.path)
    if junk == "file":
        junk_path.write_text("not a claim")
    else:
        os.mkfifo(junk_path)
    assert cli.main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"demo-cls seed 1: {junk_path} is a {'file' if junk == 'file' else 'FIFO, socket or device'}, not a " \
           "claim folder" in out, out
    assert cli.main(args) == 0
    err = capsys.readouterr().err
    assert f"warning: {junk_path} is a" in err and "removed so the run can be claimed" in err, err
    assert "held by other processes" not in err
    assert run.path.exists() and not junk_path.exists()


def test_claims_are_renewed_while_held_and_released_after_the_result(tmp_path):
    result = tmp_path / "seed-1.json"
    claims = RunClaims(1.0)
    try:
        assert claims.claim(result)
        first = read_claim(result).expires
        time.sleep(1.5)  # past the first expiry: the heartbeat (every 0.2 s) kept it alive
        info = read_claim(result)
        assert info.held and info.expires > first
        assert not RunClaims(1.0, holder=OTHER).claim(result)
        result.write_text("{}")
        claims.release(result, finished=True)
        assert not claim_path(result).exists()  # result first, then the claim goes: nothing left
    finally:
        claims.close()


# ---------------------------------------------------------------- the runner with claims
def plan(model_dir, results, **kw):
    return runner.plan_grid(str(model_dir), [spec("t1", seeds=(1, 2, 3))], lambda s: DATA[s.id], results,
                            overrides=OVERRIDES, **kw)


def test_a_run_held_elsewhere_is_waited_for_and_taken_when_its_claim_expires(tiny_mlm_dir, tmp_path):
    """Issue 48 §2: a process that finds a run held by another host's claim does not give it up for good: it
    waits (one line says so), and when the claim expires unrenewed (its holder died) it takes the run."""
    grid = plan(tiny_mlm_dir, tmp_path)
    held = grid.runs[1].path
    plant(held, OTHER, time.time() + 3)  # another host's live claim, never renewed: its holder died
    logged: list[str] = []
    claims = RunClaims(5)
    try:
        runner.execute(grid, device="cpu", progress=False, claims=claims, log=logged.append)
    finally:
        claims.close()
    assert [r.status for r in grid.runs] == ["done", "done", "done"]
    assert read_result(held).seed == 2 and not claim_path(held).exists()
    assert any("1 run(s) of" in line and "held by other processes: waiting up to 6 s" in line for line in logged)
    assert "t1 seed 2: its claim was free (holder gone or expired); taking the run" in logged
    assert not any("which finish them" in line for line in logged)


def test_a_renewed_claim_is_waited_for_and_taken_when_its_holder_dies_after_renewing(tiny_mlm_dir, tmp_path):
    """Issue 57 §6: a claim seen renewed is no longer dropped from the wait: its holder (on another host, so
    only its claim's expiry tells) renews while this process waits, then dies without releasing it (its
    heartbeat stops); the claim expires and this process, the grid's last, takes the run and does it."""
    grid = plan(tiny_mlm_dir, tmp_path)
    held = grid.runs[1].path
    other = RunClaims(1.0, holder=OTHER)  # a live holder: its heartbeat renews every 0.2 s
    waiting = threading.Event()
    renewals: list[float] = []

    def holder_dies_after_renewals() -> None:  # three renewals seen while the waiter waits, then a kill -9
        waiting.wait(300)
        while len(renewals) < 4:
            info = read_claim(held)
            if info is not None and (not renewals or info.expires > renewals[-1]):
                renewals.append(info.expires)
            time.sleep(0.05)
        other.heartbeat.stop()  # no release: as when its process is killed

    logged: list[str] = []

    def log(line: str) -> None:
        logged.append(line)
        if "held by other processes: waiting" in line:
            waiting.set()

    claims = RunClaims(5)
    killer = threading.Thread(target=holder_dies_after_renewals, daemon=True)
    try:
        assert other.claim(held)
        killer.start()
        runner.execute(grid, device="cpu", progress=False, claims=claims, log=log)
    finally:
        claims.close()
        other.heartbeat.stop()
        killer.join(5)
    assert len(renewals) == 4  # the wait saw the claim renewed, and went on waiting
    assert [r.status for r in grid.runs] == ["done", "done", "done"], logged
    assert read_result(held).seed == 2 and not claim_path(held).exists()
    assert "t1 seed 2: its claim was free (holder gone or expired); taking the run" in logged
    assert not any("which finish them" in line for line in logged)


def test_a_run_finished_by_another_process_after_the_plan_is_not_redone(tiny_mlm_dir, tmp_path):
    done_elsewhere = plan(tiny_mlm_dir, tmp_path / "other")
    runner.execute(done_elsewhere, device="cpu", progress=False)
    grid = plan(tiny_mlm_dir, tmp_path / "mine")
    for ours, theirs in zip(grid.runs, done_elsewhere.runs, strict=True):  # written while this plan waited
        ours.path.parent.mkdir(parents=True, exist_ok=True)
        ours.path.write_bytes(theirs.path.read_bytes())
    claims = RunClaims(60)
    try:
        runner.execute(grid, device="cpu", progress=False, claims=claims)
    finally:
        claims.close()
    assert [r.status for r in grid.runs] == ["skipped"] * 3  # nothing trained twice
    assert not list((tmp_path / "mine").rglob("*.claim"))


# ---------------------------------------------------------------- several processes (slow)
TINY_RUN = {"epochs": 1, "limit_train": 40, "max_length": 32}


def grid_file(tmp_path: Path, model: Path, results: str, tasks=("demo-cls", "demo-multilabel"), seeds="1-3",
              overrides=TINY_RUN) -> Path:
    table = ", ".join(f"{k} = {v}" for k, v in overrides.items())
    path = tmp_path / f"{results}.toml"
    path.write_text(f'results = "{results}"\n[[grid]]\nname = "g"\ntasks = {json.dumps(list(tasks))}\n'
                    f'seeds = "{seeds}"\noverrides = {{ {table} }}\nmodels = [{{ model = "{model}" }}]\n')
    return path


def eval_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "biobench.cli", "eval", "--no-progress", "--threads", "1", *args]


ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.mark.slow
def test_three_processes_drain_a_grid_of_unequal_runs_each_run_once(tiny_mlm_dir, tmp_path):
    shared = grid_file(tmp_path, tiny_mlm_dir, "shared")
    workers = [subprocess.Popen(eval_command("--config", str(shared)), env=ENV, stderr=subprocess.PIPE, text=True)
               for _ in range(3)]
    logs = [w.communicate(timeout=900)[1] for w in workers]
    assert [w.returncode for w in workers] == [0, 0, 0], logs
    trained = [line for log in logs for line in log.splitlines() if "test macro-F1" in line]
    assert len(trained) == 6, trained  # every run once: none twice, none skipped
    assert sum(bool([ln for ln in log.splitlines() if "test macro-F1" in ln]) for log in logs) >= 2  # shared
    results = sorted((tmp_path / "shared").rglob("seed-*.json"))
    assert len(results) == 6 and not list((tmp_path / "shared").rglob("*.claim"))
    alone = grid_file(tmp_path, tiny_mlm_dir, "alone")
    subprocess.run(eval_command("--config", str(alone), "--no-claims"), env=ENV, check=True, capture_output=True)
    for path in results:
        twin = tmp_path / "alone" / path.relative_to(tmp_path / "shared")
        predictions = path.with_name(path.name.replace(".json", ".predictions.jsonl"))
        assert predictions.read_bytes() == twin.with_name(predictions.name).read_bytes(), path
        assert read_result(path).key == read_result(twin).key


def wait_for(condition, timeout: float = 240.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, "timed out"
        assert process is None or process.poll() is None, process.communicate()[1]
        time.sleep(0.1)


@pytest.mark.slow
def test_a_process_killed_with_sigkill_leaves_a_claim_that_expires_and_is_redone(tiny_mlm_dir, tmp_path):
    long_run = ["--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1", "--epochs", "40",
                "--limit-train", "40", "--max-length", "32", "--results", str(tmp_path)]
    victim = subprocess.Popen(eval_command(*long_run, "--claim-seconds", "20"), env=ENV, stderr=subprocess.PIPE,
                              text=True)
    claims = lambda: [p for p in tmp_path.rglob("seed-1*.claim") if any(p.iterdir())]  # noqa: E731
    wait_for(claims, process=victim)
    time.sleep(1)
    victim.kill()
    victim.wait()
    folder = claims()[0]
    lease = folder / "000001.json"
    record = json.loads(lease.read_text())
    record["machine"], record["host"] = "another-node/pid:[1]", "node9"  # as if it ran on another host
    # its last renewal expires soon (written, not waited 20 s for); far enough ahead that the next process, which
    # takes several seconds to import torch under load, still finds it alive (at +3 s it was already expired on a
    # loaded CI machine, and the run was taken without the wait the test is about)
    record["expires"] = time.time() + 15
    lease.write_text(json.dumps(record))
    result = folder.with_name(folder.name.removesuffix(".claim") + ".json")  # a smoke run: seed-1.smoke-<hex>
    # the claim still looks alive: the next process waits for it (issue 48 §2), and when it expires unrenewed,
    # takes the run and redoes it; nothing is left for a later submission
    late = subprocess.run(eval_command(*long_run, "--claim-seconds", "20"), env=ENV, capture_output=True,
                          text=True, timeout=600)
    assert late.returncode == 0, late.stderr
    assert "held by other processes: waiting up to" in late.stderr and "taking the run" in late.stderr
    assert late.stderr.count("test macro-F1") == 1 and result.exists() and not folder.exists()


@pytest.mark.slow
def test_the_last_process_redoes_a_run_whose_holder_is_killed_after_renewing_its_claim(tiny_mlm_dir, tmp_path):
    """Issue 57 §6 with real processes: a process holds seed 1's claim and renews it (its heartbeat, every
    second); an eval of the grid does seed 2, then waits for seed 1, sees the claim renewed three times, and
    is still waiting when the holder is killed with `kill -9`: it takes seed 1 (a dead process of this machine
    frees its claim at once) and does it. It used to stop waiting at the first renewal and end, leaving seed 1
    to nobody."""
    from biobench.api.evaluation import plan_grid_model
    from biobench.eval.grid import select_grids
    from biobench.runtime.ownership import mark_created

    config = grid_file(tmp_path, tiny_mlm_dir, "tail", tasks=("demo-cls",), seeds="1-2")
    mark_created(tmp_path / "tail", "results")  # as the holder's own eval made it before claiming
    grid = select_grids(str(config), [])[0]
    seed_1 = next(run.path for run in plan_grid_model(grid, grid.models[0]).grid if run.seed == 1)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
                               "from biobench.eval.claims import RunClaims\n"
                               "assert RunClaims(5.0).claim(Path(sys.argv[1]))\nprint('held', flush=True)\n"
                               "time.sleep(600)\n", str(seed_1)], env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        log = tmp_path / "eval.err"
        with log.open("w") as err:
            waiter = subprocess.Popen(eval_command("--config", str(config), "--claim-seconds", "5"), env=ENV,
                                      cwd=tmp_path, stderr=err, text=True)
            wait_for(lambda: "held by other processes: waiting" in log.read_text(), process=waiter)
            renewals = [read_claim(seed_1).expires]
            while len(renewals) < 4:  # the waiter looks every second: it has seen the claim renewed
                wait_for(lambda: read_claim(seed_1).expires > renewals[-1], 60, process=waiter)
                renewals.append(read_claim(seed_1).expires)
            holder.kill()
            holder.wait()
            assert waiter.wait(600) == 0, log.read_text()
    finally:
        holder.kill()
        holder.wait()
    text = log.read_text()
    assert "demo-cls seed 1: its claim was free (holder gone or expired); taking the run" in text, text
    assert text.count("test macro-F1") == 2 and "which finish them" not in text, text
    assert read_result(seed_1).seed == 1 and not claim_path(seed_1).exists()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGUSR1 in a SLURM job", "SIGTERM with --parallel 2", "SIGUSR1 in a submitit worker"])
def test_a_stop_signal_abandons_the_run_releases_its_claim_and_requeues_the_job(tiny_mlm_dir, tmp_path, how):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    calls = tmp_path / "scontrol.calls"
    # as SLURM does, an accepted requeue sends SIGTERM to the job at once, before scontrol returns: the job must
    # still say that it was requeued and what it kept (a CI run lost both lines to that SIGTERM)
    (fake_bin / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {calls}\nkill -TERM $PPID\nsleep 0.5\n')
    (fake_bin / "squeue").write_text("#!/bin/sh\necho 1:30\n")  # the job's time left: nearly out, so USR1 requeues
    for tool in ("scontrol", "squeue"):
        (fake_bin / tool).chmod(0o755)
    env = {**ENV, "PATH": f"{fake_bin}:{os.environ['PATH']}"}
    env.pop("SLURM_JOB_ID", None)
    parallel: list[str] = []
    if how.startswith("SIGUSR1"):
        env["SLURM_JOB_ID"], sig = "4242", signal.SIGUSR1
    if how.endswith("submitit worker"):  # a `--launcher slurm` array element's eval: submitit owns the requeue
        env["BIOBENCH_REQUEUED_BY"] = "submitit"
    else:
        sig, parallel = signal.SIGTERM, ["--parallel", "2"]
    results = tmp_path / "results"
    process = subprocess.Popen(eval_command("--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1-2",
                                            "--epochs", "200", "--limit-train", "40", "--max-length", "32",
                                            "--results", str(results), *parallel),
                               env=env, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: len(list(results.rglob("*.claim"))) >= (2 if parallel else 1), process=process)
    time.sleep(3)  # into the training
    process.send_signal(sig)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 128 + sig, err
    assert "Traceback" not in err
    assert not list(results.rglob("seed-*.json")) and not list(results.rglob("*.predictions.jsonl"))
    for folder in results.rglob("*.claim"):  # released: free at once for the next process
        info = read_claim(folder.with_name(folder.name.replace(".claim", ".json")))
        assert not info.held
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"error: stopped by {sig.name}: 0 finished result(s)")
    if how.endswith("submitit worker"):  # one line, consistent (issue 62 item 6): not "not here" then "rerun"
        assert not calls.exists() and "not here" not in err and "rerun" not in err, err
        assert last.endswith("submitit requeues SLURM job 4242 (its checkpoint) and its next life resumes it"), err
    elif sig == signal.SIGUSR1:
        assert calls.read_text() == "requeue 4242\n"
        assert "requeued SLURM job 4242" in err and last.endswith("the requeued job resumes it"), err
    else:
        assert not calls.exists() and last.endswith("rerun the same command to resume")


def test_dry_run_shows_done_claimed_left_per_task_and_who_holds_what(tiny_mlm_dir, tmp_path, capsys):
    from biobench import cli
    from biobench.api.evaluation import plan_evaluation

    grid = plan_evaluation(str(tiny_mlm_dir), "demo-cls", seeds="1-3", results=tmp_path)
    plant(grid.grid[1].path, OTHER, time.time() + 600)
    claim_path(grid.grid[2].path).mkdir(parents=True)
    (claim_path(grid.grid[2].path) / "000001.json").write_text("[not a claim")
    assert cli.main(["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1-3", "--results",
                     str(tmp_path), "--dry-run", "--verbose"]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if "\t" in line]
    assert lines[0].endswith("\tdemo-cls\tseed 1\tto run")
    assert "\tseed 2\tclaimed  (by node7 pid 4242 (SLURM job 901, array 900_1), until 20" in lines[1]
    assert "\tseed 3\tto run  (" in lines[2] and "treated as expired" in lines[2]
    assert "each cell done/claimed/left" in out and "  demo-cls  0/1/2" in out  # the summary leads
    assert out.index("  demo-cls  0/1/2") < out.index("\tseed 1\t")
    assert "claimed by node7 pid 4242 (SLURM job 901, array 900_1): demo-cls seed 2 (until 20" in out
    assert "3 run(s): 0 done, 3 to run (1 claimed now); 1 model(s) x 1 task(s)" in out


# ---------------------------------------------------------------- --launcher
def launch_cli(tmp_path, model, *extra, path_dirs=()):
    grid = grid_file(tmp_path, model, "launched", tasks=("demo-cls",), seeds="1")
    env = {**ENV, "PATH": ":".join([*map(str, path_dirs), os.path.dirname(sys.executable)])}  # no real SLURM
    return subprocess.run([sys.executable, "-m", "biobench.cli", "eval", "--config", str(grid), "--launcher", "slurm",
                           "--log-dir", str(tmp_path / "logs"), *extra], env=env, capture_output=True, text=True,
                          timeout=120)


def fake_slurm(tmp_path, partitions="gpu*\ncpu\n") -> Path:
    """sinfo answering with `partitions`, and an sbatch that records its call and refuses (nothing is run)."""
    folder = tmp_path / "fake-slurm"
    folder.mkdir(exist_ok=True)
    (folder / "sinfo").write_text(f"#!/bin/sh\nprintf '{partitions}'\n")
    (folder / "sbatch").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/sbatch.calls\necho refused >&2\nexit 1\n")
    (folder / "srun").write_text("#!/bin/sh\nexit 1\n")
    for tool in ("sinfo", "sbatch", "srun"):
        (folder / tool).chmod(0o755)
    return folder


def test_launcher_slurm_without_sbatch_is_one_line(tiny_mlm_dir, tmp_path):
    done = launch_cli(tmp_path, tiny_mlm_dir)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "error: --launcher slurm: no sbatch or srun on PATH" in done.stderr and not (tmp_path / "logs").exists()


def test_launcher_slurm_refuses_an_unknown_partition_in_one_line(tiny_mlm_dir, tmp_path):
    done = launch_cli(tmp_path, tiny_mlm_dir, "--partition", "h100", path_dirs=[fake_slurm(tmp_path)])
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "error: --partition h100: not a partition of this cluster (sinfo lists: gpu, cpu)" in done.stderr
    assert not (tmp_path / "sbatch.calls").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_launcher_slurm_refuses_an_unwritable_results_folder_in_one_line(tiny_mlm_dir, tmp_path):
    locked = tmp_path / "launched"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        done = launch_cli(tmp_path, tiny_mlm_dir, "--partition", "gpu", path_dirs=[fake_slurm(tmp_path)])
    finally:
        locked.chmod(0o700)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "is not writable from here" in done.stderr and not (tmp_path / "sbatch.calls").exists()


def test_launcher_slurm_refuses_a_results_path_that_is_a_file_in_one_line(tiny_mlm_dir, tmp_path):
    (tmp_path / "launched").write_text("not a folder")
    done = launch_cli(tmp_path, tiny_mlm_dir, "--partition", "gpu", path_dirs=[fake_slurm(tmp_path)])
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "is not writable from here" in done.stderr and not (tmp_path / "sbatch.calls").exists()


def test_launcher_slurm_bad_time_and_slurm_arg_are_one_line(tiny_mlm_dir, tmp_path):
    for extra, message in ((["--time", "soon"], "--time 'soon': give HH:MM:SS"),
                           (["--slurm-arg", "qos"], "--slurm-arg 'qos': give KEY=VALUE")):
        done = launch_cli(tmp_path, tiny_mlm_dir, *extra, path_dirs=[fake_slurm(tmp_path)])
        assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_a_refused_sbatch_is_one_line_and_leaves_no_files(tiny_mlm_dir, tmp_path):
    """Issue 48 §6: sbatch's own reason in one line (not its stderr first), and no resolved grid nor submitit
    pickle left in the log folder for a job that does not exist."""
    done = launch_cli(tmp_path, tiny_mlm_dir, "--partition", "gpu", "--workers", "2", "--epochs", "2",
                      path_dirs=[fake_slurm(tmp_path)])
    assert done.returncode == 2 and done.stderr == "error: sbatch refused the array: refused\n", done.stderr
    assert (tmp_path / "sbatch.calls").exists() and not (tmp_path / "logs").exists()


def test_a_refused_sbatch_removes_the_empty_folders_it_made_and_nothing_else(tiny_mlm_dir, tmp_path):
    """Issue 62 item 6: a refused sbatch left an empty `./biobench-slurm/` (the default log folder's parent) and
    an empty results folder. The folders this submit made are removed while empty; a folder that was there
    before stays, with what it holds."""
    grid = grid_file(tmp_path, tiny_mlm_dir, "launched", tasks=("demo-cls",), seeds="1")
    env = {**ENV, "PATH": f"{fake_slurm(tmp_path)}:{os.path.dirname(sys.executable)}"}
    command = [sys.executable, "-m", "biobench.cli", "eval", "--config", str(grid), "--launcher", "slurm",
               "--partition", "gpu"]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr == "error: sbatch refused the array: refused\n", done.stderr
    assert (tmp_path / "sbatch.calls").exists()
    assert not (tmp_path / "biobench-slurm").exists() and not (tmp_path / "launched").exists()
    (tmp_path / "launched").mkdir()
    (tmp_path / "launched" / "sentinel").write_text("mine")
    (tmp_path / "biobench-slurm").mkdir()
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and (tmp_path / "launched" / "sentinel").read_text() == "mine"
    assert (tmp_path / "biobench-slurm").is_dir() and list((tmp_path / "biobench-slurm").iterdir()) == []


def test_one_worker_is_a_plain_job_and_its_printed_log_is_the_one_submitit_writes(tiny_mlm_dir, tmp_path):
    """Issue 62 item 6: with `--workers 1` submitit submits a plain job, not an array, and logs it as
    `<job>_0_log.out`; the printed `<job>_<element>_0_log.out` never existed."""
    import submitit

    fake = fake_slurm(tmp_path)
    (fake / "sbatch").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/sbatch.calls\necho Submitted batch job 77\n")
    for workers, job_id in (("1", "77"), ("2", "77_1")):
        done = launch_cli(tmp_path, tiny_mlm_dir, "--partition", "gpu", "--workers", workers, path_dirs=[fake])
        assert done.returncode == 0, done.stderr
        printed = done.stdout.splitlines()[1].removeprefix("logs: ").split(" and .err")[0]
        written = submitit.SlurmJob(folder=tmp_path / "logs", job_id=job_id).paths.stdout  # where submitit logs
        assert printed == str(written).replace("77_1_", "77_<element>_"), (printed, written)


def test_an_accepted_sbatch_gets_the_resolved_grid_and_the_launchers_settings(tiny_mlm_dir, tmp_path):
    fake = fake_slurm(tmp_path)
    (fake / "sbatch").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/sbatch.calls\necho Submitted batch job 77\n")
    done = launch_cli(tmp_path, tiny_mlm_dir, "--partition", "gpu", "--workers", "2", "--epochs", "2",
                      "--time", "1500", "--slurm-arg", "qos=long", path_dirs=[fake])
    assert done.returncode == 0 and done.stdout.startswith("submitted SLURM array 77: 2 worker(s)"), done.stderr
    from biobench.eval.grid import read_grid_file

    resolved = (tmp_path / "logs" / "grid.toml").read_text()
    grid = read_grid_file(tmp_path / "logs" / "grid.toml")[0]
    assert grid.results == (tmp_path / "launched").resolve() and grid.models[0].model == str(tiny_mlm_dir.resolve())
    assert grid.overrides["epochs"] == 2 and grid.tasks == ["demo-cls"], resolved  # the command line's override
    script = next((tmp_path / "logs").glob("*.sh")).read_text()
    assert "#SBATCH --time=1500" in script and "#SBATCH --qos=long" in script and "#SBATCH --array=0-1%2" in script


@pytest.mark.parametrize(("extra", "message"), [
    (["--workers", "0"], "--workers 0: give 1 to 10000"),
    (["--time", "99:99:99"], "--time '99:99:99': give HH:MM:SS"),
    (["--slurm-arg", "array=0-99"], "--slurm-arg 'array=0-99': array is set by --workers/--array-parallelism"),
    (["--slurm-arg", "signal=B:USR1@60"], "signal is set by the launcher"),
    (["--slurm-arg", "output=/tmp/x"], "output is set by --log-dir"),
    # issue 58 item 8: sbatch takes a unique start of a long option as the option (arr=0-2 made the job an array)
    (["--slurm-arg", "arr=0-2"], "--slurm-arg 'arr=0-2': arr is set by --workers/--array-parallelism"),
    (["--slurm-arg", "sig=B:USR1@60"], "sig is set by the launcher"),
    (["--slurm-arg", "outp=/tmp/x"], "outp is set by --log-dir"),
    (["--account", "lab\nhostname > /tmp/pwned"], "--account 'lab\\nhostname > /tmp/pwned' holds a control character"),
    (["--log-dir", "logs\n#x"], "--log-dir 'logs\\n#x' holds a control character"),
    (["--slurm-arg", "qos=a\x7fb"], "--slurm-arg 'qos=a\\x7fb' holds a control character"),
    (["--results", "elsewhere"], "with --config, each grid's results folder comes from the grid file"),
])
def test_launcher_flags_that_would_lie_or_inject_are_one_line(tiny_mlm_dir, tmp_path, extra, message):
    """Issue 48 §6 and issue 51 item 9: refused in one line before anything is written or submitted."""
    done = launch_cli(tmp_path, tiny_mlm_dir, "--partition", "gpu", *extra, path_dirs=[fake_slurm(tmp_path)])
    assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "sbatch.calls").exists() and not (tmp_path / "logs").exists()


def test_a_grid_file_named_with_a_newline_is_refused_before_the_batch_script(tiny_mlm_dir, tmp_path):
    grid = grid_file(tmp_path, tiny_mlm_dir, "launched", tasks=("demo-cls",), seeds="1")
    odd = grid.rename(tmp_path / "g\ntouch pwned.toml")
    env = {**ENV, "PATH": f"{fake_slurm(tmp_path)}:{os.path.dirname(sys.executable)}"}
    done = subprocess.run([sys.executable, "-m", "biobench.cli", "eval", "--config", str(odd), "--launcher", "slurm",
                           "--partition", "gpu", "--log-dir", str(tmp_path / "logs")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "--config" in done.stderr and "holds a control character" in done.stderr
    assert done.stderr.count("\n") == 1 and not (tmp_path / "sbatch.calls").exists()


def test_worker_launcher_refuses_control_characters_in_one_line(tmp_path):
    env = {**ENV, "PATH": f"{fake_slurm(tmp_path)}:{os.path.dirname(sys.executable)}"}
    done = subprocess.run([sys.executable, "-m", "biobench.cli", "worker", "--queue", str(tmp_path / "q"), "--results",
                           str(tmp_path / "r"), "--launcher", "slurm", "--account", "a\rb", "--log-dir",
                           str(tmp_path / "logs")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("error: --account 'a\\rb' holds a control character")
    assert done.stderr.count("\n") == 1 and not (tmp_path / "logs").exists()


def test_resolved_grid_file_round_trips(tmp_path):
    from biobench.eval.grid import read_grid_file, resolved_grid_file

    source = tmp_path / "g.toml"
    source.write_text('results = "res"\n[[grid]]\nname = "a"\nlang = "fr"\nseeds = "42-44"\nparallel = 2\n'
                      'overrides = { epochs = 3 }\nmodels = [{ model = "DrBERT", name = "Dr \\"B\\"", '
                      'overrides = { lr = 5e-5 } }]\n')
    grids = read_grid_file(source)
    copy = tmp_path / "elsewhere" / "grid.toml"
    copy.parent.mkdir()
    copy.write_text(resolved_grid_file(grids, {"max_length": 128}))
    assert 'seeds = "42-44"' in copy.read_text()  # written as the file's author wrote it
    again = read_grid_file(copy)[0]
    assert again.results == tmp_path / "res" and again.lang == "fr" and again.seeds == [42, 43, 44]
    assert again.overrides == {"epochs": 3, "max_length": 128} and again.parallel == 2
    assert again.models[0].name == 'Dr "B"' and again.models[0].overrides == {"lr": 5e-5}


def test_worker_launcher_slurm_refuses_an_unknown_partition_in_one_line(tmp_path):
    env = {**ENV, "PATH": f"{fake_slurm(tmp_path)}:{os.path.dirname(sys.executable)}"}
    done = subprocess.run([sys.executable, "-m", "biobench.cli", "worker", "--queue", str(tmp_path / "q"), "--results",
                           str(tmp_path / "r"), "--launcher", "slurm", "--partition", "a100"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr == ("error: --partition a100: not a partition of this cluster "
                                                    "(sinfo lists: gpu, cpu)\n")


def test_workers_without_a_launcher_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    """Issue 62 item 6: `eval --workers 0` (or any N) without --launcher, and `worker --workers N` without
    --launcher slurm, were ignored without a word. One line each, before anything is written."""
    from biobench import cli

    monkeypatch.chdir(tmp_path)
    for argv, said in (
            (["eval", "--model", "m", "--tasks", "demo-cls", "--workers", "0"],
             "error: --workers 0 goes with --launcher local (processes on this machine, as --parallel) or "
             "--launcher slurm (elements of a SLURM array)"),
            (["eval", "--model", "m", "--tasks", "demo-cls", "--workers", "0", "--launcher", "local"],
             "error: --workers 0: give a positive number of processes"),
            (["worker", "--queue", "q", "--results", "r", "--workers", "2"],
             "error: --workers 2 goes with --launcher slurm (elements of a SLURM array); here one worker runs")):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(said) and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []
