"""The results store: paths, atomic writes, strict reading, and the skip / conflict / overwrite decision."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from biobench import store
from biobench.errors import DiskFullError, ResultsError
from biobench.runtime import files

KEY = store.run_key("sha256:w", "sha256:d", "p1", 42)
PROTOCOL = {"name": "en", "epochs": 10, "lr": 5e-5, "hash": "p1"}


def make_result(key=KEY, protocol=PROTOCOL, f1=0.5) -> store.Result:
    return store.Result(model={"id": "m", "slug": "m"}, task={"id": "t", "lang": "en", "kind": "classification"},
                        seed=key["seed"], protocol=protocol, key=key,
                        metrics={"test": {"macro_f1": f1, "micro_f1": f1, "per_label": {}}})


def test_paths_follow_the_format(tmp_path):
    path = store.result_path(tmp_path, "org__model", "gad", 42)
    assert path == tmp_path / "org__model" / "gad" / "seed-42.json"
    assert store.predictions_path(path).name == "seed-42.predictions.jsonl"


def test_write_then_read_round_trip(tmp_path):
    path = store.result_path(tmp_path, "m", "t", 42)
    rows = [{"id": "1", "gold": "a", "pred": "b"}, {"id": "2", "gold": ["x"], "pred": []}]
    written = store.write_result(path, make_result(), rows)
    assert written.schema == store.SCHEMA and written.predictions == "seed-42.predictions.jsonl"
    assert store.read_result(path) == written
    assert store.read_predictions(path) == rows
    assert sorted(p.name for p in path.parent.iterdir()) == ["seed-42.json", "seed-42.predictions.jsonl"]  # no tmp
    assert [p for p, _ in store.iter_results(tmp_path)] == [path]


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "seed-1.json"
    files.atomic_write(path, "old")

    def boom(*_args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        files.atomic_write(path, "new")
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
    assert [r.seed for _, r in store.iter_results(tmp_path, "m")] == [9, 10, 42]
    assert len(list(store.iter_results(tmp_path))) == 4
    assert json.loads((tmp_path / "m" / "t" / "seed-9.json").read_text())["key"]["seed"] == 9


# --- the Result record: files written before it existed read back and re-serialise byte for byte -----------

# what `biobench eval` wrote before the Result record (json.dumps(dict, indent=2, ensure_ascii=False) + "\n")
OLD_EVAL = {
    "schema": "biobench.result/1",
    "model": {"id": "almanach/ModernCamemBERT-bio-base", "alias": "ModernCamemBERT-bio",
              "slug": "almanach__ModernCamemBERT-bio-base", "revision": "abc123", "params": 149000000,
              "context": 8192, "architecture": "ModernBertModel", "lineage": None},
    "task": {"id": "diamed", "lang": "fr", "kind": "classification", "data_checksum": "sha256:dd",
             "source": "données/diamed", "data_version": "", "n_train": 3, "n_dev": 1, "n_test": 2,
             "unseen_test_labels": [], "labels": ["a", "é"]},
    "seed": -1,
    "protocol": {"name": "fr", "epochs": 15, "lr": 2e-05, "hash": "sha256:pp"},
    "key": {"model_revision": "abc123", "data_checksum": "sha256:dd", "protocol_hash": "sha256:pp", "seed": -1},
    "head": {"name": "cls-linear", "dropout": 0.1},
    "metrics": {"test": {"macro_f1": 0.5, "micro_f1": 0.5, "weighted_f1": 0.5,
                         "per_label": {"é": {"precision": 1.0, "recall": 0.5, "f1": 0.6666666666666666, "support": 2}}},
                "dev": {"macro_f1": 1.0}},
    "dev_metric": "weighted_f1", "dev_score": 1.0, "best_epoch": 3, "best_step": 12,
    "history": [{"epoch": 1, "dev": 0.5}],
    "timings": {"train_s": 1.5, "eval_s": 0.1, "total_s": 1.7},
    "versions": {"biobench": "0.1.0", "torch": "2.9.0", "transformers": "4.57.0", "python": "3.11.7"},
    "device": "cpu", "created": "2026-12-02T13:00:00Z", "predictions": "seed--1.predictions.jsonl",
}
# what `biobench analyze probe` wrote: fewer fields, best_epoch null
OLD_PROBE = {
    "schema": "biobench.result/1",
    "model": {"id": "m", "slug": "m--probe-mean-last", "revision": "r", "variant": "probe-mean-last"},
    "task": {"id": "diamed", "lang": "fr", "kind": "classification", "data_checksum": "sha256:dd", "source": "s",
             "n_train": 3, "n_dev": 1, "n_test": 2},
    "seed": 42, "protocol": {"name": "probe", "hash": "sha256:q"},
    "key": {"model_revision": "r", "data_checksum": "sha256:dd", "protocol_hash": "sha256:q", "seed": 42},
    "metrics": {"test": {"macro_f1": 1, "per_label": {}}, "dev": {"macro_f1": 0.25}},
    "dev_score": 0.25, "best_epoch": None, "timings": {"encode_s": 0.5, "train_s": 0.1, "total_s": 0.6},
    "versions": {"biobench": "0.1.0", "torch": "2.9.0", "transformers": "4.57.0", "scikit-learn": "1.7.0",
                 "python": "3.11.7"},
    "device": "cpu", "created": "2026-12-02T13:00:00Z", "predictions": "seed-42.predictions.jsonl",
}


@pytest.mark.parametrize("old", [OLD_EVAL, OLD_PROBE], ids=["eval", "probe"])
def test_a_result_written_before_reads_back_and_reserialises_byte_identical(tmp_path, old):
    path = store.result_path(tmp_path, old["model"]["slug"], old["task"]["id"], old["seed"])
    path.parent.mkdir(parents=True)
    text = json.dumps(old, indent=2, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    rows = [{"id": "x", "gold": "é", "pred": "a"}]
    store.predictions_path(path).write_text(json.dumps(rows[0], ensure_ascii=False) + "\n", encoding="utf-8")
    result = store.read_result(path)
    assert result.to_json() == text and result.to_dict() == old
    assert (result.task_id, result.seed, result.macro_f1) == ("diamed", old["seed"], old["metrics"]["test"]["macro_f1"])
    assert [p.seed for _, p in store.iter_results(tmp_path)] == [old["seed"]]  # seed-(-?\d+): negative seeds too
    # written again through the writer: the same bytes, for the result and its predictions
    before = {p.name: p.read_bytes() for p in path.parent.iterdir()}
    store.write_result(path, result, rows)
    assert {p.name: p.read_bytes() for p in path.parent.iterdir()} == before


def test_a_new_result_follows_the_documented_field_order():
    result = make_result()
    result.details = {"created": "now", "head": {"name": "h"}, "timings": {}}
    assert list(result.to_dict()) == ["schema", "model", "task", "seed", "protocol", "key", "head", "metrics",
                                      "timings", "created", "predictions"]


def test_reader_rejects_a_score_that_is_not_a_fraction(tmp_path):
    path = tmp_path / "seed--1.json"  # OLD_EVAL's seed is -1 (a file's name must say its seed, issue 51)
    path.write_text(json.dumps(dict(OLD_EVAL, metrics={"test": {"macro_f1": 81.0}})))
    with pytest.raises(ResultsError, match=r"seed--1.json: test macro_f1 81.0 is not a fraction in \[0, 1\]"):
        store.read_result(path)
    path.write_text(json.dumps(dict(OLD_EVAL, key={"seed": -1})))
    with pytest.raises(ResultsError, match=r"lacks field\(s\) key.model_revision"):
        store.read_result(path)
    assert store.read_result(path, check_key=False).key == {"seed": -1}  # the leaderboard only aggregates


# --- one alignment of predictions for paired tests ---------------------------------------------------------

def _rows(gold, pred, ids=None):
    return [{"id": i, "gold": g, "pred": p} for i, g, p in zip(ids or range(len(gold)), gold, pred, strict=True)]


def test_align_predictions_pairs_seeds_and_models():
    gold = ["a", "b", "a"]
    aligned = store.align_predictions({
        "A": [("a1", _rows(gold, ["a", "b", "b"])), ("a2", _rows(gold, ["a", "a", "a"]))],
        "B": [("b1", _rows(gold, ["b", "b", "a"]))],
    })
    assert aligned.ids == [0, 1, 2] and aligned.gold == gold and aligned.dropped == []
    assert aligned.preds == {"A": [["a", "b", "b"], ["a", "a", "a"]], "B": [["b", "b", "a"]]}
    assert store.align_predictions({"A": []}) is None


def test_align_predictions_strict_raises_and_tolerant_drops():
    gold = ["a", "b"]
    groups = {
        "A": [("a1", _rows(gold, gold)), ("a2", _rows(["b", "b"], gold))],  # a2: other gold
        "B": [("b1", _rows(gold, gold, ids=["x", "y"]))],  # other test ids
        "C": [("c1", _rows(gold, ["b", "a"]))],
    }
    with pytest.raises(ResultsError, match=r"^a2: its test examples \(ids/gold\) differ from a1"):
        store.align_predictions(groups)
    aligned = store.align_predictions(groups, strict=False)
    assert aligned.preds == {"A": [gold], "C": [["b", "a"]]}
    assert [(g, s) for g, s, _ in aligned.dropped] == [("A", "a2"), ("B", "b1")]
    assert aligned.dropped[1][2] == "predictions use other test examples than a1; left out of paired tests"


# --- a shared results folder: the umask's mode; a full disk is one line and leaves nothing behind ----------

@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_written_files_get_the_umask_mode(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = store.result_path(tmp_path, "m", "t", 42)
        store.write_result(path, make_result(), [{"gold": "a", "pred": "a"}])
        files.atomic_write(tmp_path / "cache.npy", b"\x93NUMPY")
    finally:
        os.umask(old)
    for p in (path, store.predictions_path(path), tmp_path / "cache.npy"):
        assert p.stat().st_mode & 0o777 == mode, p
    assert os.umask(old) == old  # reading the umask left it as it was


def test_full_disk_is_one_line_naming_folder_size_and_what_is_safe(tmp_path, fill_disk):
    done = store.result_path(tmp_path, "m", "t", 1)
    store.write_result(done, make_result(dict(KEY, seed=1)), [{"gold": "a", "pred": "a"}])
    finished = done.read_bytes()
    path = store.result_path(tmp_path, "m", "t", 42)
    rows = [{"gold": "a", "pred": "b"}]
    fill_disk(after=1)  # the predictions fit, the result does not
    with pytest.raises(DiskFullError) as err:
        store.write_result(path, make_result(), rows)
    expected = make_result()
    expected.predictions = "seed-42.predictions.jsonl"
    needed = len(expected.to_json().encode())
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"disk full writing to {path.parent}: {needed:,} bytes needed")
    assert f"1 finished result(s) under {tmp_path} are safe" in message
    assert not path.exists() and not list(tmp_path.rglob("*.tmp"))
    assert done.read_bytes() == finished  # the finished result stays whole


def test_full_disk_in_the_cli_is_one_error_line(tmp_path, monkeypatch, fill_disk, capsys):
    from biobench import cli
    from biobench.commands import compare

    def write_fails(*_args, **_kwargs):
        files.atomic_write(tmp_path / "out" / "report.json", "{}")

    fill_disk()
    monkeypatch.setattr(compare, "compare", write_fails)
    assert cli.main(["compare", "a", "b", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: disk full writing to {tmp_path / 'out'}: 2 bytes needed")
    assert [p.name for p in Path(tmp_path / "out").iterdir()] == []


def test_one_comparison_in_fractions_with_its_fallbacks():
    """store.comparison is the one A-vs-B: paired bootstrap with aligned predictions, Welch's t with >= 2 seeds
    each, else the difference of the means; the CLI and the Compare tab format it (percent at the edge)."""
    from biobench.stats import TaskPredictions, prediction_macro_f1
    from biobench.store.comparison import MEANS_ONLY, PAIRED, WELCH, compare_task

    gold = ["a", "b"] * 20
    preds_a, preds_b = [gold, gold], [["a"] * 40, ["b"] * 40]
    paired = TaskPredictions("t", gold, preds_a, preds_b, prediction_macro_f1(gold, *preds_a, *preds_b))
    c = compare_task([1.0, 1.0], [1 / 3, 1 / 3], paired, n_boot=200)
    assert (c.method, c.n_boot) == (PAIRED, 200) and c.diff == pytest.approx(2 / 3) and c.p_value < 0.05
    assert c.scaled(100)["diff"] == pytest.approx(100 * c.diff) and c.scaled(100)["p_value"] == c.p_value
    welch = compare_task([0.6, 0.62, 0.61], [0.5, 0.52])
    assert welch.method == WELCH and welch.ci_low < welch.diff < welch.ci_high and welch.diff == pytest.approx(0.1)
    means = compare_task([0.6], [0.5, 0.52])
    assert means.method == MEANS_ONLY and means.diff == pytest.approx(0.09) and means.p_value != means.p_value


def test_task_scores_summarise_in_fractions_and_scale_at_the_edge(tmp_path):
    from biobench.store.summary import TaskScores, task_scores

    for seed, f1 in ((43, 0.52), (42, 0.5)):
        result = make_result(store.run_key("w", "d", "p1", seed), f1=f1)
        store.write_result(store.result_path(tmp_path, "m", "t", seed), result, [])
    (scores,) = task_scores(store.iter_results(tmp_path)).values()
    assert (scores.task, scores.lang, scores.metric, scores.scores) == ("t", "en", "macro_f1", {42: 0.5, 43: 0.52})
    frac, pct = scores.summary(), scores.summary(scale=100)
    assert pct.mean == pytest.approx(100 * frac.mean) and pct.ci_high == pytest.approx(100 * frac.ci_high)
    assert TaskScores("t", scores={1: 1.0, 2: 0.9}).summary().ci_high == 1.0  # clipped to the metric's range


def test_new_result_stamps_the_creation_time_last():
    result = store.new_result({"id": "m"}, {"id": "t"}, 1, {}, KEY, {"test": {"macro_f1": 0.5}}, {"device": "cpu"})
    assert list(result.details) == ["device", "created"] and result.details["created"].endswith("Z")


def test_analysis_files_load_into_typed_records(tmp_path):
    from biobench.store.analysis import CKALayer, Transplant, read_analysis

    cka = tmp_path / "cka.json"  # cka/1: model ids as strings, a layer with only its CKA
    cka.write_text(json.dumps({"models": {"a": "x/a", "b": "x/b"}, "layers": [{"layer": 1, "cka": 0.75}, "junk"]}))
    report = read_analysis(cka, "cka")
    assert report.layers == [CKALayer(1, 0.25, None)] and report.models == {"a": "x/a", "b": "x/b"}
    needle = tmp_path / "needle_results.json"
    needle.write_text(json.dumps({"models": {"m": {"by_length": {"512": 0.6}}, "n": {"other": 1}}}))
    record = read_analysis(needle, "needle")
    assert [(r.model, r.by_length) for r in record.runs] == [("m", [("512", 0.6)])] and record.empty == ["n"]
    trajectory = tmp_path / "cka_trajectory.json"
    trajectory.write_text(json.dumps({"run": "runs/x", "points": [{"tokens": 2, "mean_divergence": 0.2},
                                                                  {"tokens": 1, "mean_divergence": 0.1}]}))
    assert [p.tokens for p in read_analysis(trajectory, "cka_trajectory").points] == [1.0, 2.0]
    moved = Transplant("a", "b", [0, 1], "mlp", ["encoder.layer.0.x"], 1, 10)
    path = tmp_path / "transplant.json"
    path.write_text(json.dumps(moved.to_dict()))
    assert list(moved.to_dict())[:3] == ["schema", "from", "into"] and read_analysis(path, "transplant") == moved
    path.write_text('{"from": "a"}')
    with pytest.raises(ResultsError, match=r"transplant.json: not a transplant record \(KeyError"):
        read_analysis(path, "transplant")


def test_a_checkpoint_lineage_loads_back_as_a_record():
    from biobench.lineage import Freeze, Lineage

    meta = {"recipe": "detour", "phase": "final", "base_model": "preset:tiny", "tokens": {"seen": 61440, "clm": 4e4,
            "mlm": float("nan")}, "frozen": [{"layers": [0, 7], "phase": "clm"}, {"layers": "bad"}],
            "decay_ratio": 0.1, "compute": {"device_hours": 0.5, "device_type": "cuda"}, "hardware": "H100"}
    record = Lineage.from_dict(meta)
    assert (record.recipe, record.phase, record.base_model) == ("detour", "final", "preset:tiny")
    assert record.tokens == {"seen": 61440, "clm": 40000} and record.frozen == (Freeze(0, 7, "clm"),)
    assert record.device_hours == 0.5 and record.hardware == "H100" and record.extra == {"decay_ratio": 0.1}
    assert record.to_dict() == meta and Lineage.from_dict(record.to_dict()) == record
    assert Lineage.from_dict({"tokens": {}}) is None and Lineage.from_dict("detour") is None


def test_align_predictions_takes_columns_as_rows():
    gold = ["a", "b", "a"]
    rows = {"A": [("a1", _rows(gold, ["a", "b", "b"]))], "B": [("b1", _rows(gold, ["b", "b", "a"]))]}
    columns = {k: [(s, store.PredictionColumns.of(r)) for s, r in v] for k, v in rows.items()}
    assert columns["A"][0][1] == store.PredictionColumns((0, 1, 2), ("a", "b", "a"), ("a", "b", "b"))
    assert store.align_predictions(columns) == store.align_predictions(rows)


def test_prediction_columns_share_equal_texts_across_files():
    import json

    a, b = ([json.loads(json.dumps({"id": f"ex-{i}", "gold": "label-1", "pred": ["x", "y"]})) for i in range(3)]
            for _ in range(2))
    ca, cb = store.PredictionColumns.of(a), store.PredictionColumns.of(b)
    assert ca == cb and a[0]["id"] is not b[0]["id"]  # two parses: two string objects
    assert ca.ids[2] is cb.ids[2] and ca.gold[0] is cb.gold[1]  # the columns hold one of each
    assert ca.pred[0] == ["x", "y"]  # lists (multilabel) are kept as they are


def test_first_bad_number_names_the_path_and_skips_history_with_or_without_the_fast_walk():
    import numpy as np
    from biobench.store.record import first_bad_number

    clean = {"metrics": {"test": {"macro_f1": 0.5, "per_label": [{"f1": 1, "ok": True, "x": None}]}}, "seed": 42}
    assert first_bad_number(clean) is None
    assert first_bad_number({**clean, "history": [{"loss": float("nan")}]}) is None  # history is not checked
    assert first_bad_number({"metrics": {"test": [0.1, {"f1": float("-inf")}]}}) == ("metrics.test[1].f1", float("-inf"))
    where, value = first_bad_number({"timings": {"train_s": 10**30}})
    assert where == "timings.train_s" and value.endswith("(31 digits)")
    assert first_bad_number({"a": [np.float64("inf")]}) == ("a[0]", np.inf)  # a float subclass: the full walk
