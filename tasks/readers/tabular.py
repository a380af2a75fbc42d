"""TSV/CSV (with or without header), JSONL and JSON-array files -> rows for `rows.rows_to_examples`.

TSV is read without quote processing (biomedical sentences contain stray quotes) unless the spec says
`"quoting": "csv"` (files written by Python's csv.writer, e.g. BLUE's ChemProt); files may be gzipped.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from biobench.errors import DataError
from biobench.runtime.jsonfile import MAX_DEPTH, UnsafeJSONError, iter_jsonl, too_deep
from biobench.tasks.readers import textio
from biobench.tasks.readers.rows import Row
from biobench.tasks.readers.textio import check_data_file, numbered_lines, read_text


def read_jsonl(path: str | Path) -> list[Row]:
    rows: list[Row] = []
    bound = textio.MAX_TEXT_BYTES  # the bound of a task file read whole (the rows are held whole too)
    check_data_file(path, bound)  # never a FIFO (iter_jsonl would wait on it) nor an endless file
    try:
        for lineno, obj in iter_jsonl(path, max_bytes=bound):
            if not isinstance(obj, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
            rows.append((f"{path}:{lineno}", obj))
    except UnsafeJSONError as err:
        if err.source == str(path):  # the file as a whole (over the bound, a .gz that expands past it)
            raise DataError(f"{path}: {err.reason}") from None
        raise DataError(f"{err.source}: not a JSON object ({err.reason}); one JSON object per line") from None
    except FileNotFoundError as err:
        raise DataError(f"{path}: file not found") from err
    except (gzip.BadGzipFile, EOFError) as err:
        raise DataError(f"{path}: cannot read as UTF-8 text ({err}); re-save it as UTF-8 (optionally gzip)") from err
    return rows


def read_json(path: str | Path) -> list[Row]:
    """A JSON array of objects, or an object holding one such array (e.g. {"data": [...]})."""
    text = read_text(path)
    if too_deep(text):  # json.loads recurses: a file nested 200k deep is a RecursionError, not a message
        raise DataError(f"{path}: JSON nested too deeply (over {MAX_DEPTH} levels); refused")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: invalid JSON ({err.msg})") from err
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        data = lists[0] if len(lists) == 1 else None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise DataError(f"{path}: expected a JSON array of objects (or an object holding one array)")
    return [(f"{path}[{i}]", row) for i, row in enumerate(data)]


def _csv_records(path: str | Path, delimiter: str) -> list[tuple[int, list[str]]]:
    """(first line number, cells) of each record, undoing csv.writer's quoting (a quoted cell may span lines)."""
    reader = csv.reader(io.StringIO(read_text(path), newline=""), delimiter=delimiter)
    out, start = [], 1
    for cells in reader:
        if any(c.strip() for c in cells):
            out.append((start, cells))
        start = reader.line_num + 1
    return out


def read_delimited(
    path: str | Path,
    *,
    delimiter: str = "\t",
    header: bool = True,
    fieldnames: Sequence[str] | None = None,
    quoting: str | None = None,
    skip_header: Sequence[str] | None = None,
) -> list[Row]:
    """Rows of a header-ed (or `fieldnames`-named) delimited file; a wrong field count names the line.
    `skip_header`: with `fieldnames`, a first line equal to these names is a header and skipped (BLUE's train
    and test files start with `index sentence label`, the dev copy here does not)."""
    if quoting == "csv":
        records = _csv_records(path, delimiter)
    else:
        records = [(n, line.split(delimiter)) for n, line in numbered_lines(path) if line.strip()]
    if skip_header and records and records[0][1] == list(skip_header):
        records = records[1:]
    if header:
        if not records:
            raise DataError(f"{path}: empty file (expected a header line)")
        names = records[0][1]
        records = records[1:]
    elif fieldnames:
        names = list(fieldnames)
    else:
        raise DataError(f"{path}: no header; give \"fieldnames\" in the task spec's options")
    rows: list[Row] = []
    for lineno, cells in records:
        if len(cells) != len(names):
            raise DataError(
                f"{path}:{lineno}: {len(cells)} fields but the header has {len(names)} ({', '.join(names)}); "
                f"fix the line (fields are separated by {delimiter!r})"
            )
        rows.append((f"{path}:{lineno}", dict(zip(names, cells, strict=True))))
    return rows


DELIMITED_OPTIONS: tuple[str, ...] = ("header", "fieldnames", "quoting", "skip_header")  # read by read_table for tsv/csv


def read_table(path: str | Path, fmt: str, options: Mapping[str, Any]) -> list[Row]:
    """Dispatch on the spec's format name: jsonl | json | tsv | csv."""
    if fmt == "jsonl":
        return read_jsonl(path)
    if fmt == "json":
        return read_json(path)
    delimiter = "," if fmt == "csv" else "\t"
    return read_delimited(
        path, delimiter=delimiter, header=options.get("header", True), fieldnames=options.get("fieldnames"),
        quoting=options.get("quoting"), skip_header=options.get("skip_header"),
    )
