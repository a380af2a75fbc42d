"""Reading a predictions file under its bound (bench/store/result_files.py `read_predictions`): the result beside
it is read for the bound only when the file is large enough for the bound to matter."""

from __future__ import annotations

import json

import pytest
from biobench.errors import ResultsError
from biobench.store import result_files

from tests import hostile_corpus as hc


def _counting_result_reads(monkeypatch) -> list[str]:
    reads: list[str] = []
    read_json = result_files.read_json

    def counted(path, *args, **kwargs):
        reads.append(str(path))
        return read_json(path, *args, **kwargs)

    monkeypatch.setattr(result_files, "read_json", counted)
    return reads


def test_a_small_predictions_file_is_read_without_its_result(tmp_path, monkeypatch):
    path = hc.good_result(tmp_path / "r", "m", n_test=60)
    reads = _counting_result_reads(monkeypatch)
    assert len(result_files.read_predictions(path)) == 60
    assert reads == []  # 60 rows are far under one example's bound (PER_EXAMPLE_BYTES): no bound can refuse them


def test_a_large_predictions_file_is_still_bounded_by_its_task(tmp_path, monkeypatch):
    path = hc.good_result(tmp_path / "r", "m", n_test=1)
    predictions = path.with_name("seed-42.predictions.jsonl")
    row = json.dumps({"id": "x", "gold": "a", "pred": "a" * 1000})
    predictions.write_text((row + "\n") * (result_files.PER_EXAMPLE_BYTES // len(row) + 2))
    reads = _counting_result_reads(monkeypatch)
    with pytest.raises(ResultsError, match=r"what its task's 1 test examples can produce"):
        result_files.read_predictions(path)
    assert reads == [str(path)]
    data = json.loads(path.read_text())
    data["task"]["n_test"] = 60  # 60 examples may hold it
    path.write_text(json.dumps(data))
    assert len(result_files.read_predictions(path)) == result_files.PER_EXAMPLE_BYTES // len(row) + 2
