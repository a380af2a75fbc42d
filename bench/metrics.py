"""Task metrics from predictions-file values (docs/FORMATS.md): the one F1 implementation of biobench.

Everything is computed from per-example, per-label true-positive / false-positive / false-negative counts
(`counts`), summed and turned into F1 by `f1_from_totals`. The same two functions serve a single score
(`score`: macro, micro and weighted F1 plus per-label precision / recall / F1 / support) and the paired
bootstrap (biobench.stats sums the counts of thousands of resamples with one matrix product). Tests check
every average against scikit-learn (and seqeval for flat BIO NER).

What counts as an item, per kind:
- classification / relation: the example's label;
- multilabel: each (example, label) of its label list;
- ner: each exact (example, start, end, label) span; spans are sets, so nested and overlapping entities count.

Which labels enter the averages (the paper's "macro-F1, as scikit-learn computes it"):
- multilabel: the task's full label inventory, as scikit-learn does on multi-hot arrays: a label absent from
  both gold and predictions has F1 0 (zero_division=0) and still counts in the macro average. (Dropping such
  labels would inflate exactly the tasks with many rare codes: FrACCO, CANTEMIST, DisTEMIST.)
- classification / relation / ner: the labels present in gold or predictions (scikit-learn's `labels=None`,
  seqeval's entity types); a gold label the model cannot predict still counts, with F1 0.

No torch here: the leaderboard and statistics import this module.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

SINGLE_LABEL_KINDS = ("classification", "relation")
KINDS = (*SINGLE_LABEL_KINDS, "multilabel", "ner")
AVERAGES = ("macro", "micro", "weighted")
METRICS = tuple(f"{a}_f1" for a in AVERAGES)  # the names a task spec's `metric` / `dev_metric` may use


def _check(kind: str, gold: Sequence[Any], pred: Sequence[Any]) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown task kind {kind!r}; known: {', '.join(KINDS)}")
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold rows but {len(pred)} predictions: they must align one to one")


def items(value: Any) -> set[tuple]:
    """One predictions-file value as a set of hashable items whose last element is the label:
    'label' -> {('label',)}, ['a', 'b'] -> {('a',), ('b',)}, [[s, e, 'X'], ...] -> {(s, e, 'X'), ...}."""
    if value is None:
        return set()
    if isinstance(value, str | int | float | bool):
        return {(value,)}
    return {tuple(v) if isinstance(v, list | tuple) else (v,) for v in value}


def _distinct(values: Sequence[Any]) -> Sequence[Any] | set[Any]:
    """The distinct values of a list when they are hashable (labels), else the list itself: the labels of a
    list are those of its distinct values, and a board's 1,000 predictions hold a handful of labels."""
    try:
        return set(values)
    except TypeError:  # lists (multilabel, spans) are not hashable
        return values


def labels_in(*value_lists: Sequence[Any]) -> list:
    """Every label appearing in one or more lists of predictions-file values, sorted by string form."""
    return sorted({it[-1] for values in value_lists for v in _distinct(values) for it in items(v)}, key=str)


_SCALAR = (str, int)  # the single-label values `_label_counts` takes (bool is an int; floats take the general path)


def _label_counts(gold: Sequence[Any], pred: Sequence[Any], index: dict) -> np.ndarray | None:
    """`counts` of single-label values (a label or None per example) with numpy, or None when a value is not
    one: the same numbers as the set arithmetic below, where {g} & {p} is g == p."""
    g_codes = [index[v] if isinstance(v, _SCALAR) else (-1 if v is None else None) for v in gold]
    p_codes = [index[v] if isinstance(v, _SCALAR) else (-1 if v is None else None) for v in pred]
    if None in g_codes or None in p_codes:
        return None
    g, p = np.asarray(g_codes, dtype=np.int64), np.asarray(p_codes, dtype=np.int64)
    if len(index) <= MAX_TABLE_LABELS:  # each example's row of the table of its (gold, prediction) pair
        side = len(index) + 1  # the codes 0..L-1 and, for None (-1), L
        return _pair_table(len(index))[(g % side) * side + p % side]
    return _one_hot_counts(g, p, len(index))


MAX_TABLE_LABELS = 32  # label axes counted through `_pair_table` (33 x 33 pairs of 96 counts: 836 KB at most)
_PAIR_TABLES: dict[int, np.ndarray] = {}


def _pair_table(n_labels: int) -> np.ndarray:
    """((L + 1)^2, L, 3) tp, fp, fn of one example whose gold and predicted codes are the row's g and p (row
    g * (L + 1) + p, code L for None), made by `_one_hot_counts` once per label count. Why: a cold 300-model board's
    groups count 51,300 files, each now one lookup in this table instead of the ~20 numpy calls of
    `_one_hot_counts` (docs/performance.md); the rows are that function's, so the counts are too."""
    table = _PAIR_TABLES.get(n_labels)
    if table is None:
        side = n_labels + 1
        g, p = np.divmod(np.arange(side * side), side)
        table = _PAIR_TABLES[n_labels] = _one_hot_counts(np.where(g < n_labels, g, -1), np.where(p < n_labels, p, -1),
                                                         n_labels)
    return table


def _one_hot_counts(g: np.ndarray, p: np.ndarray, n_labels: int) -> np.ndarray:
    """(n, n_labels, 3) tp, fp, fn of examples of gold codes `g` and predicted codes `p` (-1: None)."""
    out = np.zeros((len(g), n_labels, 3), dtype=np.float64)
    rows = np.arange(len(g))
    hit, has_g, has_p = g == p, g >= 0, p >= 0
    out[rows[hit & has_g], g[hit & has_g], 0] = 1.0
    out[rows[~hit & has_p], p[~hit & has_p], 1] = 1.0
    out[rows[~hit & has_g], g[~hit & has_g], 2] = 1.0
    return out


def counts(gold: Sequence[Any], pred: Sequence[Any], labels: Sequence[Hashable]) -> np.ndarray:
    """(n_examples, n_labels, 3) array of tp, fp, fn per example and label (`labels` must cover every label
    of gold and pred). Additive over examples: a resample's totals are a weighted sum of these rows.
    Single-label values are counted with numpy (`_label_counts`), label lists and spans row by row."""
    index = {label: i for i, label in enumerate(labels)}
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold rows but {len(pred)} predictions: they must align one to one")
    fast = _label_counts(gold, pred, index)
    if fast is not None:
        return fast
    out = np.zeros((len(gold), len(index), 3), dtype=np.float64)
    for row, (g, p) in enumerate(zip(gold, pred, strict=True)):
        gs, ps = items(g), items(p)
        for column, found in ((0, gs & ps), (1, ps - gs), (2, gs - ps)):
            for it in found:
                out[row, index[it[-1]], column] += 1
    return out


def f1_from_totals(totals: np.ndarray, average: str, keep_absent: bool = False) -> np.ndarray:
    """F1 from summed counts of shape (..., n_labels, 3) -> (...). `keep_absent`: labels with no gold and no
    prediction count as F1 0 in the macro average (multilabel); otherwise they are left out. No label at all
    scores 0 (scikit-learn's zero_division=0)."""
    if average not in AVERAGES:
        raise ValueError(f"unknown average {average!r}; known: {', '.join(AVERAGES)}")
    tp, fp, fn = totals[..., 0], totals[..., 1], totals[..., 2]
    if average == "micro":
        tp, fp, fn = tp.sum(-1), fp.sum(-1), fn.sum(-1)
        denom = 2 * tp + fp + fn
        return np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), 0.0)
    # each array once (2 tp, denom > 0): the bootstrap scores 1,000 replicates x every seed of every model, and
    # repeating them was a third of a cold board's F1 time; the values are those of the formula as written
    two_tp = 2 * tp
    denom = two_tp + fp + fn
    positive = denom > 0
    f1 = np.where(positive, two_tp / np.where(positive, denom, 1), 0.0)
    if average == "weighted":
        support = tp + fn
        total = support.sum(-1)
        return np.where(total > 0, (f1 * support).sum(-1) / np.where(total > 0, total, 1), 0.0)
    if keep_absent:
        n = np.full(denom.shape[:-1], denom.shape[-1])
        summed = f1.sum(-1)
    else:  # f1 is already 0.0 where a label is left out (denom 0)
        n = positive.sum(-1)
        summed = f1.sum(-1)
    return np.where(n > 0, summed / np.maximum(n, 1), 0.0)


def metric_labels(kind: str, gold: Sequence[Any], pred: Sequence[Any], labels: Sequence[str] = ()) -> list:
    """The label axis of `counts` for a task: its inventory first (in its order), then any other label
    found in gold or predictions."""
    listed = list(dict.fromkeys(labels))
    return listed + [lab for lab in labels_in(gold, pred) if lab not in set(listed)]


def score(kind: str, gold: Sequence[Any], pred: Sequence[Any], labels: Sequence[str] = ()) -> dict[str, Any]:
    """{"macro_f1", "micro_f1", "weighted_f1", "per_label": {label: {precision, recall, f1, support}}}, plain
    python numbers. `labels` is the task's inventory: it orders per_label and, for multilabel, is the label
    set of the macro average (absent labels count 0). per_label lists the labels that enter the macro
    average."""
    _check(kind, gold, pred)
    axis = metric_labels(kind, gold, pred, labels)
    keep_absent = kind == "multilabel"
    totals = counts(gold, pred, axis).sum(axis=0) if gold else np.zeros((len(axis), 3))
    result: dict[str, Any] = {
        f"{average}_f1": float(f1_from_totals(totals, average, keep_absent)) for average in AVERAGES
    }
    per_label = {}
    for label, (tp, fp, fn) in zip(axis, totals.tolist(), strict=True):
        if not keep_absent and tp + fp + fn == 0:
            continue
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
        per_label[str(label)] = {"precision": precision, "recall": recall, "f1": f1, "support": int(tp + fn)}
    result["per_label"] = per_label
    return result
# ---------------------------------------------------------------------------------------------- extra metrics
def micro_f1_excluding(gold: Sequence[Any], pred: Sequence[Any], exclude: Sequence[str]) -> float:
    """Micro-F1 of single-label predictions over every label except `exclude` (scikit-learn's `labels=`):
    an excluded label counts neither as a true positive nor as a prediction, but predicting it for a gold
    positive still costs that positive's recall. Same counts as `score`."""
    _check("classification", gold, pred)
    keep = [lab for lab in labels_in(gold, pred) if lab not in set(exclude)]
    if not keep:
        return 0.0
    axis = keep + [lab for lab in labels_in(gold, pred) if lab in set(exclude)]
    totals = counts(gold, pred, axis).sum(axis=0)[: len(keep)]
    return float(f1_from_totals(totals, "micro"))


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
