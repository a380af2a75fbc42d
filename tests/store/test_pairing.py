"""store.pairing: predictions of several models and seeds paired on the same test examples. Strict (`biobench
compare`): a mismatch is one error naming both files; lenient (the board): the seed or model is left out and
listed with why."""

import pytest
from biobench.errors import ResultsError
from biobench.store.pairing import OTHER_EXAMPLES, PredictionColumns, align_predictions


def _rows(ids, gold, pred):
    return [{"id": i, "gold": g, "pred": p} for i, g, p in zip(ids, gold, pred, strict=True)]


IDS, GOLD = ["e1", "e2", "e3"], ["a", "b", "a"]


def test_seeds_and_models_on_the_same_examples_pair_in_order():
    aligned = align_predictions({"A": [("a1.jsonl", _rows(IDS, GOLD, "aba")), ("a2.jsonl", _rows(IDS, GOLD, "abb"))],
                                 "B": [("b1.jsonl", PredictionColumns.of(_rows(IDS, GOLD, "bbb")))]})
    assert (aligned.ids, aligned.gold) == (IDS, GOLD) and aligned.dropped == []
    assert aligned.preds == {"A": [list("aba"), list("abb")], "B": [list("bbb")]}


def test_strict_refuses_a_seed_scored_on_other_examples_naming_both_files():
    with pytest.raises(ResultsError, match=r"^a2.jsonl: its test examples \(ids/gold\) differ from a1.jsonl"):
        align_predictions({"A": [("a1.jsonl", _rows(IDS, GOLD, "aba")), ("a2.jsonl", _rows(IDS[:2], GOLD[:2], "ab"))]})


def test_lenient_leaves_out_the_seed_or_the_model_and_says_why():
    other = ["x1", "x2", "x3"]
    aligned = align_predictions({
        "A": [("a1", _rows(IDS, GOLD, "aba")), ("a2", _rows(IDS, ["b", "b", "a"], "aba"))],  # other gold: a2 out
        "B": [("b1", _rows(other, GOLD, "aaa"))],  # another subset of the test set: the whole model out
        "C": [("c1", _rows(IDS, GOLD, "ccc"))],
    }, strict=False)
    assert aligned.preds == {"A": [list("aba")], "C": [list("ccc")]}
    assert aligned.dropped == [("A", "a2", "predictions are not aligned with the model's other seeds"),
                               ("B", "b1", f"{OTHER_EXAMPLES} a1; left out of paired tests")]


def test_nothing_to_pair_is_none():
    assert align_predictions({}) is None and align_predictions({"A": []}) is None


def test_columns_share_equal_text_and_keep_structured_values():
    rows = [{"id": "".join(["e", "1"]), "gold": [[0, 3, "DISO"]], "pred": []},
            {"id": "".join(["e", "1"]), "gold": None, "pred": 2}]
    columns = PredictionColumns.of(rows)
    assert columns.ids[0] is columns.ids[1]  # two parsed copies of one id become one string
    assert columns.gold == ([[0, 3, "DISO"]], None) and columns.pred == ([], 2)
