"""The results index: what the leaderboard reads of every valid result file of one results folder, already
validated, as typed columns of one Arrow file beside the board's other caches.

Why: a board of 300 models x 19 tasks x 9 seeds is 51,300 result files. The JSON scan index this replaces kept
each file's raw fields, so every warm start parsed a 60 MB document and re-validated 51,300 results
(`Result.from_dict`, the finite-number walk, the trust checks): 4-6 s of a 300-model start (docs/performance.md).
Here each valid result is one row of what the scan made of it (model, task, seed, score, the smoke and degenerate
texts, ...): a warm start reads typed columns and builds its runs without re-reading a file.

The result files stay the source of truth:
- a row is used only while its file's stamp is unchanged and its seal holds. The stamp is the file's (size,
  mtime_ns, inode, ctime_ns): a write to the file changes its ctime, which no user can set back (utime sets
  mtime, not ctime), and a file replaced by another (a rename, a copy) has another inode or ctime. The seal is
  the sha256 of the file's bytes (recorded in the row, `content`) and of the row's own values, made from the
  bytes the row was read from. The index's own sha256 proves the index is whole, not that its rows are the
  files' rows: an index rewritten with a row's score changed (0.352 -> 0.999, its checksum recomputed) was shown
  on the board (issue 58 item 4). A row whose seal does not hold is read again from its file (one Problems line
  says how many); so is a changed or new file; a removed one is dropped when the index is saved (incremental).
  An index none of whose files is in the folder (copied without them) is said so in one line. A file that is
  not a valid result has no row: it is read, and reported, at every start. A warm start reads no result file
  whose stamp holds (version 6 read every file's bytes at each start to check its seal: 51,300 reads at 300
  models); a cold one reads each file once, and its seal is made from those bytes where it was read (a worker).
  A file changed within RACY_NS of the index being written is "racy" (git's word): a same-size write in the same
  clock tick as the read leaves its stamp as it was, so its bytes are read and checked against the row's digest
  at each start until it is older than that. An index saved after its scan (a served board saves it once its
  app is built) is dated back to its scan's end, so the rule keeps its reference.
- the index is untrusted on read (a cache folder may be shared or damaged): the file is bounded in size and
  carries a sha256 of its Arrow bytes; its schema must be this version's exactly; every row is checked for what
  the reader guarantees of a result (a score that is a finite fraction, an integer seed, ids and
  file names that are safe, JSON fields that parse to the right type with finite numbers), each distinct value
  once. Any failure makes the
  whole index a miss with one `problem` line; the files are read again and the index rewritten.
No torch; pyarrow is a core dependency.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
from pathlib import Path
from typing import Any, NamedTuple

from biobench.errors import BiobenchError, DiskFullError
from biobench.runtime.files import atomic_write
from biobench.runtime.jsonfile import UnsafeJSONError, read_bytes
from biobench.runtime.paths import LANG_CODE, UnsafePathError, safe_name
from biobench.store.record import INT_LIMIT
from biobench.store.result_files import MAX_RESULT_BYTES

# 2: the JSON scan index (raw fields); 3: Arrow rows of raw fields (reverted); 4: validated typed rows; 5: `score` is
# the task's headline metric (Result.score) and `model` the one identity (store.model_group), issue 57; 6: each row
# sealed to its file's bytes (issue 58); 7: the stamp holds the inode and ctime, the row the digest its seal was
# made from, so a warm start reads no file whose stamp holds (issue 62)
VERSION = 7
MAGIC = b"biobench-results-index"
MAX_INDEX_BYTES = 2**30  # ~600 bytes per result: over a million results
RACY_NS = 2 * 10**9  # a file whose ctime is this close to the index's writing is checked by its bytes (coarse clocks)


class IndexRow(NamedTuple):
    """What the board keeps of one valid result file (bench/standings/scan.py `index_row` makes it): the one shape
    of a result row, stored here and read by the board (`standings.scan.Run` is this row plus where the result
    lies). `lang` is the file's own `task.lang` ("" when absent: the scan falls back to the known task's
    language); `predictions` is the predictions file's name beside the result, whether or not it exists."""

    model: str  # the results folder (store.model_group): the identity of a model across tasks and folders
    name: str
    lang: str
    task: str
    kind: str
    seed: int
    score: float  # the test score of the task's headline metric (Result.score)
    per_label: dict[str, float]
    predictions: str
    model_meta: dict[str, Any]
    labels: tuple[str, ...]
    details: dict[str, Any]
    smoke: str
    degenerate: str


_JSON = ("per_label", "model_meta", "labels", "details")  # stored as JSON text
_INTS = ("seed",)
_FLOATS = ("score",)
Stamp = tuple[int, int, int, int]  # a result file's (size, mtime_ns, inode, ctime_ns), as the scan's walk saw it
_STAMP = ("size", "mtime_ns", "ino", "ctime_ns")


class SealedRow(NamedTuple):
    """A row as read from its file (`sealed_row`): the row, the sha256 of the file's bytes, and its seal."""

    row: IndexRow
    content: bytes
    seal: str


_DICTIONARY = ("model", "name", "lang", "task", "kind", "per_label", "predictions", "model_meta", "labels", "smoke",
               "degenerate")


class IndexDamaged(Exception):
    """The index on disk is not one this version wrote, unaltered."""


def _arrow_type(pa: Any, column: str) -> Any:
    if column in _INTS:
        return pa.int64()
    if column in _FLOATS:
        return pa.float64()
    return pa.dictionary(pa.int32(), pa.string()) if column in _DICTIONARY else pa.string()


def _schema(pa: Any) -> Any:
    return pa.schema([("rel", pa.string()), *[(c, pa.int64()) for c in _STAMP], ("seal", pa.string()),
                      ("content", pa.string()), *[(c, _arrow_type(pa, c)) for c in IndexRow._fields]])


def _value_digest(value: Any) -> bytes:
    """The digest of one stored value of a row (its text as stored, a number's repr)."""
    return hashlib.sha256(value.encode() if isinstance(value, str) else repr(value).encode()).digest()


def file_digest(path: str | Path) -> bytes | None:
    """The sha256 of a result file's bytes, read as the store's reader reads it (bounded, regular, confined to its
    folder); None when it cannot be read (the reader then says why)."""
    try:
        return hashlib.sha256(read_bytes(path, MAX_RESULT_BYTES, confined=True)).digest()
    except (OSError, UnsafeJSONError):
        return None


def sealed_row(row: IndexRow, data: bytes) -> SealedRow:
    """`row` sealed to `data`, the bytes of the file it was made from (store.read_result_bytes)."""
    content = hashlib.sha256(data).digest()
    return SealedRow(row, content, seal(content, _row_values(row)))


def seal(content: bytes, values: bytes) -> str:
    """A row's seal: its file's content digest with the digests of the row's stored values (`_row_values`)."""
    return hashlib.sha256(content + values).hexdigest()


# per column of a row: (stored as JSON text, a tuple stored as a JSON list), in IndexRow's order
_AS_STORED = tuple((column in _JSON, column == "labels") for column in IndexRow._fields)


def _row_values(row: IndexRow) -> bytes:
    """The digests of a row's values as the index stores them (JSON columns as their text), joined: each value's
    `_value_digest` of its `_text`, written out in one loop because a cold scan's workers seal every row they read
    (51,300 at 300 models) and the two calls per value were a quarter of the sealing (docs/performance.md)."""
    digests = []
    item: Any
    for (as_json, as_list), item in zip(_AS_STORED, row, strict=True):
        if as_json:
            item = json.dumps(list(item) if as_list else item)
        digests.append(hashlib.sha256(item.encode() if isinstance(item, str) else repr(item).encode()).digest())
    return b"".join(digests)


def _refuse_constant(name: str) -> Any:
    raise IndexDamaged(f"a JSON field holding {name}")


def _checked_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses to inf
        raise IndexDamaged(f"a JSON field holding {text[:40]}")
    return value


def _checked_int(text: str) -> int:
    if len(text) > 20 or not -INT_LIMIT < (value := int(text)) < INT_LIMIT:
        raise IndexDamaged(f"a JSON field holding {text[:20]}... ({len(text)} digits)")
    return value


def _finite_json(text: Any, kind: type) -> Any:
    """A JSON column's value: parsed, of `kind`, every number finite and within +-2**63 (as the store's reader
    requires of a result file); IndexDamaged otherwise. The parser checks each number as it reads it: walking
    every parsed value afterwards (`record.first_bad_number`) cost 0.6 s at 51,300 rows."""
    if not isinstance(text, str):
        raise IndexDamaged("a JSON field that is not text")
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_checked_float, parse_int=_checked_int)
    except (ValueError, RecursionError):
        raise IndexDamaged("a JSON field that does not parse") from None
    if not isinstance(value, kind):
        raise IndexDamaged(f"a JSON field that is not a {kind.__name__}")
    return value


def _check_text(column: str, value: Any) -> None:
    """One distinct value of a text column, as the scan checks a file's (bench/standings/scan.py `_check_ids`)."""
    if not isinstance(value, str) or (column in ("rel", "model") and not value):
        raise IndexDamaged(f"a {column} that is not text")
    if column == "lang" and value and not LANG_CODE.fullmatch(value):
        raise IndexDamaged(f"a language {value[:40]!r} that is not a language code")
    if column in ("task", "predictions"):
        try:
            safe_name(value, column)
        except UnsafePathError as err:
            raise IndexDamaged(str(err)) from None


def _check_json(column: str, value: Any) -> Any:
    """One distinct value of a JSON column, parsed and checked; labels become a tuple."""
    parsed = _finite_json(value, list if column == "labels" else dict)
    if column == "labels":
        if not all(isinstance(v, str) for v in parsed):
            raise IndexDamaged("labels that are not text")
        return tuple(parsed)
    if column == "per_label" and not all(type(v) is float for v in parsed.values()):
        raise IndexDamaged("per-label scores that are not numbers")
    return parsed


def _check_number(column: str, value: Any) -> None:
    if column == "score" and not (type(value) is float and math.isfinite(value) and 0.0 <= value <= 1.0):
        raise IndexDamaged(f"a score {value!r} that is not a fraction")
    if column == "seed" and not (type(value) is int and -INT_LIMIT < value < INT_LIMIT):
        raise IndexDamaged(f"a seed {value!r} that is not an integer")
    if column in _STAMP and not (type(value) is int and 0 <= value < INT_LIMIT):
        raise IndexDamaged(f"a file {column} {value!r} that is not a count")


def _values(chunked: Any, column: str, digests: list[list[bytes]] | None = None) -> list[Any]:
    """A column as checked Python values. A dictionary column's distinct values are checked (JSON parsed) once
    each and shared by their rows: one model's metadata is parsed once, not once per result. `digests`: a list to
    which each row's digest of its stored value is appended (`_value_digest`, once per distinct value)."""
    import pyarrow as pa

    array = chunked.combine_chunks() if chunked.num_chunks != 1 else chunked.chunk(0)
    dictionary = pa.types.is_dictionary(array.type)
    if array.null_count or (dictionary and array.dictionary.null_count):
        raise IndexDamaged(f"a missing value in column {column}")
    values = array.dictionary.to_pylist() if dictionary else array.to_pylist()
    if digests is not None:
        distinct = [_value_digest(v) for v in values]
        digests.append([distinct[i] for i in array.indices.to_pylist()] if dictionary else distinct)
    if column in ("seal", "content"):
        if not all(isinstance(v, str) and len(v) == 64 for v in values):
            raise IndexDamaged(f"a {column} that is not a sha256")
        if column == "content":  # the digest as bytes, what `seal` hashes
            try:
                return [bytes.fromhex(v) for v in values]
            except ValueError:
                raise IndexDamaged("a content that is not a sha256") from None
        return values
    if column in _JSON:
        values = [_check_json(column, v) for v in values]
    elif column in ("score", "seed", *_STAMP):
        for v in values:
            _check_number(column, v)
    else:
        for v in values:
            _check_text(column, v)
    return [values[i] for i in array.indices.to_pylist()] if dictionary else values


class ResultsIndex:
    """The index of one results folder under `cache_dir` (None: no index, every file is read). `row(rel, stamp)`:
    the checked row of a file while its stamp matches and its seal holds, else None (read the file); `keep(rel,
    stamp, sealed)`: the row the scan made of a file it read; `save(present)`: drop the files no longer present and write the index when
    something changed. `problem`: one line when the index on disk was damaged or altered (then ignored and
    rebuilt), else None."""

    def __init__(self, root: Path, cache_dir: str | Path | None):
        self.path: Path | None = None
        self._replaced: Path | None = None
        self.problem: str | None = None
        self.changed = False
        self._rows: dict[str, _Kept] = {}
        self._checked: dict[str, IndexRow | None] = {}  # rel -> the row once its seal was checked (None: it failed)
        self.loaded = 0  # rows read from the index on disk
        self.disagreeing = 0  # rows of the index on disk whose seal did not hold: read again from their files
        self.racy_reads = 0  # files whose bytes were read to check their row (changed just before the index was saved)
        self._written_ns = 0  # the index file's mtime: rows of files changed since RACY_NS before it are racy
        if cache_dir is None:
            return
        digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
        self.path = Path(cache_dir) / f"results-{digest}.arrow"
        self._replaced = Path(cache_dir) / f"scan-{digest}.json"  # the JSON scan index before version 4 (60 MB)
        try:
            self._rows = self._read()
            self.loaded = len(self._rows)
            _release_arrow_memory()  # the table is gone once its rows are Python values
        except (FileNotFoundError, NotADirectoryError):  # no index yet (or no cache folder): a quiet miss
            pass
        except _Stale:
            self.changed = True
        except IndexDamaged as err:
            self._distrust(str(err))
        except (OSError, BiobenchError) as err:
            self._distrust(f"{type(err).__name__}: {str(err)[:120]}")
        except Exception as err:  # noqa: BLE001 - pyarrow's own errors on a foreign file (ArrowInvalid, ...)
            self._distrust(f"not an index ({type(err).__name__}: {str(err)[:120]})")

    def _distrust(self, reason: str) -> None:
        self.problem = f"results index unreadable or altered ({reason}); ignored and rebuilt from the result files"
        self._rows = {}
        self.changed = True

    def _read(self) -> dict[str, _Kept]:
        import pyarrow as pa
        import pyarrow.ipc

        assert self.path is not None
        # a regular file of bounded size, no link out of its folder, as the JSON readers read
        data = read_bytes(self.path, MAX_INDEX_BYTES, confined=True)
        self._written_ns = self.path.stat().st_mtime_ns
        head, _, body = data.partition(b"\n")
        parts = head.split(b" ")
        if len(parts) != 3 or parts[0] != MAGIC:
            raise IndexDamaged("no index header")
        if parts[1] != str(VERSION).encode():
            raise _Stale
        if hashlib.sha256(body).hexdigest().encode() != parts[2]:
            raise IndexDamaged("its checksum does not match its bytes")
        table = pyarrow.ipc.open_stream(pa.py_buffer(body)).read_all()
        table.validate(full=True)  # offsets, lengths, dictionary indices and UTF-8 checked before any value is read
        if not table.schema.equals(_schema(pa)):
            raise IndexDamaged("columns of another type")
        digests: list[list[bytes]] = []  # per row column, each row's digest of its stored value
        columns = {name: _values(table.column(name), name, digests if name in IndexRow._fields else None)
                   for name in table.schema.names}
        rows: dict[str, _Kept] = {}
        for (rel, size, mtime_ns, ino, ctime_ns, sealed, content, *fields), values in zip(
                zip(*columns.values(), strict=True), zip(*digests, strict=True), strict=True):
            if rel in rows:
                raise IndexDamaged(f"{rel[:80]!r} listed twice")
            rows[rel] = (size, mtime_ns, IndexRow(*fields), sealed, b"".join(values), ino, ctime_ns, content)
        return rows

    def row(self, rel: str, stamp: Stamp | None, path: str | Path) -> IndexRow | None:
        """The row of the file `rel` (at `path`) when the index holds it at this `stamp` (size, mtime_ns, inode,
        ctime_ns: the file is the one the row was read from) and its seal holds for the row's values (each row
        checked once per scan). The stamp stands for the file's bytes, whose digest the row recorded: the file is
        read only when it is racy (changed within RACY_NS of the index's writing)."""
        if rel in self._checked:
            return self._checked[rel]
        kept = self._rows.get(rel)
        if kept is None or stamp is None or (kept[0], kept[1], kept[5], kept[6]) != stamp:
            return None
        if kept[4] and kept[6] >= self._written_ns - RACY_NS:
            self.racy_reads += 1
            if file_digest(path) != kept[7]:  # the same stamp, other bytes: read again, as a changed file is
                return None
        held = not kept[4] or seal(kept[7], kept[4]) == kept[3]
        if not held:
            self.disagreeing += 1
        self._checked[rel] = kept[2] if held else None
        return self._checked[rel]

    def keep(self, rel: str, stamp: Stamp | None, sealed: SealedRow | None) -> None:
        """What the scan read from the file `rel` (None: not a valid result, so no row; read again next start),
        its row sealed to the bytes it was read from (`sealed_row`)."""
        self._checked.pop(rel, None)
        if self.path is None or stamp is None:
            return
        if sealed is None:
            self.changed |= self._rows.pop(rel, None) is not None
        else:
            self._rows[rel] = (stamp[0], stamp[1], sealed.row, sealed.seal, b"", stamp[2], stamp[3], sealed.content)
            self.changed = True

    def orphaned(self, present: set[str]) -> str | None:
        """One line when the index on disk held rows and none of their files is in the folder (an index copied
        without its files, or the folder emptied): the board shows what the files hold, i.e. nothing of it."""
        if not self.loaded or any(rel in present for rel in self._rows):
            return None
        return (f"results index lists {self.loaded:,} result file(s), none of which is in this folder (an index "
                "copied without its files?); none of its rows is shown")

    def disagreement(self) -> str | None:
        """One line when rows of the index on disk did not match their result files (read again from them)."""
        if not self.disagreeing:
            return None
        return (f"{self.disagreeing:,} row(s) of the results index do not match their result files (altered?); "
                "read from the files and rebuilt")

    def save(self, present: set[str], scanned_ns: int | None = None) -> None:
        """Write the index with the rows of the files in `present` (the others were removed), if anything changed.
        `scanned_ns`: when its scan ended, for an index saved later (`scan_results(save_index=False)`): the file is
        dated then, since its mtime is what the racy rule (RACY_NS) measures a file's change against, and a file
        rewritten in the tick it was read in must stay racy however long the page took to build before the save."""
        if self.path is None:
            return
        gone = set(self._rows) - present
        for rel in gone:
            del self._rows[rel]
        if not (self.changed or gone):
            return
        try:
            atomic_write(self.path, self._encode(), durable=False)
            if scanned_ns is not None:
                os.utime(self.path, ns=(scanned_ns, scanned_ns))
            _release_arrow_memory()
            if self._replaced is not None:
                self._replaced.unlink(missing_ok=True)
        except (OSError, DiskFullError):  # a read-only or full cache folder only costs the next start its speed
            pass

    def _encode(self) -> bytes:
        """The index file: its header (with the sha256 of what follows), then the Arrow stream. Built in one buffer,
        each dictionary column from its distinct values: the first version built every column whole, then encoded
        it, then copied the stream twice, and a cold 300-model start peaked 190 MiB higher while saving."""
        import pyarrow as pa
        import pyarrow.ipc

        rels = sorted(self._rows)
        kept = [self._rows[rel] for rel in rels]
        arrays = [pa.array(rels, pa.string()), *[pa.array([k[i] for k in kept], pa.int64()) for i in (0, 1, 5, 6)],
                  pa.array([k[3] for k in kept], pa.string()), pa.array([k[7].hex() for k in kept], pa.string())]
        for i, column in enumerate(IndexRow._fields):
            items = [k[2][i] for k in kept]
            kind = _arrow_type(pa, column)
            if pa.types.is_dictionary(kind):
                codes, distinct = _codes(items, column)
                arrays.append(pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(distinct, pa.string())))
            else:
                arrays.append(pa.array([_text(item, column) for item in items], kind))
        schema = _schema(pa)
        table = pa.Table.from_arrays(arrays, schema=schema)
        del arrays
        sink = io.BytesIO()
        head = b" ".join([MAGIC, str(VERSION).encode(), b"0" * 64]) + b"\n"
        sink.write(head)
        with pyarrow.ipc.new_stream(sink, schema) as writer:
            writer.write_table(table)
        with sink.getbuffer() as view:
            digest = hashlib.sha256(view[len(head):]).hexdigest().encode()
        sink.seek(len(head) - 65)
        sink.write(digest)
        return sink.getvalue()


def _release_arrow_memory() -> None:
    """Hand the memory Arrow's allocator kept after the index was built or read back to the system: it holds
    freed blocks for reuse, which left a cold 300-model start's process ~100 MiB larger for good."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _codes(items: list[Any], column: str) -> tuple[list[int], list[str]]:
    """A dictionary column: each row's code and the distinct texts, in first-seen order. An object shared by
    rows (one model's metadata read from the index) is converted once; equal texts get one code."""
    codes: list[int] = []
    distinct: dict[str, int] = {}
    seen: dict[int, int] = {}  # id of an object -> its code
    for item in items:
        code = seen.get(id(item))
        if code is None:
            text = _text(item, column)
            code = seen[id(item)] = distinct.setdefault(text, len(distinct))
        codes.append(code)
    return codes, list(distinct)


# what the index keeps of a file: size, mtime_ns, row, seal, the digests of the row's stored values (b"" for a row
# made here), inode, ctime_ns, the sha256 of the file's bytes
_Kept = tuple[int, int, IndexRow, str, bytes, int, int, bytes]


class _Stale(Exception):
    """An index of another version: a quiet miss (an upgrade, not damage)."""


def _text(item: Any, column: str) -> Any:
    """A row's value as stored: JSON text for the JSON columns (dict key order kept; labels as a list), else as
    it is."""
    if column not in _JSON:
        return item
    return json.dumps(list(item) if column == "labels" else item)
