"""MedDialog-FR (Women) as the authors' French harness builds it, from the original release's two files.

The release (tabib `src/tabib/data/meddialog.py`, `MedDialogWomenAdapter.load_splits`) holds two tab-separated
files: `multilabel_annotation/dataset_multilabel_meddialog_22labels.csv` (columns `id` like `hm3_67574_q`,
`split` train/dev/test, `labels` a Python-style list literal of UMLS CUIs) and
`post-editing/meddialog-fr-women_post-editing.csv` (columns `id`, `post-edited`, `machine_translation`; the
answer of question `X_q` is `X_a`). A sample is "Question: {q}\\n\\nRéponse: {a}" (or "Question: {q}" when there
is no answer) from the post-edited text; a labelled row with no labels or no question text is dropped, as the
harness drops it. What comes out has the columns of the authors' hub copy `rntc/tabib-meddialog-fr` (`text`,
`labels_raw`, splits train/val/test, rows in file order), so both routes give the same samples.

Why a parser of our own for the list literal: it is text from a file a stranger can hand us, and the harness's
`ast.literal_eval` builds whatever Python literal it is given (a 100,000-deep nest is a RecursionError, a long
one a large object). `parse_label_list` accepts exactly a flat list of quoted strings, bounded in length and
item count, and refuses anything else with the file and line.
"""

from __future__ import annotations

import csv
import io
import re

from biobench.errors import DataError

LABELS_FILE = "dataset_multilabel_meddialog_22labels.csv"
TEXTS_FILE = "meddialog-fr-women_post-editing.csv"
SPLIT_NAMES = {"train": "train", "dev": "val", "val": "val", "test": "test"}  # the release's -> the hub copy's
HUB_SPLITS = ("train", "val", "test")
MAX_LITERAL_CHARS = 4096
MAX_LABELS = 64
MAX_LABEL_CHARS = 64
MAX_FILE_BYTES = 64 * 2**20
MAX_BAD_ROWS_SHOWN = 10

_ITEM = rf"""'[^'\\\n\r]{{1,{MAX_LABEL_CHARS}}}'|"[^"\\\n\r]{{1,{MAX_LABEL_CHARS}}}\""""
_LIST = re.compile(rf"\[\s*(?:(?:{_ITEM})\s*(?:,\s*(?:{_ITEM})\s*)*,?\s*)?\]")
_ITEMS = re.compile(_ITEM)


def _shown(value: str) -> str:
    return repr(value[:60] + ("…" if len(value) > 60 else ""))


def parse_label_list(value: str) -> tuple[str, ...]:
    """A flat list literal of quoted label strings (`['C0011847', "C0020538"]`, `[]`) -> its labels; no code is
    evaluated. ValueError (its reason, for one line naming the file and line) for anything else: another
    literal, a nested list, an escape sequence, more than MAX_LITERAL_CHARS characters or MAX_LABELS labels."""
    text = value.strip()
    if len(text) > MAX_LITERAL_CHARS:
        raise ValueError(f"a label list of {len(text):,} characters, over the {MAX_LITERAL_CHARS:,} allowed")
    if not _LIST.fullmatch(text):
        raise ValueError(f"{_shown(text)} is not a flat list of quoted labels like ['C0011847', 'C0020538'] "
                         f"(at most {MAX_LABEL_CHARS} characters each, no escapes, no nesting)")
    labels = tuple(item[1:-1].strip() for item in _ITEMS.findall(text))
    if len(labels) > MAX_LABELS:
        raise ValueError(f"{len(labels)} labels, over the {MAX_LABELS} allowed")
    if any(not label for label in labels):
        raise ValueError(f"{_shown(text)} holds a blank label")
    return labels


def _records(data: bytes, where: str, needed: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """(line number, row) of a tab-separated file with a header holding `needed` columns."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"{where}: not UTF-8 text ({err.reason} at byte {err.start}); give the file as released") from None
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="\t")
    missing = [c for c in needed if c not in (reader.fieldnames or ())]
    if missing:
        raise DataError(f"{where}: no column {', '.join(map(repr, missing))} in its header "
                        f"({', '.join(reader.fieldnames or ()) or 'empty'}); is it the release's {LABELS_FILE} / {TEXTS_FILE}?")
    out, start = [], 2
    try:
        for row in reader:
            out.append((start, {k: v for k, v in row.items() if isinstance(k, str)}))
            start = reader.line_num + 1
    except csv.Error as err:
        raise DataError(f"{where}:{start}: not a tab-separated row ({err})") from None
    return out


def release_splits(labels_csv: bytes, texts_csv: bytes, labels_where: str, texts_where: str,
                   log=lambda _: None) -> dict[str, list[dict]]:
    """The hub copy's rows per split (`train`/`val`/`test` -> [{"text", "labels_raw"}]) from the release's two
    files. Bad rows (a label list that is not a flat list of quoted labels, an unknown split) are one DataError
    with one line per row (the first MAX_BAD_ROWS_SHOWN), naming file:line; nothing is written then."""
    texts: dict[str, str] = {}
    for _, row in _records(texts_csv, texts_where, ("id",)):
        # the harness: row.get("post-edited", row.get("machine_translation", "")): the machine translation only
        # where the file has no post-edited column
        texts[row.get("id") or ""] = (row.get("post-edited", row.get("machine_translation")) or "").strip()
    splits: dict[str, list[dict]] = {name: [] for name in HUB_SPLITS}
    bad: list[str] = []
    dropped = {"no label": 0, "no question text": 0}
    for lineno, row in _records(labels_csv, labels_where, ("id", "split", "labels")):
        where = f"{labels_where}:{lineno}"
        split = SPLIT_NAMES.get((row.get("split") or "").strip())
        if split is None:
            bad.append(f"{where}: split {_shown(row.get('split') or '')} is not train, dev or test")
            continue
        try:
            labels = parse_label_list(row.get("labels") or "")
        except ValueError as err:
            bad.append(f"{where}: labels: {err}")
            continue
        if not labels:
            dropped["no label"] += 1
            continue
        q_id = row.get("id") or ""
        question = texts.get(q_id, "")
        if not question:
            dropped["no question text"] += 1
            continue
        answer = texts.get(f"{q_id.removesuffix('_q')}_a", "")
        text = f"Question: {question}\n\nRéponse: {answer}" if answer else f"Question: {question}"
        splits[split].append({"text": text, "labels_raw": list(labels)})
    if bad:
        more = f"\n… and {len(bad) - MAX_BAD_ROWS_SHOWN} more bad rows" if len(bad) > MAX_BAD_ROWS_SHOWN else ""
        raise DataError("\n".join(bad[:MAX_BAD_ROWS_SHOWN]) + more + "\nnothing was installed; give the files as released")
    for reason, n in dropped.items():
        if n:
            log(f"  dropped {n} labelled row(s) with {reason} (as the harness does)")
    return splits

