"""The English protocol's credentialed clinical sources, read from the files PhysioNet distributes.

Why here and not as a hand-made JSONL layout: a user who has the credentials has the PhysioNet files, and the
BioClinical-ModernBERT protocol (lindvalllab/BioClinical-ModernBERT, src/dataloader/dataloader.py) builds its
examples from exactly these files; reading them directly keeps our examples identical to the protocol's.

- phenotyping: `ACTdb102003.csv` (phenotype-annotations-mimic 1.20.03: one row per annotated note, a 0/1
  column per phenotype and `NONE`) joined on ROW_ID with MIMIC-III `NOTEEVENTS.csv(.gz)` (ROW_ID, TEXT).
  Rows flagged NONE together with a phenotype are inconsistent and dropped; NONE rows get no label.
- deid: PhysioNet `deidentifiedmedicaltext` 1.0 `id.text` (original notes) + `id.res` (the same notes with
  PHI replaced by `[**...**]` masks), records delimited by `START_OF_RECORD=P||||N||||` ... `||||END_OF_RECORD`.
  Tokens are whitespace tokens; the masked stretch of the original text becomes one entity whose type is
  derived from the mask's wording (age, date, location, name, other, phone_nb), as the protocol does.
- cos / social-history (open UW BioNLP BRAT corpora): tokens and gold as that dataloader builds them (a flat
  BIO sequence; see iob.flat_bio_entities).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from biobench.errors import DataError
from biobench.tasks.readers.iob import flat_bio_entities
from biobench.tasks.readers.rows import Row
from biobench.tasks.readers.textio import open_data, read_text
from biobench.tasks.schema import NerExample

PHENOTYPES: tuple[str, ...] = (
    "ADVANCED.CANCER", "ADVANCED.HEART.DISEASE", "ADVANCED.LUNG.DISEASE", "ALCOHOL.ABUSE",
    "CHRONIC.NEUROLOGICAL.DYSTROPHIES", "CHRONIC.PAIN.FIBROMYALGIA", "DEMENTIA", "DEPRESSION",
    "DEVELOPMENTAL.DELAY.RETARDATION", "NON.ADHERENCE", "OBESITY", "OTHER.SUBSTANCE.ABUSE",
    "SCHIZOPHRENIA.AND.OTHER.PSYCHIATRIC.DISORDERS", "UNSURE",
)
DEID_TYPES: tuple[str, ...] = ("age", "date", "location", "name", "other", "phone_nb")
# the task-spec options naming the second file of each format (read by tasks/loading.py, passed here)
PHENOTYPE_OPTIONS: tuple[str, ...] = ("notes",)
DEID_OPTIONS: tuple[str, ...] = ("masked",)


# ---------------------------------------------------------------------------------------------- phenotyping
def phenotype_rows(annotations: str | Path, notes: str | Path, phenotypes: Sequence[str] = PHENOTYPES) -> list[Row]:
    """Rows {id, text, labels} in annotation-file order (the order the protocol's random split sees)."""
    import pandas as pd

    def table(path: str | Path, **kwargs: object) -> pd.DataFrame:  # through the bounded regular-file opener
        with open_data(path) as fh:
            return pd.read_csv(fh, compression="gzip" if str(path).endswith(".gz") else None, **kwargs)

    for path in (annotations, notes):
        open_data(path).close()  # both checked (missing, a FIFO, too large) before the first is parsed
    ann = table(annotations)
    missing = [c for c in ("ROW_ID", "NONE", *phenotypes) if c not in ann.columns]
    if missing:
        raise DataError(
            f"{annotations}: missing column(s) {missing}; expected ACTdb102003.csv of PhysioNet's "
            "phenotype-annotations-mimic 1.20.03 (ROW_ID, one 0/1 column per phenotype, NONE)"
        )
    try:
        text = table(notes, usecols=["ROW_ID", "TEXT"])
    except ValueError as err:
        raise DataError(f"{notes}: expected MIMIC-III NOTEEVENTS.csv(.gz) with ROW_ID and TEXT columns ({err})") from err
    flags = ann[list(phenotypes)].fillna(0).astype(int)
    consistent = ~((ann["NONE"] == 1) & (flags.sum(axis=1) > 0))
    ann = ann[consistent].copy()
    ann["_labels"] = [
        () if none == 1 else tuple(p for p in phenotypes if row[p] == 1)
        for none, (_, row) in zip(ann["NONE"], flags[consistent].iterrows(), strict=True)
    ]
    merged = ann[["ROW_ID", "_labels"]].merge(text, on="ROW_ID", how="inner")  # inner join keeps annotation order
    if merged.empty:
        raise DataError(f"{annotations} and {notes}: no annotated ROW_ID has a note; is {notes} MIMIC-III NOTEEVENTS?")
    return [
        (f"{annotations}:ROW_ID={rid}", {"id": f"{rid}-{i}", "text": str(txt), "labels": list(labels)})
        for i, (rid, labels, txt) in enumerate(zip(merged["ROW_ID"], merged["_labels"], merged["TEXT"], strict=True))
    ]


# ---------------------------------------------------------------------------------------------- deid
_RECORD = re.compile(r"START_OF_RECORD=(\d+)\|\|\|\|(\d+)\|\|\|\|(.*?)\|\|\|\|END_OF_RECORD", re.DOTALL)
_MASK = re.compile(r"(\[\*\*.*?\*\*\])")
# (category, words any of which in the mask's text selects it), tried in this order; dates are checked after.
_MASK_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("name", ("name",)),
    ("other", ("e-mail address", "email address")),
    ("phone_nb", ("telephone/fax", "pager number")),
    ("age", ("age over",)),
    ("location", ("location", "hospital", "street address", "unit number")),
)
_DATE = re.compile(r"\d+|\d{1,2}-\d{1,2}|\d{4}-\d{2}-\d{2}")


def mask_category(mask: str) -> str | None:
    """The PHI type of a `[**...**]` mask, or None when its wording fits no type."""
    content = mask[3:-3].strip()
    lower = content.lower()
    for category, words in _MASK_WORDS:
        if any(w in lower for w in words):
            return category
    if _DATE.fullmatch(content) or "date range" in lower or "month/year" in lower:
        return "date"
    if not content or "company" in lower:
        return "other"
    return None


def _records(path: str | Path) -> dict[str, str]:
    records = {f"{p}-{n}": body for p, n, body in _RECORD.findall(read_text(path))}
    if not records:
        raise DataError(f"{path}: no 'START_OF_RECORD=...||||END_OF_RECORD' records; expected PhysioNet deid id.text / id.res")
    return records


def deid_rows(original: str | Path, masked: str | Path) -> list[Row]:
    """Rows {id, tokens, tags} (BIO), one per record, in file order."""
    texts, masks = _records(original), _records(masked)
    if set(texts) != set(masks):
        only = sorted(set(texts) ^ set(masks))[:3]
        raise DataError(f"{original} and {masked} hold different records (e.g. {only}); use id.text and id.res of one release")
    rows: list[Row] = []
    for rec_id, raw in texts.items():
        text = raw.strip().replace("\n", " ")
        segments = _MASK.split(masks[rec_id].strip().replace("\n", " "))
        tokens: list[str] = []
        tags: list[str] = []
        pointer = 0
        for i, segment in enumerate(segments):
            if i % 2 == 0:  # plain text, identical in both files
                words = segment.split()
                tokens += words
                tags += ["O"] * len(words)
                pointer += len(segment)
                continue
            category = mask_category(segment)
            if category is None:
                raise DataError(
                    f"{masked}: record {rec_id}: mask {segment!r} maps to no PHI type ({', '.join(DEID_TYPES)})"
                )
            after = segments[i + 1] if i + 1 < len(segments) else ""
            end = text.find(after, pointer) if after else len(text)
            end = len(text) if end == -1 else end
            words = text[pointer:end].split()
            tokens += words
            tags += [f"{'B' if j == 0 else 'I'}-{category}" for j in range(len(words))]
            pointer = end
        rows.append((f"{original}:record {rec_id}", {"id": rec_id, "tokens": tokens, "tags": tags}))
    return rows


# ---------------------------------------------------------------------------------------------- COS / social history
COS_TYPES: tuple[str, ...] = ("Attr", "Cos", "Loc", "Ref", "Val")
_COS_TOKEN = re.compile(r"\w+|[^\w\s]")
_WHITESPACE_TOKEN = re.compile(r"\S+")


def _protocol_spans(ann_text: str) -> list[tuple[str, int, int, str]]:
    """(label, start, end, text) of the continuous text-bound annotations of a .ann, in file order. Discontinuous
    (`0 5;8 12`) or malformed ones are skipped: the protocol's dataloader fails to parse their offsets as two
    integers and skips them too."""
    spans = []
    for line in ann_text.split("\n"):
        if not line.startswith("T") or "\t" not in line:
            continue
        _, rest = line.split("\t", 1)
        fields = rest.split(None, 3)
        if len(fields) < 3 or not (fields[1].isdigit() and fields[2].isdigit()):
            continue
        spans.append((fields[0], int(fields[1]), int(fields[2]), fields[3].strip() if len(fields) > 3 else ""))
    return spans


def cos_snippet_examples(folder: str | Path) -> list:
    """UW BioNLP's COS corpus (events-COS-corpus.zip, BRAT): one example per `Snippet` annotation, in .ann
    file-name order; its text is the snippet's text as the .ann gives it, its tokens words and single
    punctuation marks (the protocol's regex), its gold the flat BIO of the Cos/Ref/Loc/Attr/Val annotations
    inside the snippet (iob.flat_bio_entities), as lindvalllab/BioClinical-ModernBERT's COS.process_ann_only
    builds it. Only the .ann files are read, as there."""

    folder = Path(folder)
    anns = sorted(folder.rglob("*.ann")) if folder.is_dir() else []
    if not anns:
        raise DataError(f"{folder}: no .ann files (expected the BRAT files of UW BioNLP's events-COS-corpus.zip)")
    out = []
    for ann in anns:
        spans = _protocol_spans(read_text(ann))
        for n, (_, s_start, s_end, text) in enumerate(s for s in spans if s[0] == "Snippet"):
            inside = [(start - s_start, end - s_start, lab) for lab, start, end, _ in spans
                      if lab in COS_TYPES and s_start <= start and end <= s_end]
            tokens = tuple((m.start(), m.end()) for m in _COS_TOKEN.finditer(text))
            out.append(NerExample(f"{ann.stem}-{n}", text, flat_bio_entities(tokens, inside), tokens))
    return out


def social_history_examples(folder: str | Path) -> list:
    """UW BioNLP's SocialHistoryMTSamples (BRAT): one example per .txt with an .ann beside it (others skipped),
    in file-name order; whitespace tokens; gold = the flat BIO of every continuous annotation, applied in order
    of start offset (file order among equal starts), as lindvalllab/BioClinical-ModernBERT's
    SocialHistory.process_pair builds it (iob.flat_bio_entities)."""

    folder = Path(folder)
    texts = sorted(folder.rglob("*.txt")) if folder.is_dir() else []
    pairs = [(txt, txt.with_suffix(".ann")) for txt in texts if txt.with_suffix(".ann").exists()]
    if not pairs:
        raise DataError(f"{folder}: no .txt files with an .ann beside them (expected the BRAT files of UW BioNLP's "
                        "SocialHistoryMTSamples.zip)")
    out = []
    for txt, ann in pairs:
        text = read_text(txt)
        spans = sorted(_protocol_spans(read_text(ann)), key=lambda s: s[1])
        tokens = tuple((m.start(), m.end()) for m in _WHITESPACE_TOKEN.finditer(text))
        ents = flat_bio_entities(tokens, [(start, end, lab) for lab, start, end, _ in spans])
        out.append(NerExample(txt.relative_to(folder).with_suffix("").as_posix(), text, ents, tokens))
    return out
