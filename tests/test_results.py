"""The results store: paths, atomic writes, strict reading, and the skip / conflict / overwrite decision."""

from __future__ import annotations

import json
import os

import pytest
from biobench import results as store
from biobench.errors import ResultsError

KEY = store.run_key("sha256:w", "sha256:d", "p1", 42)
PROTOCOL = {"name": "en", "epochs": 10, "lr": 5e-5, "hash": "p1"}


def make_result(key=KEY, protocol=PROTOCOL, f1=0.5) -> dict:
    return {"model": {"id": "m", "slug": "m"}, "task": {"id": "t", "lang": "en", "kind": "classification"},
            "seed": key["seed"], "protocol": protocol, "key": key,
            "metrics": {"test": {"macro_f1": f1, "micro_f1": f1, "per_label": {}}}}


def test_paths_follow_the_format(tmp_path):
    path = store.result_path(tmp_path, "org__model", "gad", 42)
    assert path == tmp_path / "org__model" / "gad" / "seed-42.json"
    assert store.predictions_path(path).name == "seed-42.predictions.jsonl"


def test_write_then_read_round_trip(tmp_path):
    path = store.result_path(tmp_path, "m", "t", 42)
    rows = [{"id": "1", "gold": "a", "pred": "b"}, {"id": "2", "gold": ["x"], "pred": []}]
    written = store.write_result(path, make_result(), rows)
    assert written["schema"] == store.SCHEMA and written["predictions"] == "seed-42.predictions.jsonl"
    assert store.read_result(path) == written
    assert store.read_predictions(path) == rows
    assert sorted(p.name for p in path.parent.iterdir()) == ["seed-42.json", "seed-42.predictions.jsonl"]  # no tmp
    assert [p for p, _ in store.iter_results(tmp_path)] == [path]


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "seed-1.json"
    store.atomic_write_text(path, "old")

    def boom(*_args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        store.atomic_write_text(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["seed-1.json"]  # the tmp file is cleaned up


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", r"corrupt result file \(not valid JSON"),
    ('{"schema": "other/1"}', r"not a biobench result \(schema 'other/1', expected 'biobench.result/1'\)"),
    ("[1, 2]", r"not a biobench result \(schema 'list'"),
    ('{"schema": "biobench.result/1", "model": {}, "task": {}, "seed": 1, "protocol": {}, "key": {"seed": 1}}',
     r"lacks field\(s\) metrics, key.model_revision, key.data_checksum, key.protocol_hash"),
])
def test_read_result_errors_name_the_file(tmp_path, content, message):
    path = tmp_path / "seed-1.json"
    path.write_text(content)
    with pytest.raises(ResultsError, match=message) as err:
        store.read_result(path)
    assert str(err.value).startswith(str(path))


def test_read_predictions_errors(tmp_path):
    path = tmp_path / "seed-1.json"
    with pytest.raises(ResultsError, match=r"seed-1.predictions.jsonl: predictions file is missing"):
        store.read_predictions(path)
    store.predictions_path(path).write_text('{"gold": "a", "pred": "a"}\n{"gold": "a"\n')
    with pytest.raises(ResultsError, match=r"seed-1.predictions.jsonl:2: corrupt predictions line"):
        store.read_predictions(path)


def test_decide_new_skip_overwrite(tmp_path):
    path = store.result_path(tmp_path, "m", "t", 42)
    assert store.decide(path, KEY) == "new"
    store.write_result(path, make_result(), [])
    assert store.decide(path, KEY) == "skip"
    assert store.decide(path, KEY, overwrite=True) == "overwrite"


def test_a_result_of_another_run_is_never_replaced_silently(tmp_path):
    path = store.result_path(tmp_path, "m", "t", 42)
    store.write_result(path, make_result(), [])
    before = path.read_bytes()
    other = dict(KEY, protocol_hash="p2")
    new_protocol = dict(PROTOCOL, epochs=1, hash="p2")
    with pytest.raises(ResultsError) as err:
        store.decide(path, other, protocol=new_protocol)
    assert str(err.value) == (
        f"{path} holds a result of another run (protocol (epochs 10 -> 1)); not overwriting it: pass --overwrite "
        "to replace it, or --results DIR to keep both")
    with pytest.raises(ResultsError, match=r"another run \(data_checksum sha256:d -> sha256:other\)"):
        store.decide(path, dict(KEY, data_checksum="sha256:other"))
    assert path.read_bytes() == before


def test_corrupt_existing_result_stops_unless_overwrite(tmp_path):
    path = store.result_path(tmp_path, "m", "t", 42)
    path.parent.mkdir(parents=True)
    path.write_text("{trunc")
    with pytest.raises(ResultsError, match=r"corrupt result file .*; fix or delete it, or pass --overwrite"):
        store.decide(path, KEY)
    assert store.decide(path, KEY, overwrite=True) == "overwrite"
    assert path.read_text() == "{trunc"


def test_iter_results_sorts_seeds_numerically_and_filters(tmp_path):
    for seed in (10, 9, 42):
        key = dict(KEY, seed=seed)
        store.write_result(store.result_path(tmp_path, "m", "t", seed), make_result(key), [])
    store.write_result(store.result_path(tmp_path, "n", "t", 1), make_result(dict(KEY, seed=1)), [])
    assert [r["seed"] for _, r in store.iter_results(tmp_path, "m")] == [9, 10, 42]
    assert len(list(store.iter_results(tmp_path))) == 4
    assert json.loads((tmp_path / "m" / "t" / "seed-9.json").read_text())["key"]["seed"] == 9
