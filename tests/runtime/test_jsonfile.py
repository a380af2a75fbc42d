"""The JSONL reader's batch parse (bench/runtime/jsonfile.py `_one_array`): one scanner call per batch, the
duplicate-key hook only where the colons do not rule a repeated key out, and the same values and refusals as
line by line."""

from __future__ import annotations

import json

import pytest
from biobench.runtime import jsonfile
from biobench.runtime.jsonfile import JSONL_BATCH_LINES, UnsafeJSONError, iter_jsonl


def _counting(monkeypatch, name: str) -> list[int]:
    calls = [0]
    scan = getattr(jsonfile, name)

    def counted(text, idx):
        calls[0] += 1
        return scan(text, idx)

    monkeypatch.setattr(jsonfile, name, counted)
    return calls


def _rows(n: int, id_of=lambda i: f"doc-{i}") -> list[dict]:
    return [{"id": id_of(i), "gold": f"label-{i % 3}", "pred": f"label-{i % 2}"} for i in range(n)]


def test_a_predictions_file_is_one_plain_parse_per_batch(tmp_path, monkeypatch):
    rows = _rows(JSONL_BATCH_LINES + 44)
    path = tmp_path / "seed-42.predictions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    plain, hooked = _counting(monkeypatch, "_PLAIN_SCAN"), _counting(monkeypatch, "_SCAN")
    assert [v for _, v in iter_jsonl(path)] == rows
    assert (plain[0], hooked[0]) == (2, 0)  # two batches, no line parsed alone, no hook


def test_a_colon_in_a_string_takes_the_hooks_parse_with_the_same_values(tmp_path, monkeypatch):
    rows = _rows(10, lambda i: f"doc:{i}")
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    plain, hooked = _counting(monkeypatch, "_PLAIN_SCAN"), _counting(monkeypatch, "_SCAN")
    assert [v for _, v in iter_jsonl(path)] == rows
    assert (plain[0], hooked[0]) == (1, 1)  # the batch's hook parse, still not line by line


@pytest.mark.parametrize("row", ['{"id": "a", "gold": 1, "gold": 2}', '{"id": "a:b", "gold": 1, "gold": 2}',
                                 '{"id": "a", "x": {"k": 1, "k": 2}, "gold": 1}'])
def test_a_repeated_key_is_refused_naming_its_line(tmp_path, row):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "ok", "gold": 1}\n' + row + "\n")
    with pytest.raises(UnsafeJSONError, match=r"p\.jsonl:2: duplicate key"):
        list(iter_jsonl(path))


def test_lines_that_only_join_into_values_are_refused(tmp_path):
    # joined by commas these three lines are an array of three objects, yet none of them is one JSON value alone
    path = tmp_path / "p.jsonl"
    path.write_text('{"a": [{"b": 1}\n{"c": 2}]}\n{"d": 1}, {"e": 2}\n')
    with pytest.raises(UnsafeJSONError, match=r"p\.jsonl:1: "):
        list(iter_jsonl(path))
    path.write_text('{"a": 1}\n\n{"b": 2}\n')  # a blank line is skipped, as ever
    assert list(iter_jsonl(path)) == [(1, {"a": 1}), (3, {"b": 2})]
