"""IOB / CoNLL token files -> NerExample per sentence.

One token per line (`token<TAB>tag`, or space-separated columns: first = token, last = tag), blank line
between sentences, `-DOCSTART-` lines act as boundaries. The sentence text is the tokens joined by single
spaces; token and entity offsets are character offsets into that text.

Tag policy: `iob2` (every entity starts with B-X; with `strict` an I-X that does not continue an X entity is
an error, without it it starts a new entity as seqeval does) or `iob1` (I-X starts an entity unless it
continues one of type X; B-X only separates two adjacent X entities). Untyped `B`/`I` tags (BLURB) need
`default_type`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from biobench.errors import DataError
from biobench.tasks.readers.textio import numbered_lines
from biobench.tasks.schema import Entity, NerExample

OPTIONS: tuple[str, ...] = ("scheme", "strict", "default_type")  # the task-spec options read_iob reads


def _split_tag(tag: str, default_type: str | None, where: str) -> tuple[str, str | None]:
    if tag == "O":
        return "O", None
    prefix, _, etype = tag.partition("-")
    if prefix not in ("B", "I") or (_ and not etype):
        raise DataError(f"{where}: tag {tag!r} is not O, B-TYPE or I-TYPE; fix the tag column")
    if not etype:
        if default_type is None:
            raise DataError(
                f"{where}: untyped tag {tag!r}; set \"default_type\" in the task spec's options to name the entity type"
            )
        etype = default_type
    return prefix, etype


def entities_from_tags(
    tokens: Sequence[str],
    tags: Sequence[str],
    *,
    scheme: str = "iob2",
    strict: bool = True,
    default_type: str | None = None,
    where: Sequence[str] | None = None,
) -> tuple[str, tuple[tuple[int, int], ...], tuple[Entity, ...]]:
    """Join tokens into text and decode tags into char-span entities. `where[i]` names token i in errors."""
    offsets, pos = [], 0
    for tok in tokens:
        offsets.append((pos, pos + len(tok)))
        pos += len(tok) + 1
    entities = decode_tags(offsets, tags, scheme=scheme, strict=strict, default_type=default_type, where=where)
    return " ".join(tokens), tuple(offsets), entities


def decode_tags(
    offsets: Sequence[tuple[int, int]],
    tags: Sequence[str],
    *,
    scheme: str = "iob2",
    strict: bool = True,
    default_type: str | None = None,
    where: Sequence[str] | None = None,
) -> tuple[Entity, ...]:
    """Entities (character spans from the tokens' `offsets`) that a tag sequence describes."""
    if scheme not in ("iob1", "iob2"):
        raise DataError(f"IOB scheme {scheme!r} is not supported; use 'iob2' or 'iob1' in the task spec")
    entities: list[Entity] = []
    current: list | None = None  # [start_token, end_token, type]
    prev_tag = "O"
    for i, tag in enumerate(tags):
        loc = where[i] if where else f"token {i}"
        prefix, etype = _split_tag(tag, default_type, loc)
        continues = current is not None and current[2] == etype
        if prefix == "I" and not continues and scheme == "iob2" and strict:
            raise DataError(
                f"{loc}: tag {tag!r} follows {prev_tag!r}, which breaks IOB2 (an entity must start with B-{etype}); "
                "fix the tag, or set \"scheme\": \"iob1\" (or \"strict\": false) in the task spec's options"
            )
        if current is not None and (prefix != "I" or not continues):
            entities.append(Entity(offsets[current[0]][0], offsets[current[1]][1], current[2]))
            current = None
        if prefix == "I" and continues:
            assert current is not None  # continues: an entity is open
            current[1] = i
        elif prefix in ("B", "I"):
            current = [i, i, etype]
        prev_tag = tag
    if current is not None:
        entities.append(Entity(offsets[current[0]][0], offsets[current[1]][1], current[2]))
    return tuple(entities)


def flat_bio_entities(
    offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int, str]]
) -> tuple[Entity, ...]:
    """Gold as the English protocol's dataloader builds it for BRAT corpora (lindvalllab/BioClinical-ModernBERT
    src/dataloader/dataloader.py, COS.process_ann_only and SocialHistory.process_pair): one BIO tag per token,
    a token tagged by a span only when it lies wholly inside it (B- on the first such token, I- on the rest),
    spans applied in the given order so that a later span overwrites an earlier one; the entities are then what
    seqeval reads from that flat sequence (an I- that continues nothing starts an entity). Nested or overlapping
    mentions therefore leave only what survives the overwriting, and a mention covering no whole token is lost."""
    tags = ["O"] * len(offsets)
    for start, end, label in spans:
        inside = [i for i, (a, b) in enumerate(offsets) if a >= start and b <= end]
        for n, i in enumerate(inside):
            tags[i] = f"{'B' if n == 0 else 'I'}-{label}"
    return decode_tags(offsets, tags, strict=False)


def read_iob(
    path: str | Path,
    *,
    scheme: str = "iob2",
    strict: bool = True,
    default_type: str | None = None,
    id_prefix: str | None = None,
) -> list[NerExample]:
    """Sentences of an IOB/CoNLL file (gzip aware) as NerExamples with token offsets."""
    groups = read_iob_documents(path, scheme=scheme, strict=strict, default_type=default_type, id_prefix=id_prefix)
    return [ex for _, sentences in groups for ex in sentences]


def read_iob_documents(
    path: str | Path,
    *,
    scheme: str = "iob2",
    strict: bool = True,
    default_type: str | None = None,
    id_prefix: str | None = None,
) -> list[tuple[str, list[NerExample]]]:
    """The sentences of an IOB file grouped by document: (the `-DOCSTART- <id>` id, "" when the marker names
    none or before the first marker, its sentences). Sentence ids run over the whole file, as read_iob's."""
    path = Path(path)
    prefix = id_prefix or path.name.split(".")[0]
    groups: list[tuple[str, list[NerExample]]] = [("", [])]
    count = 0
    tokens: list[str] = []
    tags: list[str] = []
    where: list[str] = []
    ncols: int | None = None

    def flush() -> None:
        nonlocal count
        if tokens:
            text, offsets, ents = entities_from_tags(
                tokens, tags, scheme=scheme, strict=strict, default_type=default_type, where=where
            )
            groups[-1][1].append(NerExample(f"{prefix}-{count}", text, ents, offsets))
            count += 1
            tokens.clear()
            tags.clear()
            where.clear()

    for lineno, line in numbered_lines(path):
        if not line.strip():
            flush()
            continue
        if line.startswith("-DOCSTART-"):
            flush()
            marker = line.split()
            groups.append((marker[1] if len(marker) > 1 and marker[1] != "O" else "", []))
            continue
        cols = line.split("\t") if "\t" in line else line.split()
        if ncols is None:
            ncols = len(cols)
        if len(cols) < 2 or len(cols) != ncols or not cols[0]:
            raise DataError(
                f"{path}:{lineno}: expected {max(ncols, 2)} columns (token<TAB>tag), got {len(cols)}: {line!r}; "
                "fix or remove the line (sentences are separated by blank lines)"
            )
        tokens.append(cols[0])
        tags.append(cols[-1])
        where.append(f"{path}:{lineno}")
    flush()
    return [(doc, sentences) for doc, sentences in groups if sentences]
