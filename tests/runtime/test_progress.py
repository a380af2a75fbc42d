"""Progress off a terminal (biobench.runtime.progress): a long loop says where it is every ~30 s in a log, and
nothing when progress is off."""

from __future__ import annotations

import pytest
from biobench.runtime import progress


def test_a_long_loop_prints_a_line_every_interval_in_a_log(monkeypatch, capsys):
    clock = iter([0.0, 10.0, 31.0, 45.0, 62.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(progress, "on_terminal", lambda: False)
    ticker = progress.Ticker(True, "bc5cdr seed 42: scoring test (inputs)", 5000)  # started at 0 s
    for done in (1000, 2000, 3000, 4000):  # at 10, 31, 45, 62 s
        ticker.update(done)
    ticker.close()
    assert capsys.readouterr().err.splitlines() == ["bc5cdr seed 42: scoring test (inputs): 2,000/5,000 (31 s)",
                                                    "bc5cdr seed 42: scoring test (inputs): 4,000/5,000 (62 s)"]


def test_no_line_when_progress_is_off(monkeypatch, capsys):
    monkeypatch.setattr(progress, "on_terminal", lambda: False)
    ticker = progress.Ticker(False, "x", 10, every=0.0)
    ticker.update(5)
    ticker.close()
    assert capsys.readouterr().err == ""


def test_a_fine_tuning_run_in_a_log_says_where_training_and_scoring_are(tiny_mlm_dir, tmp_path, monkeypatch, capsys):
    """Off a terminal, training and each dev / test scoring print a heartbeat line (here every 0 s)."""
    from biobench.eval import runner

    from tests.support import DATA, spec

    monkeypatch.setattr(progress, "on_terminal", lambda: False)
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)
    plan = runner.plan_grid(str(tiny_mlm_dir), [spec("t1", "fr", seeds=(1,))], lambda s: DATA[s.id], tmp_path,
                            overrides={"epochs": 1, "batch_size": 4, "max_length": 32})
    runner.execute(plan, device="cpu", progress=True)
    err = capsys.readouterr().err
    assert "t1 seed 1: training steps: 1/3 (0 s)" in err
    assert "t1 seed 1: scoring dev (inputs): " in err and "t1 seed 1: scoring test (inputs): " in err


@pytest.mark.slow  # an eval subprocess: ~10 s
def test_no_loading_weights_bar_in_a_log(tiny_mlm_dir):
    """Off a terminal (stderr a pipe), `biobench` silences transformers' own bars before any command loads a
    model: a log gets no "Loading weights" frames. The same load without biobench's start shows the bar, so the
    check is not vacuous."""
    import os
    import subprocess
    import sys

    load = f"from transformers import AutoModel; AutoModel.from_pretrained({str(tiny_mlm_dir)!r})"
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    bare = subprocess.run([sys.executable, "-c", load], env=env, capture_output=True, text=True, timeout=300)
    assert bare.returncode == 0 and "Loading weights" in bare.stderr
    quiet = subprocess.run([sys.executable, "-c", f"from biobench.cli import main; main(['models', '--json']); {load}"],
                           env=env, capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0, quiet.stderr
    assert "Loading weights" not in quiet.stderr
