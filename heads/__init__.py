"""Task heads: CLS linear (classification, relation), multilabel (weighted BCE), span NER
(BiLSTM + CRF + biaffine). `get_head(kind)` returns the HeadSpec for a task kind."""

from __future__ import annotations

import importlib

from biobench.errors import ConfigError

# kind -> "module:attribute" of its HeadSpec instance (lazy: importing a head imports torch).
HEAD_SPECS = {
    "classification": "biobench.heads.sequence:CLASSIFICATION",
    "relation": "biobench.heads.sequence:RELATION",
    "multilabel": "biobench.heads.sequence:MULTILABEL",
    "ner": "biobench.heads.span_ner:SPAN_NER",
}


def get_head(kind: str):
    """The HeadSpec (see biobench.heads.base) for a task kind."""
    try:
        target = HEAD_SPECS[kind]
    except KeyError:
        raise ConfigError(f"no head for task kind {kind!r}; known kinds: {', '.join(HEAD_SPECS)}") from None
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)
