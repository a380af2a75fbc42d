"""The results index: what the leaderboard reads of every result file of one results folder, kept in one columnar
file beside the board's other caches, so a warm start reads one file instead of tens of thousands.

Why it is built this way: a board of 300 models x 19 tasks x 9 seeds is 51,300 result files; the JSON index it
replaced was one 60 MB JSON document whose bounded parse (depth count, then json.loads) cost seconds at every
start. Here each result is one row of an Arrow IPC file (pyarrow, the leaderboard extra): its path relative to the
folder, its (size, mtime_ns) stamp, its test macro-F1 as a float column, and the board's fields of the file as
JSON text. The result files stay the source of truth:
- a row is used only while its file's (size, mtime_ns) stamp is unchanged; a changed or new file is read again on
  its own, a removed one is dropped at `save` (incremental);
- a row's fields go through the store's one validation (`Result.from_dict`, called by the scan's `parse_result`)
  exactly as a file's content does; an index file that is unreadable, over the size limit, not Arrow, of another
  schema or whose rows fail the checks below is a miss: `problem` says so in one line, the files are read again
  and the index rewritten. An index of another version is a quiet miss (an upgrade, not damage).
- without pyarrow (the store does not require it) the same rows are kept as one JSON file, read with the bounded
  reader: slower, the same behaviour.
No torch, no project import above the store.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

from biobench.errors import BiobenchError, DiskFullError, ResultsError
from biobench.runtime.files import atomic_write
from biobench.runtime.jsonfile import read_bytes, read_json
from biobench.store.storage import read_json_file

VERSION = 3  # 2: the JSON scan index (bench/board/scan.py); 3: this module, Arrow rows with the score column
MAX_INDEX_BYTES = 2**30  # ~2 KB per result: half a million results
BOARD_DETAILS = ("timings", "device", "dev_score", "created", "contamination")
TRUST_FIELDS = ("overrides", "degenerate")  # what store.trust reads besides the protocol


def _arrow() -> Any:
    """pyarrow when installed (the leaderboard extra), else None: the index then falls back to JSON."""
    try:
        import pyarrow as pa
        import pyarrow.ipc  # noqa: F401 - the IPC reader and writer
    except ImportError:
        return None
    return pa


def board_fields(path: Path) -> dict[str, Any] | None:
    """What the leaderboard reads of a result file (history, dev metrics and versions left out), or None when the
    bounded reader refuses the file or it is not a JSON object (the full reader then reports why)."""
    try:
        data = read_json_file(path)
    except ResultsError:
        return None
    if not isinstance(data, dict):
        return None
    keep = {k: data[k] for k in ("schema", "model", "task", "seed", "protocol", "key", "predictions", *BOARD_DETAILS,
                                 *TRUST_FIELDS) if k in data}
    metrics = data.get("metrics")
    test = metrics.get("test") if isinstance(metrics, dict) else None
    if isinstance(test, dict):
        keep["metrics"] = {"test": {k: test[k] for k in ("macro_f1", "per_label") if k in test}}
    elif "metrics" in data:
        keep["metrics"] = metrics
    return keep


def _score(fields: dict[str, Any]) -> float | None:
    """The test macro-F1 of a row's fields when it is a number (the score column; validated where it is used)."""
    metrics = fields.get("metrics")
    test = metrics.get("test") if isinstance(metrics, dict) else None
    value = test.get("macro_f1") if isinstance(test, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _digest(rels: list, sizes: list, mtimes: list, texts: list) -> str:
    """A checksum of an index's rows (written in its metadata): a damaged file whose Arrow structure still holds
    (a flipped byte in a string) is a miss, not a silently different row."""
    h = hashlib.sha256()
    for column in (rels, sizes, mtimes, texts):
        h.update("\0".join(map(str, column)).encode("utf-8", "surrogatepass"))
        h.update(b"\1")
    return h.hexdigest()


def _stamp_ok(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


class ResultsIndex:
    """The index of one results folder under `cache_dir` (None: no index, every file is read). `fields(path, rel,
    stamp)` gives a file's board fields (from the index while its stamp matches, else read and kept); `save(present)`
    drops the files no longer there and writes the index when something changed. `problem`: one line when the index
    on disk was damaged or hostile (then ignored and rebuilt), else None."""

    def __init__(self, root: Path, cache_dir: str | Path | None):
        self.path: Path | None = None
        self.root = root
        self.problem: str | None = None
        self.changed = False
        self._rows: dict[str, tuple[int, int, str]] = {}  # rel -> (size, mtime_ns, fields JSON) as stored
        self._fields: dict[str, tuple[int, int, dict[str, Any]]] = {}  # rel -> parsed and kept (this start)
        self._indexed: set[str] = set()  # the rels whose fields came from the index this start
        if cache_dir is None:
            return
        self._pa = _arrow()
        digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
        self.path = Path(cache_dir) / f"scan-{digest}.{'arrow' if self._pa else 'json'}"
        try:
            self._rows = self._read_arrow() if self._pa else self._read_json()
        except FileNotFoundError:
            pass
        except _Stale:
            self.changed = True
        except (OSError, BiobenchError, ValueError, TypeError, KeyError, _Damaged) as err:
            self._distrust(f"{type(err).__name__}: {err}" if not isinstance(err, _Damaged) else str(err))
        except Exception as err:  # noqa: BLE001 - pyarrow's own errors on a foreign file (ArrowInvalid, ...)
            self._distrust(f"not an index ({type(err).__name__}: {str(err)[:120]})")

    def _distrust(self, reason: str) -> None:
        """Ignore the index from here on (every file read again) and say so once; rewritten at save()."""
        if self.problem is None:
            self.problem = f"results index unreadable or altered ({reason}); ignored and rebuilt from the result files"
        self._rows.clear()
        self._fields = {rel: kept for rel, kept in self._fields.items() if rel not in self._indexed}
        self._indexed.clear()
        self.changed = True

    def _read_arrow(self) -> dict[str, tuple[int, int, str]]:
        pa = self._pa
        assert self.path is not None
        data = read_bytes(self.path, MAX_INDEX_BYTES)  # a regular file of bounded size, as the JSON readers do
        reader = pa.ipc.open_file(pa.py_buffer(data))
        meta = reader.schema.metadata or {}
        if meta.get(b"biobench") != str(VERSION).encode():
            raise _Stale
        table = reader.read_all()
        table.validate(full=True)  # offsets, lengths and UTF-8 checked before any value is read
        expected = [("rel", pa.string()), ("size", pa.int64()), ("mtime_ns", pa.int64()), ("score", pa.float64()),
                    ("fields", pa.string())]
        if [(f.name, f.type) for f in table.schema] != expected:
            raise _Damaged(f"columns {table.schema.names} of another type")
        columns = [table.column(name).to_pylist() for name in ("rel", "size", "mtime_ns", "fields")]
        if meta.get(b"sha256") != _digest(*columns).encode():
            raise _Damaged("its checksum does not match its rows")
        return self._checked(zip(*columns, strict=True))

    def _read_json(self) -> dict[str, tuple[int, int, str]]:
        assert self.path is not None
        data = read_json(self.path, MAX_INDEX_BYTES)
        if isinstance(data, dict) and data.get("v") != VERSION:
            raise _Stale
        if not (isinstance(data, dict) and isinstance(data.get("rows"), list)):
            raise _Damaged("not an index of this shape")
        return self._checked(row if isinstance(row, list) and len(row) == 4 else (None,) * 4 for row in data["rows"])

    @staticmethod
    def _checked(rows: Any) -> dict[str, tuple[int, int, str]]:
        out = {}
        for rel, size, mtime_ns, text in rows:
            if not (isinstance(rel, str) and rel and _stamp_ok(size) and _stamp_ok(mtime_ns) and isinstance(text, str)):
                raise _Damaged(f"a row of another shape ({str(rel)[:80]!r})")
            if rel in out:
                raise _Damaged(f"{rel[:80]!r} listed twice")
            out[rel] = (size, mtime_ns, text)
        return out

    def fields(self, path: Path, rel: str, stamp: tuple[int, int] | None) -> dict[str, Any] | None:
        """The board fields of `path` from the index when its (size, mtime_ns) `stamp` still matches, else read from
        the file (and kept); None when the file is not a JSON object (its reader then says why)."""
        if self.path is None or stamp is None:
            return None
        kept = self._fields.get(rel)
        if kept is not None and kept[:2] == stamp:
            return kept[2]
        row = self._rows.get(rel)
        if row is not None and row[:2] == stamp:
            try:
                data = json.loads(row[2])
            except (ValueError, RecursionError):
                data = None
            if isinstance(data, dict):
                self._fields[rel] = (*stamp, data)
                self._indexed.add(rel)
                return data
            self._distrust(f"the row of {rel[:80]!r} is not a JSON object")
        return self.read(path, rel, stamp)

    def read(self, path: Path, rel: str, stamp: tuple[int, int]) -> dict[str, Any] | None:
        """The board fields of `path` read from the file itself, kept for the index."""
        data = board_fields(path)
        self._indexed.discard(rel)
        if data is not None:
            self._fields[rel] = (*stamp, data)
            self.changed = True
        else:
            self._fields.pop(rel, None)
        return data

    def from_index(self, rel: str) -> bool:
        """Whether the fields given for `rel` this start came from the index (not read from the file)."""
        return rel in self._indexed

    def refuted(self, rel: str, reason: str) -> None:
        """The file of `rel` says something else than its index row (a row the store's validation refused where the
        file passes): the whole index is distrusted."""
        self._distrust(f"the row of {rel[:80]!r} differs from its file: {reason[:120]}")

    def save(self, present: set[str]) -> None:
        """Write the index with the rows of the files in `present` (the others were removed), if anything changed."""
        if self.path is None:
            return
        rows = {}
        for rel in sorted(present):
            kept, row = self._fields.get(rel), self._rows.get(rel)
            if kept is not None and (row is None or row[:2] != kept[:2]):
                rows[rel] = (kept[0], kept[1], json.dumps(kept[2]), _score(kept[2]))
            elif row is not None:
                rows[rel] = (*row, None)
            elif self.problem is not None:  # served from a distrusted index earlier this start: from the file now
                try:
                    st = (self.root / rel).stat()
                except OSError:
                    continue
                data = board_fields(self.root / rel)
                if data is not None:
                    rows[rel] = (st.st_size, st.st_mtime_ns, json.dumps(data), _score(data))
        if not (self.changed or set(self._rows) - set(rows)):
            return
        try:
            atomic_write(self.path, self._encode(rows), durable=False)
        except (OSError, DiskFullError):  # a read-only or full cache folder only costs the next start its speed
            pass

    def _encode(self, rows: dict[str, tuple[int, int, str, float | None]]) -> bytes | str:
        rels = list(rows)
        if not self._pa:
            return json.dumps({"v": VERSION, "rows": [[rel, *rows[rel][:3]] for rel in rels]})
        pa = self._pa
        scores = [rows[rel][3] if rows[rel][3] is not None else _score(json.loads(rows[rel][2])) for rel in rels]
        sizes, mtimes, texts = [rows[r][0] for r in rels], [rows[r][1] for r in rels], [rows[r][2] for r in rels]
        schema = pa.schema([("rel", pa.string()), ("size", pa.int64()), ("mtime_ns", pa.int64()),
                            ("score", pa.float64()), ("fields", pa.string())],
                           metadata={"biobench": str(VERSION), "sha256": _digest(rels, sizes, mtimes, texts)})
        table = pa.table([rels, sizes, mtimes, scores, texts], schema=schema)
        sink = io.BytesIO()
        with pa.ipc.new_file(sink, schema) as writer:
            writer.write_table(table)
        return sink.getvalue()


class _Stale(Exception):
    """An index of another version: a quiet miss."""


class _Damaged(Exception):
    """An index whose content is not what this module writes: a miss with one Problems line."""
