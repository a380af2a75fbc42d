"""BRAT standoff (`doc.txt` + `doc.ann`) from a folder or straight from a .tar.gz archive (no extraction).

Handles discontinuous mentions (`T1<TAB>label 0 5;8 12<TAB>text`), nested/overlapping mentions, and notes
(`#1<TAB>AnnotatorNotes T1<TAB>C0011849`) attached as `Entity.code` for the chosen note type. Every span is
checked: offsets inside the text, and the text at the offsets equal to the annotation's text (whitespace
normalised, fragments joined by a space as BRAT writes them).
"""

from __future__ import annotations

import logging
import re
import tarfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from biobench.errors import DataError
from biobench.tasks.readers.textio import MAX_TEXT_BYTES, open_data, read_text
from biobench.tasks.schema import Entity, NerExample

log = logging.getLogger(__name__)
_WS = re.compile(r"\s+")
CODE_UNITS = ("token", "note")
# the task-spec options the `brat` format reads (read_brat, ner_examples), and `brat_codes` (+ document_codes)
OPTIONS: tuple[str, ...] = ("note_type", "missing_ann", "verify_spans", "entity_labels", "sample_unit")
SAMPLE_UNITS = ("document", "line")
CODE_OPTIONS: tuple[str, ...] = (*(o for o in OPTIONS if o != "sample_unit"), "code_pattern", "code_unit")


@dataclass(frozen=True)
class BratDocument:
    id: str
    text: str
    entities: tuple[Entity, ...]
    source: str


def _norm(s: str) -> str:
    return _WS.sub(" ", s)


def _raw_pairs(path: Path, member_prefix: str = "") -> Iterator[tuple[str, str, str | None, str]]:
    """(doc id, text, ann content or None, where) for every .txt under a folder or inside a tar.gz."""
    if path.is_dir():
        for txt in sorted(path.rglob("*.txt")):
            rel = txt.relative_to(path).with_suffix("").as_posix()
            if member_prefix and not rel.startswith(member_prefix):
                continue
            ann = txt.with_suffix(".ann")
            yield (
                rel[len(member_prefix):],
                read_text(txt),
                read_text(ann) if ann.exists() else None,
                str(txt.with_suffix("")),
            )
        return
    files: dict[str, bytes] = {}
    with open_data(path) as raw:  # a regular file (never a FIFO or /dev/zero), opened once: checked, then read
        try:
            tar = tarfile.open(fileobj=raw, mode="r:*")
        except (tarfile.TarError, EOFError, OSError):
            raise DataError(f"{path}: not a folder or a .tar.gz archive of BRAT .txt/.ann files") from None
        with tar:
            total = 0  # the members kept are held in memory: bounded as one text file is (a .tar.gz may be a bomb)
            for member in tar:
                name = member.name.removeprefix("./")
                if member.isfile() and name.startswith(member_prefix) and name.endswith((".txt", ".ann")):
                    total += member.size
                    if total > MAX_TEXT_BYTES:
                        raise DataError(f"{path}: its .txt/.ann members expand to over {MAX_TEXT_BYTES >> 20} MiB; "
                                        "refused (split the archive)")
                    member_file = tar.extractfile(member)
                    assert member_file is not None  # a regular file (isfile above)
                    files[name] = member_file.read(member.size)
    for name in sorted(n for n in files if n.endswith(".txt")):
        stem = name[:-4]
        annotations = files.get(stem + ".ann")
        yield (
            stem[len(member_prefix):],
            files[name].decode("utf-8"),
            annotations.decode("utf-8") if annotations is not None else None,
            f"{path}!{stem}",
        )


def parse_ann(
    ann: str, text: str, where: str, note_type: str = "AnnotatorNotes", verify_spans: bool = True
) -> tuple[Entity, ...]:
    """Entities of one .ann file checked against its text; notes of `note_type` become Entity.code.

    verify_spans=False skips the check that the text at the offsets equals the annotation's text (offsets
    must still lie inside the text): for corpora whose mentions were projected from another language
    (FRASIMED) and whose tasks use only the codes, as the authors' harness reads them."""
    spans: dict[str, tuple[str, tuple[tuple[int, int], ...]]] = {}
    notes: dict[str, list[str]] = {}
    for lineno, line in enumerate(ann.split("\n"), start=1):
        line = line.rstrip("\r")
        loc = f"{where}.ann:{lineno}"
        if line.startswith("T"):
            parts = line.split("\t")
            if len(parts) < 3:
                raise DataError(f"{loc}: expected 'Tn<TAB>LABEL START END<TAB>TEXT', got {line!r}")
            label, _, offs = parts[1].partition(" ")
            try:
                frags = tuple(
                    (int(a), int(b)) for a, b in (f.split() for f in offs.split(";"))
                )
            except ValueError as err:
                raise DataError(f"{loc}: bad offsets {offs!r} (expected 'START END[;START END...]')") from err
            for s, e in frags:
                if not 0 <= s < e <= len(text):
                    raise DataError(
                        f"{loc}: offsets {s}-{e} are outside the text ({len(text)} characters in {where}.txt); "
                        "the .ann does not belong to this .txt, or the .txt was re-encoded/edited"
                    )
            expected = parts[2]
            actual = " ".join(text[s:e] for s, e in frags)
            if verify_spans and _norm(actual) != _norm(expected):
                raise DataError(
                    f"{loc}: span {offs} reads {actual!r} in {where}.txt but the annotation says {expected!r}; "
                    "offsets are shifted (check line endings / encoding) or the .ann belongs to another .txt"
                )
            spans[parts[0]] = (label, frags)
        elif line.startswith("#"):
            parts = line.split("\t")
            head = parts[1].split() if len(parts) > 1 else []
            if len(parts) >= 3 and len(head) == 2 and head[0] == note_type:
                notes.setdefault(head[1], []).append(parts[2].strip())
    entities = []
    for tid, (label, frags) in spans.items():
        code = " ".join(notes[tid]) if tid in notes else None
        start, end = min(s for s, _ in frags), max(e for _, e in frags)
        entities.append(Entity(start, end, label, frags if len(frags) > 1 else (), code))
    return tuple(sorted(entities, key=lambda e: (e.start, e.end, e.label, e.fragments)))


@lru_cache(maxsize=8)  # fracco-30 and fracco-100 read the same archive
def read_brat(
    path: str | Path,
    *,
    member_prefix: str = "",
    note_type: str = "AnnotatorNotes",
    missing_ann: str = "error",
    verify_spans: bool = True,
) -> tuple[BratDocument, ...]:
    """All documents under `path` (folder or .tar.gz; only members under `member_prefix`), cached per process.

    missing_ann: "error" (default), "skip" (drop the document) or "empty" (a document with no entities).
    """
    path = Path(path)
    docs = []
    for doc_id, text, ann, where in _raw_pairs(path, member_prefix):
        if ann is None:
            if missing_ann == "skip":
                continue
            if missing_ann != "empty":
                raise DataError(
                    f"{where}.txt has no {Path(where).name}.ann beside it; add an (empty) .ann file, or set "
                    "\"missing_ann\": \"skip\" or \"empty\" in the task spec's options"
                )
            ann = ""
        docs.append(BratDocument(doc_id, text, parse_ann(ann, text, where, note_type, verify_spans), where))
    if not docs:
        raise DataError(f"{path}: no BRAT .txt files found" + (f" under {member_prefix!r}" if member_prefix else ""))
    return tuple(docs)


def ner_examples(docs: Iterable[BratDocument], entity_labels: Iterable[str] | None = None,
                 sample_unit: str = "document") -> list[NerExample]:
    """NerExamples (raw text, no tokens), optionally keeping only some entity labels.

    sample_unit "document" (default): one example per document. "line": one per non-blank line (split_lines),
    as the authors' harness reads QUAERO EMEA (Rian-T/tabib `src/tabib/data/brat.py` `_split_by_lines`, used by
    `EMEAAdapter` with `chunk_size=-1`)."""
    if sample_unit not in SAMPLE_UNITS:
        raise DataError(f"sample_unit {sample_unit!r} is not one of {', '.join(SAMPLE_UNITS)}; fix the task spec's "
                        "options")
    keep = set(entity_labels) if entity_labels else None
    out: list[NerExample] = []
    for d in docs:
        kept = tuple(e for e in d.entities if keep is None or e.label in keep)
        if sample_unit == "document":
            out.append(NerExample(d.id, d.text, kept))
            continue
        lines, crossing = split_lines(d.id, d.text, kept)
        if crossing:
            log.warning("%s: %d entities cross a line boundary and belong to no line sample (dropped, as the "
                        "authors' harness drops them)", d.source, crossing)
        out += lines
    return out


def split_lines(doc_id: str, text: str, entities: Sequence[Entity]) -> tuple[list[NerExample], int]:
    """(one example per non-blank line, the number of entities that lie in no single line).

    Why: the authors' harness trains and scores QUAERO EMEA line by line (Rian-T/tabib `_split_by_lines`): lines split at
    newline characters only, blank or whitespace-only lines skipped, an entity kept in the line holding it whole (offsets
    made line-relative), an entity crossing a line boundary kept nowhere. A line's example id is
    `<doc>_line<k>@<c>`: k the line's index among all lines (blank ones included, as Rian-T/tabib numbers them), c the
    document character offset of its first character, so a line's spans map back to the document."""
    bounds, start = [], 0
    for k, line in enumerate(text.split("\n")):
        bounds.append((k, start, start + len(line)))
        start += len(line) + 1
    out, placed = [], 0
    for k, lo, hi in bounds:
        if not text[lo:hi].strip():
            continue
        inside = tuple(replace(e, start=e.start - lo, end=e.end - lo,
                               fragments=tuple((a - lo, b - lo) for a, b in e.fragments))
                       for e in entities if lo <= e.start and e.end <= hi)
        placed += len(inside)
        out.append(NerExample(f"{doc_id}_line{k}@{lo}", text[lo:hi], inside))
    return out, len(entities) - placed


def document_codes(
    doc: BratDocument,
    entity_labels: Iterable[str] | None = None,
    code_pattern: str | None = None,
    code_unit: str = "token",
) -> tuple[str, ...]:
    """The sorted set of codes noted on a document's entities.

    code_unit "token" (default): each note split on whitespace, every piece a code (FRASIMED's single codes,
    FRACCO's separate morphology/topography codes). "note": the whole note is one code (FRACCO's
    `expression_CIM` expressions such as `C77.9 8000/1`, and `;`-joined multi-site notes kept whole, as the
    French harness's FRACCODocumentICDAdapter takes the annotation's `code` unsplit)."""
    if code_unit not in CODE_UNITS:
        raise DataError(f"{doc.source}: code_unit {code_unit!r} is not one of {', '.join(CODE_UNITS)}")
    keep = set(entity_labels) if entity_labels else None
    pattern = re.compile(code_pattern) if code_pattern else None
    codes = {
        c
        for e in doc.entities
        if e.code and (keep is None or e.label in keep)
        for c in (e.code.split() if code_unit == "token" else [e.code])
        if pattern is None or pattern.fullmatch(c)
    }
    return tuple(sorted(codes))


_NO_SPACE = re.compile(r"\s+")


def _mention_text(s: str) -> str:
    """A mention's text compared across tokenisations: no whitespace, LaTeX-style quotes as plain quotes."""
    return _NO_SPACE.sub("", s).replace("``", '"').replace("''", '"')


def type_from_standoff(
    groups: Iterable[tuple[str, list[NerExample]]], docs: Iterable[BratDocument], where: str
) -> list[NerExample]:
    """Untyped token-level sentences typed from a standoff of the same documents.

    Why: typed JNLPBA's train split exists here only as Pyysalo's standoff (spyysalo/jnlpba, made from the
    original GENIA BIO files, abstract text re-fetched from PubMed) while its dev/test are GENIA-tokenised IOB;
    BLURB's untyped train file keeps the GENIA tokens and sentences. The standoff's mentions were made from
    those same BIO entities, so in every abstract they are the BIO entities in order: the k-th entity of an
    abstract gets the type of its k-th mention (by start offset), after checking that both read the same text.
    A document id met again is the standoff's `<id>-2`, `<id>-3`... (one MEDLINE id occurs twice in GENIA)."""
    by_id = {d.id.rsplit("/", 1)[-1]: d for d in docs}
    seen: dict[str, int] = {}
    out: list[NerExample] = []
    for doc_id, sentences in groups:
        seen[doc_id] = seen.get(doc_id, 0) + 1
        name = doc_id if seen[doc_id] == 1 else f"{doc_id}-{seen[doc_id]}"
        if name not in by_id:
            raise DataError(f"{where}: document {name!r} has no standoff .txt/.ann to take its entity types from")
        mentions = sorted(by_id[name].entities, key=lambda e: (e.start, -e.end))
        ents = [(ex, e) for ex in sentences for e in ex.entities]
        if len(ents) != len(mentions):
            raise DataError(f"{where}: document {name!r} has {len(ents)} entities but its standoff "
                            f"({by_id[name].source}) has {len(mentions)} mentions; they are not the same annotation")
        typed: dict[str, list[Entity]] = {ex.id: [] for ex in sentences}
        doc_text = by_id[name].text
        for (ex, e), m in zip(ents, mentions, strict=True):
            if _mention_text(ex.text[e.start:e.end]) != _mention_text(doc_text[m.start:m.end]):
                raise DataError(f"{where}: document {name!r}: entity {ex.text[e.start:e.end]!r} is matched with the "
                                f"standoff mention {doc_text[m.start:m.end]!r}; they are not the same annotation")
            typed[ex.id].append(Entity(e.start, e.end, m.label))
        out += [NerExample(ex.id, ex.text, tuple(typed[ex.id]), ex.tokens) for ex in sentences]
    return out
