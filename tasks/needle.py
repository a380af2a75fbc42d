"""Synthetic needle-in-a-haystack data (paper Appendix I), with no model code.

A *fact* is one French medical sentence rendered from a template (tasks/templates/needle_fr.json: 8
templates, 1-4 slots, small lexicons). Four templates are Appendix I's example facts verbatim, with slots where
the paper varies values (drug: dose, drug, route, as its distractor changes them; vitals: the blood pressure;
diagnosis: disease and stage; symptom: symptom and onset); the other four (lab, procedure, allergy, duration)
are ours. Each template's `source` says which. Each *pair* shares one haystack
(consecutive sentences of a French biomedical corpus, cut to a target length) and one query (the fact with
the query's slot values):
- the positive inserts exactly the query's fact,
- the negative inserts the same template with EVERY slot changed to another value, as Appendix I's example
  does (200 mg morphine IV -> 500 mg tramadol oral), at the same character offset.
Pairs are spread round-robin over lengths x positions (start / middle / end), so labels, lengths and
positions are balanced, and split 70/15/15 by pair within each cell (both members of a pair share a split).

Counting: "1500 balanced positive/negative pairs" (Appendix I) is read as 1500 (query, document) inputs,
half positive and half negative, i.e. 750 positive/negative *pairs* in the sense above (`n_pairs=750`): an
input to the probe is itself a (query, document) pair, and 1500 inputs over 5 lengths x 3 positions give
100 per cell (50 pairs), 1050/225/225 after the 70/15/15 split.

Length rule: with a tokenizer (the default on the command line: the evaluated model's), a length L is the
whole probe input: query + special tokens (`reserve(query)`) + document (haystack with the fact) <= L
tokens, so a model with an L-token context never truncates, and a fact at "end" is always seen. With
whitespace words (only when asked), L counts the document's words; the query is not counted.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError, DataError
from biobench.runtime.files import atomic_write
from biobench.runtime.jsonfile import UnsafeJSONError, iter_jsonl

TEMPLATES_PATH = Path(__file__).parent / "templates" / "needle_fr.json"
POSITIONS: tuple[str, ...] = ("start", "middle", "end")
DEFAULT_LENGTHS: tuple[int, ...] = (512, 1024, 2048, 4096, 8192)
SPLITS: tuple[tuple[str, float], ...] = (("train", 0.70), ("dev", 0.15), ("test", 0.15))
MIDDLE_TOLERANCE = 0.10  # a sentence boundary within 10% of the middle, else the nearest word boundary

Counter = Callable[[str], int]


@dataclass(frozen=True)
class Template:
    """One fact template. `source`: "paper" (one of Appendix I's example facts, `paper_example` verbatim, which
    `paper_slots` render back) or "biobench" (written here to reach the paper's eight templates)."""

    id: str
    category: str
    text: str
    slots: dict[str, tuple[str, ...]]
    source: str = "biobench"
    paper_example: str | None = None
    paper_slots: dict[str, str] | None = None

    def render(self, values: dict[str, str]) -> str:
        return self.text.format(**values)


def load_templates(path: Path = TEMPLATES_PATH) -> list[Template]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    templates = [
        Template(t["id"], t["category"], t["text"], {k: tuple(v) for k, v in t["slots"].items()},
                 t.get("source", "biobench"), t.get("paper_example"), t.get("paper_slots"))
        for t in data["templates"]
    ]
    for t in templates:
        short = [k for k, v in t.slots.items() if len(set(v)) < 2]
        if short:
            raise DataError(f"{path}: template '{t.id}' slot '{short[0]}' needs at least 2 distinct values "
                            "(a negative changes every slot)")
    return templates


def word_count(text: str) -> int:
    return len(text.split())


def read_texts(path: str | Path) -> list[str]:
    """Texts of a file or folder: .jsonl / .jsonl.gz records' "text" field (E3C, pretraining corpora),
    .txt / .txt.gz non-empty lines. A folder is read recursively in sorted order; when it holds JSONL files,
    only those are read (a .txt beside them, like pretrain-fr's selected_ids.txt, is not corpus text)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"text path '{path}' does not exist")
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    files = [f for f in files if f.name.removesuffix(".gz").endswith((".jsonl", ".txt"))]
    if path.is_dir() and any(".jsonl" in f.name for f in files):
        files = [f for f in files if ".jsonl" in f.name]  # .txt beside JSONL records are id lists, notes...
    texts: list[str] = []
    for f in files:
        name = f.name.removesuffix(".gz")
        opener = gzip.open if f.name.endswith(".gz") else open
        with opener(f, "rt", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                if name.endswith(".txt"):
                    texts.append(line.strip())
                    continue
                try:
                    text = json.loads(line).get("text")
                except (json.JSONDecodeError, AttributeError) as err:
                    raise DataError(f"{f}:{lineno}: not a JSON object with a 'text' field ({err})") from err
                if isinstance(text, str) and text.strip():
                    texts.append(text)
    if not texts:
        raise DataError(f"no texts found in '{path}' (expected .jsonl[.gz] records with 'text' or .txt[.gz] lines)")
    return texts


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


def split_sentences(texts: Sequence[str]) -> list[str]:
    """Whitespace-normalised sentences, in corpus order."""
    out = []
    for text in texts:
        for sent in _SENTENCE_END.split(text):
            sent = " ".join(sent.split())
            if sent:
                out.append(sent)
    return out


class _Pool:
    """The corpus as a ring of sentences with cached lengths, to cut haystacks of a given size."""

    def __init__(self, sentences: list[str], count: Counter):
        self.sentences, self.count = sentences, count
        self._lengths: list[int | None] = [None] * len(sentences)

    def length(self, i: int) -> int:
        if self._lengths[i] is None:
            self._lengths[i] = self.count(self.sentences[i])
        return self._lengths[i]  # type: ignore[return-value]

    def require(self, needed: int, source: str, unit: str) -> None:
        total = 0
        for i in range(len(self.sentences)):
            total += self.length(i)
            if total >= needed:
                return
        raise DataError(
            f"haystack folder '{source}' holds only {total} {unit} of text, fewer than the longest length "
            f"{needed}; add more texts or lower --lengths"
        )

    def haystack(self, start: int, budget: int) -> list[str]:
        """Consecutive sentences from `start` (wrapping around) holding at most `budget` units."""
        sents: list[str] = []
        total, i = 0, start
        while total < budget:
            sents.append(self.sentences[i % len(self.sentences)])
            total += self.length(i % len(self.sentences))
            i += 1
        while sents and self.count(" ".join(sents)) > budget:
            sents = _trim_last(sents, budget, self.count)
        return sents


def _trim_last(sents: list[str], budget: int, count: Counter) -> list[str]:
    """Drop words from the last sentence (binary search) so the joined text fits the budget."""
    head, words = sents[:-1], sents[-1].split(" ")
    lo, hi = 0, len(words) - 1  # largest k with count(head + words[:k]) <= budget
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(" ".join(head + [" ".join(words[:mid])])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return head + ([" ".join(words[:lo])] if lo else [])


def _insertion_offset(sents: list[str], position: str) -> int:
    """Character offset in " ".join(sents) where the fact goes."""
    filler = " ".join(sents)
    if position == "start" or not filler:
        return 0
    if position == "end":
        return len(filler) + 1 if filler else 0
    middle = len(filler) / 2
    starts, offset = [], 0
    for s in sents:
        starts.append(offset)
        offset += len(s) + 1
    best = min(starts, key=lambda b: abs(b - middle))
    if abs(best - middle) <= MIDDLE_TOLERANCE * len(filler):
        return best
    spaces = [m.end() for m in re.finditer(" ", filler)] or [0]
    return min(spaces, key=lambda b: abs(b - middle))


def _insert(sents: list[str], offset: int, fact: str) -> str:
    filler = " ".join(sents)
    if not filler:
        return fact
    if offset >= len(filler):
        return filler + " " + fact
    return filler[:offset] + fact + " " + filler[offset:]


def _other_values(rng: random.Random, template: Template, slots: dict[str, str]) -> dict[str, str]:
    """The same slots with every one changed to another lexicon value (the negative shares no slot value)."""
    return {name: rng.choice([v for v in template.slots[name] if v != value]) for name, value in sorted(slots.items())}


def _assign_splits(cells: dict[tuple[int, str], list[int]], rng: random.Random) -> dict[int, str]:
    split_of: dict[int, str] = {}
    for pair_ids in cells.values():
        ids = list(pair_ids)
        rng.shuffle(ids)
        n_dev = n_test = round(SPLITS[2][1] * len(ids))  # dev and test first, so small cells still have both
        n_train = len(ids) - n_dev - n_test
        for k, pid in enumerate(ids):
            split_of[pid] = "train" if k < n_train else "dev" if k < n_train + n_dev else "test"
    return split_of


def generate(
    texts: Sequence[str],
    n_pairs: int = 750,
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    seed: int = 0,
    count: Counter | None = None,
    templates: list[Template] | None = None,
    source: str = "texts",
    reserve: Counter | None = None,
) -> list[dict[str, Any]]:
    """2 x n_pairs examples (n_pairs positive/negative pairs), balanced over lengths x positions;
    deterministic per seed. `reserve(query)`: the input tokens the query and the special tokens take (with a
    tokenizer), subtracted from each length so the whole input fits it (module docstring)."""
    if n_pairs < 1:
        raise ConfigError(f"{n_pairs} pairs: the needle set needs at least one positive/negative pair")
    if not lengths or any(length < 32 for length in lengths):
        raise ConfigError(f"--lengths {list(lengths)}: every length must be >= 32 tokens")
    unit = "words" if count is None else "tokens"
    count = count or word_count
    templates = templates or load_templates()
    pool = _Pool(split_sentences(texts), count)
    pool.require(max(lengths), source, unit)
    rng = random.Random(seed)
    cells = [(length, pos) for length in lengths for pos in POSITIONS]
    by_cell: dict[tuple[int, str], list[int]] = {c: [] for c in cells}
    rows: list[dict[str, Any]] = []
    for pid in range(n_pairs):
        length, position = cells[pid % len(cells)]
        by_cell[(length, position)].append(pid)
        template = templates[rng.randrange(len(templates))]
        query_slots = {name: rng.choice(values) for name, values in template.slots.items()}
        neg_slots = _other_values(rng, template, query_slots)
        query = template.render(query_slots)
        facts = {1: (query, query_slots), 0: (template.render(neg_slots), neg_slots)}
        reserved = reserve(query) if reserve else 0
        doc_budget = length - reserved  # the document's share of the input
        budget = doc_budget - max(count(f) for f, _ in facts.values()) - 1
        start = rng.randrange(len(pool.sentences))
        while True:
            if budget < 8:
                raise ConfigError(f"length {length} is too short for the fact '{query}' ({count(query)} {unit}, "
                                  f"{reserved} reserved for the query and special tokens); use longer --lengths")
            sents = pool.haystack(start, budget)
            offset = _insertion_offset(sents, position)
            docs = {label: _insert(sents, offset, facts[label][0]) for label in (1, 0)}
            over = max(count(d) for d in docs.values()) - doc_budget
            if over <= 0:
                break
            budget -= over  # subword merges at the fact's seams cost a token or two: cut the haystack more
        for label in (1, 0):
            fact, slots = facts[label]
            text = docs[label]
            n_tokens = count(text)
            rows.append({
                "id": f"needle-{pid:05d}-{'pos' if label else 'neg'}", "pair": pid,
                "text": text, "query": query, "label": label,
                "length": length, "position": position, "n_tokens": n_tokens, "length_unit": unit,
                "n_input_tokens": n_tokens + reserved if reserve else None,
                "template": template.id, "slots": slots, "query_slots": query_slots,
                "fact_start": offset, "fact_end": offset + len(fact),
            })
    split_of = _assign_splits(by_cell, rng)
    for row in rows:
        row["split"] = split_of[row["pair"]]
    return rows


def write_jsonl(rows: Sequence[dict[str, Any]], path: Path) -> None:
    atomic_write(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise DataError(f"needle data '{path}' not found; create it with `biobench analyze needle generate`")
    required = {"text", "query", "label", "length", "position", "split"}
    rows = []
    try:
        for lineno, row in iter_jsonl(path):
            missing = required - row.keys() if isinstance(row, dict) else required
            if missing:
                raise DataError(f"{path}:{lineno}: missing fields {sorted(missing)}")
            rows.append(row)
    except UnsafeJSONError as err:
        raise DataError(f"{err.source}: {err.reason}") from None
    return rows
