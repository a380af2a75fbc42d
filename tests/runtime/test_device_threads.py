"""The device module's CPU thread rule (issue 62 item 1): one choice for pretrain, eval, evaluate() and the
worker's eval, taken from the load average and printed in eval's start line."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from biobench.runtime import device


@pytest.mark.parametrize(("cores", "load", "requested", "expected"), [
    (2, 12.7, None, 1),   # the shared dev box at a load of 11-14: one thread, never zero
    (8, 3.2, None, 5),    # the cores the load leaves idle
    (8, 0.1, None, 8),    # an idle machine: every core
    (2, 12.7, 3, 3),      # --threads wins over the load
])
def test_threads_are_the_idle_cores_unless_asked(monkeypatch, cores, load, requested, expected):
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert device.cpu_threads(requested) == expected
    assert device.cpu_threads(requested, cores=cores, load=load) == expected


def test_a_system_without_a_load_average_gets_every_core(monkeypatch):
    def no_load():
        raise OSError("getloadavg unavailable")

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(os, "getloadavg", no_load)
    assert device.cpu_threads() == 4


def test_eval_under_load_uses_one_thread_and_says_so(tmp_path, tiny_mlm_dir, monkeypatch, capsys):
    """`biobench eval` on a CPU at a load of 12 on 2 cores: torch gets 1 thread, not its default of every core,
    and the start line says it (before issue 62 the eval kept torch's default and said nothing)."""
    import torch
    from biobench.api import evaluation
    from biobench.cli import main
    from biobench.eval import runner

    seen: list[int] = []
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (12.0, 12.0, 12.0))
    for module in (runner, evaluation):
        if hasattr(module, "execute"):  # train nothing: record the threads the runs would get
            monkeypatch.setattr(module, "execute", lambda plan, **kwargs: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert main(["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1", "--device", "cpu",
                     "--results", str(tmp_path / "res"), "--no-progress"]) == 0
        assert seen == [1]
        assert "1 run(s) in this shard, 0 already done, 1 CPU thread(s)" in capsys.readouterr().err
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_a_real_eval_process_prints_its_threads(tmp_path, tiny_mlm_dir):
    """A real `biobench eval` process: its start line gives the threads it trains with, the rule's answer for
    this machine's cores and load (asked once with --threads 1, once by the rule)."""
    args = [sys.executable, "-m", "biobench.cli", "eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls",
            "--seeds", "1", "--epochs", "1", "--limit-train", "16", "--limit-eval", "8", "--max-length", "16",
            "--device", "cpu", "--results", str(tmp_path / "res"), "--no-progress"]
    env = {key: value for key, value in os.environ.items() if key not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    asked = subprocess.run([*args, "--threads", "1"], env=env, capture_output=True, text=True, timeout=300)
    assert asked.returncode == 0, asked.stderr
    assert "1 run(s) in this shard, 0 already done, 1 CPU thread(s)" in asked.stderr
    ruled = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)  # the run is done: skipped
    assert ruled.returncode == 0, ruled.stderr
    said = re.search(r"1 already done, (\d+) CPU thread\(s\)", ruled.stderr)
    assert said, ruled.stderr
    assert 1 <= int(said[1]) <= (os.cpu_count() or 1)  # the load moves: the rule's range, not one number
