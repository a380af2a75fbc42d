"""Each head's configuration as a typed object: its fields, their defaults, the task kinds each field applies
to, and the checks on their values.

Why typed: a head's config is recorded in every result and hashed into its protocol, so a key that no code
reads would change the hash (and a typo would silently train the default head). `parse_config` therefore
refuses an unknown key, a key the task kind does not use (a multilabel threshold on a classification task),
a value of the wrong type and a value out of range, each with one message naming the head and the key; and
`as_dict(kind)` records only the fields that kind uses.

Torch-free at import (the head registry is read by `biobench tasks` and the protocol hash).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from biobench.errors import ConfigError


@dataclass(frozen=True)
class HeadConfig:
    """Base of the head configs; subclasses are frozen dataclasses whose fields are the head's knobs."""

    def applies(self, name: str, kind: str) -> bool:
        """Whether field `name` is used for tasks of `kind` (default: by every kind the head fits)."""
        return True

    def as_dict(self, kind: str) -> dict[str, Any]:
        """The fields a task of `kind` uses, by name (what a result records and the protocol hashes)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if self.applies(f.name, kind)}

    def check(self, head: str) -> None:
        """Value checks (ranges, choices); raise ConfigError naming the head and the field."""


@dataclass(frozen=True)
class LinearConfig(HeadConfig):
    """`linear` (fr, Rian-T/tabib bert_multilabel_cls): p > threshold, a document with no label above it gets its single
    most probable label."""

    threshold: float = 0.5
    fallback_top1: bool = True
    MULTILABEL_ONLY: ClassVar[tuple[str, ...]] = ("threshold", "fallback_top1")

    def applies(self, name: str, kind: str) -> bool:
        return kind == "multilabel" or name not in self.MULTILABEL_ONLY

    def check(self, head: str) -> None:
        _in_open_unit(head, "threshold", self.threshold)


@dataclass(frozen=True)
class HfSequenceConfig(LinearConfig):
    """`hf-sequence` (en, lindvalllab/BioClinical-ModernBERT): logit > 0 (= p > 0.5), no fallback."""

    threshold: float = 0.5
    fallback_top1: bool = False


@dataclass(frozen=True)
class TokenConfig(HeadConfig):
    """`hf-token` (en, lindvalllab/BioClinical-ModernBERT): the model's own token-classification head has no knob of ours."""


@dataclass(frozen=True)
class SpanConfig(HeadConfig):
    """`span` / `span-words`: Rian-T/tabib `configs/base/ner_span_bert.yaml` backend_args. `unit` is what a span is made
    of: "subword" (the harness: tokenizer tokens, special tokens excluded) or "word" (the word-level variant);
    `max_width` counts units. Training samples every gold span plus the first `negatives` others in order,
    shuffled, at most `max_spans` per window; decoding keeps, per candidate span, its best non-O label when
    its probability exceeds `threshold`, then removes overlaps within a label."""

    unit: str = "subword"
    max_width: int = 40
    lstm_layers: int = 3
    lstm_size: int = 400
    biaffine_size: int = 64
    dropout: float = 0.4
    tagger_weight: float = 1.0
    biaffine_weight: float = 1.0
    threshold: float = 0.5
    negatives: int = 500
    max_spans: int = 512
    UNITS: ClassVar[tuple[str, ...]] = ("subword", "word")

    def check(self, head: str) -> None:
        if self.unit not in self.UNITS:
            raise ConfigError(f"head {head!r}: unit must be one of {', '.join(self.UNITS)}, not {self.unit!r}")
        for name in ("max_width", "lstm_layers", "lstm_size", "biaffine_size", "max_spans"):
            if getattr(self, name) < 1:
                raise ConfigError(f"head {head!r}: {name} must be at least 1 (got {getattr(self, name)})")
        if self.lstm_size % 2:
            raise ConfigError(f"head {head!r}: lstm_size must be even (two directions), got {self.lstm_size}")
        if self.negatives < 0:
            raise ConfigError(f"head {head!r}: negatives must be 0 or more (got {self.negatives})")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"head {head!r}: dropout must be in [0, 1) (got {self.dropout})")
        _in_open_unit(head, "threshold", self.threshold)


def _in_open_unit(head: str, name: str, value: float) -> None:
    if not 0 < value < 1:
        raise ConfigError(f"head {head!r}: {name} must be between 0 and 1 (got {value})")


def _typed(head: str, key: str, default: Any, value: Any) -> Any:
    """`value` as the type of the field's default (an int is a fine float; a bool is not a number)."""
    expected = type(default)
    ok = isinstance(value, expected) and not (expected is not bool and isinstance(value, bool))
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        raise ConfigError(f"head {head!r}: {key} must be a {expected.__name__}, not {value!r}")
    return value


def parse_config(head: str, kind: str, defaults: HeadConfig, raw: Mapping[str, Any] | None) -> HeadConfig:
    """`defaults` with the keys of `raw` applied, refusing unknown keys, keys the kind does not use, wrong
    types and out-of-range values (ConfigError naming the head and the key)."""
    known = [f.name for f in fields(defaults)]
    updates = {}
    for key, value in (raw or {}).items():
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(f"head {head!r}: unknown config key {key!r}{hint}; "
                              f"its keys: {', '.join(known) or 'none'}")
        if not defaults.applies(key, kind):
            raise ConfigError(f"head {head!r}: config key {key!r} is not used for {kind} tasks; "
                              f"keys used for {kind}: {', '.join(defaults.as_dict(kind)) or 'none'}")
        updates[key] = _typed(head, key, getattr(defaults, key), value)
    config = replace(defaults, **updates)
    config.check(head)
    return config

