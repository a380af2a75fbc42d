"""Pairing the test predictions of several models (and seeds) on the same examples, for paired statistics.

Why one alignment: `biobench compare` (strict: a mismatch is an error naming both files), the leaderboard's
significance groups and comparisons, and the detectable difference (lenient: a mismatching seed or model is
left out and reported) must agree on which runs were scored on the same data.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from biobench.errors import ResultsError


@dataclass(frozen=True)
class PredictionColumns:
    """A predictions file as columns: the test example ids, gold values and predictions, row order kept. Why:
    pairing reads only these three fields, and a board holds thousands of files at once; three tuples take
    a fraction of the memory of the files' row dicts."""

    ids: tuple
    gold: tuple
    pred: tuple

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, Any]]) -> PredictionColumns:
        """The columns of parsed rows, each text value shared with every equal one (`sys.intern`). Why: JSON
        parsing makes a new string per row, and a task's 2,700 files of a 300-model board hold 540,000 ids and
        1,080,000 labels that are copies of 200 ids and a handful of labels: the groups' worker held them all
        (docs/performance.md)."""
        if set(map(type, rows)) <= {dict}:  # the reader's rows: each column taken by one `map`, run in C
            return cls(_shared(list(map(operator.methodcaller("get", "id"), rows))),
                       _shared(list(map(operator.itemgetter("gold"), rows))),
                       _shared(list(map(operator.itemgetter("pred"), rows))))
        return cls(_shared([r.get("id") for r in rows]), _shared([r["gold"] for r in rows]),
                   _shared([r["pred"] for r in rows]))

    @classmethod
    def shared(cls, ids: list[Any], gold: list[Any], pred: list[Any]) -> PredictionColumns:
        """The columns of three lists, text shared as `of` shares it (a reader that takes the columns without
        making the rows, `store.read_prediction_columns`)."""
        return cls(_shared(ids), _shared(gold), _shared(pred))


def _shared(values: list[Any]) -> tuple:
    try:  # all text (ids, single labels): interned in one C loop
        return tuple(map(sys.intern, values))
    except TypeError:  # lists (multilabel, spans), numbers, None: text interned, the rest kept as it is
        return tuple(sys.intern(v) if type(v) is str else v for v in values)


@dataclass
class AlignedPredictions:
    """Predictions of several models (groups) on the same test examples, ready for paired tests."""

    ids: list
    gold: list
    preds: dict[str, list[list]]  # group -> one prediction list per seed, in the order given
    dropped: list[tuple[str, str, str]] = field(default_factory=list)  # (group, source, reason)


OTHER_EXAMPLES = "predictions use other test examples than"  # another subset (--limit-eval) or data version


def align_predictions(groups: Mapping[str, Sequence[tuple[str, Sequence[Mapping[str, Any]] | PredictionColumns]]],
                      strict: bool = True) -> AlignedPredictions | None:
    """Pair up predictions files: `groups` maps a model to its seeds' (source, rows or their PredictionColumns).
    Seeds pair when their rows
    hold the same test examples (ids and gold, in order). The reference of a model is its first seed; the
    reference of all is the first model's. `strict`: a mismatch raises ResultsError naming both files
    (`biobench compare`); otherwise the seed (or, when its reference differs, the whole model) is dropped and
    listed in `dropped` (the leaderboard). None when no seed is left."""
    out = AlignedPredictions([], [], {})

    def differs(group: str, source: str | None, reference: str | None, reason: str) -> None:
        if strict:
            raise ResultsError(f"{source}: its test examples (ids/gold) differ from {reference}; the two runs were "
                               "scored on different data, so they cannot be compared pairwise")
        out.dropped.append((group, str(source), reason))

    examples = first_source = None
    for group, seeds in groups.items():
        own = own_source = None
        kept = []
        for source, rows in seeds:
            columns = rows if isinstance(rows, PredictionColumns) else PredictionColumns.of(rows)
            these = (columns.ids, columns.gold)
            if own is None:
                own, own_source = these, source
            elif these != own:
                differs(group, source, own_source, "predictions are not aligned with the model's other seeds")
                continue
            kept.append(list(columns.pred))
        if own is None:
            continue
        if examples is None:
            examples, first_source = own, own_source
        elif own != examples:
            differs(group, own_source, first_source, f"{OTHER_EXAMPLES} {first_source}; left out of paired tests")
            continue
        out.preds[group] = kept
    if examples is None:
        return None
    out.ids, out.gold = list(examples[0]), list(examples[1])
    return out
