"""The contract between the fine-tuning loop (biobench.eval.finetune) and a task head.

A HeadSpec bundles everything kind-specific, so the loop is one generic loop:
  featurize  examples -> features (tokenised ONCE per task, reused across seeds; pure python/lists)
  collate    features -> a batch of tensors
  build      encoder + labels + train examples -> a HeadModel (nn.Module)
  gold       example -> its gold value in the predictions-file format (docs/FORMATS.md)
  merge      per-feature predictions -> per-example predictions (documents split into windows are merged
             back here; one feature per example for sequence tasks)

Every feature dict carries "example_index" (position of its example in the split) so merge can regroup.
Prediction values use the predictions-file format: a label (classification/relation), a sorted list of
labels (multilabel), a sorted list of [start, end, label] character spans (ner).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import torch
from biobench.errors import ConfigError
from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class HeadModel(nn.Module):
    """Encoder + head. forward(batch) returns {"loss": scalar tensor, ...}; predict(batch) returns one
    prediction value per feature in the batch (decoded, in the predictions-file format)."""

    encoder: nn.Module

    def head_parameters(self) -> list[nn.Parameter]:
        """Parameters that are not the encoder's (they may get their own learning rate, e.g. 1e-3 for NER)."""
        encoder_ids = {id(p) for p in self.encoder.parameters()}
        return [p for p in self.parameters() if id(p) not in encoder_ids]

    def predict(self, batch: dict[str, Any]) -> list[Any]:  # pragma: no cover - interface
        raise NotImplementedError


class HeadSpec(Protocol):
    kind: str

    def featurize(self, examples: Sequence[Any], tokenizer: Any, max_length: int,
                  labels: Sequence[str]) -> list[dict[str, Any]]: ...

    def collate(self, features: Sequence[dict[str, Any]], pad_token_id: int) -> dict[str, Any]: ...

    def build(self, encoder: nn.Module, labels: Sequence[str], train_examples: Sequence[Any]) -> HeadModel: ...

    def gold(self, example: Any) -> Any: ...

    def merge(self, features: Sequence[dict[str, Any]], feature_predictions: Sequence[Any],
              n_examples: int) -> list[Any]: ...


def to_device(batch: dict[str, Any], device: torch.device | str) -> dict[str, Any]:
    """Move the tensors of a batch to `device`, leaving python values (offsets, ids) alone."""
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}


def wrap_hf_head(auto_class: Any, encoder: nn.Module, labels: Sequence[str], **config_values: Any) -> PreTrainedModel:
    """The architecture's own task model (`auto_class`, e.g. AutoModelForTokenClassification) around an
    already loaded `encoder`: built from the encoder's config with the task's labels, then the pretrained
    encoder takes the place of the freshly initialised one (`base_model_prefix`), so the head is the model's
    own and the weights are the checkpoint's."""
    import copy


    config: Any = copy.deepcopy(encoder.config)  # a transformers config (torch types it Tensor | Module)
    config.num_labels = len(labels)
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: i for i, label in enumerate(labels)}
    for name, value in config_values.items():
        setattr(config, name, value)
    try:
        model = auto_class.from_config(config)
    except ValueError as err:
        raise ConfigError(f"{type(encoder).__name__} has no {auto_class.__name__} head in transformers ({err}); "
                          "use --head linear / --head span instead") from err
    prefix = model.base_model_prefix
    if not isinstance(getattr(model, prefix, None), nn.Module):
        raise ConfigError(f"{type(model).__name__} keeps its encoder elsewhere than .{prefix}; "
                          "use --head linear / --head span instead")
    setattr(model, prefix, encoder)
    return model


class HfHeadModel(HeadModel):
    """The architecture's own task model (`auto_class`, via wrap_hf_head) around the encoder: the one home of
    the HF heads' forward (the model's own loss on batch["labels"]) and logits; subclasses decode."""

    def __init__(self, auto_class: Any, encoder: nn.Module, labels: Sequence[str], **config_values: Any):
        super().__init__()
        self.model = wrap_hf_head(auto_class, encoder, labels, **config_values)
        self.encoder = self.model.base_model

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
        return {"loss": out.loss, "logits": out.logits}

    def logits(self, batch: dict[str, Any]) -> torch.Tensor:
        return self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
