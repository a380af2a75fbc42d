"""Seeds in parallel (`eval --parallel N`): the value's bounds, how many runs fit a device, the same results as
a sequential grid (predictions byte-identical), no child left when the parent is killed, resume after it."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from biobench import cli
from biobench.errors import BiobenchError, ConfigError
from biobench.eval import parallel, runner
from biobench.eval.grid import read_grid_file
from biobench.eval.parallel import Memory, check_parallel, parallel_value, runs_that_fit, thread_share
from biobench.eval.runner import Execution
from biobench.store.record import predictions_path

from tests.support import DATA, OVERRIDES, spec, toy_data

GiB = 2**30
SPECS2 = [spec("t1", seeds=(1, 2)), spec("t2", "fr", seeds=(1, 2))]  # 2 tasks x 2 seeds


def plan(model_dir, results, **kw):
    return runner.plan_grid(str(model_dir), SPECS2, lambda s: DATA[s.id], results, overrides=OVERRIDES, **kw)


def masked(result_path: Path) -> dict:
    """A result without its wall-clock fields (timings, creation time)."""
    record = json.loads(result_path.read_text(encoding="utf-8"))
    record.pop("timings")
    record.pop("created")
    return record


@pytest.mark.parametrize("text", ["0", "-1", "65", "1000000", "two", "", "1.5", "nan"])
def test_parallel_refuses_zero_negative_absurd_and_non_numbers(text):
    with pytest.raises(argparse.ArgumentTypeError, match=r"1-64, or 'auto'"):
        parallel_value(text)


def test_parallel_values():
    assert parallel_value("4") == 4 and parallel_value(" AUTO ") == "auto" and parallel_value("64") == 64
    assert check_parallel(2, "g.toml") == 2 and check_parallel("auto", "g.toml") == "auto"
    for bad in (0, True, 2.5, "many"):
        with pytest.raises(ConfigError, match=r"g.toml: parallel"):
            check_parallel(bad, "g.toml")


def test_eval_cli_refuses_a_bad_parallel_at_parse_time(capsys):
    with pytest.raises(SystemExit):
        cli.main(["eval", "--model", "x", "--tasks", "gad", "--parallel", "0"])
    assert "argument --parallel: expected a number of runs at once, 1-64" in capsys.readouterr().err


def test_runs_that_fit_the_device_with_a_margin_and_a_context_each():
    # 80 GiB free, 10 GiB per run: 10 * 1.2 + 0.75 context = 12.75 GiB each -> 6 runs (6*12 + 5*0.75 = 75.75)
    assert runs_that_fit(Memory(free=80 * GiB, peak=10 * GiB)) == 6
    assert runs_that_fit(Memory(free=8 * GiB, peak=10 * GiB)) == 1  # never below one
    assert runs_that_fit(Memory(free=10**15, peak=1)) == parallel.MAX_PARALLEL  # never above the cap
    assert runs_that_fit(Memory(free=80 * GiB, peak=10 * GiB), margin=0.0, context=0) == 8
    assert thread_share(16, 4) == 4 and thread_share(2, 4) == 1 and thread_share(3, 2) == 1


def test_grid_file_parallel_key(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text('parallel = 3\n[[grid]]\nname = "a"\ntasks = ["gad"]\nmodels = ["m"]\n'
                    '[[grid]]\nname = "b"\ntasks = ["gad"]\nmodels = ["m"]\nparallel = "auto"\n', encoding="utf-8")
    assert [g.parallel for g in read_grid_file(path)] == [3, "auto"]
    path.write_text('[[grid]]\ntasks = ["gad"]\nmodels = ["m"]\nparallel = 0\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"g.toml grid 'grid-1': parallel: expected a number of runs"):
        read_grid_file(path)


def test_worker_passes_parallel_to_eval():
    from biobench.service.worker import WorkerConfig, eval_arguments

    request = SimpleNamespace(model="m", tasks=["gad"], seeds=[1], name=None, overrides={}, metadata={})
    args = eval_arguments(request, Path("r"), WorkerConfig(results="r", parallel=2))
    assert args[args.index("--parallel") + 1] == "2"
    assert "--parallel" not in eval_arguments(request, Path("r"), WorkerConfig(results="r"))


@pytest.mark.slow
def test_parallel_grid_equals_the_sequential_grid(tiny_mlm_dir, tmp_path, capsys):
    """2 tasks x 2 seeds, 2 at once with 1 thread each vs one after the other with 1 thread."""
    sequential = plan(tiny_mlm_dir, tmp_path / "seq")
    runner.execute(sequential, device="cpu", progress=False)
    capsys.readouterr()
    together = plan(tiny_mlm_dir, tmp_path / "par")
    parallel.execute_parallel(together, 2, Execution(device="cpu"), threads=2)
    err = capsys.readouterr().err
    assert "2 runs at once on cpu, 1 CPU thread(s) each" in err
    assert sorted(line.split("] ", 1)[1].split(":")[0] for line in err.splitlines() if line.startswith("[")) == [
        f"{together.name} · {t} seed {s}" for t in ("t1", "t2") for s in (1, 2)]  # one line per finished run
    assert [r.status for r in together.runs] == ["done"] * 4
    for seq_run, par_run in zip(sequential.runs, together.runs, strict=True):
        assert par_run.macro_f1 == seq_run.macro_f1
        assert predictions_path(par_run.path).read_bytes() == predictions_path(seq_run.path).read_bytes()
        assert masked(par_run.path) == masked(seq_run.path)
    again = plan(tiny_mlm_dir, tmp_path / "par")
    assert [r.status for r in again.runs] == ["skipped"] * 4  # the same keys: a sequential rerun skips them


@pytest.mark.slow
def test_auto_starts_as_many_as_a_simulated_gpu_fits(tiny_mlm_dir, tmp_path, capsys):
    """The first run alone, then runs_that_fit(probe's figures) at once: 10 GiB free, 3 GiB peak -> 2."""
    grid = plan(tiny_mlm_dir, tmp_path)
    parallel.execute_parallel(grid, "auto", Execution(device="cpu"), threads=2,
                              probe=lambda measured: Memory(free=10 * GiB, peak=3 * GiB))
    err = capsys.readouterr().err
    assert "the first run trains alone" in err and "peaks at 3.00 GiB of 10.00 GiB free (20% margin): 2 run(s)" in err
    assert [r.status for r in grid.runs] == ["done"] * 4


def test_auto_on_a_cpu_runs_one_at_a_time_here(tiny_mlm_dir, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(parallel, "execute", lambda p, **kw: calls.append(kw) or p.runs)
    monkeypatch.setattr(parallel, "_Pool", None)  # no child process may start
    parallel.execute_parallel(plan(tiny_mlm_dir, tmp_path), "auto", Execution(device="cpu"), log=lambda m: None)
    assert calls and calls[0]["device"] == "cpu"


@pytest.mark.slow
def test_a_failed_run_stops_the_grid_with_its_message(tiny_mlm_dir, tmp_path):
    """A run that fails in a child (here: its task data has no dev split) ends the grid with the child's
    one-line error, as the sequential grid would."""
    broken = {"nodev": toy_data("nodev", dev=False), "t1": DATA["t1"]}
    p = runner.plan_grid(str(tiny_mlm_dir), [spec("nodev", seeds=(1, 2))], lambda s: broken[s.id], tmp_path,
                         overrides=OVERRIDES)
    with pytest.raises(BiobenchError, match="dev"):
        parallel.execute_parallel(p, 2, Execution(device="cpu"), threads=2, log=lambda m: None)


# ---------------------------------------------------------------- kill and resume, through the command line
def children_of(pid: int) -> set[int]:
    """The pids whose parent is `pid` (from /proc/<n>/stat)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads children from /proc (Linux)")
def test_killing_the_parent_leaves_no_child_and_a_rerun_skips_finished_runs(tiny_mlm_dir, tmp_path):
    args = [sys.executable, "-m", "biobench.cli", "eval", "--model", str(tiny_mlm_dir), "--tasks",
            "demo-cls", "--seeds", "1-4", "--epochs", "1", "--limit-train", "40", "--max-length", "32",
            "--results", str(tmp_path), "--no-progress", "--threads", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    parent = subprocess.Popen([*args, "--parallel", "2"], env=env, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        workers: set[int] = set()  # the spawned run processes (not multiprocessing's resource tracker)
        deadline = time.time() + 240
        while time.time() < deadline and not list(tmp_path.rglob("seed-*.json")):
            workers |= {c for c in children_of(parent.pid) if "spawn_main" in _cmdline(c)}
            assert parent.poll() is None, parent.stderr.read()
            time.sleep(0.2)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    finally:
        if parent.poll() is None:
            parent.kill()
    assert len(workers) >= 2, "the parallel run processes were never seen"
    deadline = time.time() + 120  # a hang guard: they die within a second of the parent
    while time.time() < deadline and any(running(c) for c in workers):
        time.sleep(0.2)
    assert not [c for c in workers if running(c)], "a run process outlived its killed parent"
    finished = len(list(tmp_path.rglob("seed-*.json")))
    assert finished >= 1
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"4 run(s) in this shard, {finished} already done" in done.stderr
    assert done.stderr.count("test macro-F1") == 4 - finished  # only the unfinished runs trained
    assert len(list(tmp_path.rglob("seed-*.json"))) == 4


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
