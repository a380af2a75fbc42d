"""The offline demo end to end (slow): pretrain detour + mlm, eval on the generated tasks, leaderboard table;
a second run reuses every checkpoint and result."""

from __future__ import annotations

import re

import pytest
from biobench import cli


def _files(root):
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file() and "corpus" not in p.parts}


@pytest.mark.slow
def test_demo_runs_end_to_end_and_resumes(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("BIOBENCH_DATA", raising=False)
    args = ["demo", "--out", str(tmp_path), "--tokens", "60K", "--seeds", "42", "--epochs", "1", "--ner-epochs", "1", "--no-minilm",
            "--jobs", "2"]
    assert cli.main(args) == 0
    captured = capsys.readouterr()
    out = captured.out
    for recipe in ("detour", "mlm"):
        assert (tmp_path / recipe / "phase1" / "biobench_pretrain.json").exists()
        assert (tmp_path / recipe / "final" / "config.json").exists()
    results = sorted(p.relative_to(tmp_path / "results").as_posix() for p in (tmp_path / "results").rglob("seed-*.json"))
    folders = sorted({r.split("/")[0] for r in results})  # display name + 8 digits of the weights' revision
    assert [f.split("_")[0] for f in folders] == ["detour", "mlm"]
    assert all(re.fullmatch(r"[a-z]+_tiny_[\w.]+--[0-9a-f]{8}", f) for f in folders), folders
    # the demo's budgets are protocol overrides: smoke runs, each in its own file beside the protocol's seed-42.json
    assert [re.sub(r"\.smoke-[0-9a-f]{12}\.json$", ".smoke.json", r) for r in results] == [
        f"{m}/{t}/seed-42.smoke.json" for m in folders for t in ("demo-cls", "demo-multilabel", "demo-ner")]
    finished = [line for line in captured.err.splitlines() if ": test macro-F1 " in line]
    assert len(finished) == 6  # one line per run despite --no-progress, each after its step's name
    assert sum(line.startswith("[eval/sequence/detour] [") and "] detour · tiny · " in line for line in finished) == 2
    # the two pretrainings ran side by side (--jobs 2): the second started before the first finished
    assert captured.err.index("[pretrain/mlm] started") < captured.err.index("[pretrain/detour] finished")
    assert "demo-ner" in out and "biobench leaderboard --results" in out
    table = out[out.index("3/3 leaderboard"):out.index("demo finished")]
    assert "detour · tiny · " in table and "mlm · tiny · " in table and str(tmp_path) not in table

    before = _files(tmp_path)
    assert cli.main(args) == 0
    assert capsys.readouterr().err.count("done already: skipped") == 6  # 2 pretrainings, 4 eval steps
    assert _files(tmp_path) == before
