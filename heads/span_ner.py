"""The paper's span-NER head as the authors' harness runs it (Rian-T/tabib `src/tabib/models/bert_span_ner.py`:
`BERTSpanNER`, `BIOULTagger`, `BiaffineSpanScorer`, `_prepare_spans`, `_training_forward`, `predict`).

encoder sub-words -> units (`unit` "subword": the sub-words themselves, special tokens excluded; "word": the
mean of each word's sub-words) -> gated residual BiLSTM (`GatedBiLSTM`) ->
  (a) one BIOUL CRF over O + 4 tags per class (classes = "O" + the entity labels; biobench.heads.crf) whose
      log-marginals give each candidate span a per-class log-score min(no hole, begins, ends);
  (b) a biaffine begin x end scorer per class (biobench.heads.biaffine);
span logit = tagger_weight x (a) + biaffine_weight x (b), for spans of up to `max_width` units.
Loss: BCE with logits over the *sampled* spans only, against a one-hot over the classes (O is a class):
mean over classes, then over the batch's sampled spans; no CRF likelihood term (the tagger learns through
its marginals). Sampling, per window: every gold span, then the first `negatives` non-gold spans in
(start, end) order, shuffled together (fixed generator), at most `max_spans` kept. Decoding: per candidate
span, its best non-O class if its sigmoid exceeds `threshold`; overlaps within a label removed.
Dev selection (`sampled_span_f1`, Rian-T/tabib `compute_metrics`): micro-F1 of the argmax class over each window's
sampled spans, a positive counting when its argmax is its gold class, a prediction when it is not O.

Differences from Rian-T/tabib, all in docs/PROTOCOL.md: documents longer than `max_length` are read in overlapping
windows merged back by character offsets (Rian-T/tabib truncates); gold spans wider than `max_width` are not trained
(Rian-T/tabib trains them but can never predict them); an entity maps to the units its characters touch.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from biobench.errors import ConfigError, DataError
from biobench.heads.base import HeadModel
from biobench.heads.biaffine import BandBiaffine, band_valid, decode_spans
from biobench.heads.config import SpanConfig
from biobench.heads.crf import BioulCrf, span_log_scores
from biobench.heads.words import (
    Window,
    align_words,
    entity_word_span,
    plan_windows,
    segment_words,
    special_tokens,
    subword_units,
    tokenize_documents,
)
from biobench.metrics import f1_from_totals
from torch import nn

log = logging.getLogger(__name__)

Span = list  # [start, end, label] in the predictions-file format
SELECTION_METRIC = "sampled_span_f1"


class WindowSpans(list):
    """One window's predicted [start, end, label] spans, plus (tp, fp, fn) of the argmax class over its
    sampled spans (the selection tally)."""

    tally: tuple[int, int, int] = (0, 0, 0)


def sample_spans(gold: Sequence[tuple[int, int, int]], n_units: int, max_width: int, negatives: int,
                 max_spans: int, rng: random.Random) -> list[tuple[int, int, int]]:
    """Rian-T/tabib `_prepare_spans` + `SpanNERDataCollator`: the gold (first, last, class) spans, then the first
    `negatives` other spans (first, last, 0) of width <= max_width in (first, last) order, shuffled
    together, the first `max_spans` kept."""
    taken = {(b, e) for b, e, _ in gold}
    others = ((b, e, 0) for b in range(n_units) for e in range(b, min(b + max_width, n_units)) if (b, e) not in taken)
    spans = [*gold, *itertools.islice(others, negatives)]
    rng.shuffle(spans)
    return spans[:max_spans]


@dataclass(frozen=True)
class SpanNerSpec:
    """HeadSpec for kind "ner"; `config` holds the head's knobs (biobench.heads.config.SpanConfig)."""

    kind: str = "ner"
    config: SpanConfig = field(default_factory=SpanConfig)
    overlap: float = 0.25  # share of a window's subwords repeated as context in the next window
    sampled: bool = True  # draw the training / selection spans (hf-token borrows featurize without them)
    # training batches uniformly shuffled, not length-grouped (biobench.eval.finetune._train_loader): Rian-T/tabib trains the
    # span head with the HF Trainer's default RandomSampler (no `group_by_length` in its configs)
    train_order: str = "random"
    name: str = "span NER"  # in featurize's warning: hf-token borrows featurize, and a --quick run has no span head

    # ---- featurize: examples -> windows (pure python, once per task) ---------------------------------
    def featurize(self, examples: Sequence[Any], tokenizer: Any, max_length: int,
                  labels: Sequence[str]) -> list[dict[str, Any]]:
        """One feature per window (>= 1 per example, in example order). Keys: example_index, input_ids,
        unit_subwords (subword range of each unit in input_ids), unit_chars (character range of each
        unit), own_chars (the document characters whose predictions this window keeps), spans (gold unit
        spans (first, last, label index) inside the window), samples (sampled (first, last, class) spans,
        class 0 = O), n_labels."""
        prefix, suffix = special_tokens(tokenizer)
        budget = max_length - len(prefix) - len(suffix)
        if budget < 1:
            raise ConfigError(f"max_length {max_length} leaves no room for text after the tokenizer's "
                              f"{len(prefix) + len(suffix)} special tokens; use a larger --max-length (e.g. 128)")
        label_index = {label: i for i, label in enumerate(labels)}
        rng = random.Random(0)  # one shuffle per task, like Rian-T/tabib's (its samples are drawn once, at tokenisation)
        features: list[dict[str, Any]] = []
        n_entities = inexact = unplaced = 0
        encoded = tokenize_documents(tokenizer, [ex.text for ex in examples])
        for index, (ex, (ids, offsets, content)) in enumerate(zip(examples, encoded, strict=True)):
            if self.config.unit == "subword":
                units, ranges = subword_units(ex.text, offsets, content)
            else:
                units = segment_words(ex.text, ex.tokens)
                ranges = align_words(units, offsets, content, budget)
            starts, ends = [u[0] for u in units], [u[1] for u in units]
            spans = set()
            for ent in ex.entities:
                if not 0 <= ent.start < ent.end <= len(ex.text):
                    raise DataError(f"document {ex.id!r}: entity {ent.label} at characters [{ent.start}, "
                                    f"{ent.end}) does not lie inside its text ({len(ex.text)} characters); "
                                    "fix the annotation offsets")
                if ent.label not in label_index:
                    continue
                n_entities += 1
                placed = entity_word_span(units, starts, ends, ent.start, ent.end)
                if placed is None:
                    unplaced += 1
                    continue
                inexact += not placed[2]
                spans.add((placed[0], placed[1], label_index[ent.label]))
            windows = plan_windows(ranges, budget, int(budget * self.overlap))
            for i, win in enumerate(windows):
                feature = _window_feature(index, ex.text, ids, units, ranges, spans, win, first=i == 0,
                                          last=i == len(windows) - 1, prefix=prefix, suffix=suffix,
                                          n_labels=len(labels))
                if self.sampled:
                    gold = [(b, e, lab + 1) for b, e, lab in feature["spans"] if e - b < self.config.max_width]
                    feature["samples"] = sample_spans(gold, len(feature["unit_chars"]), self.config.max_width,
                                                      self.config.negatives, self.config.max_spans, rng)
                features.append(feature)
        if inexact or unplaced:
            log.warning("%s: %d of %d entities do not start/end on %s boundaries (learned and scored as "
                        "the covering %ss) and %d cover none (ignored in training)", self.name,
                        inexact, n_entities, self.config.unit, self.config.unit, unplaced)
        return features

    # ---- collate: features -> tensors ----------------------------------------------------------------
    def collate(self, features: Sequence[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
        """Batch keys: input_ids, attention_mask (N, S); unit_start, unit_end (N, W) subword ranges; unit_mask
        (N, W) real units; samples (M, 4) rows (feature, first unit, width - 1, class); plus python lists
        unit_chars and example_index. W >= 1 even for a window without units, whose dummy first unit points
        at input_ids[0]."""
        n = len(features)
        seq_len = max(max(len(f["input_ids"]) for f in features), 1)
        n_units = max(max(len(f["unit_chars"]) for f in features), 1)
        input_ids = torch.full((n, seq_len), pad_token_id, dtype=torch.long)
        attention = torch.zeros((n, seq_len), dtype=torch.long)
        unit_start = torch.zeros((n, n_units), dtype=torch.long)
        unit_end = torch.ones((n, n_units), dtype=torch.long)
        unit_mask = torch.zeros((n, n_units), dtype=torch.bool)
        samples: list[tuple[int, int, int, int]] = []
        for i, f in enumerate(features):
            ids = f["input_ids"] or [pad_token_id]
            input_ids[i, : len(ids)] = torch.tensor(ids)
            attention[i, : len(ids)] = 1
            n_u = len(f["unit_chars"])
            if n_u:
                ranges = torch.tensor(f["unit_subwords"], dtype=torch.long).clamp(0, len(ids) - 1)
                unit_start[i, :n_u] = ranges[:, 0]
                unit_end[i, :n_u] = torch.maximum(ranges[:, 1], ranges[:, 0] + 1).clamp(max=len(ids))
                unit_mask[i, :n_u] = True
            samples.extend((i, b, e - b, cls) for b, e, cls in f["samples"])
        return {
            "input_ids": input_ids, "attention_mask": attention,
            "unit_start": unit_start, "unit_end": unit_end, "unit_mask": unit_mask,
            "samples": torch.tensor(samples, dtype=torch.long).view(-1, 4),
            "unit_chars": [f["unit_chars"] for f in features],
            "example_index": [f["example_index"] for f in features],
            "edges": features[0].get("edges", (False, False)),
        }

    # ---- build / gold / merge / selection ---------------------------------------------------------------
    def build(self, encoder: nn.Module, labels: Sequence[str], train_examples: Sequence[Any]) -> SpanNerModel:
        return SpanNerModel(encoder, labels, self.config)

    def gold(self, example: Any) -> list[Span]:
        """Sorted, de-duplicated [start, end, label]; a discontinuous entity counts by its hull."""
        return [list(s) for s in sorted({(e.start, e.end, e.label) for e in example.entities})]

    def selection_metrics(self, feature_predictions: Sequence[WindowSpans]) -> dict[str, float]:
        """Rian-T/tabib's `compute_metrics` `f1` over every window's sampled spans (SELECTION_METRIC)."""
        totals = np.array([getattr(p, "tally", (0, 0, 0)) for p in feature_predictions] or [(0, 0, 0)], dtype=float)
        return {SELECTION_METRIC: float(f1_from_totals(totals, "micro"))}

    def merge(self, features: Sequence[dict[str, Any]], feature_predictions: Sequence[list[Span]],
              n_examples: int) -> list[list[Span]]:
        """Document-level spans, each taken from one designated window: the window owning its first
        character when that window holds the whole span, else the nearest later (then earlier) window
        that does. Overlapping windows thus never duplicate or contradict each other. Sorted."""
        windows: dict[int, list[int]] = {}
        for k, f in enumerate(features):
            windows.setdefault(f["example_index"], []).append(k)

        def holds(k: int, s: int, e: int) -> bool:
            chars = features[k]["unit_chars"]
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


def _window_feature(index: int, text: str, ids: list[int], units: list[tuple[int, int]],
                    ranges: list[tuple[int, int]], spans: set, win: Window, *, first: bool, last: bool,
                    prefix: list[int], suffix: list[int], n_labels: int) -> dict[str, Any]:
    lo = ranges[win.start][0] if win.end > win.start else 0
    hi = max((ranges[u][1] for u in range(win.start, win.end)), default=lo)
    shift = len(prefix) - lo
    return {
        "example_index": index,
        "input_ids": prefix + ids[lo:hi] + suffix,
        "unit_subwords": [(s + shift, e + shift) for s, e in ranges[win.start:win.end]],
        "unit_chars": list(units[win.start:win.end]),
        "own_chars": (0 if first else units[win.own_start][0], len(text) + 1 if last else units[win.own_end][0]),
        "spans": sorted((b - win.start, e - win.start, lab) for b, e, lab in spans if win.start <= b and e < win.end),
        "n_labels": n_labels,
        "edges": (bool(prefix), bool(suffix)),
    }


def reverse_index(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(N, W) index reversing each row's first `lengths` positions and leaving its padding in place."""
    t = torch.arange(width, device=lengths.device)[None, :]
    return torch.where(t < lengths[:, None], lengths[:, None] - 1 - t, t)


def bidirectional_lstm(lstm: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor, reverse: torch.Tensor) -> torch.Tensor:
    """What `lstm` (one bidirectional layer) returns for the right-padded rows of `x` packed by `lengths` and
    padded back with zeros, without a PackedSequence: on CPU, backpropagating through a packed LSTM whose rows
    differ in length costs one full-size zero-filled gradient per time step (O(W^2): 13.7 of the 17 s of a
    2 x 1,024-subword training step, bench/perf/span_head_speed.py). Here each direction is one unpacked run:
    the forward one over the rows as they are (its output at a real position never sees the padding after
    it), the reverse one over each row reversed within its length, so both start at the row's own ends and
    the result is the same function of the same weights. Padding positions are zeroed, as unpacking does."""
    names = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
    n, width, _ = x.shape
    zeros = x.new_zeros(1, n, lstm.hidden_size)
    index = reverse[..., None].expand(-1, -1, x.shape[-1])

    def run(inputs: torch.Tensor, suffix: str) -> torch.Tensor:
        weights = [getattr(lstm, name + suffix) for name in names]
        return torch.lstm(inputs, (zeros, zeros), weights, True, 1, 0.0, lstm.training, False, True)[0]

    ahead = run(x, "")
    behind = run(x.gather(1, index), "_reverse").gather(1, index[..., : lstm.hidden_size])
    real = torch.arange(width, device=x.device)[None, :] < lengths[:, None]
    return torch.cat([ahead, behind], dim=-1) * real[..., None]


class GatedBiLSTM(nn.Module):
    """Rian-T/tabib `BiLSTMContextualizer`: input projected to `size` (GELU) when it differs, then `layers` one-layer
    BiLSTMs, each added through a sigmoid gate and a LayerNorm: x = LN(x (1 - g) + dropout(lstm(x)) g)."""

    def __init__(self, input_size: int, size: int, layers: int, dropout: float):
        super().__init__()
        self.project = nn.Linear(input_size, size) if input_size != size else None
        self.lstms = nn.ModuleList(nn.LSTM(size, size // 2, batch_first=True, bidirectional=True)
                                   for _ in range(layers))
        self.gates = nn.ModuleList(nn.Linear(size, 1) for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(size) for _ in range(layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.project is not None:
            x = nn.functional.gelu(self.project(x))
        lengths = mask.sum(1).clamp(min=1)
        reverse = reverse_index(lengths, x.shape[1])
        for lstm, gate, norm in zip(self.lstms, self.gates, self.norms, strict=True):
            # nn.ModuleList iterates as nn.Module; its items here are the nn.LSTM layers built above
            out = self.dropout(bidirectional_lstm(lstm, x, lengths, reverse))  # type: ignore[arg-type]
            g = torch.sigmoid(gate(out))
            x = norm(x * (1 - g) + out * g)
        return x


class SpanNerModel(HeadModel):
    """Encoder + units + gated BiLSTM + one BIOUL CRF (marginals) + biaffine span scorer."""

    def __init__(self, encoder: nn.Module, labels: Sequence[str], config: SpanConfig):
        super().__init__()
        self.encoder = encoder
        self.labels = list(labels)
        self.config = config
        self.n_classes = len(self.labels) + 1  # class 0 = O
        size = config.lstm_size
        encoder_config: Any = encoder.config  # a transformers config (torch types it Tensor | Module)
        self.contextualizer = GatedBiLSTM(encoder_config.hidden_size, size, config.lstm_layers, config.dropout)
        self.tagger_dropout = nn.Dropout(config.dropout)
        self.tag_proj = nn.Linear(size, 1 + 4 * self.n_classes)
        self.crf = BioulCrf(self.n_classes)
        self.biaffine_dropout = nn.Dropout(config.dropout)
        self.biaffine = BandBiaffine(size, self.n_classes, config.biaffine_size)

    def _units(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(sequence vectors (N, lead + W + tail, H), their mask, lead): the mean of each unit's sub-words (one
        sub-word for unit "subword"), between the window's first special token ([CLS]: lead = 1) and its
        last ([SEP], right after each window's last unit: tail = 1) when the tokenizer has them. Why: T's
        BiLSTM and CRF run over every position of `input_ids`, special tokens included; spans never start or
        end on them (Rian-T/tabib `_inference_forward` spans from 1 to len - 2), so `span_logits` cuts them off after."""
        out = self.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        hidden = (out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]).float()
        start, end = batch["unit_start"], batch["unit_end"]
        index = lambda pos: pos[..., None].expand(-1, -1, hidden.shape[-1])  # noqa: E731
        cum = torch.cat([torch.zeros_like(hidden[:, :1]), hidden.cumsum(1)], dim=1)
        units = (cum.gather(1, index(end)) - cum.gather(1, index(start))) / (end - start)[..., None]
        lead, tail = (int(e) for e in batch.get("edges", (False, False)))
        n, w, _ = units.shape
        counts = batch["unit_mask"].sum(1)
        if lead or tail:
            rows = torch.arange(n, device=units.device)
            units = torch.cat([hidden[:, :lead], units, units.new_zeros(n, tail, units.shape[-1])], dim=1)
            if tail:
                units = units.index_put((rows, counts + lead), hidden[rows, batch["attention_mask"].sum(1) - 1])
        mask = torch.arange(w + lead + tail, device=units.device)[None] < (counts + lead + tail)[:, None]
        return units, mask, lead

    def span_logits(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """(span logits (N, W, K, classes), valid (N, W, K)) with K = min(max_width, W)."""
        vectors, seq_mask, lead = self._units(batch)
        return self.score_units(vectors, seq_mask, batch["unit_mask"], lead)

    def score_units(self, units: torch.Tensor, seq_mask: torch.Tensor, unit_mask: torch.Tensor | None = None,
                    lead: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """`span_logits` from the sequence vectors (N, lead + W + tail, H) and their mask: the BiLSTM and the
        CRF run over the whole sequence ([CLS] and [SEP] included, `_units`), spans are kept over the W text
        units (`unit_mask`, (N, W); default: every position is a text unit, lead 0)."""
        unit_mask = seq_mask if unit_mask is None else unit_mask
        units = self.contextualizer(units, seq_mask)
        w = unit_mask.shape[1]
        band = min(self.config.max_width, w)
        crf_mask = seq_mask.clone()
        crf_mask[:, 0] = True  # the recursion starts at step 0 of every sequence, even an empty one
        emissions = self.tag_proj(self.tagger_dropout(units))
        tagger = span_log_scores(self.crf.log_marginals(emissions, crf_mask), self.n_classes, band)
        biaffine = self.biaffine(self.biaffine_dropout(units), band)
        logits = self.config.tagger_weight * tagger + self.config.biaffine_weight * biaffine
        return logits[:, lead:lead + w], band_valid(unit_mask.sum(1), w, band)

    @staticmethod
    def sampled(logits: torch.Tensor, samples: torch.Tensor) -> torch.Tensor:
        """The logits (M, classes) of the sampled spans."""
        return logits[samples[:, 0], samples[:, 1], samples[:, 2]]

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        """BCE with logits on a one-hot class target over the sampled spans: mean over classes, then over
        spans (Rian-T/tabib `_training_forward`)."""
        logits, _ = self.span_logits(batch)
        samples = batch["samples"]
        chosen = self.sampled(logits, samples)
        target = nn.functional.one_hot(samples[:, 3], self.n_classes).float()
        per_span = nn.functional.binary_cross_entropy_with_logits(chosen, target, reduction="none").mean(-1)
        return {"loss": per_span.sum() / max(len(samples), 1)}

    @torch.no_grad()
    def predict(self, batch: dict[str, Any]) -> list[WindowSpans]:
        """Per window, sorted [start, end, label] character spans (document offsets), with the window's
        selection tally."""
        logits, valid = self.span_logits(batch)
        decoded = decode_spans(logits.sigmoid(), valid, self.config.threshold, batch["unit_chars"])
        samples = batch["samples"]
        argmax, gold = self.sampled(logits, samples).argmax(-1), samples[:, 3]
        out = []
        for i, (spans, chars) in enumerate(zip(decoded, batch["unit_chars"], strict=True)):
            window = WindowSpans([chars[b][0], chars[e][1], self.labels[lab]] for b, e, lab, _ in spans)
            mine = samples[:, 0] == i
            hit = argmax[mine] == gold[mine]
            window.tally = (int(((argmax[mine] > 0) & hit).sum()), int(((argmax[mine] > 0) & ~hit).sum()),
                            int(((gold[mine] > 0) & ~hit).sum()))
            out.append(window)
        return out


def span_head(kind: str, config: SpanConfig) -> SpanNerSpec:
    """The "span" / "span-words" head (typed config: biobench.heads.config.SpanConfig)."""
    return SpanNerSpec(kind=kind, config=config)
