"""Sequence heads (classification, relation, multilabel): features, pos_weight, and a near-perfect fit of
tiny data through the generic fine-tuning loop."""

from __future__ import annotations

import re

import pytest
import torch
from biobench.errors import ConfigError, DataError
from biobench.eval.encoder import load_encoder
from biobench.eval.finetune import finetune, prepare_task
from biobench.heads import get_head
from biobench.heads.sequence import IGNORE_INDEX, HfSequenceModel, decide_multilabel, decode
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


CLASSIFICATION = get_head("linear", "classification")
MULTILABEL = get_head("linear", "multilabel")


def test_get_head_builds_each_named_head_per_kind():
    relation = get_head("linear", "relation")
    assert (relation.kind, relation.multilabel, relation.fallback_top1, relation.hf) == ("relation", False, False, False)
    assert (CLASSIFICATION.kind, CLASSIFICATION.multilabel, CLASSIFICATION.fallback_top1) == \
        ("classification", False, False)  # single-label: argmax, nothing to fall back to
    assert (MULTILABEL.multilabel, MULTILABEL.fallback_top1, MULTILABEL.hf, MULTILABEL.threshold) == \
        (True, True, False, 0.5)
    hf = get_head("hf-sequence", "multilabel")
    assert (hf.multilabel, hf.fallback_top1, hf.hf, hf.threshold) == (True, False, True, 0.5)
    tuned = get_head("linear", "multilabel", {"threshold": 0.3, "fallback_top1": False})
    assert (tuned.threshold, tuned.fallback_top1) == (0.3, False)
    probs = torch.tensor([[0.35, 0.2], [0.1, 0.2]])  # the config reaches the decision rule
    assert decide_multilabel(probs, tuned.threshold, tuned.fallback_top1).tolist() == [[True, False], [False, False]]


@pytest.mark.parametrize(("head", "kind", "config", "message"), [
    ("linear", "multilabel", {"multilabel_loss": "focal"}, "head 'linear': unknown config key 'multilabel_loss'"),
    ("hf-sequence", "multilabel", {"model_class": "AutoModel"}, "head 'hf-sequence': unknown config key 'model_class'"),
    ("hf-token", "ner", {"scheme": "BIO"}, "head 'hf-token': unknown config key 'scheme'; its keys: none"),
    ("linear", "classification", {"threshold": 0.3},
     "head 'linear': config key 'threshold' is not used for classification tasks"),
    ("linear", "multilabel", {"threshold": "0.5"}, "head 'linear': threshold must be a float, not '0.5'"),
    ("linear", "multilabel", {"fallback_top1": 1}, "head 'linear': fallback_top1 must be a bool, not 1"),
])
def test_head_configs_refuse_unknown_unused_and_mistyped_keys(head, kind, config, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        get_head(head, kind, config)


def test_multilabel_decision_rule_and_fallback():
    probs = torch.tensor([[0.7, 0.2, 0.51], [0.3, 0.45, 0.1], [0.5, 0.5, 0.2], [0.1, 0.2, 0.3]])
    # p > 0.5 strictly (the harness); a row with none gets its single most probable label
    assert decide_multilabel(probs, 0.5, True).int().tolist() == [[1, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0, 1]]
    assert decide_multilabel(probs, 0.5, False).int().tolist() == [[1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]]
    logits = torch.logit(probs)
    assert decode(logits, ["a", "b", "c"], True, 0.5, True) == [["a", "c"], ["b"], ["a"], ["c"]]
    assert decode(logits, ["a", "b", "c"], True, 0.5, False) == [["a", "c"], [], [], []]  # en: logit > 0 only


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


def test_multilabel_pos_weight_is_neg_over_pos_and_the_harness_value_without_positives():
    train = [MultilabelExample(str(i), "t", labs) for i, labs in enumerate([("a",), ("a", "b"), (), ("a",)])]
    weights = MULTILABEL.pos_weight(["a", "b", "c"], train)
    # c never positive: Rian-T/tabib's compute_pos_weights clips its count to 1, so its weight is negatives / 1 = 4
    assert weights.tolist() == pytest.approx([1 / 3, 3.0, 4.0])
    model = MULTILABEL.build(_encoder_stub(), ["a", "b", "c"], train)
    assert model.loss_fn.pos_weight.tolist() == pytest.approx([1 / 3, 3.0, 4.0])  # what the loss uses


def _encoder_stub():
    from torch import nn
    from transformers import BertConfig

    stub = nn.Module()
    stub.config = BertConfig(hidden_size=8)
    return stub


def test_train_label_outside_inventory_is_a_data_error(tiny_mlm_dir):
    encoder, _, _ = load_encoder(str(tiny_mlm_dir))
    with pytest.raises(DataError, match=r"train labels \['neuro'\] are missing from the task's label list"):
        CLASSIFICATION.build(encoder, ["cardio"], cls_examples(3)[2:])


@pytest.mark.parametrize(("kind", "head"), [("classification", "linear"), ("relation", "linear"),
                                            ("multilabel", "linear"), ("classification", "hf-sequence"),
                                            ("multilabel", "hf-sequence")])
def test_head_fits_tiny_data(kind, head, tiny_mlm_dir):
    encoder, tokenizer, _ = load_encoder(str(tiny_mlm_dir))
    if kind == "multilabel":
        examples = ml_examples(16)
    else:
        examples = cls_examples(18, RelationExample if kind == "relation" else ClassificationExample)
    data = task(kind, examples, sorted(WORDS))
    protocol = resolve_protocol("en", kind, 32, {"epochs": 25, "lr": 3e-3, "batch_size": 4, "warmup_ratio": 0.0,
                                                 "head": head})
    prepared = prepare_task(get_head(head, kind), data, tokenizer, protocol)
    outcome = finetune(prepared, encoder, tokenizer.pad_token_id, protocol, seed=0, progress=False)
    if prepared.head.fallback_top1:  # 2 of the 9 test notes have no label: the fallback must give them one
        assert all(outcome.test_predictions), outcome.test_predictions
        assert outcome.test_metrics["macro_f1"] >= 0.8
    else:  # plain BCE (hf multilabel) learns the 3 codes more slowly than the softmax heads
        floor = 0.9 if kind == "multilabel" else 0.95
        assert outcome.dev_score >= floor, outcome.history
        assert outcome.test_metrics["macro_f1"] >= floor
    assert len(outcome.test_predictions) == 9
    assert outcome.history[-1]["epoch"] == 25 and outcome.best_epoch <= 25


def test_hf_sequence_head_is_the_models_own_with_the_pretrained_encoder(tiny_mlm_dir):
    encoder, _, _ = load_encoder(str(tiny_mlm_dir))
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    model = get_head("hf-sequence", "multilabel").build(encoder, sorted(WORDS), ml_examples(4))
    assert isinstance(model, HfSequenceModel) and model.encoder is encoder
    assert type(model.model).__name__ == "ModernBertForSequenceClassification"
    assert model.model.config.problem_type == "multi_label_classification"
    assert all(torch.equal(before[k], v) for k, v in model.encoder.state_dict().items())
    assert {id(p) for p in model.head_parameters()}.isdisjoint(id(p) for p in encoder.parameters())
    assert model.head_parameters()  # the classifier (and the architecture's prediction head) are the head
