"""The inputs of a study checked before anything starts (bench/api/study_inputs.py, issue 60 item 2): one
message listing all that are missing, and nothing started. (Every example study's dry run from a clone holding
its inputs: tests/api/test_study.py.)"""

from __future__ import annotations

import pytest

from tests.support import example_study_clone, run_biobench


@pytest.mark.slow
def test_missing_inputs_are_listed_at_once_and_nothing_starts(tmp_path):
    example_study_clone(tmp_path, inputs=False)
    for extra in (["--dry-run"], []):
        done = run_biobench("study", "run", "examples/studies/paper-fr-base.toml", *extra, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "input(s) missing, so nothing was started" in done.stderr
        corpus = tmp_path / "corpora" / "fr-mix"
        # the corpus once, with the 11 pretrainings that read it, and the command that builds it
        assert f"corpus {corpus} (for pretrain/detour, pretrain/mlm" in done.stderr and "and 7 more" in done.stderr
        assert f"biobench corpus build TEXT_FILES_OR_FOLDERS --tokenizer almanach/moderncamembert-base --out {corpus}" \
            in done.stderr
        for task in ("fracco-30", "quaero-emea", "quaero-medline"):  # the French tasks without a hub copy
            assert f"task data {task} (missing {tmp_path / 'data'}" in done.stderr
        assert f"haystacks {tmp_path / 'data' / 'pretrain-fr'} (for analysis/needle-data)" in done.stderr
        assert done.stdout == ""
    assert not (tmp_path / "studies").exists()  # no study folder, no log: nothing started
