"""Bounded JSON and JSONL reading for files biobench did not necessarily write (results folders, datasets, caches).

Why: a leaderboard reads results that other people produced. `json.loads(path.read_text())` hangs on a FIFO
named `seed-42.json`, reads a symlink to /dev/zero without end, copies a 300 MB file whole, and raises
RecursionError on JSON nested 200,000 deep. Here a file is opened without blocking, must be a regular file
(after following links), is read up to a byte limit, and its nesting depth is counted without recursion before
the parser sees it. What the JSON *means* is checked by its owner (the results store validates a result).

Generic on purpose (no schema here): biobench.runtime imports no project package but `biobench.errors`.
"""

from __future__ import annotations

import gzip
import json
import json.scanner
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

from biobench.errors import BiobenchError

MAX_DEPTH = 64  # a result file nests 5 deep, the scan cache 8
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class UnsafeJSONError(BiobenchError):
    """A JSON file that was refused (not a regular file, too large, too deep, not JSON); `reason` says why
    without the path, for the callers that name the file themselves (the leaderboard's Problems tab)."""

    def __init__(self, source: str | Path, reason: str):
        super().__init__(f"{source}: {reason}")
        self.source, self.reason = str(source), reason


def _human(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n} bytes"


def open_regular(path: str | Path, max_bytes: int) -> BinaryIO:
    """A binary file object on a regular file (links followed) of at most `max_bytes`, for readers that want a
    handle rather than bytes (pandas, tarfile, gzip on task data). A FIFO, device or folder is refused without
    blocking (opened O_NONBLOCK, checked with fstat on the open descriptor, so a swap between check and read
    cannot fool it); FileNotFoundError propagates for the caller's own message. The caller closes it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeJSONError(path, "not a regular file (a FIFO, device or folder); refused")
        if info.st_size > max_bytes:
            raise UnsafeJSONError(path, f"file of {_human(info.st_size)} is over the {_human(max_bytes)} limit")
        return open(fd, "rb")  # noqa: SIM115 - the caller closes it (not os.fdopen: tests fake a full disk there)
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | Path, max_bytes: int) -> bytes:
    """The bytes of a regular file (links followed) of at most `max_bytes` (`open_regular`'s checks); a file
    that grows past the limit while read is refused too."""
    with open_regular(path, max_bytes) as fh:
        # the size it has now, plus one byte to see growth: read(max_bytes + 1) allocated the whole limit for
        # every file (8 MiB for a 1 KB result: 35 us of a 50 us read, 1.8 s of a 51,300-result scan)
        size = os.fstat(fh.fileno()).st_size
        data = fh.read(size + 1)
        if len(data) > size:  # it grew while read: the rest, up to the limit
            data += fh.read(max_bytes + 1 - len(data))
    if len(data) > max_bytes:  # grew while read
        raise UnsafeJSONError(path, f"file is over the {_human(max_bytes)} limit")
    return data


def too_deep(text: str, max_depth: int = MAX_DEPTH) -> bool:
    """Whether JSON `text` nests arrays/objects deeper than `max_depth`: strings removed, brackets counted in a
    loop (no recursion, so 200,000 levels cost a pass over the text, not a RecursionError). A text with no more
    opening brackets than `max_depth`, strings included, cannot nest deeper: it is answered without the two
    regex passes (two thirds of the reader's own time on a 1 KB result)."""
    if text.count("[") + text.count("{") <= max_depth:
        return False
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if len(brackets) <= max_depth:
        return False
    depth = 0
    for char in brackets:
        depth += 1 if char in "[{" else -1
        if depth > max_depth:
            return True
    return False


def parse_json(text: str | bytes, source: str | Path = "<json>", max_depth: int = MAX_DEPTH) -> Any:
    """json.loads behind the depth check; UnsafeJSONError naming `source` for bad UTF-8, too deep or not JSON.
    Non-finite numbers (NaN, Infinity) parse as Python floats: the owner of the schema decides where they may be."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            raise UnsafeJSONError(source, f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    if too_deep(text, max_depth):
        raise UnsafeJSONError(source, f"JSON nested too deeply (over {max_depth} levels); refused")
    try:
        return json.loads(text)
    except ValueError as err:  # JSONDecodeError, and int strings past Python's digit limit
        raise UnsafeJSONError(source, f"not valid JSON: {err}") from None


def parse_toml(data: bytes, source: str | Path) -> dict[str, Any]:
    """A TOML document (grid files, task specs, pretraining configs) as tomllib reads it, or UnsafeJSONError
    naming `source`: not UTF-8, not TOML (with tomllib's line and column), or nested so deeply that tomllib's
    recursion gives up (a 100,000-deep inline array was a 3,000-line RecursionError)."""
    import tomllib

    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise UnsafeJSONError(source, f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    except tomllib.TOMLDecodeError as err:
        raise UnsafeJSONError(source, f"not valid TOML ({err})") from None
    except RecursionError:
        raise UnsafeJSONError(source, "TOML nested too deeply; refused") from None


# the C scanner json.loads itself runs (typeshed types its argument as the scanner class, hence the ignore)
_SCAN = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]
_JSON_SPACE = " \t\n\r"  # what json.loads skips around a value (str.strip would skip more)


def object_at(data: Any, key: str) -> dict[str, Any]:
    """`data[key]` when `data` is a JSON object holding an object there, else {}: the parts of an untrusted
    record that must be objects are read through this, so a list or a number there is no crash."""
    value = data.get(key) if isinstance(data, dict) else None
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def list_at(data: Any, key: str) -> list[Any]:
    """`data[key]` when `data` is a JSON object holding a list there, else []."""
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, list) else []


def read_json(path: str | Path, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """The parsed content of a JSON file, read with `read_bytes` and `parse_json`'s checks."""
    return parse_json(read_bytes(path, max_bytes), path, max_depth)


def iter_jsonl(path: str | Path, max_bytes: int | None = None, max_depth: int = MAX_DEPTH,
               encoding: str = "utf-8") -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for each non-blank line of a JSONL file (gzipped when it ends in .gz), streamed:
    the one JSONL reader (results' predictions, pretraining corpora, task files). Errors name `path:line`
    (UnsafeJSONError); OSError / EOFError (a truncated gzip) propagate for the caller's own message. Each line is
    read as `parse_json` reads it, about 4x faster: a board reads millions of predictions rows, and json.loads'
    Python wrapper, `too_deep`'s two regex passes and a `path:line` string per row cost more than the parse.
    `max_bytes`: refuse a longer file (checked before reading, on a regular file only; a .gz also when what it
    expands to passes the bound, counted line by line: a small gzip may expand a thousandfold)."""
    path = Path(path)
    if max_bytes is not None:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeJSONError(path, "not a regular file (a FIFO, device or folder); refused")
        if info.st_size > max_bytes:
            raise UnsafeJSONError(path, f"file of {_human(info.st_size)} is over the {_human(max_bytes)} limit")
    opener = gzip.open if path.suffix == ".gz" else open
    left = max_bytes if max_bytes is not None and path.suffix == ".gz" else None  # characters, a bound of bytes
    with opener(path, "rt", encoding=encoding) as fh:
        lineno = 0
        try:
            for lineno, line in enumerate(fh, 1):
                if left is not None:
                    left -= len(line)
                    if left < 0:
                        raise UnsafeJSONError(path, f"expands to over the {_human(max_bytes or 0)} limit when "
                                                    "decompressed; refused")
                # the fast path: json.loads' own scanner, the depth check skipped when the line holds no more
                # brackets than max_depth (a bound of its nesting); anything else (an error, trailing data, a
                # BOM, a deep line) goes through parse_json, so every message is the one it always was
                text = line.strip(_JSON_SPACE)
                if text and text.count("[") + text.count("{") <= max_depth:
                    try:
                        value, end = _SCAN(text, 0)
                    except (StopIteration, ValueError):
                        end = -1
                    if end == len(text):
                        yield lineno, value
                        continue
                if line.strip():
                    yield lineno, parse_json(line, f"{path}:{lineno}", max_depth)
        except UnicodeDecodeError as err:
            raise UnsafeJSONError(f"{path}:{lineno + 1}", f"not UTF-8 text ({err.reason})") from None
