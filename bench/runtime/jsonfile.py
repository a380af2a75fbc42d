"""Bounded JSON and JSONL reading for files biobench did not necessarily write (results folders, datasets, caches).

Why: a leaderboard reads results that other people produced. `json.loads(path.read_text())` hangs on a FIFO
named `seed-42.json`, reads a symlink to /dev/zero without end, copies a 300 MB file whole, and raises
RecursionError on JSON nested 200,000 deep. Here a file is opened without blocking, must be a regular file
(after following links), is read up to a byte limit, and its nesting depth is counted without recursion before
the parser sees it. What the JSON *means* is checked by its owner (the results store validates a result).

Generic on purpose (no schema here): biobench.runtime imports no project package but `biobench.errors`.
"""

from __future__ import annotations

import errno
import gzip
import io
import json
import json.scanner
import operator
import os
import re
import stat
from collections.abc import Iterator
from itertools import islice, repeat
from pathlib import Path
from typing import Any, BinaryIO, cast

from biobench.errors import BiobenchError
from biobench.runtime.paths import UnsafePathError, inside

MAX_DEPTH = 64  # a result file nests 5 deep, the scan cache 8
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class DuplicateKeyError(ValueError):
    """An object that names one key twice: json.loads keeps the last, so a second `"seed": 43` or `"metrics"`
    in a stranger's result silently replaced the first (issue 51 §7). Refused by the parse hook below."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object_pairs_hook: the object as a dict, or DuplicateKeyError naming the first key seen twice."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        twice = next(k for i, k in enumerate(keys) if k in keys[:i])
        raise DuplicateKeyError(f"duplicate key {twice[:80]!r} in one object (a reader would keep only the last); "
                                "refused")
    return obj


# the one JSON decoder of untrusted text: json.loads' own, with duplicate keys refused
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


class UnsafeJSONError(BiobenchError):
    """A JSON file that was refused (not a regular file, too large, too deep, not JSON); `reason` says why
    without the path, for the callers that name the file themselves (the leaderboard's Problems tab)."""

    def __init__(self, source: str | Path, reason: str):
        super().__init__(f"{source}: {reason}")
        self.source, self.reason = str(source), reason


def _human(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n} bytes"


def _confined(path: str | Path) -> str:
    """`path` with its links resolved, when that stays in the folder that holds it (also resolved); UnsafeJSONError
    otherwise. The one rule for a file of a results folder (a result, its predictions, a claim, an index): a
    `seed-42.predictions.jsonl` linked to /etc/shadow was published raw by `leaderboard --export` and `results
    push` (issue 51 §1). A link within its own folder is followed; one that leads out is refused."""
    try:
        return str(inside(Path(path).parent, path))
    except UnsafePathError:
        raise UnsafeJSONError(path, "a link that leads outside its folder; refused (replace it with the file "
                                    "itself)") from None


def _open_in_folder(path: str | Path, flags: int) -> int | None:
    """A descriptor on `path` opened without following a link as its last part, or None when that fails for any
    reason (a link, a missing file, a platform without O_NOFOLLOW): the caller then takes `_confined`'s way, with
    its own errors. Why: a file that is not a link lies in the folder that holds it, whatever that folder resolves
    to, so `_confined` would accept it and open the same file; its two `resolve()`s walked every part of both
    paths with an lstat each (38% of a cold board's scan, 0.1 ms a file, three files a result: docs/performance.md).
    The kernel follows the folder parts here as it does on `_confined`'s resolved path, so a folder swapped for a
    link after the check is followed alike either way."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    if not nofollow or os.path.basename(path) in ("", ".", ".."):
        return None
    try:
        return os.open(path, flags | nofollow)
    except OSError:
        return None


def open_regular(path: str | Path, max_bytes: int, confined: bool = False, one_link: bool = False) -> BinaryIO:
    """A binary file object on a regular file (links followed) of at most `max_bytes`, for readers that want a
    handle rather than bytes (pandas, tarfile, gzip on task data). A FIFO, device or folder is refused without
    blocking (opened O_NONBLOCK, checked with fstat on the open descriptor, so a swap between check and read
    cannot fool it); FileNotFoundError propagates for the caller's own message. `confined`: the file, links
    followed, must stay in the folder that holds it (`_confined`; the resolved path is then opened without
    following a link, so a link swapped in after the check is refused too). `one_link`: the file must have one
    name only (st_nlink 1, checked on the open descriptor): a hard link resolves inside its folder whatever file
    it names, so a `seed-42.predictions.jsonl` hard-linked to a secret elsewhere passed `confined` and was
    published (issue 57 item 8); what is published is a file of its folder alone. The caller closes it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = _open_in_folder(path, flags) if confined else None
    if fd is None:
        target, extra = (_confined(path), getattr(os, "O_NOFOLLOW", 0)) if confined else (path, 0)
        try:
            fd = os.open(target, flags | extra)
        except OSError as err:
            if confined and err.errno == errno.ELOOP:  # O_NOFOLLOW met a link swapped in after the check
                raise UnsafeJSONError(path, "a link that leads outside its folder; refused") from None
            raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeJSONError(path, "not a regular file (a FIFO, device or folder); refused")
        if one_link and info.st_nlink != 1:
            raise UnsafeJSONError(path, f"a file with {info.st_nlink} hard links (one may lie outside its folder); "
                                        "refused (replace it with a copy of its own)")
        if info.st_size > max_bytes:
            raise UnsafeJSONError(path, f"file of {_human(info.st_size)} is over the {_human(max_bytes)} limit")
        return open(fd, "rb")  # noqa: SIM115 - the caller closes it (not os.fdopen: tests fake a full disk there)
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | Path, max_bytes: int, confined: bool = False, one_link: bool = False) -> bytes:
    """The bytes of a regular file (links followed) of at most `max_bytes` (`open_regular`'s checks, `confined`
    and `one_link` included); a file that grows past the limit while read is refused too."""
    with open_regular(path, max_bytes, confined, one_link) as fh:
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
        if text.startswith("\ufeff"):  # what json.loads says (the decoder itself does not look)
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        return _DECODER.decode(text)
    except DuplicateKeyError as err:
        raise UnsafeJSONError(source, str(err)) from None
    except ValueError as err:  # JSONDecodeError, and int strings past Python's digit limit
        raise UnsafeJSONError(source, f"not valid JSON: {err}") from None


MAX_TOML_KEY_PARTS = 32  # a grid's `[[grid]]` or `models.0.name` is 1-3 parts deep
MAX_TOML_BYTES = 4 * 2**20  # grid files, task specs and configs are a few KiB
# TOML strings (multi-line first) and comments, which may hold dots and brackets that are no keys
_TOML_TEXT = re.compile(r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*', re.S)
_TOML_DEEP_KEY = re.compile(rf"[\w-]+(?:[ \t]*\.[ \t]*[\w-]+){{{MAX_TOML_KEY_PARTS},}}")


def toml_too_deep(text: str) -> bool:
    """Whether TOML `text` holds a dotted key or a table header of more than MAX_TOML_KEY_PARTS parts (strings
    and comments set aside, quoted parts counted as one): tomllib's time grows with the square of the parts
    (5k parts 0.5 s, 40k 31.6 s, 60k a MemoryError at 6 GB: issue 51 §4), so it is counted before tomllib sees
    the text, in one pass of a regex that cannot backtrack far (each part is a run of key characters)."""
    if text.count(".") <= MAX_TOML_KEY_PARTS:
        return False
    return _TOML_DEEP_KEY.search(_TOML_TEXT.sub(lambda m: "s" if m[0][0] != "#" else "", text)) is not None


def parse_toml(data: bytes, source: str | Path) -> dict[str, Any]:
    """A TOML document (grid files, task specs, pretraining configs) as tomllib reads it, or UnsafeJSONError
    naming `source`: over MAX_TOML_BYTES, not UTF-8, a dotted key or table header deeper than MAX_TOML_KEY_PARTS
    (`toml_too_deep`, before tomllib sees it), not TOML (with tomllib's line and column), or nested so deeply that
    tomllib's recursion gives up (a 100,000-deep inline array was a 3,000-line RecursionError). The one TOML
    reader of biobench: every TOML file is read through it or `read_toml`."""
    import tomllib

    if len(data) > MAX_TOML_BYTES:
        raise UnsafeJSONError(source, f"TOML of {_human(len(data))} is over the {_human(MAX_TOML_BYTES)} limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UnsafeJSONError(source, f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    if toml_too_deep(text):
        raise UnsafeJSONError(source, f"a TOML key or table of more than {MAX_TOML_KEY_PARTS} dotted parts; "
                                      "refused (nest fewer levels)")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UnsafeJSONError(source, f"not valid TOML ({err})") from None
    except RecursionError:
        raise UnsafeJSONError(source, "TOML nested too deeply; refused") from None


def read_toml(path: str | Path, max_bytes: int = MAX_TOML_BYTES) -> dict[str, Any]:
    """The parsed content of a TOML file: `read_bytes`' checks (a regular file of at most `max_bytes`), then
    `parse_toml`'s."""
    return parse_toml(read_bytes(path, max_bytes), path)


# the C scanner json.loads itself runs (typeshed types its argument as the scanner class, hence the ignore)
_SCAN = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]
_PLAIN_SCAN = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # no duplicate-key hook
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


def read_json(path: str | Path, max_bytes: int, max_depth: int = MAX_DEPTH, confined: bool = False) -> Any:
    """The parsed content of a JSON file, read with `read_bytes` and `parse_json`'s checks."""
    return parse_json(read_bytes(path, max_bytes, confined), path, max_depth)


def iter_jsonl(path: str | Path, max_bytes: int | None = None, max_depth: int = MAX_DEPTH,
               encoding: str = "utf-8", confined: bool = False) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for each non-blank line of a JSONL file (gzipped when it ends in .gz), streamed:
    the one JSONL reader (results' predictions, pretraining corpora, task files). Errors name `path:line`
    (UnsafeJSONError); OSError / EOFError (a truncated gzip) propagate for the caller's own message. Each line is
    read as `parse_json` reads it, about 4x faster: a board reads millions of predictions rows, and json.loads'
    Python wrapper, `too_deep`'s two regex passes and a `path:line` string per row cost more than the parse.
    `max_bytes`: refuse a longer file (checked before reading, on a regular file only; a .gz also when what it
    expands to passes the bound, counted line by line: a small gzip may expand a thousandfold). `confined`: opened
    as `open_regular` opens it (a link leading out of its folder refused, a regular file of at most max_bytes)."""
    for batch in iter_jsonl_batches(path, max_bytes, max_depth, encoding, confined):
        yield from batch


def iter_jsonl_batches(path: str | Path, max_bytes: int | None = None, max_depth: int = MAX_DEPTH,
                       encoding: str = "utf-8", confined: bool = False) -> Iterator[list[tuple[int, Any]]]:
    """`iter_jsonl`'s (line number, value) pairs a list at a time (up to JSONL_BATCH_LINES lines), for a reader
    of many rows that checks them by batches too (`store.read_predictions`): an error is raised after the list
    of the lines before it, as `iter_jsonl` hands those out before raising."""
    path = Path(path)
    if confined:
        handle = open_regular(path, max_bytes if max_bytes is not None else 2**63 - 1, confined=True)
        text = gzip.open(handle, "rt", encoding=encoding) if path.suffix == ".gz" else io.TextIOWrapper(
            handle, encoding=encoding)
        yield from _jsonl_batches(path, text, max_bytes if path.suffix == ".gz" else None, max_depth)
        return
    if max_bytes is not None:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeJSONError(path, "not a regular file (a FIFO, device or folder); refused")
        if info.st_size > max_bytes:
            raise UnsafeJSONError(path, f"file of {_human(info.st_size)} is over the {_human(max_bytes)} limit")
    opener = gzip.open if path.suffix == ".gz" else open
    left = max_bytes if max_bytes is not None and path.suffix == ".gz" else None  # characters, a bound of bytes
    yield from _jsonl_batches(path, opener(path, "rt", encoding=encoding), left, max_depth)


def iter_jsonl_text(text: str, source: str | Path, max_depth: int = MAX_DEPTH) -> Iterator[tuple[int, Any]]:
    """`iter_jsonl` of JSONL text already read (the bytes a publisher checks and then copies as they are), with
    its errors naming `source:line`."""
    for batch in _jsonl_batches(Path(source), io.StringIO(text), None, max_depth):
        yield from batch


JSONL_BATCH_LINES = 256  # lines read and parsed together by `_jsonl_batches`


def _jsonl_batches(path: Path, handle: Any, left: int | None, max_depth: int) -> Iterator[list[tuple[int, Any]]]:
    """iter_jsonl's loop over an open text handle (closed here), a list of (line number, value) at a time; `left`:
    characters a .gz may still expand to. The lines are taken by batches (`islice`, in C) and parsed by batches
    (`_jsonl_batch`)."""
    limit = left
    with handle as fh:
        lineno = 0
        while True:
            batch: list[str] = []
            try:
                batch.extend(islice(fh, JSONL_BATCH_LINES))
            except UnicodeDecodeError as err:
                # the lines read before the undecodable one stay in `batch` (list.extend keeps what it took) and are
                # handed out first, as line by line
                yield from _handed_out(_jsonl_batch(path, batch, lineno, left, limit, max_depth))
                raise UnsafeJSONError(f"{path}:{lineno + len(batch) + 1}", f"not UTF-8 text ({err.reason})") from None
            if not batch:
                return
            yield from _handed_out(_jsonl_batch(path, batch, lineno, left, limit, max_depth))
            lineno += len(batch)
            left = None if left is None else left - sum(map(len, batch))


def _handed_out(parsed: tuple[list[tuple[int, Any]], UnsafeJSONError | None]) -> Iterator[list[tuple[int, Any]]]:
    """A parsed batch's pairs, then its error: the lines before a refused one are handed out first."""
    pairs, error = parsed
    if pairs:
        yield pairs
    if error is not None:
        raise error


_CLOSE_COMMA = re.compile(r"[\]}][ \t\r]*,")  # a closing bracket, JSON space within a line, a comma


def _one_array(texts: list[str]) -> list[Any] | None:
    """The values of `texts` (stripped lines, each meant to be one JSON value) parsed as one JSON array, the lines
    joined by commas, in one call of the same scanner (duplicate keys refused by its hook); None when that does
    not show each line to be one value (the caller then parses line by line). Why: one call per batch instead of
    one per line reads a predictions file about twice as fast (each call of the scanner has its own set-up).
    Why it is exact: an array of len(texts) values has len(texts) - 1 commas at its top level. When no line holds
    a closing bracket followed by a comma (strings included, so this errs towards the slow path), no line holds a
    top-level comma: the first one in a line would follow the end of the value that holds the line's start, a
    closing bracket. So the top-level commas are the joining ones, and each line is exactly one value, parsed as
    it would be alone (a blank line leaves two commas side by side, not JSON).
    Duplicate keys: the array is parsed without the hook first (a third faster: no Python call per object), and
    kept when every value is an object and the text holds as many colons as the objects hold keys. Colons in the
    text >= key tokens >= distinct keys of every object (nested ones too) >= keys of the rows, so equality means
    no object repeats a key; otherwise (a colon in a string, a nested object) the hook's parse decides."""
    if _CLOSE_COMMA.search("\n".join(texts)):
        return None
    joined = "[" + ",".join(texts) + "]"
    try:
        values, end = _PLAIN_SCAN(joined, 0)
    except (StopIteration, ValueError):  # not JSON, too many digits: the line-by-line path says which
        return None
    if end != len(joined) or len(values) != len(texts):
        return None
    if set(map(type, values)) <= {dict} and joined.count(":") == sum(map(len, values)):
        return values
    try:
        return _SCAN(joined, 0)[0]
    except ValueError:  # a duplicate key: the line-by-line path names its line
        return None


def _jsonl_batch(path: Path, lines: list[str], before: int, left: int | None, limit: int | None, max_depth: int
                 ) -> tuple[list[tuple[int, Any]], UnsafeJSONError | None]:
    """(line number, value) of `lines`, the lines after line `before`, each line read as `parse_json` reads it
    (`left`: characters a .gz may still expand to, of its `limit`). Why by batches: a board reads millions of
    predictions rows, and a Python loop per line (strip, count, scan, compare) cost a fifth of a file's reading;
    here each step is one `map` over the batch, run in C, and gives the values the loop below gives when every
    line passes. When one does not (a blank line, an error, trailing data, a BOM, a deep line, a .gz past its
    bound), the batch goes through the loop, line by line, so every message is the one it always was: the
    lines before the first refused one, and its error (None when there is none)."""
    if left is None or left >= sum(map(len, lines)):
        texts = list(map(str.strip, lines, repeat(_JSON_SPACE)))
        depth = max(map(operator.add, map(str.count, texts, repeat("[")), map(str.count, texts, repeat("{"))),
                    default=0)
        if depth <= max_depth:
            values = _one_array(texts)
            if values is None:
                try:
                    # a line the scanner finds no value in raises StopIteration, which ends the list early
                    scanned = list(map(_SCAN, texts, repeat(0)))
                except ValueError:  # not JSON, a duplicate key, an integer of too many digits: the loop says which
                    scanned = []
                if len(scanned) == len(texts) and list(map(operator.itemgetter(1), scanned)) == list(map(len, texts)):
                    values = list(map(operator.itemgetter(0), scanned))
            if values is not None:
                return list(zip(range(before + 1, before + 1 + len(lines)), values, strict=True)), None
    pairs: list[tuple[int, Any]] = []
    try:
        for lineno, line in enumerate(lines, before + 1):
            if left is not None:
                left -= len(line)
                if left < 0:
                    raise UnsafeJSONError(path, f"expands to over the {_human(limit or 0)} limit when "
                                                "decompressed; refused")
            # json.loads' own scanner, the depth check skipped when the line holds no more brackets than max_depth
            # (a bound of its nesting); anything else goes through parse_json
            text = line.strip(_JSON_SPACE)
            if text and text.count("[") + text.count("{") <= max_depth:
                try:
                    value, end = _SCAN(text, 0)
                except DuplicateKeyError as err:
                    raise UnsafeJSONError(f"{path}:{lineno}", str(err)) from None
                except (StopIteration, ValueError):
                    end = -1
                if end == len(text):
                    pairs.append((lineno, value))
                    continue
            if line.strip():
                pairs.append((lineno, parse_json(line, f"{path}:{lineno}", max_depth)))
    except UnsafeJSONError as err:
        return pairs, err
    return pairs, None
