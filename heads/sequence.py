"""Sequence-level heads: a linear layer on the first ([CLS]) token.

One parameterised implementation serves three task kinds:
- classification: softmax over the labels, cross-entropy;
- relation: the same classifier over text whose two entities are already marked (ChemProt, GAD);
- multilabel: one sigmoid per label, BCEWithLogitsLoss with per-label pos_weight = negatives / positives in
  train (rare codes would otherwise never be predicted), threshold 0.5.

A gold label absent from the label inventory (e.g. a test label never seen in train) cannot be predicted; its
feature target is ignored by the loss and the metrics still count it (as a miss) through `gold`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from biobench.errors import DataError
from biobench.heads.base import HeadModel
from torch import nn
from torch.nn.utils.rnn import pad_sequence

IGNORE_INDEX = -100


class SequenceModel(HeadModel):
    """Encoder + dropout + linear on the first token."""

    def __init__(self, encoder: nn.Module, labels: Sequence[str], multilabel: bool,
                 pos_weight: torch.Tensor | None = None, threshold: float = 0.5):
        super().__init__()
        self.encoder = encoder
        self.labels = list(labels)
        self.multilabel = multilabel
        self.threshold = threshold
        config = encoder.config
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
        logits = self.logits(batch)
        if self.multilabel:
            chosen = torch.sigmoid(logits) >= self.threshold
            return [sorted(self.labels[j] for j in row.nonzero().flatten().tolist()) for row in chosen]
        return [self.labels[j] for j in logits.argmax(-1).tolist()]


@dataclass(frozen=True)
class SequenceHead:
    """HeadSpec (biobench.heads.base) for classification, relation and multilabel tasks."""

    kind: str
    multilabel: bool = False
    threshold: float = 0.5

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
        pos_weight = self.pos_weight(labels, train_examples) if self.multilabel else None
        return SequenceModel(encoder, labels, self.multilabel, pos_weight, self.threshold)

    def pos_weight(self, labels: Sequence[str], train_examples: Sequence[Any]) -> torch.Tensor:
        """neg/pos per label from train; a label with no positive gets 1 (nothing to up-weight)."""
        n = len(train_examples)
        positives = torch.tensor([sum(lab in ex.labels for ex in train_examples) for lab in labels],
                                 dtype=torch.float)
        return torch.where(positives > 0, (n - positives) / positives.clamp(min=1), torch.ones_like(positives))

    def gold(self, example: Any) -> Any:
        return sorted(set(example.labels)) if self.multilabel else example.label

    def merge(self, features: Sequence[dict[str, Any]], feature_predictions: Sequence[Any],
              n_examples: int) -> list[Any]:
        merged: list[Any] = [None] * n_examples
        for feature, prediction in zip(features, feature_predictions, strict=True):
            merged[feature["example_index"]] = prediction
        return merged


CLASSIFICATION = SequenceHead("classification")
RELATION = SequenceHead("relation")
MULTILABEL = SequenceHead("multilabel", multilabel=True)
