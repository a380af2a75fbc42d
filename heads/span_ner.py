"""The paper's span-NER head (nlstruct's architecture, as the authors used it) as a HeadSpec.

encoder subwords -> words (mean or first-subword pooling) -> BiLSTM (residual) ->
  (a) per-label BIOUL CRF tagger (biobench.heads.crf): CRF negative log-likelihood; its marginals give a
      begin/end/inside score for every candidate span;
  (b) biaffine begin x end scorer (biobench.heads.biaffine);
span logit = tagger logit (detached, as nlstruct) + biaffine logit; loss = CRF NLL + BCE over all
candidate spans, weighted 1:1 (`tagger_weight`, `biaffine_weight`) (up to `max_width` words); decoding keeps spans with probability > `threshold` and
removes overlaps within a label, so nested entities of different labels survive.

Spans are word-level (biobench.heads.words): gold entities whose boundaries fall inside a word are
learned and scored as the covering words (featurize logs how many). Discontinuous entities count by
their hull (start, end), for gold and for training targets. Documents longer than `max_length`
subwords become several overlapping windows (features); `merge` maps them back to document-level
character spans, each prediction taken from one designated window (the one owning its first word).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from biobench.errors import ConfigError
from biobench.heads import crf as crf_lib
from biobench.heads.base import HeadModel
from biobench.heads.biaffine import BandBiaffine, band_valid, decode_spans
from biobench.heads.words import (
    Window,
    align_words,
    entity_word_span,
    plan_windows,
    segment_words,
    special_tokens,
    tokenize_documents,
)
from torch import nn

log = logging.getLogger(__name__)

Span = list  # [start, end, label] in the predictions-file format


@dataclass(frozen=True)
class SpanNerSpec:
    """HeadSpec for kind "ner". Fields are the head's hyper-parameters (the defaults are the paper's
    setting where it has one); a variant is `dataclasses.replace(SPAN_NER, max_width=20)`."""

    kind: str = "ner"
    max_width: int = 40          # longest candidate span, in words
    pooling: str = "mean"        # word vector from its subwords: "mean" or "first"
    overlap: float = 0.25        # share of a window's subwords repeated as context in the next window
    # the authors' harness (Rian-T/tabib configs/base/ner_span_bert.yaml): 3 BiLSTM layers of size 400
    # (200 per direction, encoder output projected to 400 first), biaffine 64, dropout 0.4, losses 1:1
    lstm_layers: int = 3
    lstm_size: int = 400
    biaffine_size: int = 64
    dropout: float = 0.4
    tagger_weight: float = 1.0
    biaffine_weight: float = 1.0
    threshold: float = 0.5

    # ---- featurize: examples -> windows (pure python, once per task) ---------------------------------
    def featurize(self, examples: Sequence[Any], tokenizer: Any, max_length: int,
                  labels: Sequence[str]) -> list[dict[str, Any]]:
        """One feature per window (>= 1 per example, in example order). Keys: example_index, input_ids,
        word_subwords (subword range of each word in input_ids), word_chars (character range of each
        word), own_chars (the document characters whose predictions this window keeps), spans (gold
        word spans (first, last, label index) lying inside the window), n_labels."""
        prefix, suffix = special_tokens(tokenizer)
        budget = max_length - len(prefix) - len(suffix)
        if budget < 1:
            raise ConfigError(f"max_length {max_length} leaves no room for text after the tokenizer's "
                              f"{len(prefix) + len(suffix)} special tokens; use a larger --max-length (e.g. 128)")
        label_index = {label: i for i, label in enumerate(labels)}
        features: list[dict[str, Any]] = []
        n_entities = inexact = unplaced = 0
        encoded = tokenize_documents(tokenizer, [ex.text for ex in examples])
        for index, (ex, (ids, offsets, content)) in enumerate(zip(examples, encoded, strict=True)):
            words = segment_words(ex.text, ex.tokens)
            ranges = align_words(words, offsets, content, budget)
            starts, ends = [w[0] for w in words], [w[1] for w in words]
            spans = set()
            for ent in ex.entities:
                if ent.label not in label_index:
                    continue
                n_entities += 1
                placed = entity_word_span(words, starts, ends, ent.start, ent.end)
                if placed is None:
                    unplaced += 1
                    continue
                inexact += not placed[2]
                spans.add((placed[0], placed[1], label_index[ent.label]))
            windows = plan_windows(ranges, budget, int(budget * self.overlap))
            for i, win in enumerate(windows):
                features.append(self._window_feature(index, ex.text, ids, words, ranges, spans, win,
                                                     first=i == 0, last=i == len(windows) - 1,
                                                     prefix=prefix, suffix=suffix, n_labels=len(labels)))
        if inexact or unplaced:
            log.warning("span NER: %d of %d entities do not start/end on word boundaries (learned and "
                        "scored as the covering words) and %d cover no word (ignored in training)",
                        inexact, n_entities, unplaced)
        return features

    @staticmethod
    def _window_feature(index: int, text: str, ids: list[int], words: list[tuple[int, int]],
                        ranges: list[tuple[int, int]], spans: set, win: Window, *, first: bool, last: bool,
                        prefix: list[int], suffix: list[int], n_labels: int) -> dict[str, Any]:
        lo = ranges[win.start][0] if win.end > win.start else 0
        hi = max((ranges[w][1] for w in range(win.start, win.end)), default=lo)
        shift = len(prefix) - lo
        return {
            "example_index": index,
            "input_ids": prefix + ids[lo:hi] + suffix,
            "word_subwords": [(s + shift, e + shift) for s, e in ranges[win.start:win.end]],
            "word_chars": list(words[win.start:win.end]),
            "own_chars": (0 if first else words[win.own_start][0],
                          len(text) + 1 if last else words[win.own_end][0]),
            "spans": sorted((b - win.start, e - win.start, lab) for b, e, lab in spans
                            if win.start <= b and e < win.end),
            "n_labels": n_labels,
        }

    # ---- collate: features -> tensors ----------------------------------------------------------------
    def collate(self, features: Sequence[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
        """Batch keys: input_ids, attention_mask (N, S); word_start, word_end (N, W) subword ranges;
        word_mask (N, W) real words; tags (N, labels, W) BIOUL gold per label; gold_spans (G, 4) rows
        (feature, first word, width - 1, label); plus python lists word_chars and example_index.
        W >= 1 even for a window without words, whose dummy first word points at input_ids[0]."""
        n = len(features)
        seq_len = max(max(len(f["input_ids"]) for f in features), 1)
        n_words = max(max(len(f["word_chars"]) for f in features), 1)
        n_labels = features[0]["n_labels"]
        input_ids = torch.full((n, seq_len), pad_token_id, dtype=torch.long)
        attention = torch.zeros((n, seq_len), dtype=torch.long)
        word_start = torch.zeros((n, n_words), dtype=torch.long)
        word_end = torch.ones((n, n_words), dtype=torch.long)
        word_mask = torch.zeros((n, n_words), dtype=torch.bool)
        tags = torch.zeros((n, n_labels, n_words), dtype=torch.long)
        gold = []
        for i, f in enumerate(features):
            ids = f["input_ids"] or [pad_token_id]
            input_ids[i, : len(ids)] = torch.tensor(ids)
            attention[i, : len(ids)] = 1
            n_w = len(f["word_chars"])
            if n_w:
                ranges = torch.tensor(f["word_subwords"], dtype=torch.long).clamp(0, len(ids) - 1)
                word_start[i, :n_w] = ranges[:, 0]
                word_end[i, :n_w] = torch.maximum(ranges[:, 1], ranges[:, 0] + 1).clamp(max=len(ids))
                word_mask[i, :n_w] = True
            by_label: dict[int, list[tuple[int, int]]] = {}
            for b, e, lab in f["spans"]:
                by_label.setdefault(lab, []).append((b, e))
                gold.append((i, b, e - b, lab))
            for lab, spans in by_label.items():
                tags[i, lab, :n_w] = torch.tensor(crf_lib.spans_to_tags(crf_lib.resolve_overlaps(spans), n_w))
        return {
            "input_ids": input_ids, "attention_mask": attention,
            "word_start": word_start, "word_end": word_end, "word_mask": word_mask, "tags": tags,
            "gold_spans": torch.tensor(gold, dtype=torch.long).view(-1, 4),
            "word_chars": [f["word_chars"] for f in features],
            "example_index": [f["example_index"] for f in features],
        }

    # ---- build / gold / merge -------------------------------------------------------------------------
    def build(self, encoder: nn.Module, labels: Sequence[str], train_examples: Sequence[Any]) -> SpanNerModel:
        return SpanNerModel(encoder, labels, self)

    def gold(self, example: Any) -> list[Span]:
        """Sorted, de-duplicated [start, end, label]; a discontinuous entity counts by its hull."""
        return [list(s) for s in sorted({(e.start, e.end, e.label) for e in example.entities})]

    def merge(self, features: Sequence[dict[str, Any]], feature_predictions: Sequence[list[Span]],
              n_examples: int) -> list[list[Span]]:
        """Document-level spans, each taken from one designated window: the window owning its first
        character when that window holds the whole span, else the nearest later (then earlier) window
        that does. Overlapping windows thus never duplicate or contradict each other. Sorted."""
        windows: dict[int, list[int]] = {}
        for k, f in enumerate(features):
            windows.setdefault(f["example_index"], []).append(k)

        def holds(k: int, s: int, e: int) -> bool:
            chars = features[k]["word_chars"]
            return bool(chars) and chars[0][0] <= s and e <= chars[-1][1]

        def designated(siblings: list[int], s: int, e: int) -> int | None:
            owner = next(i for i, k in enumerate(siblings)
                         if features[k]["own_chars"][0] <= s < features[k]["own_chars"][1])
            order = siblings[owner:] + siblings[:owner][::-1]
            return next((k for k in order if holds(k, s, e)), None)

        merged: list[set[tuple[int, int, str]]] = [set() for _ in range(n_examples)]
        for k, (f, preds) in enumerate(zip(features, feature_predictions, strict=True)):
            siblings = windows[f["example_index"]]
            merged[f["example_index"]].update(
                (s, e, lab) for s, e, lab in preds if len(siblings) == 1 or designated(siblings, s, e) == k)
        return [[list(s) for s in sorted(spans)] for spans in merged]


class SpanNerModel(HeadModel):
    """Encoder + word pooling + BiLSTM + per-label BIOUL CRF + biaffine span scorer."""

    def __init__(self, encoder: nn.Module, labels: Sequence[str], spec: SpanNerSpec):
        super().__init__()
        if spec.pooling not in ("mean", "first"):
            raise ConfigError(f"span NER pooling must be 'mean' or 'first', not {spec.pooling!r}")
        self.encoder = encoder
        self.labels = list(labels)
        self.spec = spec
        hidden = spec.lstm_size
        n_labels = len(self.labels)
        self.dropout = nn.Dropout(spec.dropout)
        self.lstm_in = nn.Linear(encoder.config.hidden_size, hidden)
        self.lstm = nn.LSTM(hidden, hidden // 2, num_layers=spec.lstm_layers, batch_first=True,
                            bidirectional=True, dropout=spec.dropout if spec.lstm_layers > 1 else 0.0)
        self.lstm_out = nn.Linear(2 * (hidden // 2), hidden)
        self.tag_proj = nn.Linear(hidden, n_labels * len(crf_lib.TAGS))
        self.crf = crf_lib.bioul_crf()
        self.biaffine = BandBiaffine(hidden, n_labels, spec.biaffine_size, spec.max_width)

    def _words(self, batch: dict[str, Any]) -> torch.Tensor:
        """Contextual word vectors (N, W, H): pooled subwords, then a residual BiLSTM."""
        out = self.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        hidden = (out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]).float()
        start, end = batch["word_start"], batch["word_end"]
        index = lambda pos: pos[..., None].expand(-1, -1, hidden.shape[-1])  # noqa: E731
        if self.spec.pooling == "first":
            words = hidden.gather(1, index(start))
        else:
            cum = torch.cat([torch.zeros_like(hidden[:, :1]), hidden.cumsum(1)], dim=1)
            words = (cum.gather(1, index(end)) - cum.gather(1, index(start))) / (end - start)[..., None]
        words = self.dropout(nn.functional.gelu(self.lstm_in(words)))
        lengths = batch["word_mask"].sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(words, lengths, batch_first=True, enforce_sorted=False)
        context, _ = self.lstm(packed)
        context, _ = nn.utils.rnn.pad_packed_sequence(context, batch_first=True, total_length=words.shape[1])
        return words + self.dropout(self.lstm_out(context))

    def _scores(self, batch: dict[str, Any], with_nll: bool = False
                ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
        """(CRF NLL summed over windows and labels when `with_nll` else None, span logits (N, W, K, labels),
        valid (N, W, K)) with K = min(max_width, W). The tagger logits are computed once, and in training
        one forward algorithm serves both the NLL and the marginals."""
        words = self._words(batch)
        n, w, _ = words.shape
        n_labels = len(self.labels)
        band = min(self.spec.max_width, w)  # widths a span can have in this batch
        emissions = self.tag_proj(words).float().view(n, w, n_labels, 5).permute(0, 2, 1, 3).reshape(-1, w, 5)
        crf_mask = batch["word_mask"].clone()
        crf_mask[:, 0] = True  # pytorch-crf needs the first step of every sequence, even an empty one
        crf_mask = crf_mask.repeat_interleave(n_labels, dim=0)
        nll = None
        if with_nll:
            tags = batch["tags"].reshape(emissions.shape[:2])
            nll, marginals = crf_lib.crf_nll_and_log_marginals(self.crf, emissions, tags, crf_mask)
        else:
            with torch.no_grad():
                marginals = crf_lib.crf_log_marginals(self.crf, emissions, crf_mask)
        with torch.no_grad():  # the span scorer sees the tagger through detached logits (nlstruct's default)
            tagger = crf_lib.tagger_span_logits(marginals, band)
        tagger = tagger.view(n, n_labels, w, band).permute(0, 2, 3, 1)
        logits = tagger + self.biaffine(words, band)
        valid = band_valid(batch["word_mask"].sum(1), w, band)
        return nll, logits, valid

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        """loss = (CRF NLL summed over labels + BCE summed over candidate spans) / number of windows."""
        nll, logits, valid = self._scores(batch, with_nll=True)
        n = logits.shape[0]
        target = torch.zeros_like(logits)
        gold = batch["gold_spans"]
        gold = gold[gold[:, 2] < logits.shape[2]]
        target[gold[:, 0], gold[:, 1], gold[:, 2], gold[:, 3]] = 1.0
        bce = nn.functional.binary_cross_entropy_with_logits(logits[valid], target[valid], reduction="sum")
        loss = self.spec.tagger_weight * nll + self.spec.biaffine_weight * bce
        return {"loss": loss / n, "crf_nll": nll.detach() / n, "span_bce": bce.detach() / n}

    @torch.no_grad()
    def predict(self, batch: dict[str, Any]) -> list[list[Span]]:
        """Per window, sorted [start, end, label] character spans (document offsets)."""
        _, logits, valid = self._scores(batch)
        decoded = decode_spans(logits.sigmoid(), valid, self.spec.threshold)
        return [[[chars[b][0], chars[e][1], self.labels[lab]] for b, e, lab, _ in spans]
                for spans, chars in zip(decoded, batch["word_chars"], strict=True)]


def span_head(kind: str = "ner", **config: Any) -> SpanNerSpec:
    """The "span" head (config from biobench.heads.HEAD_SPECS)."""
    return SpanNerSpec(kind=kind, **config)


SPAN_NER = SpanNerSpec()
