"""Result files on disk: the one writer, the one validating reader, the folder walk and the skip decision.

Why it is built this way: a grid of hundreds of fine-tuning runs gets killed, resharded and rerun. Every file
is written atomically (biobench.runtime.files: tmp file in the same folder + os.replace, the umask's mode)
with the predictions first and the result last, so a result file exists only for a finished run. A run is
identified by its key (model revision, data checksum, protocol hash, seed): an existing result with the same
key is skipped; one with another key is never replaced silently.

Every reader of results (eval's check of an existing result, compare, card, the leaderboard's scan and its
cache, `results push`, the results dataset) goes through `read_result` / `parse_result`: regular files only,
bounded size and nesting depth (biobench.runtime.jsonfile), then the record's validation
(record.Result.from_dict). A refused file is one ResultsError naming the file and the reason.
"""

from __future__ import annotations

import json
import operator
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any, Literal, TypeVar

from biobench.errors import ResultsError
from biobench.runtime.files import atomic_write
from biobench.runtime.jsonfile import (
    UnsafeJSONError,
    iter_jsonl_batches,
    iter_jsonl_text,
    object_at,
    parse_json,
    read_bytes,
    read_json,
)
from biobench.store.pairing import PredictionColumns
from biobench.store.record import KEY_FIELDS, SEED_FILE, Result, predictions_path, result_path

MAX_RESULT_BYTES = 8 * 2**20  # a result with a long history is ~100 KB; a 300 MB "result" is refused
MAX_PREDICTIONS_BYTES = 2**30  # a result that does not say how many test examples it has
# What one test example's predictions row may take: a token task's gold and predicted label lists of a long
# document (8,192 tokens x ~8 bytes) fit; a 900 MB line in a 60-example task's file was an ArrowMemoryError
# traceback at 3.7 GB in `leaderboard --export` and `results push` (issue 51 §5).
PER_EXAMPLE_BYTES = 64 * 2**10

Decision = Literal["new", "skip", "overwrite"]
_Read = TypeVar("_Read")  # what a predictions reader gives: rows or columns


def _finished(path: Path) -> str:
    """What a full disk cannot harm: the finished results of the results folder `path` belongs to."""
    root = path.parent.parent.parent
    n = sum(1 for p in root.glob("*/*/seed-*.json") if SEED_FILE.fullmatch(p.name))
    return f"{n} finished result(s) under {root} are safe"


def write_result(path: str | Path, result: Result, predictions: Sequence[Mapping[str, Any]]) -> Result:
    """Write the predictions JSONL, then the result JSON (which names it); returns the result as written.
    A full disk raises DiskFullError (one line) and leaves the folder as it was."""
    path = Path(path)
    pred_path = predictions_path(path)
    safe = lambda: _finished(path)  # noqa: E731 - counted only when the disk is full
    atomic_write(pred_path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in predictions), safe)
    result.predictions = pred_path.name
    atomic_write(path, result.to_json(), safe)
    return result


def _refused(source: str | Path, err: UnsafeJSONError) -> ResultsError:
    if err.reason.startswith(("not valid JSON", "not UTF-8")):
        return ResultsError(f"{source}: corrupt result file ({err.reason})")
    return ResultsError(f"{source}: {err.reason}")


def parse_result(text: str | bytes, source: str | Path = "<result>", check_key: bool = True) -> Result:
    """The Result of a result file's text (e.g. the `result` column of a results dataset), with the checks of
    `read_result`."""
    if len(text) > MAX_RESULT_BYTES:
        raise ResultsError(f"{source}: result of {len(text)} bytes is over the {MAX_RESULT_BYTES} limit")
    try:
        data = parse_json(text, source)
    except UnsafeJSONError as err:
        raise _refused(source, err) from None
    return Result.from_dict(data, source, check_key)


def _json_file(path: str | Path, max_bytes: int, what: str) -> tuple[Any, bytes]:
    """`read_json_file`'s value and the bytes it was parsed from."""
    try:
        data = read_bytes(path, max_bytes, confined=True)
        return parse_json(data, path), data
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such {what}") from None
    except UnsafeJSONError as err:
        raise _refused(path, err) from None
    except OSError as err:
        raise ResultsError(f"{path}: unreadable {what} ({err.strerror or err})") from None


def read_json_file(path: str | Path, max_bytes: int = MAX_RESULT_BYTES, what: str = "file") -> Any:
    """A JSON file from a results folder (a result, an analysis output, a cache), parsed with the bounded reader;
    ResultsError naming the file when it is missing, refused or not JSON (`what` names the kind of file)."""
    return _json_file(path, max_bytes, what)[0]


def read_result(path: str | Path, check_key: bool = True) -> Result:
    """The Result of a file; ResultsError naming the file when it is missing, not a regular file, too large or
    too deeply nested, not valid JSON or not a valid biobench result (see Result.from_dict for `check_key`)."""
    return read_result_bytes(path, check_key)[0]


def read_result_bytes(path: str | Path, check_key: bool = True) -> tuple[Result, bytes]:
    """`read_result` and the bytes the result was read from, in one read (the board's results index seals its row
    to them, bench/store/index.py)."""
    data, content = _json_file(path, MAX_RESULT_BYTES, "result file")
    # a Path is kept as given: parsing it again was 6% of a cold scan worker's CPU per file (docs/performance.md)
    return Result.from_dict(data, path if isinstance(path, Path) else Path(path), check_key), content


def predictions_limit(path: str | Path) -> int:
    """The bytes the predictions file `path` (`seed-<n>.predictions.jsonl`) may hold: what its task can produce, the
    test examples its result beside it records (`task.n_test`) x PER_EXAMPLE_BYTES, at most MAX_PREDICTIONS_BYTES
    (also when the result is missing, refused or does not say). The one bound every reader applies (the board,
    its export, `results push`, compare, `load_results`)."""
    path = Path(path)
    result = path.with_name(path.name.removesuffix(".jsonl").removesuffix(".predictions") + ".json")
    try:
        n_test = object_at(read_json(result, MAX_RESULT_BYTES, confined=True), "task").get("n_test")
    except (OSError, UnsafeJSONError):
        return MAX_PREDICTIONS_BYTES
    if isinstance(n_test, bool) or not isinstance(n_test, int) or n_test < 1:
        return MAX_PREDICTIONS_BYTES
    return min(MAX_PREDICTIONS_BYTES, n_test * PER_EXAMPLE_BYTES)


def predictions_refused(path: str | Path, err: UnsafeJSONError, limit: int) -> str:
    """The reason a predictions file was refused, saying where a size bound comes from."""
    if err.reason.startswith("file of") and limit < MAX_PREDICTIONS_BYTES:
        return (f"{err.reason}: what its task's {limit // PER_EXAMPLE_BYTES:,} test examples can produce "
                f"({PER_EXAMPLE_BYTES // 1024} KiB each)")
    return err.reason


def read_predictions(path: str | Path) -> list[dict[str, Any]]:
    """The predictions rows of a result (pass the result's path or the .jsonl itself); blank lines are skipped.
    Read confined (a link out of its folder is refused) and bounded by `predictions_limit`."""
    return _bounded(path, _read_predictions)


def read_prediction_columns(path: str | Path) -> PredictionColumns:
    """`read_predictions` as columns: `PredictionColumns.of` of its rows, with the same bounds, checks and
    refusals. A file in the form `write_result` writes rows of text ids and labels (`_writer_columns`) is split,
    not parsed: a board's groups read 51,300 such files cold, and parsing them was half of the groups' CPU
    (docs/performance.md)."""
    return _bounded(path, _read_columns)


def _bounded(path: str | Path, read: Callable[[Path, int], _Read]) -> _Read:
    """`read(predictions file, its byte bound)` for a result's path or its .jsonl (`read_predictions`)."""
    path = Path(path)
    if not path.name.endswith(".jsonl"):
        path = predictions_path(path)
    # the result beside it is read for the bound only when the bound could matter: every bound
    # `predictions_limit` gives is at least PER_EXAMPLE_BYTES (one test example), so a file no larger passes
    # whatever the result says (a board's groups read 51,300 such files, and reading each result again for
    # this was a tenth of their reading). A refusal (the file grown past it since this stat, or damaged) is read
    # again under the real bound, so its message is the one it always was.
    try:
        small = os.stat(path).st_size <= PER_EXAMPLE_BYTES
    except OSError:
        small = False
    if small:
        try:
            return read(path, PER_EXAMPLE_BYTES)
        except ResultsError:
            pass
    return read(path, predictions_limit(path))


def _read_columns(path: Path, limit: int) -> PredictionColumns:
    """`read_prediction_columns` of the .jsonl `path` under the byte bound `limit`: split when it is in the
    writer's form, else (or when it is refused) parsed by `_read_predictions`, whose messages are the reader's."""
    try:  # a file over SPLIT_MAX_BYTES is refused here unread (`open_regular`'s size check) and streamed below
        columns = _writer_columns(read_bytes(path, min(limit, SPLIT_MAX_BYTES), confined=True).decode("utf-8"))
    except (OSError, UnsafeJSONError, UnicodeDecodeError):
        columns = None
    return columns if columns is not None else PredictionColumns.of(_read_predictions(path, limit))


# The largest predictions file split whole (`_writer_columns`); a larger one is streamed by batches of lines as
# before. Why a bound: the split holds the file's text and a string per quoted part at once (some 20 times the
# file's size when its parts are short), where the streaming reader holds a batch of lines; 1 MiB is ~16,000 rows
# of a classification task.
SPLIT_MAX_BYTES = 2**20
_NOT_LITERAL = re.compile(r"[\\\x00-\x09\x0b-\x1f]")  # a backslash or a control character other than a newline
_LINE_PARTS = 12  # a writer's line split on quotes: {, id, ": ", <id>, ", ", gold, ": ", <gold>, ", ", pred, ": ", <pred>


def _writer_columns(text: str) -> PredictionColumns | None:
    """The columns of predictions JSONL whose every line is exactly `{"id": "…", "gold": "…", "pred": "…"}` and a
    newline, no string holding a backslash or a control character (how `write_result` writes text ids and single
    labels); None for any other text, which the caller parses. Why it is exact: split on its quotes, such a text
    gives the same twelve parts a line, the fixed ones ({, the keys, ": ", ", ", and "}\\n{" between lines) checked
    here by position; a string without a quote, backslash or control character is its own JSON value, so each
    line parses to {"id": <id>, "gold": <gold>, "pred": <pred>}, a row `read_predictions` keeps. The fixed parts
    hold exactly one newline a line, so a count of them rules a newline in a string out."""
    parts = text.split('"')
    n = len(parts) // _LINE_PARTS
    if not (n and len(parts) == _LINE_PARTS * n + 1 and parts[0] == "{" and parts[-1] == "}\n"
            and parts[_LINE_PARTS:-1:_LINE_PARTS].count("}\n{") == n - 1 and text.count("\n") == n
            and parts[1::_LINE_PARTS].count("id") == n and parts[5::_LINE_PARTS].count("gold") == n
            and parts[9::_LINE_PARTS].count("pred") == n and parts[2::4].count(": ") == 3 * n
            and parts[4::_LINE_PARTS].count(", ") == n and parts[8::_LINE_PARTS].count(", ") == n
            and _NOT_LITERAL.search(text) is None):
        return None
    return PredictionColumns.shared(parts[3::_LINE_PARTS], parts[7::_LINE_PARTS], parts[11::_LINE_PARTS])


def _read_predictions(path: Path, limit: int) -> list[dict[str, Any]]:
    """`read_predictions` of the .jsonl `path` under the byte bound `limit`."""
    numbered: list[tuple[int, Any]] = []
    try:
        try:
            for batch in iter_jsonl_batches(path, limit, confined=True):
                numbered += batch
        except UnsafeJSONError:
            _predictions_rows(path, numbered)  # a bad row before the bad line is the one reported, as line by line
            raise
    except FileNotFoundError:
        raise ResultsError(f"{path}: predictions file is missing (rerun the seed with --overwrite)") from None
    except UnsafeJSONError as err:
        if err.reason.startswith("not valid JSON"):
            raise ResultsError(f"{err.source}: corrupt predictions line ({err.reason})") from None
        raise ResultsError(f"{err.source}: unreadable predictions file "
                           f"({predictions_refused(path, err, limit)})") from None
    except OSError as err:
        raise ResultsError(f"{path}: unreadable predictions file ({err})") from None
    return _predictions_rows(path, numbered)


def _predictions_rows(path: str | Path, numbered: list[tuple[int, Any]]) -> list[dict[str, Any]]:
    """The rows of (line number, value) pairs when each is a predictions row (`_predictions_row`), checked by
    `map`s that run in C: a board checks millions of rows, and a function call per row was a sixth of reading a
    file. ResultsError naming the first row that is not one."""
    rows = list(map(operator.itemgetter(1), numbered))
    if (set(map(type, rows)) <= {dict} and all(map(operator.contains, rows, repeat("gold")))
            and all(map(operator.contains, rows, repeat("pred")))):
        return rows
    return [_predictions_row(path, lineno, row) for lineno, row in numbered]


def _predictions_row(path: str | Path, lineno: int, row: Any) -> dict[str, Any]:
    """A predictions row as the format has it (a JSON object with 'gold' and 'pred'); ResultsError otherwise."""
    if not isinstance(row, dict) or "gold" not in row or "pred" not in row:
        raise ResultsError(f"{path}:{lineno}: a predictions row needs 'gold' and 'pred'")
    return row


def published_predictions(path: str | Path) -> str:
    """The text of a predictions file for publishing (`leaderboard --export`, `results push`, anything that copies
    it where others read it), under the one rule for a published file: a regular file with one link (a hard link
    to a secret elsewhere resolves inside the folder; `open_regular`'s `one_link`), no link leading out of its
    folder, bounded by what its task can produce (`predictions_limit`), and every line a predictions row of the
    format (a JSON object with 'gold' and 'pred'). ResultsError naming the file and why otherwise: the caller
    leaves it out with a warning, never copies it."""
    path = Path(path)
    limit = predictions_limit(path)
    try:
        text = read_bytes(path, limit, confined=True, one_link=True).decode("utf-8")
        for lineno, row in iter_jsonl_text(text, path):
            _predictions_row(path, lineno, row)
    except FileNotFoundError:
        raise ResultsError(f"{path}: predictions file is missing (rerun the seed with --overwrite)") from None
    except UnsafeJSONError as err:
        raise ResultsError(f"{err.source}: predictions file refused ({predictions_refused(path, err, limit)})"
                           ) from None
    except UnicodeDecodeError as err:
        raise ResultsError(f"{path}: predictions file refused (not UTF-8 text: {err.reason} at byte {err.start})"
                           ) from None
    except OSError as err:
        raise ResultsError(f"{path}: predictions file unreadable ({err})") from None
    return text


def _key_difference(old: Result, key: Mapping[str, Any], protocol: Mapping[str, Any] | None) -> str:
    parts = []
    for name in KEY_FIELDS:
        was, now = old.key.get(name), key.get(name)
        if was == now:
            continue
        if name == "protocol_hash" and protocol is not None and isinstance(old.protocol, dict):
            changed = sorted(
                f for f in set(protocol) | set(old.protocol)
                if f != "hash" and protocol.get(f) != old.protocol.get(f)
            )
            detail = ", ".join(f"{f} {old.protocol.get(f)!r} -> {protocol.get(f)!r}" for f in changed)
            parts.append(f"protocol ({detail or 'hash differs'})")
        else:
            parts.append(f"{name} {str(was)[:19]} -> {str(now)[:19]}")
    return "; ".join(parts)


def _is_hex(value: object) -> bool:
    return isinstance(value, str) and len(value) >= 12 and all(c in "0123456789abcdef" for c in value.lower())


def decide(path: str | Path, key: Mapping[str, Any], overwrite: bool = False,
           protocol: Mapping[str, Any] | None = None) -> Decision:
    """What to do for a planned run whose result goes to `path`:
    "new" (nothing there), "skip" (same key, finished), "overwrite" (--overwrite and something is there).
    A corrupt file or a result of another run raises ResultsError unless `overwrite`."""
    path = Path(path)
    if not path.exists():
        return "new"
    if overwrite:
        return "overwrite"
    try:
        old = read_result(path)
    except ResultsError as err:
        raise ResultsError(f"{err}; fix or delete it, or pass --overwrite to redo this run") from None
    if all(old.key.get(f) == key.get(f) for f in KEY_FIELDS):
        return "skip"
    if old.details.get("overrides") and path.name == f"seed-{old.seed}.json" and _is_hex(old.key.get("protocol_hash")):
        # a smoke run written by a biobench that stored it where protocol runs go: it has a place of its own now
        beside = result_path(path.parent.parent.parent, path.parent.parent.name, path.parent.name, old.seed,
                             str(old.key["protocol_hash"]))
        raise ResultsError(
            f"{path} holds a smoke run (protocol overrides) written by an older biobench where the protocol run of "
            f"seed {old.seed} now goes; keep both: mv {path} {beside} && mv {predictions_path(path)} "
            f"{predictions_path(beside)} (or pass --overwrite to replace it)")
    raise ResultsError(
        f"{path} holds a result of another run ({_key_difference(old, key, protocol)}); not overwriting it: "
        "pass --overwrite to replace it, or --results DIR to keep both"
    )


def _seed_of(path: Path) -> int:
    match = SEED_FILE.fullmatch(path.name)
    return int(match[1]) if match else -1


def seed_paths(results_dir: str | Path, model_slug: str | None = None, task_id: str | None = None) -> list[Path]:
    """Every `<results>/<slug>/<task>/seed-<n>.json`, sorted by (slug, task, seed), through real folders only: a
    symlinked model or task folder is not followed. The one rule of every reader of a results folder (the board's
    walk does not follow links either, bench/standings/scan.py `Listing`): the Every Eval Ever export counted a
    linked folder's runs that the board and the parquet export skipped, 4 runs against the board's 2 (issue 58)."""
    root = Path(results_dir)
    pattern = f"{model_slug or '*'}/{task_id or '*'}/seed-*.json"
    paths = [p for p in root.glob(pattern) if SEED_FILE.fullmatch(p.name)
             and not p.parent.is_symlink() and not p.parent.parent.is_symlink()]
    return sorted(paths, key=lambda p: (p.parent.parent.name, p.parent.name, _seed_of(p)))


def iter_results(results_dir: str | Path, model_slug: str | None = None,
                 task_id: str | None = None) -> Iterator[tuple[Path, Result]]:
    """(path, result) for every `<results>/<slug>/<task>/seed-<n>.json` (seed_paths), sorted; corrupt files raise."""
    for path in seed_paths(results_dir, model_slug, task_id):
        yield path, read_result(path)
