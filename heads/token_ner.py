"""The "hf-token" NER head: the model's own AutoModelForTokenClassification with BIO tags, as the
BioClinical-ModernBERT protocol runs it (src/tasks/token_classification.py there).

- Tags: O, then B-<label>, I-<label> per label. The first sub-word of each word carries the word's tag, every
  other sub-word and the special tokens carry -100 (ignored by the model's cross-entropy).
- Words, windows and merging are the span head's (biobench.heads.words, SpanNerSpec.featurize / merge), so a
  document longer than max_length is read in overlapping windows instead of being cut, and predictions map
  back to exact character offsets.
- Gold entities that overlap (nested corpora) cannot all be encoded in one BIO sequence: the longest of an
  overlapping group is taught; the metrics still count every gold entity.
- Decoding reads each word's argmax tag and forms entities as seqeval's default mode does: an entity starts
  at B-X, or at I-X after a tag that is not of type X, and continues over I-X.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from biobench.heads.base import HeadModel, HfHeadModel
from biobench.heads.config import SpanConfig, TokenConfig
from biobench.heads.span_ner import SpanNerSpec
from torch import nn

IGNORE_INDEX = -100


def bio_tags(labels: Sequence[str]) -> list[str]:
    return ["O"] + [f"{prefix}-{label}" for label in labels for prefix in ("B", "I")]


def spans_to_bio(spans: Sequence[tuple[int, int, int]], n_words: int) -> list[int]:
    """Tag ids (O=0, B-l=1+2l, I-l=2+2l) of word spans (first, last inclusive, label index); of overlapping
    spans the longest (then the earliest) is kept."""
    tags = [0] * n_words
    taken = [False] * n_words
    for b, e, lab in sorted(set(spans), key=lambda s: (s[0] - s[1], s[0])):
        if e >= n_words or any(taken[b:e + 1]):
            continue
        tags[b] = 1 + 2 * lab
        for w in range(b + 1, e + 1):
            tags[w] = 2 + 2 * lab
        taken[b:e + 1] = [True] * (e + 1 - b)
    return tags


def bio_to_spans(tags: Sequence[int]) -> list[tuple[int, int, int]]:
    """Word spans (first, last inclusive, label index) of a tag-id sequence, read as seqeval's default mode."""
    spans: list[tuple[int, int, int]] = []
    start = label = None
    for w, tag in enumerate([*tags, 0]):
        kind, lab = ("O", None) if tag == 0 else ("B" if tag % 2 else "I", (tag - 1) // 2)
        if start is not None and not (kind == "I" and lab == label):
            assert label is not None  # set together with start
            spans.append((start, w - 1, label))
            start = label = None
        if kind == "B" or (kind == "I" and start is None):
            start, label = w, lab
    return spans


@dataclass(frozen=True)
class TokenNerSpec:
    """HeadSpec for kind "ner" with the model's token-classification head."""

    kind: str = "ner"
    # words, windows and merge (no span scoring): the span head's, over words
    windows: SpanNerSpec = field(default_factory=lambda: SpanNerSpec(config=SpanConfig(unit="word"), sampled=False,
                                                                                    name="token NER"))

    def featurize(self, examples: Sequence[Any], tokenizer: Any, max_length: int,
                  labels: Sequence[str]) -> list[dict[str, Any]]:
        return self.windows.featurize(examples, tokenizer, max_length, labels)

    def collate(self, features: Sequence[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
        n = len(features)
        seq_len = max(max(len(f["input_ids"]) for f in features), 1)
        input_ids = torch.full((n, seq_len), pad_token_id, dtype=torch.long)
        attention = torch.zeros((n, seq_len), dtype=torch.long)
        labels = torch.full((n, seq_len), IGNORE_INDEX, dtype=torch.long)
        first_subword = []
        for i, f in enumerate(features):
            ids = f["input_ids"] or [pad_token_id]
            input_ids[i, : len(ids)] = torch.tensor(ids)
            attention[i, : len(ids)] = 1
            firsts = [min(s, len(ids) - 1) for s, _ in f["unit_subwords"]]
            for position, tag in zip(firsts, spans_to_bio(f["spans"], len(firsts)), strict=True):
                labels[i, position] = tag
            first_subword.append(firsts)
        return {"input_ids": input_ids, "attention_mask": attention, "labels": labels,
                "first_subword": first_subword, "unit_chars": [f["unit_chars"] for f in features],
                "example_index": [f["example_index"] for f in features]}

    def build(self, encoder: nn.Module, labels: Sequence[str], train_examples: Sequence[Any]) -> HeadModel:
        return TokenNerModel(encoder, labels)

    def gold(self, example: Any) -> list[list]:
        return self.windows.gold(example)

    def merge(self, features: Sequence[dict[str, Any]], feature_predictions: Sequence[list],
              n_examples: int) -> list[list]:
        return self.windows.merge(features, feature_predictions, n_examples)


class TokenNerModel(HfHeadModel):
    """AutoModelForTokenClassification around the encoder; its own cross-entropy over first sub-words."""

    def __init__(self, encoder: nn.Module, labels: Sequence[str]):
        from transformers import AutoModelForTokenClassification

        super().__init__(AutoModelForTokenClassification, encoder, bio_tags(labels))
        self.labels = list(labels)

    @torch.no_grad()
    def predict(self, batch: dict[str, Any]) -> list[list]:
        """Per window, sorted [start, end, label] character spans (document offsets)."""
        tags = self.logits(batch).argmax(-1)
        out = []
        for row, firsts, chars in zip(tags.tolist(), batch["first_subword"], batch["unit_chars"], strict=True):
            spans = bio_to_spans([row[p] for p in firsts])
            out.append(sorted([chars[b][0], chars[e][1], self.labels[lab]] for b, e, lab in spans))
        return out


def hf_token_head(kind: str, config: TokenConfig) -> TokenNerSpec:
    """The "hf-token" head (typed config: biobench.heads.config.TokenConfig, no knobs)."""
    return TokenNerSpec(kind=kind)
