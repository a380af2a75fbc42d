"""Task heads, by name: every head is an entry of `HEAD_SPECS` (data), never a class per task.

A head name covers one or more task kinds; `get_head(name, kind)` builds the HeadSpec (biobench.heads.base)
that the one fine-tuning loop (biobench.finetune) talks to. The entry's `config` (sizes, thresholds, loss
weights) is what a result records next to the head's name, and its `training` values (head learning rate,
gradient clipping) are the head's own protocol knobs. The defaults per protocol live in
`biobench.protocols.DEFAULT_HEADS`; evidence for every number is in docs/PROTOCOL.md.

Torch-free at import (the registry is read by `biobench tasks` and the protocol hash); building a head
imports its module.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from biobench.errors import ConfigError

SEQUENCE_KINDS = ("classification", "relation", "multilabel")


@dataclass(frozen=True)
class HeadEntry:
    """A named head: the task kinds it fits, its factory ("module:function(kind, **config)"), its
    hyper-parameters and the protocol knobs that belong to it (None = the protocol's)."""

    kinds: tuple[str, ...]
    factory: str
    config: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    summary: str = ""


HEAD_SPECS: dict[str, HeadEntry] = {
    # fr (Rian-T/tabib bert_text_cls / bert_multilabel_cls): linear layer on the first token.
    "linear": HeadEntry(
        SEQUENCE_KINDS, "biobench.heads.sequence:linear_head",
        config={"multilabel_loss": "bce_pos_weight_neg_over_pos", "threshold": 0.5, "fallback_top1": True},
        summary="linear on CLS; softmax CE, or (multilabel) BCE with pos_weight neg/pos, p > 0.5, "
                "top-1 label when none passes"),
    # en (BioClinical-ModernBERT src/tasks/sequence_classification.py): the model's own HF head.
    "hf-sequence": HeadEntry(
        SEQUENCE_KINDS, "biobench.heads.sequence:hf_sequence_head",
        config={"model_class": "AutoModelForSequenceClassification", "multilabel_loss": "bce", "threshold": 0.5,
                "fallback_top1": False},
        summary="AutoModelForSequenceClassification; CE, or (multilabel) plain BCE, logit > 0"),
    # fr NER (Rian-T/tabib bert_span_ner.py + configs/base/ner_span_bert.yaml).
    "span": HeadEntry(
        ("ner",), "biobench.heads.span_ner:span_head",
        config={"lstm_layers": 3, "lstm_size": 400, "biaffine_size": 64, "dropout": 0.4, "max_width": 40,
                "tagger_weight": 1.0, "biaffine_weight": 1.0, "threshold": 0.5},
        training={"head_lr": 1e-3, "grad_clip": 10.0},
        summary="words -> BiLSTM -> BIOUL CRF tagger + biaffine span scorer (nested spans)"),
    # en NER (BioClinical-ModernBERT src/tasks/token_classification.py).
    "hf-token": HeadEntry(
        ("ner",), "biobench.heads.token_ner:hf_token_head",
        config={"model_class": "AutoModelForTokenClassification", "scheme": "BIO", "label_subword": "first"},
        summary="AutoModelForTokenClassification; BIO on the first sub-word of each word (-100 elsewhere)"),
}


def head_entry(name: str, kind: str, origin: str = "") -> HeadEntry:
    """The registry entry of head `name`, checked against the task kind; `origin` (a spec file) prefixes
    the error."""
    where = f"{origin}: " if origin else ""
    if name not in HEAD_SPECS:
        raise ConfigError(f"{where}unknown head {name!r}; known heads: {', '.join(HEAD_SPECS)}")
    entry = HEAD_SPECS[name]
    if kind not in entry.kinds:
        fitting = [n for n, e in HEAD_SPECS.items() if kind in e.kinds]
        raise ConfigError(f"{where}head {name!r} does not fit a {kind} task (it is for {', '.join(entry.kinds)}); "
                          f"heads for {kind}: {', '.join(fitting)}")
    return entry


def get_head(name: str, kind: str, config: dict[str, Any] | None = None):
    """The HeadSpec of head `name` for a task kind, with the registry's config (or `config`)."""
    entry = head_entry(name, kind)
    module, attr = entry.factory.split(":")
    return getattr(importlib.import_module(module), attr)(kind, **(entry.config if config is None else config))
