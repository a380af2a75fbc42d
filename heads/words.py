"""Units for the span-NER heads: words or sub-words, unit <-> subword alignment, windows, entity <-> unit spans.

A unit is what a span is made of: a sub-word token (the `span` head, as the authors' harness scores spans)
or a word (`span-words`, and the words `hf-token` tags), so predictions map back to exact character
offsets. Subwords come from the fast tokenizer run on the raw text with offsets (not on
pre-split words), which works for every tokenizer family (WordPiece, byte-level BPE with or without
add_prefix_space, SentencePiece) and lets the encoder see the text with its real spacing.
Everything here is pure python: it runs once per task in `featurize`.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from biobench.errors import ConfigError

# \w+ keeps words whole, every other non-space character is its own word (so "BRCA1-associated" is 3 words).
WORD_PATTERN = re.compile(r"\w+|[^\w\s]")

Range = tuple[int, int]  # (start, end), end-exclusive


def segment_words(text: str, tokens: Sequence[Range] | None = None) -> list[Range]:
    """Character ranges of the words of `text`: the source's own tokens when it has them (IOB data),
    else a regex segmentation of the raw text (BRAT documents). Empty tokens are dropped."""
    if tokens is not None:
        return [(int(s), int(e)) for s, e in tokens if e > s]
    return [m.span() for m in WORD_PATTERN.finditer(text)]


def special_tokens(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The special ids the tokenizer puts before and after a single sequence (e.g. [CLS] / [SEP]),
    read off a real encoding so it works whatever post-processor the tokenizer has."""
    enc = tokenizer("x", return_special_tokens_mask=True)
    ids, special = enc["input_ids"], enc["special_tokens_mask"]
    content = [i for i, s in enumerate(special) if not s]
    if not content:
        return [], []
    return list(ids[: content[0]]), list(ids[content[-1] + 1:])


def tokenize_documents(tokenizer: Any, texts: Sequence[str]) -> list[tuple[list[int], list[Range], list[bool]]]:
    """Subword ids, character offsets and a "has content" flag per subword for each text (no special
    tokens). Subwords that decode to whitespace only (a byte-level BPE "Ġ" whose offsets fall on the
    next character) and empty-offset subwords carry no word content and are not aligned to words."""
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError(
            f"span NER needs a fast tokenizer (character offsets); {type(tokenizer).__name__} is a slow one: "
            "load it with AutoTokenizer.from_pretrained(..., use_fast=True) or provide a tokenizer.json")
    enc = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    blank: dict[int, bool] = {}
    out = []
    for ids, offsets in zip(enc["input_ids"], enc["offset_mapping"], strict=True):
        for i in ids:
            if i not in blank:
                blank[i] = not tokenizer.decode([i]).strip()
        content = [e > s and not blank[i] for i, (s, e) in zip(ids, offsets, strict=True)]
        out.append((list(ids), [(int(s), int(e)) for s, e in offsets], content))
    return out


def subword_units(text: str, offsets: Sequence[Range], content: Sequence[bool]) -> tuple[list[Range], list[Range]]:
    """Sub-words as units: (character range, subword range) of every subword that carries text (special
    tokens are never in `offsets`; a blank SentencePiece "▁" or empty-offset subword is no unit). A character
    range is trimmed of surrounding whitespace (a byte-level "Ġword" whose offsets include the space), as T's
    `_normalize_char_offsets` trims predicted spans."""
    units: list[Range] = []
    ranges: list[Range] = []
    for i, ((start, end), has_text) in enumerate(zip(offsets, content, strict=True)):
        while has_text and start < end and text[start].isspace():
            start += 1
        while has_text and end > start and text[end - 1].isspace():
            end -= 1
        if has_text and end > start:
            units.append((start, end))
            ranges.append((i, i + 1))
    return units, ranges


def align_words(words: Sequence[Range], offsets: Sequence[Range], content: Sequence[bool],
                max_subwords: int) -> list[Range]:
    """For each word, the range of subword indices that overlap it (at most `max_subwords` of them).
    A subword spanning two words belongs to both; a word no subword covers (a character the tokenizer
    drops) borrows the nearest following subword so it still has a representation."""
    n = len(offsets)
    ranges: list[Range] = []
    j = 0
    for ws, we in words:
        while j < n and offsets[j][1] <= ws:
            j += 1
        first = last = -1
        k = j
        while k < n and offsets[k][0] < we:
            if content[k] and offsets[k][1] > ws:
                first = k if first < 0 else first
                last = k
            k += 1
        if first < 0:
            anchor = min(j, n - 1)
            ranges.append((anchor, anchor + 1) if n else (0, 0))
        else:
            ranges.append((first, min(last + 1, first + max_subwords)))
    return ranges


@dataclass(frozen=True)
class Window:
    """Words [start, end) fed to the encoder together; the window *owns* words [own_start, own_end):
    a prediction is kept from the window that owns its first word, so overlapping windows never
    produce duplicates and each word is judged with context on both sides where possible."""

    start: int
    end: int
    own_start: int
    own_end: int


def plan_windows(ranges: Sequence[Range], budget: int, overlap: int) -> list[Window]:
    """Split words into windows of at most `budget` subwords, consecutive windows sharing about
    `overlap` subwords of context. A text that fits is one window; an empty text is one empty window."""
    n = len(ranges)
    if n == 0:
        return [Window(0, 0, 0, 0)]
    spans: list[Range] = []
    a = 0
    while True:
        b = a + 1
        while b < n and ranges[b][1] - ranges[a][0] <= budget:
            b += 1
        spans.append((a, b))
        if b >= n:
            break
        context_from = ranges[b][0] - overlap
        a = next(c for c in range(a + 1, b + 1) if ranges[c][0] >= context_from)
    bounds = [0] + [(nxt[0] + cur[1]) // 2 for cur, nxt in itertools.pairwise(spans)] + [n]
    return [Window(s, e, bounds[i], bounds[i + 1]) for i, (s, e) in enumerate(spans)]


def entity_word_span(words: Sequence[Range], word_starts: Sequence[int], word_ends: Sequence[int],
                     start: int, end: int) -> tuple[int, int, bool] | None:
    """(first word, last word inclusive, exact) for the character span [start, end): the words it
    touches, and whether their outer character bounds are exactly the span. None when it touches
    no word (whitespace only or outside the text)."""
    first = bisect.bisect_right(word_ends, start)
    last = bisect.bisect_left(word_starts, end) - 1
    if first > last:
        return None
    return first, last, words[first][0] == start and words[last][1] == end
