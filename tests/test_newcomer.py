"""A newcomer's first hour (issue 39): the README's quick check, verbatim, on the real ncbi-disease and
quaero-emea data with the installed all-MiniLM-L6-v2, scores above 0 on both with no ⚠ (the old check, one epoch
of 500 examples, scored 0.00 ⚠ on both: the span head predicts nothing for its first ~200 steps)."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from biobench import cli
from conftest import REPO


def readme_quick_check() -> list[str]:
    """The README's quick-check command, as a newcomer would copy it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    (command,) = re.findall(r"`(biobench eval [^`]*--quick[^`]*)`", text)
    return shlex.split(command)


@pytest.mark.slow
def test_the_readme_quick_check_learns_on_real_ner_data(shared_data, minilm_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    command = readme_quick_check()
    assert command[:2] == ["biobench", "eval"] and "--quick" in command
    tasks = command[command.index("--tasks") + 1].split(",")
    if not all((shared_data / t).is_dir() for t in tasks):
        pytest.skip(f"{', '.join(tasks)}: not all present in {shared_data}")
    model = command.index("--model") + 1
    command[model] = str(minilm_dir)  # the alias resolves to the hub; the installed package holds the same weights
    assert cli.main([*command[1:], "--data-dir", str(shared_data), "--results", str(tmp_path),
                     "--no-progress", "--json", "--threads", "1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = {row["task"]: row for row in summary["tasks"]}
    assert sorted(rows) == sorted(tasks)
    for task, row in rows.items():
        assert row["mean"] > 0, (task, row)
        assert not row.get("degenerate"), (task, row["degenerate"])
        assert row["overrides"]  # a smoke run: marked ⚑, beside the protocol's runs
    assert all(".smoke-" in p.name for p in tmp_path.rglob("seed-42*.json"))
