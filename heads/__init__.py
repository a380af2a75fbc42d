"""Task heads, by name: every head is an entry of `HEAD_SPECS` (data), never a class per task.

A head name covers one or more task kinds; `get_head(name, kind)` builds the HeadSpec (biobench.heads.base)
that the one fine-tuning loop (biobench.eval.finetune) talks to. An entry's `defaults` is its typed config
(biobench.heads.config: fields, defaults, checks); `as_dict(kind)` of it is what a result records next to the
head's name. The protocol knobs a head brings with it (its own learning rate, gradient clipping, dev selection
metric) are its entry's `knobs`; the default head per protocol and task kind is the protocol's
(the `head` setting of `biobench.protocols.Protocol`). Evidence for every number is in docs/PROTOCOL.md.

Torch-free at import (the registry is read by `biobench tasks` and the protocol hash): each factory below is a
small function that imports its head's module when a head is built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
    """A named head: the task kinds it fits, its factory (kind, typed config) -> HeadSpec, its typed default
    config, the dev metrics it computes itself (besides biobench.metrics.METRICS) and the protocol knobs it
    brings (None = the protocol's value)."""

    kinds: tuple[str, ...]
    factory: Callable[[str, Any], Any]
    defaults: HeadConfig
    summary: str = ""
    selection_metrics: tuple[str, ...] = ()  # dev metrics the head computes itself (HeadSpec.selection_metrics)
    knobs: Mapping[str, Any] = field(default_factory=dict)  # head_lr, grad_clip, dev_metric
    # kind -> (loss, decision rule) in words, and the harness file they follow: the protocol table
    # (biobench.protocols.protocol_rows, `biobench tasks --protocol`) shows them per task
    rules: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    source: str = ""


def _linear_head(kind: str, config: Any):
    # lazy: loads torch
    from biobench.heads.sequence import linear_head

    return linear_head(kind, config)


def _hf_sequence_head(kind: str, config: Any):
    # lazy: loads torch
    from biobench.heads.sequence import hf_sequence_head

    return hf_sequence_head(kind, config)


def _span_head(kind: str, config: Any):
    # lazy: loads torch
    from biobench.heads.span_ner import span_head

    return span_head(kind, config)


def _hf_token_head(kind: str, config: Any):
    # lazy: loads torch
    from biobench.heads.token_ner import hf_token_head

    return hf_token_head(kind, config)


# What the span heads bring to the protocol: Rian-T/tabib configs/base/ner_span_bert.yaml (learning_rate 1e-3 for
# the head, gradient_clip 10) and the harness's compute_metrics in src/tabib/models/bert_span_ner.py (`eval_f1` =
# micro-F1 of the argmax class over the sampled dev spans), which biobench.heads.span_ner computes.
_SPAN_KNOBS = {"head_lr": 1e-3, "grad_clip": 10.0, "dev_metric": "sampled_span_f1"}
_SPAN_RULES = ("BCE over sampled spans (O a class), no CRF NLL", "best non-O label p > 0.5, no same-label overlap")
_SPAN_SOURCE = "tabib src/tabib/models/bert_span_ner.py, configs/base/ner_span_bert.yaml"


HEAD_SPECS: dict[str, HeadEntry] = {
    # fr (Rian-T/tabib bert_text_cls / bert_multilabel_cls): linear layer on the first token.
    "linear": HeadEntry(
        SEQUENCE_KINDS, _linear_head, LinearConfig(),
        summary="linear on CLS; softmax CE, or (multilabel) BCE with pos_weight neg/pos, p > 0.5, "
                "top-1 label when none passes",
        rules={"classification": ("CE", "argmax"), "relation": ("CE", "argmax"),
               "multilabel": ("BCE, pos_weight neg/pos", "p > 0.5, none -> top-1")},
        source="tabib src/tabib/models/bert_multilabel_cls.py (multilabel loss and decision); linear on the first "
               "token as issue 10 asks (docs/PROTOCOL.md)"),
    # en (BioClinical-ModernBERT src/tasks/sequence_classification.py): the model's own HF head.
    "hf-sequence": HeadEntry(
        SEQUENCE_KINDS, _hf_sequence_head, HfSequenceConfig(),
        summary="AutoModelForSequenceClassification; CE, or (multilabel) plain BCE, logit > 0",
        rules={"classification": ("CE (model's own)", "argmax"), "relation": ("CE (model's own)", "argmax"),
               "multilabel": ("plain BCE (model's own)", "logit > 0, no fallback")},
        source="BioClinical-ModernBERT src/tasks/sequence_classification.py, src/metrics/metrics.py"),
    # fr NER (Rian-T/tabib bert_span_ner.py + configs/base/ner_span_bert.yaml).
    "span": HeadEntry(
        ("ner",), _span_head, SpanConfig(),
        summary="sub-word spans (<= 40): gated BiLSTM -> one BIOUL CRF (marginals) + biaffine, "
                "BCE over sampled spans, best non-O label > 0.5", selection_metrics=("sampled_span_f1",),
        knobs=_SPAN_KNOBS, rules={"ner": _SPAN_RULES}, source=_SPAN_SOURCE),
    # the same head over words (sub-words mean-pooled): spans always cover whole words.
    "span-words": HeadEntry(
        ("ner",), _span_head, SpanConfig(unit="word"),
        summary="the span head over words (mean of their sub-words) instead of sub-words",
        selection_metrics=("sampled_span_f1",), knobs=_SPAN_KNOBS, rules={"ner": _SPAN_RULES}, source=_SPAN_SOURCE),
    # en NER (BioClinical-ModernBERT src/tasks/token_classification.py).
    "hf-token": HeadEntry(
        ("ner",), _hf_token_head, TokenConfig(),
        summary="AutoModelForTokenClassification; BIO on the first sub-word of each word (-100 elsewhere)",
        rules={"ner": ("CE on first sub-words (model's own)", "word argmax -> BIO entities")},
        source="BioClinical-ModernBERT src/tasks/token_classification.py"),
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
    return head_entry(name, kind).factory(kind, head_config(name, kind, config))


def heads_help() -> str:
    """Each head with the task kinds it fits (the --head help, from this registry)."""
    return "; ".join(f"{name} ({'/'.join(entry.kinds)})" for name, entry in HEAD_SPECS.items())
