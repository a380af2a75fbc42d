"""Sequence-level heads: a classifier on the first ([CLS]) token, in two flavours (registry names in
biobench.heads):

- "linear" (fr, the authors' harness Rian-T/tabib): dropout + linear on the encoder's first token.
  classification / relation: softmax, cross-entropy. multilabel: one sigmoid per label, BCEWithLogitsLoss with
  per-label pos_weight = negatives / positives in train (rare codes would otherwise never be predicted), a
  label is predicted when p > 0.5, and a document with no label above the threshold gets its single most
  probable label (the harness's fallback, src/tabib/models/bert_multilabel_cls.py).
- "hf-sequence" (en, BioClinical-ModernBERT): the model's own AutoModelForSequenceClassification head and loss
  (problem_type single_label_classification: CE; multi_label_classification: plain BCE, positive when
  logit > 0, no fallback). Its pooler / prediction head is whatever the architecture defines; layers that a
  bare encoder checkpoint lacks start from the architecture's own initialisation.

Relation tasks are classification over text whose two entities are already marked (ChemProt, GAD).

A gold label absent from the label inventory (e.g. a test label never seen in train) cannot be predicted; its
feature target is ignored by the loss and the metrics still count it (as a miss) through `gold`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from biobench.errors import DataError
from biobench.heads.base import HeadModel, HfHeadModel
from biobench.heads.config import LinearConfig
from torch import nn
from torch.nn.utils.rnn import pad_sequence

IGNORE_INDEX = -100


def decide_multilabel(probs: torch.Tensor, threshold: float, fallback_top1: bool) -> torch.Tensor:
    """Boolean (N, labels) decisions: p > threshold; with `fallback_top1`, a row with no label above the
    threshold gets its single most probable label."""
    chosen = probs > threshold
    if fallback_top1 and probs.shape[-1]:
        empty = ~chosen.any(-1)
        chosen[empty, probs[empty].argmax(-1)] = True
    return chosen


class SequenceModel(HeadModel):
    """Encoder + dropout + linear on the first token ("linear")."""

    def __init__(self, encoder: nn.Module, labels: Sequence[str], multilabel: bool,
                 pos_weight: torch.Tensor | None = None, threshold: float = 0.5, fallback_top1: bool = False):
        super().__init__()
        self.encoder = encoder
        self.labels = list(labels)
        self.multilabel = multilabel
        self.threshold = threshold
        self.fallback_top1 = fallback_top1
        config: Any = encoder.config  # a transformers config (torch types it Tensor | Module)
        rates = (getattr(config, name, None) for name in ("classifier_dropout", "hidden_dropout_prob"))
        self.dropout = nn.Dropout(next((r for r in rates if r is not None), 0.1))
        self.classifier = nn.Linear(config.hidden_size, len(self.labels))
        if multilabel:
            self.loss_fn: nn.Module = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
        else:
            self.loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX)

    def logits(self, batch: dict[str, Any]) -> torch.Tensor:
        hidden = self.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        return self.classifier(self.dropout(hidden[:, 0])).float()

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        logits = self.logits(batch)
        return {"loss": self.loss_fn(logits, batch["labels"]), "logits": logits}

    @torch.no_grad()
    def predict(self, batch: dict[str, Any]) -> list[Any]:
        return decode(self.logits(batch), self.labels, self.multilabel, self.threshold, self.fallback_top1)


def decode(logits: torch.Tensor, labels: Sequence[str], multilabel: bool, threshold: float,
           fallback_top1: bool) -> list[Any]:
    """Predictions-file values from logits: argmax label, or the sorted labels decided by decide_multilabel."""
    if multilabel:
        chosen = decide_multilabel(torch.sigmoid(logits.float()), threshold, fallback_top1)
        return [sorted(labels[j] for j in row.nonzero().flatten().tolist()) for row in chosen]
    return [labels[j] for j in logits.argmax(-1).tolist()]


class HfSequenceModel(HfHeadModel):
    """The model's own AutoModelForSequenceClassification around `encoder` ("hf-sequence"): its head, its
    loss (CE, or plain BCE for multi_label_classification), logit > 0 for multilabel."""

    def __init__(self, encoder: nn.Module, labels: Sequence[str], multilabel: bool, threshold: float = 0.5,
                 fallback_top1: bool = False):
        from transformers import AutoModelForSequenceClassification

        problem = "multi_label_classification" if multilabel else "single_label_classification"
        super().__init__(AutoModelForSequenceClassification, encoder, labels, problem_type=problem)
        self.labels = list(labels)
        self.multilabel = multilabel
        self.threshold = threshold
        self.fallback_top1 = fallback_top1

    @torch.no_grad()
    def predict(self, batch: dict[str, Any]) -> list[Any]:
        return decode(self.logits(batch), self.labels, self.multilabel, self.threshold, self.fallback_top1)


@dataclass(frozen=True)
class SequenceHead:
    """HeadSpec (biobench.heads.base) for classification, relation and multilabel tasks."""

    kind: str
    multilabel: bool = False
    threshold: float = 0.5
    fallback_top1: bool = False  # multilabel: no label above threshold -> the most probable one
    hf: bool = False  # the model's own AutoModelForSequenceClassification instead of dropout + linear

    def _gold_labels(self, example: Any) -> list[str]:
        return list(example.labels) if self.multilabel else [example.label]

    def featurize(self, examples: Sequence[Any], tokenizer: Any, max_length: int,
                  labels: Sequence[str]) -> list[dict[str, Any]]:
        index = {label: i for i, label in enumerate(labels)}
        encoded = tokenizer([ex.text for ex in examples], truncation=True, max_length=max_length)["input_ids"]
        features = []
        for i, (example, ids) in enumerate(zip(examples, encoded, strict=True)):
            known = [index[lab] for lab in self._gold_labels(example) if lab in index]
            if self.multilabel:
                target: Any = [0.0] * len(labels)
                for j in known:
                    target[j] = 1.0
            else:
                target = known[0] if known else IGNORE_INDEX
            features.append({"example_index": i, "input_ids": ids, "labels": target})
        return features

    def collate(self, features: Sequence[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
        ids = [torch.tensor(f["input_ids"], dtype=torch.long) for f in features]
        input_ids = pad_sequence(ids, batch_first=True, padding_value=pad_token_id)
        attention_mask = pad_sequence([torch.ones_like(t) for t in ids], batch_first=True, padding_value=0)
        dtype = torch.float if self.multilabel else torch.long
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "labels": torch.tensor([f["labels"] for f in features], dtype=dtype),
            "example_index": [f["example_index"] for f in features],
        }

    def build(self, encoder: nn.Module, labels: Sequence[str], train_examples: Sequence[Any]) -> HeadModel:
        unknown = sorted({lab for ex in train_examples for lab in self._gold_labels(ex)} - set(labels))
        if unknown:
            raise DataError(f"train labels {unknown[:5]} are missing from the task's label list; "
                            "fix the task spec's `labels` or the data")
        if self.hf:
            return HfSequenceModel(encoder, labels, self.multilabel, self.threshold, self.fallback_top1)
        pos_weight = self.pos_weight(labels, train_examples) if self.multilabel else None
        return SequenceModel(encoder, labels, self.multilabel, pos_weight, self.threshold, self.fallback_top1)

    def pos_weight(self, labels: Sequence[str], train_examples: Sequence[Any]) -> torch.Tensor:
        """negatives / positives per label in train; a label with no positive gets negatives / 1 (= the number
        of train examples), as Rian-T/tabib's compute_pos_weights clips the count (it cannot change the loss: such a
        label has no positive target to weight)."""
        n = len(train_examples)
        positives = torch.tensor([sum(lab in ex.labels for ex in train_examples) for lab in labels],
                                 dtype=torch.float)
        return (n - positives) / positives.clamp(min=1)

    def gold(self, example: Any) -> Any:
        return sorted(set(example.labels)) if self.multilabel else example.label

    def merge(self, features: Sequence[dict[str, Any]], feature_predictions: Sequence[Any],
              n_examples: int) -> list[Any]:
        merged: list[Any] = [None] * n_examples
        for feature, prediction in zip(features, feature_predictions, strict=True):
            merged[feature["example_index"]] = prediction
        return merged


def linear_head(kind: str, config: LinearConfig) -> SequenceHead:
    """The "linear" head for a sequence kind (typed config: biobench.heads.config.LinearConfig)."""
    multilabel = kind == "multilabel"
    return SequenceHead(kind, multilabel, config.threshold, fallback_top1=multilabel and config.fallback_top1)


def hf_sequence_head(kind: str, config: LinearConfig) -> SequenceHead:
    """The "hf-sequence" head for a sequence kind (typed config: biobench.heads.config.HfSequenceConfig)."""
    multilabel = kind == "multilabel"
    return SequenceHead(kind, multilabel, config.threshold, fallback_top1=multilabel and config.fallback_top1,
                        hf=True)
