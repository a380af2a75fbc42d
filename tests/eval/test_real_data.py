"""End to end on real data (slow): all-MiniLM-L6-v2 from the PyPI package on ../shared/data GAD
(classification, the smoke protocol of issue 3) and NCBI-disease (NER, the English token head: the README's
quick check, run once for the session by conftest's readme_quick_check_run). Minutes on a CPU."""

from __future__ import annotations

import json

import pytest
from biobench import cli

SMOKE = ["--seeds", "42", "--epochs", "1", "--limit-train", "2000", "--max-length", "128", "--no-progress"]
CHANCE = {"gad": 0.5, "ncbi-disease": 0.05}  # binary macro-F1 of a coin; entity F1 of a random tagger is ~0


def snapshot(root):
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_minilm_smoke_run_on_gad_learns_and_skips(shared_data, minilm_dir, tmp_path, capsys):
    """GAD is not retrained here: its head (hf-sequence, English classification) is retrained to the same score
    and predictions by tests/eval/test_runner.py::test_overwrite_same_seed_reproduces_the_score."""
    task = "gad"
    args = ["eval", "--model", "all-MiniLM-L6-v2", "--data-dir", str(shared_data), "--tasks", task,
            "--results", str(tmp_path), *SMOKE, "--json"]
    assert cli.main(args) == 0
    first = json.loads(capsys.readouterr().out)
    score = first["runs"][0]["macro_f1"]
    assert first["runs"][0]["status"] == "done" and score > CHANCE[task] + 0.1

    files = snapshot(tmp_path)
    assert cli.main(args) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["status"] == "skipped"
    assert snapshot(tmp_path) == files


@pytest.mark.slow
def test_ncbi_disease_learns_and_skips(readme_quick_check_run, capsys):
    """The README quick check's ncbi-disease run (the English token head): above chance; the same command again
    skips every run and touches no file. That the token head retrained with --overwrite learns the same weights is
    tests/eval/test_runner.py's, on the tiny model (this retrain of MiniLM cost a minute of the suite)."""
    run = readme_quick_check_run
    (first,) = [r for r in run.summary["runs"] if r["task"] == "ncbi-disease"]
    assert first["status"] == "done" and first["macro_f1"] > CHANCE["ncbi-disease"] + 0.1

    files = snapshot(run.results)
    assert cli.main(run.argv) == 0
    assert {r["status"] for r in json.loads(capsys.readouterr().out)["runs"]} == {"skipped"}
    assert snapshot(run.results) == files
