"""TSV/CSV (with or without header), JSONL and JSON-array files -> rows for `rows.rows_to_examples`.

TSV is read without quote processing (biomedical sentences contain stray quotes); files may be gzipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from biobench.errors import DataError
from biobench.tasks.readers.rows import Row
from biobench.tasks.readers.textio import numbered_lines


def read_jsonl(path: str | Path) -> list[Row]:
    rows = []
    for lineno, line in numbered_lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{lineno}: not a JSON object ({err.msg}); one JSON object per line") from err
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        rows.append((f"{path}:{lineno}", obj))
    return rows


def read_json(path: str | Path) -> list[Row]:
    """A JSON array of objects, or an object holding one such array (e.g. {"data": [...]})."""
    from biobench.tasks.readers.textio import read_text

    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: invalid JSON ({err.msg})") from err
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        data = lists[0] if len(lists) == 1 else None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise DataError(f"{path}: expected a JSON array of objects (or an object holding one array)")
    return [(f"{path}[{i}]", row) for i, row in enumerate(data)]


def read_delimited(
    path: str | Path, *, delimiter: str = "\t", header: bool = True, fieldnames: Sequence[str] | None = None
) -> list[Row]:
    """Rows of a header-ed (or `fieldnames`-named) delimited file; a wrong field count names the line."""
    lines = [(n, line) for n, line in numbered_lines(path) if line.strip()]
    if header:
        if not lines:
            raise DataError(f"{path}: empty file (expected a header line)")
        names = lines[0][1].split(delimiter)
        lines = lines[1:]
    elif fieldnames:
        names = list(fieldnames)
    else:
        raise DataError(f"{path}: no header; give \"fieldnames\" in the task spec's options")
    rows = []
    for lineno, line in lines:
        cells = line.split(delimiter)
        if len(cells) != len(names):
            raise DataError(
                f"{path}:{lineno}: {len(cells)} fields but the header has {len(names)} ({', '.join(names)}); "
                f"fix the line (fields are separated by {delimiter!r})"
            )
        rows.append((f"{path}:{lineno}", dict(zip(names, cells, strict=True))))
    return rows


def read_table(path: str | Path, fmt: str, options: Mapping[str, Any]) -> list[Row]:
    """Dispatch on the spec's format name: jsonl | json | tsv | csv."""
    if fmt == "jsonl":
        return read_jsonl(path)
    if fmt == "json":
        return read_json(path)
    delimiter = "," if fmt == "csv" else "\t"
    return read_delimited(
        path, delimiter=delimiter, header=options.get("header", True), fieldnames=options.get("fieldnames")
    )
