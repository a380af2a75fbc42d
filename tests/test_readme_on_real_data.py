"""A newcomer's first hour (issues 39, 52): the README's examples, verbatim, on the real data with the installed
all-MiniLM-L6-v2. Its quick check scores above 0 on ncbi-disease and quaero-emea with no ⚠ (the old check, one
epoch of 500 examples, scored 0.00 ⚠ on both: the span head predicts nothing for its first ~200 steps); that run
is conftest's readme_quick_check_run, shared with tests/eval/test_real_data.py."""

from __future__ import annotations

import json
import re
import shlex
import shutil

import pytest
from biobench import cli

from tests.support import REPO


@pytest.mark.slow
def test_the_readme_quick_check_learns_on_real_ner_data(readme_quick_check_run):
    command, summary = readme_quick_check_run.command, readme_quick_check_run.summary
    assert command[:2] == ["biobench", "eval"] and "--quick" in command
    tasks = command[command.index("--tasks") + 1].split(",")
    rows = {row["task"]: row for row in summary["tasks"]}
    assert sorted(rows) == sorted(tasks)
    for task, row in rows.items():
        assert row["mean"] > 0, (task, row)
        assert not row.get("degenerate"), (task, row["degenerate"])
        assert row["overrides"]  # a smoke run: marked ⚑, beside the protocol's runs
    assert all(".smoke-" in p.name for p in readme_quick_check_run.results.rglob("seed-42*.json"))


def readme_pretrain_to_eval() -> list[list[str]]:
    """The README's 'Pretrain with the CLM detour' commands that run on a CPU (the 10B-token one needs GPUs)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text[text.index("## Pretrain with the CLM detour"):]
    block = block[block.index("```bash\n") + 8:block.index("```", block.index("```bash\n") + 8)]
    return [shlex.split(line) for line in block.splitlines() if line.strip() and "10B" not in line]


@pytest.mark.slow
def test_the_readme_pretrain_then_eval_example_scores_without_a_warning(shared_data, tmp_path, monkeypatch):
    """Issue 52 item 1: the README's pretrain -> eval example scored 0.00 ⚠ (`--epochs 1`). Run verbatim in a
    fresh folder (its `my-corpus/` and `data/` are the shared E3C corpus and data folder): above 0, no ⚠.
    ~75 s on one core."""
    commands = readme_pretrain_to_eval()
    assert [c[:2] for c in commands] == [["biobench", "pretrain"], ["biobench", "eval"]]
    task = commands[1][commands[1].index("--tasks") + 1]
    if not (shared_data / "pretrain-fr").is_dir() or not (shared_data / task).is_dir():
        pytest.skip(f"pretrain-fr or {task} not in {shared_data}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "my-corpus").symlink_to(shared_data / "pretrain-fr")
    (tmp_path / "data").symlink_to(shared_data)
    for words in commands:
        assert cli.main(words[1:]) == 0, words
    (found,) = (tmp_path / "results").glob(f"*/{task}/seed-42*.json")
    result = json.loads(found.read_text())
    assert result["metrics"]["test"]["macro_f1"] > 0 and "degenerate" not in result, found


@pytest.mark.slow
@pytest.mark.parametrize("doc", ["README.md", "docs/API.md"])
def test_the_python_example_scores_without_a_warning(doc, shared_data, minilm_dir, readme_quick_check_run, tmp_path,
                                                     monkeypatch, capsys):
    """Issue 52 item 1: the first Python example of the README and of docs/API.md, run as written in a folder whose
    `data/` is the shared data folder (the alias resolves to the hub; the installed package holds the same
    weights): every task above 0 and no ⚠. The folder's `results/` starts as a copy of the README quick check's
    (conftest readme_quick_check_run), whose runs are the examples' own (the README's ncbi-disease seed 42, API.md's
    ncbi-disease and quaero-emea seed 42): each is found finished and read back, so nothing trains here (API.md's
    seed 43 trained for ~60 CPU-s of the suite before it took the quick check's tasks)."""
    text = (REPO / doc).read_text(encoding="utf-8")
    code = re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)[0]
    assert "biobench.evaluate(" in code and "quick=True" in code
    if not (shared_data / "ncbi-disease").is_dir():
        pytest.skip(f"ncbi-disease not in {shared_data}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "data").symlink_to(shared_data)
    shutil.copytree(readme_quick_check_run.results, tmp_path / "results")
    scope: dict = {}
    exec(compile(code.replace('"all-MiniLM-L6-v2"', repr(str(minilm_dir))), doc, "exec"), scope)
    summary = scope["results"].summary()
    assert len(summary) >= 1 and (summary["mean"] > 0).all(), summary
    assert not summary["degenerate"].astype(bool).any(), summary["degenerate"].tolist()
    assert "ncbi-disease" in capsys.readouterr().out
    # every run of the example was the quick check's, found finished: no file written, none changed
    copied = {p.relative_to(tmp_path / "results").as_posix(): p.read_bytes()
              for p in (tmp_path / "results").rglob("seed-*") if p.is_file()}
    made = {p.relative_to(readme_quick_check_run.results).as_posix(): p.read_bytes()
            for p in readme_quick_check_run.results.rglob("seed-*") if p.is_file()}
    assert copied == made, sorted(set(copied) ^ set(made))
    tasks = {"README.md": ["ncbi-disease"], "docs/API.md": ["ncbi-disease", "quaero-emea"]}[doc]
    assert sorted(summary["task"]) == tasks, summary
