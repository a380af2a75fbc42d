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


def _counting_json_scans(monkeypatch) -> list[int]:
    """Calls of the JSON scanner behind every JSONL read (`runtime.jsonfile`: a batch as one array, or a line)."""
    from biobench.runtime import jsonfile

    calls = [0]
    for name in ("_PLAIN_SCAN", "_SCAN"):
        scan = getattr(jsonfile, name)

        def counted(*args, _scan=scan):
            calls[0] += 1
            return _scan(*args)

        monkeypatch.setattr(jsonfile, name, counted)
    return calls


def _writer_rows(n: int) -> list[dict[str, str]]:
    return [{"id": f"ex-{i}", "gold": ["négatif", "positif", "b c"][i % 3], "pred": ["positif", "b c"][i % 2]}
            for i in range(n)]


def test_predictions_in_the_writers_form_are_split_not_parsed(tmp_path, monkeypatch):
    # issue 62 item 7: the board's groups read 51,300 such files cold, and the JSON scanner was half their CPU
    from biobench.standings import scan
    from biobench.store import PredictionColumns

    path = tmp_path / "seed-42.predictions.jsonl"
    rows = _writer_rows(200)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")  # as written
    calls = _counting_json_scans(monkeypatch)
    columns = scan.load_predictions(path)
    assert calls[0] == 0  # on main, one scanner call for the file's 200 lines (a batch)
    assert columns == PredictionColumns.of(rows)
    assert columns.gold[1] is columns.gold[4] == "positif"  # text shared as the parsing reader shares it
    assert result_files.read_prediction_columns(path) == PredictionColumns.of(result_files.read_predictions(path))
    assert calls[0] == 1  # read_predictions still parses


ROW = '{"id": "x", "gold": "a", "pred": "b"}'
LOOKALIKES = {  # text that is not the writer's form in some way: parsed, with the parsing reader's values or refusal
    "escaped quote": ROW + "\n" + '{"id": "y", "gold": "a\\"b", "pred": "b"}\n',
    "escaped letter": ROW + "\n" + '{"id": "y", "gold": "\\u00e9", "pred": "b"}\n',
    "raw tab in a string": ROW + "\n" + '{"id": "y", "gold": "a\tb", "pred": "b"}\n',
    "other key order": '{"gold": "a", "id": "x", "pred": "b"}\n',
    "another key": '{"id": "x", "gold": "a", "pred": "b", "p": "0.9"}\n',
    "a repeated key": '{"id": "x", "gold": "a", "pred": "b", "pred": "c"}\n',
    "no id": '{"ix": "x", "gold": "a", "pred": "b"}\n',
    "no spaces": '{"id":"x","gold":"a","pred":"b"}\n',
    "space before the newline": ROW + " \n",
    "integer label": '{"id": "x", "gold": 1, "pred": "b"}\n',
    "no prediction": '{"id": "x", "gold": "a", "pred": null}\n',
    "label list": '{"id": "x", "gold": ["a"], "pred": ["b"]}\n',
    "CRLF": ROW + "\r\n" + ROW + "\r\n",
    "blank line": ROW + "\n\n" + ROW + "\n",
    "no final newline": ROW + "\n" + ROW,
    "byte order mark": "\ufeff" + ROW + "\n",
    "two rows on a line": ROW + ROW + "\n",
    "a row and a half": ROW + "\n" + '{"id": "x", "gold": "a"',
    "empty": "",
    "a string holding a row": '{"id": "}\\n{", "gold": "a", "pred": "b"}\n',
}


@pytest.mark.parametrize("case", LOOKALIKES)
def test_predictions_not_in_the_writers_form_are_read_as_the_parser_reads_them(tmp_path, case):
    from biobench.store import PredictionColumns

    path = tmp_path / "seed-42.predictions.jsonl"
    path.write_text(LOOKALIKES[case], encoding="utf-8", newline="")

    def outcome(read):
        try:
            return read()
        except ResultsError as err:
            return str(err)

    parsed = outcome(lambda: PredictionColumns.of(result_files.read_predictions(path)))
    assert outcome(lambda: result_files.read_prediction_columns(path)) == parsed
    if case in ("raw tab in a string", "a repeated key", "two rows on a line", "a row and a half"):
        assert isinstance(parsed, str)  # refused, with the parser's line


def test_a_predictions_file_over_the_split_bound_is_streamed(tmp_path, monkeypatch):
    """The split holds a whole file's parts at once, so a file over SPLIT_MAX_BYTES (the bound a hostile 1 GiB file
    would otherwise reach) is streamed by the parsing reader, with the same columns."""
    from biobench.store import PredictionColumns

    monkeypatch.setattr(result_files, "SPLIT_MAX_BYTES", 4096)
    path = tmp_path / "seed-42.predictions.jsonl"
    rows = _writer_rows(200)  # ~12 KB
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    calls = _counting_json_scans(monkeypatch)
    assert result_files.read_prediction_columns(path) == PredictionColumns.of(rows)
    assert calls[0] == 1  # one batch of 200 lines through the scanner
