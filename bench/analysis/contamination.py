"""Contamination: which task examples share a word n-gram with a pretraining corpus, and how long a run.

Why this design (a 10B-token corpus must be feasible): the task side is small (thousands of examples), so every
word n-gram of every example is hashed into one sorted array kept in memory; the corpus side is streamed once,
document by document through the one corpus reader `pretrain` uses (biobench.training.corpus.iter_documents:
text files, folders, JSONL(.gz), hub datasets), in batches of words whose n-gram hashes are computed with numpy
and looked up in the task array. Memory is the task side plus one batch, whatever the corpus size.

Both sides are normalised the same way before words are cut (`words`): Unicode NFKC, case folded, words are the
runs of letters and digits (`\\w+`), so punctuation, its spacing ("âgé , de" / "âgé, de") and line breaks never
change an n-gram. n = 13 by default, as the overlap analysis of the GPT-3 paper (Brown et al. 2020, appendix C).
An example is contaminated when any of its n-grams occurs in the corpus; its longest shared run is the longest
stretch of words that occurs contiguously in both (consecutive n-grams matched at consecutive corpus positions).
Examples shorter than n words cannot be checked and are counted as `short`.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from biobench.errors import ConfigError

WORD = re.compile(r"\w+")
DEFAULT_N = 13
BATCH_WORDS = 1 << 20  # words per numpy batch on the corpus side (~50 MB of working arrays)
MAX_IDS = 50  # contaminated example ids listed per split (the counts are exact)
_MULT = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier of the polynomial n-gram hash (wraps mod 2**64)


def words(text: str) -> list[str]:
    """The normalised words of a text: NFKC, case folded, runs of letters and digits."""
    return WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def _word_hashes(tokens: Sequence[str]) -> np.ndarray:
    # Python's str hash (salted per process; both sides are hashed in the same process), as unsigned 64-bit
    return np.fromiter(map(hash, tokens), dtype=np.int64, count=len(tokens)).view(np.uint64)


def ngram_hashes(word_hashes: np.ndarray, n: int) -> np.ndarray:
    """The hash of every n-gram (start positions 0 .. len - n) of a sequence of word hashes."""
    if len(word_hashes) < n:
        return np.empty(0, dtype=np.uint64)
    count = len(word_hashes) - n + 1
    out = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            out *= _MULT
            out += word_hashes[k:k + count]
    return out


@dataclass
class SplitCheck:
    examples: int = 0
    short: int = 0  # fewer than n words: not checkable
    contaminated: set[int] = field(default_factory=set)  # example indices
    longest: dict[int, int] = field(default_factory=dict)  # example index -> longest shared run (words)
    ids: list[str] = field(default_factory=list)  # example ids by index

    def to_dict(self) -> dict[str, Any]:
        found = sorted(self.contaminated)
        return {"examples": self.examples, "short": self.short, "contaminated": len(found),
                "share": len(found) / self.examples if self.examples else 0.0,
                "longest": max(self.longest.values(), default=0),
                "ids": [self.ids[i] for i in found[:MAX_IDS]]}


@dataclass
class TaskSide:
    """Every n-gram of the task examples: sorted hashes and, per hash, where it occurs (split key, example, start)."""

    n: int
    splits: dict[tuple[str, str], SplitCheck]
    hashes: np.ndarray  # sorted unique
    where: list[list[tuple[tuple[str, str], int, int]]]  # parallel to hashes


def task_side(texts: Mapping[tuple[str, str], Sequence[tuple[str, str]]], n: int = DEFAULT_N) -> TaskSide:
    """`texts`: (task, split) -> [(example id, text)]."""
    occurrences: dict[int, list[tuple[tuple[str, str], int, int]]] = {}
    splits: dict[tuple[str, str], SplitCheck] = {}
    for key, examples in texts.items():
        check = splits[key] = SplitCheck(examples=len(examples), ids=[str(i) for i, _ in examples])
        for index, (_, text) in enumerate(examples):
            tokens = words(text)
            if len(tokens) < n:
                check.short += 1
                continue
            for start, h in enumerate(ngram_hashes(_word_hashes(tokens), n).tolist()):
                occurrences.setdefault(h, []).append((key, index, start))
    ordered = sorted(occurrences)
    return TaskSide(n, splits, np.array(ordered, dtype=np.uint64), [occurrences[h] for h in ordered])


@dataclass
class CorpusScan:
    documents: int = 0
    words: int = 0
    chars: int = 0
    seconds: float = 0.0


class _Matcher:
    """Streams the corpus's word hashes in batches and records the task examples they hit."""

    def __init__(self, side: TaskSide):
        self.side = side
        self.offset = 0  # global corpus position of the current batch's first word
        # (split key, example, start) -> (last corpus position it matched, run of consecutive n-grams there)
        self.last: dict[tuple[tuple[str, str], int, int], tuple[int, int]] = {}

    def batch(self, hashes: np.ndarray, doc_ids: np.ndarray) -> None:
        n = self.side.n
        grams = ngram_hashes(hashes, n)
        if len(grams) and len(self.side.hashes):
            same_doc = doc_ids[: len(grams)] == doc_ids[n - 1:]
            slots = np.searchsorted(self.side.hashes, grams)
            slots[slots >= len(self.side.hashes)] = 0
            hits = np.nonzero((self.side.hashes[slots] == grams) & same_doc)[0]
            for position in hits.tolist():
                self._hit(self.offset + position, self.side.where[int(slots[position])])
        self.offset += len(hashes)

    def _hit(self, corpus_pos: int, occurrences: list[tuple[tuple[str, str], int, int]]) -> None:
        n = self.side.n
        for key, index, start in occurrences:
            before = self.last.get((key, index, start - 1))
            run = before[1] + 1 if before is not None and before[0] == corpus_pos - 1 else 1
            self.last[(key, index, start)] = (corpus_pos, run)
            check = self.side.splits[key]
            check.contaminated.add(index)
            check.longest[index] = max(check.longest.get(index, 0), run + n - 1)


def scan_corpus(side: TaskSide, documents: Iterable[str], batch_words: int = BATCH_WORDS,
                progress: Callable[[CorpusScan], None] | None = None) -> CorpusScan:
    """Stream `documents` once against the task side (filling its SplitChecks); returns what was read.
    Batches end at document boundaries, except a document longer than a batch, which is cut with n - 1 words of
    overlap so no n-gram is lost."""
    scan, matcher = CorpusScan(), _Matcher(side)
    started = time.perf_counter()
    pending: list[np.ndarray] = []
    pending_docs: list[np.ndarray] = []
    size = 0

    def flush() -> None:
        nonlocal size
        if pending:
            matcher.batch(np.concatenate(pending), np.concatenate(pending_docs))
            pending.clear()
            pending_docs.clear()
            size = 0

    for doc_index, text in enumerate(documents):
        scan.documents += 1
        scan.chars += len(text)
        for piece_start, piece in _pieces(words(text), batch_words, side.n):
            hashed = _word_hashes(piece)
            if piece_start:  # a long document's next piece repeats n - 1 words: positions continue from there
                flush()
                matcher.offset -= side.n - 1
            pending.append(hashed)
            pending_docs.append(np.full(len(hashed), doc_index, dtype=np.int64))
            size += len(hashed)
            scan.words += len(hashed) - (side.n - 1 if piece_start else 0)
            if size >= batch_words:
                flush()
        if progress is not None and scan.documents % 10000 == 0:
            scan.seconds = time.perf_counter() - started
            progress(scan)
    flush()
    scan.seconds = time.perf_counter() - started
    return scan


def _pieces(tokens: list[str], size: int, n: int) -> Iterator[tuple[int, list[str]]]:
    """A document's words in pieces of at most `size`, consecutive pieces sharing n - 1 words."""
    if len(tokens) <= size:
        yield 0, tokens
        return
    step = max(1, size - (n - 1))
    for start in range(0, len(tokens) - (n - 1), step):
        yield start, tokens[start:start + size]


def check(texts: Mapping[tuple[str, str], Sequence[tuple[str, str]]], documents: Iterable[str], n: int = DEFAULT_N,
          batch_words: int = BATCH_WORDS, progress: Callable[[CorpusScan], None] | None = None) -> dict[str, Any]:
    """The report: per task and split, examples, short, contaminated (count and share), the longest shared run
    (words) and the first contaminated example ids; plus what was read of the corpus."""
    if n < 1:

        raise ConfigError(f"--n {n}: give a positive n-gram length (13 is the GPT-3 paper's)")
    side = task_side(texts, n)
    scan = scan_corpus(side, documents, batch_words, progress)
    tasks: dict[str, dict[str, Any]] = {}
    for (task, split), found in side.splits.items():
        tasks.setdefault(task, {})[split] = found.to_dict()
    return {"n": n, "normalisation": "NFKC, case folded, words = runs of letters and digits",
            "corpus": {"documents": scan.documents, "words": scan.words, "chars": scan.chars,
                       "seconds": round(scan.seconds, 3)},
            "tasks": tasks}
