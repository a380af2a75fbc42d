"""Opening text files the same way everywhere: UTF-8, gzip-aware by suffix, lines numbered from 1."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

from biobench.errors import DataError


def read_text(path: str | Path) -> str:
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                return fh.read()
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise DataError(f"{path}: file not found") from err
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as err:
        raise DataError(f"{path}: cannot read as UTF-8 text ({err}); re-save it as UTF-8 (optionally gzip)") from err


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, line without its newline) for every line of a possibly gzipped file."""
    for i, line in enumerate(read_text(path).split("\n"), start=1):
        yield i, line.rstrip("\r")
