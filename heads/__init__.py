"""Task heads, by name: every head is an entry of `HEAD_SPECS` (data), never a class per task.

A head name covers one or more task kinds; `get_head(name, kind)` builds the HeadSpec (biobench.heads.base)
that the one fine-tuning loop (biobench.eval.finetune) talks to. An entry's `defaults` is its typed config
(biobench.heads.config: fields, defaults, checks); `as_dict(kind)` of it is what a result records next to the
head's name. The protocol knobs that come with a head (its learning rate, gradient clipping) and the default
head per protocol live with the rest of the protocol in `biobench.eval.protocols`; evidence for every number is in
docs/PROTOCOL.md.

Torch-free at import (the registry is read by `biobench tasks` and the protocol hash); building a head
imports its module.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from biobench.errors import ConfigError
from biobench.heads.config import (
    HeadConfig,
    HfSequenceConfig,
    LinearConfig,
    SpanConfig,
    TokenConfig,
    parse_config,
)

SEQUENCE_KINDS = ("classification", "relation", "multilabel")


@dataclass(frozen=True)
class HeadEntry:
    """A named head: the task kinds it fits, its factory ("module:function(kind, config)"), its typed
    default config, and the dev metrics it computes itself (besides biobench.metrics.METRICS)."""

    kinds: tuple[str, ...]
    factory: str
    defaults: HeadConfig
    summary: str = ""
    selection_metrics: tuple[str, ...] = ()  # dev metrics the head computes itself (HeadSpec.selection_metrics)


HEAD_SPECS: dict[str, HeadEntry] = {
    # fr (Rian-T/tabib bert_text_cls / bert_multilabel_cls): linear layer on the first token.
    "linear": HeadEntry(
        SEQUENCE_KINDS, "biobench.heads.sequence:linear_head", LinearConfig(),
        summary="linear on CLS; softmax CE, or (multilabel) BCE with pos_weight neg/pos, p > 0.5, "
                "top-1 label when none passes"),
    # en (BioClinical-ModernBERT src/tasks/sequence_classification.py): the model's own HF head.
    "hf-sequence": HeadEntry(
        SEQUENCE_KINDS, "biobench.heads.sequence:hf_sequence_head", HfSequenceConfig(),
        summary="AutoModelForSequenceClassification; CE, or (multilabel) plain BCE, logit > 0"),
    # fr NER (Rian-T/tabib bert_span_ner.py + configs/base/ner_span_bert.yaml).
    "span": HeadEntry(
        ("ner",), "biobench.heads.span_ner:span_head", SpanConfig(),
        summary="sub-word spans (<= 40): gated BiLSTM -> one BIOUL CRF (marginals) + biaffine, "
                "BCE over sampled spans, best non-O label > 0.5", selection_metrics=("sampled_span_f1",)),
    # the same head over words (sub-words mean-pooled): spans always cover whole words.
    "span-words": HeadEntry(
        ("ner",), "biobench.heads.span_ner:span_head", SpanConfig(unit="word"),
        summary="the span head over words (mean of their sub-words) instead of sub-words",
        selection_metrics=("sampled_span_f1",)),
    # en NER (BioClinical-ModernBERT src/tasks/token_classification.py).
    "hf-token": HeadEntry(
        ("ner",), "biobench.heads.token_ner:hf_token_head", TokenConfig(),
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


def head_config(name: str, kind: str, config: Mapping[str, Any] | None = None, origin: str = "") -> HeadConfig:
    """The typed config of head `name` for a task kind: its defaults with `config`'s keys applied (unknown,
    unused, mistyped or out-of-range keys are a ConfigError naming the head and the key)."""
    return parse_config(name, kind, head_entry(name, kind, origin).defaults, config)


def get_head(name: str, kind: str, config: Mapping[str, Any] | None = None):
    """The HeadSpec of head `name` for a task kind, with its default config updated by `config`."""
    typed = head_config(name, kind, config)
    module, attr = head_entry(name, kind).factory.split(":")
    return getattr(importlib.import_module(module), attr)(kind, typed)
