"""Sequence heads (classification, relation, multilabel): features, pos_weight, and a near-perfect fit of
tiny data through the generic fine-tuning loop."""

from __future__ import annotations

import pytest
import torch
from biobench.errors import DataError
from biobench.finetune import finetune, prepare_task
from biobench.heads import get_head
from biobench.heads.sequence import CLASSIFICATION, IGNORE_INDEX, MULTILABEL, RELATION
from biobench.models import load_encoder
from biobench.protocols import resolve_protocol
from biobench.tasks.schema import ClassificationExample, MultilabelExample, RelationExample, TaskData

WORDS = {"cardio": "cœur infarctus palpitations", "pneumo": "poumon toux dyspnée", "neuro": "cerveau migraine vertiges"}


def cls_examples(n: int, cls=ClassificationExample) -> list:
    labels = list(WORDS)
    return [cls(f"e{i}", f"Le patient {i % 7} présente {WORDS[labels[i % 3]]}.", labels[i % 3]) for i in range(n)]


def ml_examples(n: int) -> list[MultilabelExample]:
    out = []
    for i in range(n):
        labs = tuple(lab for j, lab in enumerate(WORDS) if (i >> j) & 1)
        text = " ; ".join(WORDS[lab] for lab in labs) or "examen normal"
        out.append(MultilabelExample(f"m{i}", f"Note {i % 5} : {text}.", labs))
    return out


def task(kind: str, examples: list, labels: list[str]) -> TaskData:
    return TaskData(f"toy-{kind}", kind, {"train": examples, "dev": examples[:9], "test": examples[:9]}, labels,
                    "hand-built", f"sha256:{kind}")


def test_get_head_maps_kinds():
    assert get_head("classification") is CLASSIFICATION
    assert get_head("relation") is RELATION and RELATION.kind == "relation"
    assert get_head("multilabel") is MULTILABEL


def test_featurize_collate_gold_and_unknown_labels(tiny_tokenizer):
    examples = [ClassificationExample("a", "toux sèche", "pneumo"), ClassificationExample("b", "fièvre", "other")]
    feats = CLASSIFICATION.featurize(examples, tiny_tokenizer, 8, ["cardio", "pneumo"])
    assert [f["labels"] for f in feats] == [1, IGNORE_INDEX]  # a label outside the inventory is ignored by the loss
    assert [f["example_index"] for f in feats] == [0, 1]
    assert all(len(f["input_ids"]) <= 8 for f in feats)
    assert [CLASSIFICATION.gold(e) for e in examples] == ["pneumo", "other"]  # ...but scored as gold
    batch = CLASSIFICATION.collate(feats, tiny_tokenizer.pad_token_id)
    assert batch["input_ids"].shape == batch["attention_mask"].shape
    assert batch["attention_mask"].sum(1).tolist() == [len(f["input_ids"]) for f in feats]
    ml = [MultilabelExample("m", "toux", ("pneumo", "cardio", "pneumo"))]
    ml_feats = MULTILABEL.featurize(ml, tiny_tokenizer, 8, ["cardio", "neuro", "pneumo"])
    assert ml_feats[0]["labels"] == [1.0, 0.0, 1.0]
    assert MULTILABEL.gold(ml[0]) == ["cardio", "pneumo"]
    assert MULTILABEL.collate(ml_feats, 0)["labels"].dtype == torch.float
    assert CLASSIFICATION.merge([{"example_index": 1}, {"example_index": 0}], ["x", "y"], 2) == ["y", "x"]


def test_multilabel_pos_weight_is_neg_over_pos():
    train = [MultilabelExample(str(i), "t", labs) for i, labs in enumerate([("a",), ("a", "b"), (), ("a",)])]
    weights = MULTILABEL.pos_weight(["a", "b", "c"], train)
    assert weights.tolist() == pytest.approx([1 / 3, 3.0, 1.0])  # c never positive: weight 1


def test_train_label_outside_inventory_is_a_data_error(tiny_mlm_dir):
    encoder, _, _ = load_encoder(str(tiny_mlm_dir))
    with pytest.raises(DataError, match=r"train labels \['neuro'\] are missing from the task's label list"):
        CLASSIFICATION.build(encoder, ["cardio"], cls_examples(3)[2:])


@pytest.mark.parametrize("kind", ["classification", "relation", "multilabel"])
def test_head_fits_tiny_data(kind, tiny_mlm_dir):
    encoder, tokenizer, _ = load_encoder(str(tiny_mlm_dir))
    if kind == "multilabel":
        examples = ml_examples(16)
    else:
        examples = cls_examples(18, RelationExample if kind == "relation" else ClassificationExample)
    data = task(kind, examples, sorted(WORDS))
    protocol = resolve_protocol("en", kind, 32, {"epochs": 25, "lr": 3e-3, "batch_size": 4, "warmup_ratio": 0.0})
    prepared = prepare_task(get_head(kind), data, tokenizer, protocol)
    outcome = finetune(prepared, encoder, tokenizer.pad_token_id, protocol, seed=0, progress=False)
    assert outcome.dev_score >= 0.95, outcome.history
    assert outcome.test_metrics["macro_f1"] >= 0.95
    assert len(outcome.test_predictions) == 9
    assert outcome.history[-1]["epoch"] == 25 and outcome.best_epoch <= 25
