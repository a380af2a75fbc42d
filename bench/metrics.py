"""Task metrics from predictions-file values (docs/FORMATS.md): macro-F1 for every task, plus micro-F1 and
per-label precision / recall / F1 / support.

- classification / relation: a label per example; scikit-learn.
- multilabel: a list of labels per example; scikit-learn on the binarised matrix.
- ner: entity-level exact match on (start, end, label) spans, per entity type; spans are sets, so nested and
  overlapping entities count. On flat BIO data this equals seqeval (tests/test_metrics.py checks it).

Macro averages run over the labels present in gold or predictions (scikit-learn's and seqeval's default), so a
label absent from both a split's gold and its predictions neither helps nor hurts. A gold label the model cannot
predict (e.g. unseen in train) stays in the average with F1 0.

No torch here: the leaderboard and statistics import this module.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

SINGLE_LABEL_KINDS = ("classification", "relation")
KINDS = (*SINGLE_LABEL_KINDS, "multilabel", "ner")


def _check(kind: str, gold: Sequence[Any], pred: Sequence[Any]) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown task kind {kind!r}; known: {', '.join(KINDS)}")
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold rows but {len(pred)} predictions: they must align one to one")


def _items(kind: str, rows: Sequence[Any]) -> Iterable[tuple[Hashable, str]]:
    """(item, label) pairs of every row; an item is what must match exactly to count as a true positive."""
    for i, row in enumerate(rows):
        if kind in SINGLE_LABEL_KINDS:
            yield (i,), row
        elif kind == "multilabel":
            for label in set(row):
                yield (i, label), label
        else:
            for start, end, label in {tuple(span) for span in row}:
                yield (i, start, end, label), label


def _counts(kind: str, gold: Sequence[Any], pred: Sequence[Any]) -> dict[str, list[int]]:
    """label -> [true positives, false positives, false negatives]."""
    gold_items, pred_items = set(_items(kind, gold)), set(_items(kind, pred))
    counts: dict[str, list[int]] = {}
    for item, label in gold_items | pred_items:
        c = counts.setdefault(label, [0, 0, 0])
        if (item, label) in gold_items and (item, label) in pred_items:
            c[0] += 1
        elif (item, label) in pred_items:
            c[1] += 1
        else:
            c[2] += 1
    return counts


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _score_spans(gold: Sequence[Any], pred: Sequence[Any]) -> dict[str, Any]:
    counts = _counts("ner", gold, pred)
    per_label = {}
    for label in sorted(counts):
        tp, fp, fn = counts[label]
        p, r, f = _prf(tp, fp, fn)
        per_label[label] = {"precision": p, "recall": r, "f1": f, "support": tp + fn}
    totals = [sum(c[i] for c in counts.values()) for i in range(3)]
    macro = sum(v["f1"] for v in per_label.values()) / len(per_label) if per_label else 0.0
    return {"macro_f1": macro, "micro_f1": _prf(*totals)[2], "per_label": per_label}


def _score_sklearn(kind: str, gold: Sequence[Any], pred: Sequence[Any]) -> dict[str, Any]:
    from sklearn.metrics import precision_recall_fscore_support
    from sklearn.preprocessing import MultiLabelBinarizer

    if kind == "multilabel":
        present = sorted({lab for row in (*gold, *pred) for lab in row})
        binarizer = MultiLabelBinarizer(classes=present)
        y_true, y_pred = binarizer.fit_transform(gold), binarizer.transform(pred)
        sk_labels: list[Any] = list(range(len(present)))
    else:
        present = sorted(set(gold) | set(pred))
        y_true, y_pred, sk_labels = list(gold), list(pred), present
    if not present:
        return {"macro_f1": 0.0, "micro_f1": 0.0, "per_label": {}}
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=sk_labels, average=None, zero_division=0)
    per_label = {
        str(name): {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]), "support": int(s[i])}
        for i, name in enumerate(present)
    }
    micro = precision_recall_fscore_support(y_true, y_pred, labels=sk_labels, average="micro", zero_division=0)[2]
    return {"macro_f1": float(f.mean()), "micro_f1": float(micro), "per_label": per_label}


def score(kind: str, gold: Sequence[Any], pred: Sequence[Any], labels: Sequence[str] = ()) -> dict[str, Any]:
    """{"macro_f1", "micro_f1", "per_label": {label: {precision, recall, f1, support}}}, plain python numbers.

    `labels` (the task's inventory) orders per_label: listed labels come first, in that order; labels absent
    from both gold and predictions are not reported (they are not part of the macro average).
    """
    _check(kind, gold, pred)
    result = _score_spans(gold, pred) if kind == "ner" else _score_sklearn(kind, gold, pred)
    order = {label: i for i, label in enumerate(labels)}
    result["per_label"] = dict(
        sorted(result["per_label"].items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
    )
    return result


def fast_macro_f1(kind: str, gold: Sequence[Any], pred: Sequence[Any]) -> float:
    """Macro-F1 from tp/fp/fn counts (no scikit-learn overhead): the bootstrap calls it thousands of times.
    Equal to score(...)["macro_f1"] for every kind (tested)."""
    _check(kind, gold, pred)
    counts = _counts(kind, gold, pred)
    if not counts:
        return 0.0
    return sum(_prf(*c)[2] for c in counts.values()) / len(counts)


def prediction_metric(kind: str) -> Callable[[Sequence[Any], Sequence[Any]], float]:
    """metric(gold_rows, pred_rows) -> macro-F1 for predictions-file values of a task kind (for statistics)."""
    if kind not in KINDS:
        raise ValueError(f"unknown task kind {kind!r}; known: {', '.join(KINDS)}")

    def metric(gold: Sequence[Any], pred: Sequence[Any]) -> float:
        return fast_macro_f1(kind, gold, pred)

    metric.__name__ = f"macro_f1_{kind}"
    return metric



# ---------------------------------------------------------------------------------------------- extra metrics
def micro_f1_excluding(gold: Sequence[Any], pred: Sequence[Any], exclude: Sequence[str]) -> float:
    """Micro-F1 of single-label predictions over every label except `exclude` (scikit-learn's `labels=`):
    an excluded label counts neither as a true positive nor as a prediction, but predicting it for a gold
    positive still costs that positive's recall."""
    from sklearn.metrics import precision_recall_fscore_support

    _check("classification", gold, pred)
    keep = sorted((set(gold) | set(pred)) - set(exclude))
    if not keep:
        return 0.0
    return float(precision_recall_fscore_support(gold, pred, labels=keep, average="micro", zero_division=0)[2])


# name -> (what it is, metric(gold, pred) for the task's kind); a spec's `extra_metrics` names them.
EXTRA_METRICS: dict[str, tuple[str, Callable[[Sequence[Any], Sequence[Any]], float]]] = {
    "blue_micro_f1": (
        "BLUE's ChemProt score: micro-F1 over the relation classes, 'false' excluded",
        lambda gold, pred: micro_f1_excluding(gold, pred, ("false",)),
    ),
}


def extra_metrics(names: Sequence[str], gold: Sequence[Any], pred: Sequence[Any]) -> dict[str, float]:
    """The named extra metrics of a task (its spec's `extra_metrics`), stored beside the headline metrics."""
    unknown = [n for n in names if n not in EXTRA_METRICS]
    if unknown:
        raise ValueError(f"unknown extra metric(s) {unknown}; known: {', '.join(EXTRA_METRICS)}")
    return {name: EXTRA_METRICS[name][1](gold, pred) for name in names}
