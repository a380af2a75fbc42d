"""Metrics equal scikit-learn (classification, multilabel over the full label inventory, zero_division=0) and
seqeval (flat BIO NER), count nested spans, are JSON-safe, and the bootstrap's count metric is the same
implementation."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from biobench import stats
from biobench.metrics import score
from seqeval.metrics import classification_report
from sklearn.metrics import f1_score, precision_recall_fscore_support
from sklearn.preprocessing import MultiLabelBinarizer


def random_cls(seed: int, n: int = 60, labels: str = "abcd"):
    rng = random.Random(seed)
    gold = [rng.choice(labels) for _ in range(n)]
    pred = [g if rng.random() < 0.6 else rng.choice(labels + "e") for g in gold]  # 'e' only predicted
    return gold, pred


@pytest.mark.parametrize("seed", range(5))
def test_classification_equals_sklearn(seed):
    gold, pred = random_cls(seed)
    got = score("classification", gold, pred, ["d", "c"])
    assert got["macro_f1"] == pytest.approx(f1_score(gold, pred, average="macro", zero_division=0))
    assert got["micro_f1"] == pytest.approx(f1_score(gold, pred, average="micro", zero_division=0))
    assert got["weighted_f1"] == pytest.approx(f1_score(gold, pred, average="weighted", zero_division=0))
    labels = sorted(set(gold) | set(pred))
    p, r, f, s = precision_recall_fscore_support(gold, pred, labels=labels, zero_division=0)
    for i, lab in enumerate(labels):
        assert got["per_label"][lab] == pytest.approx({"precision": p[i], "recall": r[i], "f1": f[i], "support": s[i]})
    assert list(got["per_label"])[:2] == ["d", "c"]  # the inventory orders per_label
    assert stats.prediction_macro_f1(gold, pred, kind="relation")(gold, pred) == pytest.approx(got["macro_f1"])


@pytest.mark.parametrize("seed", range(5))
def test_multilabel_equals_sklearn_over_the_full_inventory(seed):
    """'v' is in the inventory but absent from gold and predictions: scikit-learn on multi-hot arrays counts
    it with F1 0 (zero_division=0), and so must the headline score and the bootstrap's count metric."""
    rng = random.Random(seed)
    inventory = ["x", "y", "z", "w", "v"]
    gold = [sorted(rng.sample(inventory[:4], rng.randint(0, 3))) for _ in range(50)]
    pred = [sorted(set(g[:1]) | set(rng.sample(inventory[:4], rng.randint(0, 2)))) for g in gold]
    mlb = MultiLabelBinarizer(classes=inventory)
    y_true, y_pred = mlb.fit_transform(gold), mlb.transform(pred)
    got = score("multilabel", gold, pred, inventory)
    for average in ("macro", "micro", "weighted"):
        expected = f1_score(y_true, y_pred, average=average, zero_division=0)
        assert got[f"{average}_f1"] == pytest.approx(expected), average
    assert got["macro_f1"] < f1_score(y_true[:, :4], y_pred[:, :4], average="macro", zero_division=0)
    assert got["per_label"]["v"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    metric = stats.prediction_macro_f1(gold, pred, kind="multilabel", labels=inventory)
    assert metric(gold, pred) == pytest.approx(got["macro_f1"])


def test_count_metric_on_resamples_equals_sklearn_on_each_resample():
    """The bootstrap sums per-example counts; each resample's macro-F1 must equal scikit-learn's on it."""
    rng = np.random.default_rng(0)
    gold, pred = random_cls(3, n=80)
    metric = stats.prediction_macro_f1(gold, pred, kind="classification")
    counts = metric.counts(gold, pred)
    for _ in range(20):
        draw = rng.integers(0, len(gold), len(gold))
        g, p = [gold[i] for i in draw], [pred[i] for i in draw]
        expected = f1_score(g, p, average="macro", zero_division=0)
        assert float(metric.score(counts[draw].sum(axis=0))) == pytest.approx(expected)


def bio_to_spans(tags: list[str]) -> list[list]:
    """Token spans [start, end) of a flat BIO2 sequence (as seqeval's default mode reads it)."""
    spans, start, label = [], None, None
    for i, tag in enumerate([*tags, "O"]):
        if start is not None and not tag.startswith("I-") or (tag.startswith("I-") and tag[2:] != label):
            if start is not None:
                spans.append([start, i, label])
            start, label = None, None
        if tag.startswith("B-") or (tag.startswith("I-") and start is None):
            start, label = i, tag[2:]
    return sorted(spans)


def random_bio(rng: random.Random, n: int) -> list[str]:
    tags = []
    for _ in range(n):
        r = rng.random()
        if r < 0.5:
            tags.append("O")
        elif r < 0.8:
            tags.append(f"B-{rng.choice('PQR')}")
        else:
            prev = tags[-1] if tags and tags[-1] != "O" else f"B-{rng.choice('PQR')}"
            tags.append(f"I-{prev[2:]}")
    return tags


@pytest.mark.parametrize("seed", range(6))
def test_ner_equals_seqeval_on_flat_bio(seed):
    rng = random.Random(seed)
    gold_tags = [random_bio(rng, rng.randint(3, 15)) for _ in range(40)]
    pred_tags = [[t if rng.random() < 0.8 else rng.choice(["O", "B-P", "I-Q", "B-R"]) for t in s] for s in gold_tags]
    report = classification_report(gold_tags, pred_tags, output_dict=True, zero_division=0)
    got = score("ner", [bio_to_spans(s) for s in gold_tags], [bio_to_spans(s) for s in pred_tags])
    assert got["macro_f1"] == pytest.approx(float(report["macro avg"]["f1-score"]))
    assert got["micro_f1"] == pytest.approx(float(report["micro avg"]["f1-score"]))
    assert got["weighted_f1"] == pytest.approx(float(report["weighted avg"]["f1-score"]))
    for label, row in got["per_label"].items():
        assert row["f1"] == pytest.approx(float(report[label]["f1-score"]))
        assert row["support"] == int(report[label]["support"])


def test_bio_helper_matches_seqeval_reading():
    assert bio_to_spans(["B-P", "I-P", "O", "I-Q", "B-P", "B-P"]) == [[0, 2, "P"], [3, 4, "Q"], [4, 5, "P"], [5, 6, "P"]]


def test_ner_counts_nested_and_overlapping_spans():
    gold = [[[0, 16, "DISEASE"], [10, 16, "ANATOMY"]], [[0, 4, "DRUG"]]]
    pred = [[[10, 16, "ANATOMY"], [0, 16, "DISEASE"], [0, 16, "DISEASE"]], [[0, 5, "DRUG"]]]
    got = score("ner", gold, pred, ["DRUG", "DISEASE", "ANATOMY"])
    assert got["per_label"]["DISEASE"]["f1"] == 1.0 and got["per_label"]["ANATOMY"]["f1"] == 1.0  # nested both count
    assert got["per_label"]["DRUG"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}  # off by one char
    assert got["macro_f1"] == pytest.approx(2 / 3)
    assert got["micro_f1"] == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))
    assert list(got["per_label"]) == ["DRUG", "DISEASE", "ANATOMY"]


def test_no_entities_at_all_scores_zero_without_raising():
    assert score("ner", [[], []], [[], []]) == {"macro_f1": 0.0, "micro_f1": 0.0, "weighted_f1": 0.0,
                                                "per_label": {}}
    assert score("multilabel", [[]], [[]])["macro_f1"] == 0.0
    assert score("multilabel", [[]], [[]], ["a"])["per_label"]["a"]["f1"] == 0.0
    assert stats.prediction_macro_f1([[]], [[]], kind="ner")([[]], [[]]) == 0.0


def test_scores_are_plain_json_numbers():
    gold, pred = random_cls(0)
    for kind, g, p in (("classification", gold, pred), ("multilabel", [[x] for x in gold], [[x] for x in pred]),
                       ("ner", [[[0, 1, x]] for x in gold], [[[0, 1, x]] for x in pred])):
        got = score(kind, g, p)
        json.dumps(got)
        assert all(type(got[f"{a}_f1"]) is float for a in ("macro", "micro", "weighted"))
        assert all(type(v["support"]) is int and type(v["f1"]) is float for v in got["per_label"].values())


def test_bad_inputs():
    with pytest.raises(ValueError, match="2 gold rows but 1 predictions"):
        score("classification", ["a", "b"], ["a"])
    with pytest.raises(ValueError, match="unknown task kind 'regression'"):
        score("regression", ["a"], ["a"])


def test_single_label_counts_with_numpy_equal_the_row_by_row_set_counts():
    """`counts` takes single labels (strings, ints, None) with numpy; the same values as one-label lists go row
    by row through the set arithmetic: the counts must be the same numbers, and so must the label axis."""
    from biobench.metrics import counts, labels_in

    rng = random.Random(3)
    values = ["a", "b", "c", 7, None]
    gold = [rng.choice(values) for _ in range(300)]
    pred = [rng.choice(values) for _ in range(300)]

    def as_lists(vs):
        return [[] if v is None else [v] for v in vs]

    axis = labels_in(gold, pred)
    assert axis == labels_in(as_lists(gold), as_lists(pred)) == [7, "a", "b", "c"]
    fast = counts(gold, pred, axis)
    assert fast.shape == (300, 4, 3) and fast.sum() > 0
    assert np.array_equal(fast, counts(as_lists(gold), as_lists(pred), axis))
    with pytest.raises(KeyError):
        counts(["a"], ["z"], ["a"])  # a label missing from the axis, as before
    with pytest.raises(ValueError, match="must align one to one"):
        counts(["a"], [], ["a"])


def test_single_label_counts_of_many_files_look_up_one_table(monkeypatch):
    """issue 62 item 7: a cold 300-model board counts 51,300 predictions files; each file's (n, L, 3) counts are
    rows of one table per label count (`_pair_table`), not a zeroed array filled by ~20 numpy calls a file. Wide
    label axes (over MAX_TABLE_LABELS) keep the per-file arrays; both equal the row-by-row set counts."""
    from biobench import metrics

    monkeypatch.setattr(metrics, "_PAIR_TABLES", {}, raising=False)
    zeros = np.zeros
    made: list[tuple] = []

    def counted(shape, *args, **kwargs):
        made.append(shape)
        return zeros(shape, *args, **kwargs)

    monkeypatch.setattr(metrics.np, "zeros", counted)
    rng = random.Random(5)
    for n_labels in (8, 40):  # MAX_TABLE_LABELS is 32
        made.clear()
        values = [f"label-{i}" for i in range(n_labels)] + [None]
        axis = values[:-1]
        gold = [rng.choice(values) for _ in range(200)]
        for _ in range(100):
            pred = [rng.choice(values) for _ in range(200)]
            fast = metrics.counts(gold, pred, axis)
            lists = metrics.counts([[] if v is None else [v] for v in gold], [[] if v is None else [v] for v in pred],
                                   axis)
            assert np.array_equal(fast, lists) and fast.dtype == lists.dtype and fast.flags.c_contiguous
        single = [shape for shape in made if shape == (200, n_labels, 3)]
        per_file = 100 + 100  # the label lists' arrays are made per file either way
        assert len(single) == (100 if n_labels == 8 else per_file)  # main: 200 for both


def test_f1_from_totals_gives_the_formula_as_written_to_the_last_bit():
    """f1_from_totals computes 2 tp and `denom > 0` once each (the bootstrap scores every replicate of every seed);
    every average, with and without absent labels kept, equals the formula as it was written, with `==`."""
    from biobench.metrics import f1_from_totals

    def as_written(totals, average, keep_absent):
        tp, fp, fn = totals[..., 0], totals[..., 1], totals[..., 2]
        if average == "micro":
            tp, fp, fn = tp.sum(-1), fp.sum(-1), fn.sum(-1)
            denom = 2 * tp + fp + fn
            return np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), 0.0)
        denom = 2 * tp + fp + fn
        f1 = np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), 0.0)
        if average == "weighted":
            support = tp + fn
            total = support.sum(-1)
            return np.where(total > 0, (f1 * support).sum(-1) / np.where(total > 0, total, 1), 0.0)
        included = np.ones_like(denom, dtype=bool) if keep_absent else denom > 0
        n = included.sum(-1)
        return np.where(n > 0, np.where(included, f1, 0.0).sum(-1) / np.maximum(n, 1), 0.0)

    rng = np.random.default_rng(0)
    for shape in [(7, 3), (50, 4, 7, 3), (20, 9, 1, 3), (5, 0, 3)]:
        totals = rng.integers(0, 4, size=shape).astype(np.float64) * (rng.random(shape) < 0.7)
        for average in ("macro", "micro", "weighted"):
            for keep_absent in (False, True):
                got, want = f1_from_totals(totals, average, keep_absent), as_written(totals, average, keep_absent)
                assert got.shape == want.shape and np.array_equal(got, want)
                assert got.tobytes() == want.tobytes()  # the same bits, signs of zeros included
