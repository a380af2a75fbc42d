"""Rows (dicts from TSV/JSONL files or Hugging Face datasets) -> normalised examples, by task kind.

`columns` maps our field names (id, text, label, labels, tokens, tags) to the source's column names.
Multilabel label cells may be a list, a `label_sep`-separated string, or BLUE-style flags
(`0_1,1_0,...`: index_flag pairs, names from `label_names`). `group_pattern` merges consecutive rows whose
ids share the pattern's first group into one example (HoC: sentences -> abstract, labels unioned).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from biobench.errors import DataError
from biobench.tasks.readers.iob import entities_from_tags
from biobench.tasks.schema import ClassificationExample, MultilabelExample, NerExample, RelationExample

Row = tuple[str, Mapping[str, Any]]  # (where, row)
DEFAULT_COLUMNS = {"id": "id", "text": "text", "label": "label", "labels": "labels", "tokens": "tokens", "tags": "tags"}
# the task-spec options rows_to_examples reads (every row-based format and hub source)
OPTIONS: tuple[str, ...] = ("columns", "label_names", "labels_format", "label_sep", "group_pattern", "scheme", "strict",
                            "default_type")


def _get(row: Mapping[str, Any], column: str, where: str) -> Any:
    if column not in row:
        raise DataError(
            f"{where}: no column {column!r} (columns: {', '.join(map(str, row))}); "
            "map it in the task spec's options.columns"
        )
    return row[column]


def _name(value: Any, names: Sequence[str] | None, where: str) -> str:
    if names is not None and not isinstance(value, str):
        try:
            return names[int(value)]
        except (IndexError, ValueError) as err:
            raise DataError(f"{where}: label index {value!r} is outside label_names ({len(names)} names)") from err
    return str(value)


def _multilabels(value: Any, options: Mapping[str, Any], where: str) -> tuple[str, ...]:
    names = options.get("label_names")
    encoding = options.get("labels_format", "list")
    if encoding == "flags":
        out = []
        for item in str(value).split(","):
            idx, _, flag = item.strip().partition("_")
            if flag not in ("0", "1") or not idx.isdigit() or not names or int(idx) >= len(names):
                raise DataError(f"{where}: label flag {item!r} is not INDEX_0/INDEX_1 with INDEX < {len(names or [])}")
            if flag == "1":
                out.append(names[int(idx)])
        return tuple(out)
    if isinstance(value, str):
        value = [v for v in value.split(options.get("label_sep", ",")) if v.strip()]
    return tuple(_name(v, names, where) if not isinstance(v, str) else v.strip() for v in value or ())


def rows_to_examples(rows: Sequence[Row], kind: str, split: str, options: Mapping[str, Any]) -> list:
    """Convert rows to the schema's examples of `kind`; ids default to `<split>-<n>`."""
    cols = {**DEFAULT_COLUMNS, **options.get("columns", {})}
    names = options.get("label_names")
    out: list = []
    for n, (where, row) in enumerate(rows):
        ex_id = str(row[cols["id"]]) if cols["id"] in row else f"{split}-{n}"
        if kind == "ner":
            tokens = [str(t) for t in _get(row, cols["tokens"], where)]
            tags = [_name(t, names, where) for t in _get(row, cols["tags"], where)]
            if len(tokens) != len(tags):
                raise DataError(f"{where}: {len(tokens)} tokens but {len(tags)} tags")
            text, offsets, ents = entities_from_tags(
                tokens,
                tags,
                scheme=options.get("scheme", "iob2"),
                strict=options.get("strict", True),
                default_type=options.get("default_type"),
                where=[f"{where} token {i}" for i in range(len(tokens))],
            )
            out.append(NerExample(ex_id, text, ents, offsets))
            continue
        text = _get(row, cols["text"], where)
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{where}: empty text in column {cols['text']!r}")
        if kind == "multilabel":
            out.append(MultilabelExample(ex_id, text, _multilabels(_get(row, cols["labels"], where), options, where)))
        else:
            label = _name(_get(row, cols["label"], where), names, where).strip()
            cls = RelationExample if kind == "relation" else ClassificationExample
            out.append(cls(ex_id, text, label))
    if options.get("group_pattern") and kind == "multilabel":
        out = _group(out, options["group_pattern"])
    return out


def _group(examples: list[MultilabelExample], pattern: str) -> list[MultilabelExample]:
    rx = re.compile(pattern)
    groups: dict[str, list[MultilabelExample]] = {}
    for ex in examples:
        m = rx.match(ex.id)
        groups.setdefault(m.group(1) if m else ex.id, []).append(ex)
    return [
        MultilabelExample(key, " ".join(e.text for e in members), tuple(sorted({lab for e in members for lab in e.labels})))
        for key, members in groups.items()
    ]
