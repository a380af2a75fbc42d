"""Read results folders (docs/FORMATS.md) and the paper's reference rows, tolerantly.

Files are read by the results store's one reader (`biobench.store`); every file that cannot be used becomes
a `Problem` (path + the reader's reason) instead of an exception: one corrupt or half-written result must never
take the leaderboard down. No torch here (the leaderboard starts fast).
"""

from __future__ import annotations

import csv
import functools
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from biobench import store
from biobench.errors import ResultsError
from biobench.names import display_name
from biobench.runtime.paths import LANG_CODE, UnsafePathError, hide_paths, safe_name
from biobench.standings import process_pool
from biobench.store import trust
from biobench.store.analysis import ANALYSIS_FILES
from biobench.store.index import IndexRow, ResultsIndex, SealedRow, Stamp, sealed_row


@dataclass(frozen=True)
class Problem:
    path: str
    reason: str

    def public(self, roots: Sequence[str | Path]) -> Problem:
        """This problem as a public page shows it: its file relative to the results folder it lies in, and any
        path in its reason likewise (a path outside every results folder by its last part, runtime.paths.hide_paths).
        Why: the Problems tab showed /tmp/.../cache/results/<sha>/model/task/seed-1.json to every visitor."""
        return Problem(public_path(self.path, roots), public_text(self.reason, roots))


def _root_prefixes(roots: Sequence[str | Path]) -> list[str]:
    """Each results folder as written and resolved (a symlinked /tmp), longest first, with a trailing separator."""
    found = {str(p).rstrip(os.sep) + os.sep for root in roots for p in (Path(root), Path(root).resolve())}
    return sorted(found, key=len, reverse=True)


def public_path(path: str, roots: Sequence[str | Path]) -> str:
    """A file named relative to the results folder holding it (`model--1234abcd/task/seed-1.json`); a results
    folder itself by its name; anything else by its last part."""
    text = str(path)
    for prefix in _root_prefixes(roots):
        if text.startswith(prefix):
            return text[len(prefix):]
        if text + os.sep == prefix:
            return Path(text).name
    return hide_paths(text)


def public_text(text: str, roots: Sequence[str | Path]) -> str:
    for prefix in _root_prefixes(roots):
        text = text.replace(prefix, "")
    return hide_paths(text)


PROBLEMS_LIKE_THIS = 5  # lines shown per kind of problem before "... and N more like this"
_ROW = re.compile(r" \(row \d+\)$")
_VALUE = re.compile(r"'[^']*'|\"[^\"]*\"|\S*/\S*|\d+")  # quoted values, paths, numbers


def collapse(problems: Sequence[Problem], keep: int = PROBLEMS_LIKE_THIS) -> list[Problem]:
    """`problems` with each kind past its first `keep` folded into one "... and N more like this" line, in first-
    seen order. A kind: the same reason once its quoted values, paths and numbers are blanked (a file's path is
    not part of it: 200,000 copies of one result are one kind). Why: a 1.2 MB results dataset of 200,000 rows
    printed 199,999 warning lines (`duplicate of ...`) and filled the Problems tab; one problem repeated tells
    nothing a count does not."""
    kinds: dict[str, list[Problem]] = {}
    for problem in problems:
        kinds.setdefault(_VALUE.sub("_", problem.reason), []).append(problem)
    out: list[Problem] = []
    for same in kinds.values():
        out += same[:keep]
        if len(same) > keep:
            out.append(Problem(_ROW.sub("", same[keep].path), f"... and {len(same) - keep:,} more like this"))
    return out


@dataclass(frozen=True)
class Run:
    """One measured (model, task, seed) result: what the results index keeps of its file (`row`,
    `store.index.IndexRow`, the one shape of a result row: the index stores it, the board reads it) and where the
    result lies, resolved at scan time: its file, its language (the row's, else the known task's) and its
    predictions file when it exists. `score` is the test score of the task's headline metric (`Result.score`,
    macro-F1 unless the task's spec says otherwise) as a fraction."""

    path: Path
    lang: str
    predictions: Path | None
    row: IndexRow

    # the row's columns, read through (`lang` and `predictions` above are the resolved ones)
    @property
    def model(self) -> str:  # slug: the identity of a model across tasks and folders
        return self.row.model

    @property
    def name(self) -> str:
        return self.row.name

    @property
    def task(self) -> str:
        return self.row.task

    @property
    def kind(self) -> str:
        return self.row.kind

    @property
    def seed(self) -> int:
        return self.row.seed

    @property
    def score(self) -> float:
        return self.row.score

    @property
    def per_label(self) -> dict[str, float]:
        return self.row.per_label

    @property
    def model_meta(self) -> dict[str, Any]:
        return self.row.model_meta

    @property
    def labels(self) -> tuple[str, ...]:  # the task's label inventory, when the result records it
        return self.row.labels

    @property
    def details(self) -> dict[str, Any]:  # run key, protocol, timings, device, dev_score
        return self.row.details

    @property
    def smoke(self) -> str:  # a smoke run's protocol overrides (store.trust.describe_overrides); "" = the protocol's
        return self.row.smoke

    @property
    def degenerate(self) -> str:  # degenerate test predictions and their likely reason (store.trust.degenerate_text)
        return self.row.degenerate

    @property
    def metric(self) -> str:  # the task's headline metric, the one `score` is (Result.metric)
        protocol = self.row.details.get("protocol")
        return str(protocol.get("metric") or "macro_f1") if isinstance(protocol, dict) else "macro_f1"


@dataclass(frozen=True)
class ReferenceRow:
    """The paper's published per-task numbers for one (language, model): percentages, means over seeds."""

    lang: str
    model: str
    recipe: str
    size: str
    context: int | None
    scores: dict[str, float]
    seeds: int
    paper_avg: float | None
    source: str


@dataclass
class Scan:
    runs: list[Run] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    analyses: dict[str, list[Path]] = field(default_factory=lambda: {k: [] for k in (*ANALYSIS_FILES, "train_log")})
    listings: list[Listing] = field(default_factory=list)  # the walks; build_board keeps their stamps on the Board
    saves: list[Callable[[], None]] = field(default_factory=list)  # the results indexes' saves, when left to the caller


def _per_label_f1(per_label: Any) -> dict[str, float]:
    if not isinstance(per_label, dict):
        return {}
    out = {}
    for label, v in per_label.items():
        f1 = v.get("f1") if isinstance(v, dict) else v
        if isinstance(f1, int | float) and math.isfinite(f1):
            out[str(label)] = float(f1)
    return out


def _reason(err: Exception, path: Path) -> str:
    """A store error's message without the file name (the Problem names the file): 'path:2: x' -> 'line 2: x'."""
    message = str(err).removeprefix(f"{path}: ")
    return re.sub(r"^(\d+): ", r"line \1: ", message.removeprefix(f"{path}:"))


def _check_ids(path: Path, task_id: str, lang: Any, predictions: Any) -> None:
    """A task id, language and predictions file name from a result become tabs, element ids and file names:
    each must look like the ones biobench writes, or the file is a Problem (never a tab, never a path). None:
    not checked here."""
    if lang is not None and (not isinstance(lang, str) or not LANG_CODE.fullmatch(lang)):
        raise ResultsError(f"{path}: task.lang {str(lang)[:80]!r} is not a language code (like fr, en)")
    try:
        safe_name(task_id, "task.id")
        if predictions:
            safe_name(predictions, "predictions file")
    except UnsafePathError as err:
        raise ResultsError(f"{path}: {err}") from None


def index_row(path: Path, result: store.Result) -> IndexRow:
    """What the board keeps of a validated result (`store.index.IndexRow`), its ids checked (`_check_ids`; a task
    without `lang` is checked when its language is known, in `run_of`): the scan's results index stores it, so a
    warm start builds its runs from typed columns instead of re-reading and re-validating the file."""
    task = result.task
    lang = task.get("lang")
    predictions = str(result.predictions) if result.predictions else store.predictions_path(path).name
    _check_ids(path, result.task_id, lang or None, predictions)  # no language: checked once it is known (run_of)
    note = trust.degenerate(result)
    return IndexRow(
        model=store.model_group(result, path),  # the one identity of a model (its results folder)
        name=display_name(result.model),  # the stored name; older files: built from alias / lineage / id
        lang=lang or "",
        task=result.task_id,
        kind=str(task.get("kind", "classification")),
        seed=result.seed,
        score=result.score,  # the task's headline metric: what ranks and averages
        per_label=_per_label_f1(result.metrics["test"].get("per_label")),
        predictions=predictions,
        model_meta=dict(result.model),
        labels=tuple(str(v) for v in task.get("labels") or ()),
        details={"key": result.key, "protocol": result.protocol,
                 **{k: result.details[k] for k in BOARD_DETAILS if k in result.details}},
        smoke=trust.describe_overrides(trust.overrides(result)),
        degenerate=trust.degenerate_text(note) if note else "",
    )


def _child(folder: Path, name: str) -> Path:
    """`folder / name` for a name of one part (a listed file name, or a predictions name `_check_ids` passed).
    Why not `/`: it parses the name as a path, 0.6 s for the 100,000 paths of a 300-model board's warm start;
    pathlib's own glob uses `_make_child_relpath` for the children it lists, which parses nothing (CPython
    3.11-3.13; where it is missing, `/`)."""
    make = getattr(folder, "_make_child_relpath", None)
    return make(name) if make is not None else folder / name


def run_of(path: Path, row: IndexRow, known_langs: dict[str, str] | None = None, listing: Listing | None = None,
           folder: Path | None = None) -> Run:
    """The Run of a result file from its row (ids checked when it was made, `index_row` or the index's own
    checks); a task without `lang` takes the language of the known task of that id. `listing`: the scan's one
    directory walk, which says whether the predictions file exists without asking the disk again."""
    lang = row.lang or (known_langs or {}).get(row.task)
    if not lang:
        raise ResultsError(f"{path}: no task.lang and task {row.task!r} is not a known task")
    if not row.lang:
        _check_ids(path, row.task, lang, None)
    folder = folder or path.parent
    pred_path: Path | None
    if listing is None:
        pred_path = folder / row.predictions
        pred_path = pred_path if pred_path.is_file() else None
    else:
        pred_str = f"{folder}{os.sep}{row.predictions}"
        pred_path = _child(folder, row.predictions) if listing.has(pred_str) else None
    return Run(path=path, lang=lang, predictions=pred_path, row=row)


def parse_result(path: Path, known_langs: dict[str, str] | None = None, listing: Listing | None = None) -> Run:
    """One result file -> Run through the results store's reader (`biobench.store.read_result`), which
    raises ResultsError naming what is wrong. An incomplete run key is accepted (the board only aggregates
    scores)."""
    return run_of(path, read_row(path).row, known_langs, listing)


def read_row(path: Path) -> SealedRow:
    """The row of one result file, read and validated by the store's reader (an incomplete run key is accepted:
    the board only aggregates scores), sealed to the bytes it was read from (one read: the results index keeps
    the seal)."""
    result, data = store.read_result_bytes(path, check_key=False)
    return sealed_row(index_row(path, result), data)


PARALLEL_READ_FILES = 4_000  # a scan with more result files to read than this reads them in worker processes
READ_CHUNK = 1_000  # result files per worker job


def read_rows(paths: list[str]) -> list[SealedRow | str]:
    """Each file's sealed row, or the reader's message (a ResultsError's text) when it is not a valid result: a
    worker's job (bench/standings/process_pool.py); the seals are made there, beside the reading."""
    out: list[SealedRow | str] = []
    folders: dict[str, Path] = {}
    for path in paths:
        head, sep, name = path.rpartition(os.sep)
        folder = folders.get(head)
        if folder is None:  # one Path per folder, each file a child of it (`_child`): parsing every path was 6%
            folder = folders[head] = Path(head or ".")  # of a worker's CPU per file (docs/performance.md)
        try:
            out.append(read_row(_child(folder, name) if sep and name else Path(path)))
        except ResultsError as err:
            out.append(str(err))
    return out


def _read_in_workers(paths: list[str]) -> dict[str, SealedRow | str]:
    """`read_rows` of `paths` in worker processes, by chunks: a cold 300-model board reads 51,300 result files,
    11 s in one process (docs/performance.md), and a board start has the machine's cores to itself until its
    groups begin. What a worker returns is what this process would have read (the same reader, the same
    messages); a failed worker's chunks are read here."""
    chunks = [(paths[i:i + READ_CHUNK],) for i in range(0, len(paths), READ_CHUNK)]
    read: dict[str, SealedRow | str] = {}
    for (chunk,), rows in zip(chunks, process_pool.in_workers(read_rows, chunks), strict=True):
        read.update(zip(chunk, rows, strict=True))
    return read


def _row_read(path: Path, ahead: SealedRow | str | None) -> SealedRow:
    """The row of `path` as a worker read it ahead (its error message raised as the reader raises it), else
    read here."""
    if ahead is None:
        return read_row(path)
    if isinstance(ahead, str):
        raise ResultsError(ahead)
    return ahead


BOARD_DETAILS = ("timings", "device", "dev_score", "created", "contamination")
TRAIN_LOG = "train_log.jsonl"  # a `biobench pretrain` run's per-step log (docs/FORMATS.md)


class Listing:
    """One walk of a results folder: every file under it, in the order sorted(Path.rglob) gives (by path parts),
    and the (size, mtime_ns) of the result and predictions files, taken once (with the inode and ctime_ns of the
    result files: the results index's stamp, `index_stamp`). Why: a warm start of a large board
    otherwise spent most of its time in three pathlib `stat`s per result (the scan index check, the predictions
    file, the significance fingerprint), and then 0.5 s sorting 100,000 paths by their parts; each folder's
    entries are sorted by name here instead, which gives the same order. Symlinked folders are listed, not
    followed (as os.walk does)."""

    def __init__(self, root: Path):
        self.files: set[str] = set()
        self.ordered: list[str] = []
        self.stamps: dict[str, tuple[int, int]] = {}
        self.identities: dict[str, tuple[int, int]] = {}  # a .json's (inode, ctime_ns)
        # depth first with a stack of each open folder's sorted entries, not recursion: a results folder nested
        # deeper than Python's recursion limit is listed, not a RecursionError
        stack = [self._entries(str(root))]
        while stack:
            entry = next(stack[-1], None)
            if entry is None:
                stack.pop()
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if not entry.is_symlink():
                    stack.append(self._entries(entry.path))
                continue
            path, name = entry.path, entry.name
            self.files.add(path)
            self.ordered.append(path)
            if name.endswith(".json") or name.endswith(".jsonl"):
                try:
                    st = os.stat(path)
                except OSError:  # removed while walking
                    continue
                self.stamps[path] = (st.st_size, st.st_mtime_ns)
                if name.endswith(".json"):
                    self.identities[path] = (st.st_ino, st.st_ctime_ns)

    @staticmethod
    def _entries(folder: str) -> Iterator[os.DirEntry]:
        try:
            with os.scandir(folder) as found:
                return iter(sorted(found, key=lambda e: e.name))
        except OSError:  # unreadable or removed while walking: os.walk skips it too
            return iter(())

    def has(self, path: Path | str) -> bool:
        return str(path) in self.files

    def stamp(self, path: Path | str) -> tuple[int, int] | None:
        return self.stamps.get(str(path))

    def index_stamp(self, path: str) -> Stamp | None:
        """A result file's (size, mtime_ns, inode, ctime_ns): what the results index checks its row against."""
        stamp, identity = self.stamps.get(path), self.identities.get(path)
        return None if stamp is None or identity is None else (*stamp, *identity)

    def wanted(self) -> list[str]:
        """Every .json and train_log.jsonl, in the order sorted(Path.rglob) gives (by path parts)."""
        return [p for p in self.ordered if p.endswith(".json") or os.path.basename(p) == TRAIN_LOG]


def scan_results(dirs: Iterable[str | Path], known_langs: dict[str, str] | None = None,
                 cache_dir: str | Path | None = None, save_index: bool = True,
                 meanwhile: Callable[[], None] | None = None) -> Scan:
    """Every `seed-<n>.json` under each folder (any depth), plus analysis outputs and pretraining logs.
    Duplicates of a (model, task, seed) across folders keep the first and report the others; a smoke run
    (protocol overrides) and a protocol run of the same seed are not duplicates (separate rows). With
    `cache_dir`, result files are read through the folder's results index (`biobench.store.index`), which is
    saved before returning, or (`save_index=False`) left in `Scan.saves` for the caller to run once its page is
    served: encoding a cold 300-model index is a third of the board's own CPU (docs/performance.md), and an
    index not written only costs the next start a cold scan. `meanwhile`: run in a thread once the first folder is
    listed (never without a folder), as its result files are read (in worker processes past PARALLEL_READ_FILES, while this process waits
    for them)."""
    scan = Scan()
    seen: dict[tuple[str, str, str, int], Path] = {}
    for root in map(Path, dirs):
        if not root.is_dir():
            scan.problems.append(Problem(str(root), "results folder does not exist"))
            continue
        index, present, listing = ResultsIndex(root, cache_dir), set(), Listing(root)
        if index.problem:
            scan.problems.append(Problem(str(index.path), index.problem))
        scan.listings.append(listing)
        prefix = len(str(root).rstrip(os.sep)) + 1
        folders: dict[str, Path] = {}
        wanted = listing.wanted()
        unread = [p for p in wanted if store.SEED_FILE.fullmatch(os.path.basename(p))
                  and index.row(p[prefix:], listing.index_stamp(p), p) is None]
        if meanwhile is not None:  # after the walk: its stats would wait for the GIL behind the other thread
            threading.Thread(target=meanwhile, name="biobench-board-meanwhile", daemon=True).start()
            meanwhile = None
        read_ahead = _read_in_workers(unread) if len(unread) >= PARALLEL_READ_FILES else {}
        for name_str in wanted:
            name = os.path.basename(name_str)
            if name == TRAIN_LOG:
                scan.analyses["train_log"].append(Path(name_str))
                continue
            kind = next((k for k, fname in ANALYSIS_FILES.items() if name == fname), None)
            if kind:
                scan.analyses[kind].append(Path(name_str))
                continue
            if not store.SEED_FILE.fullmatch(name):
                continue
            folder_str, rel = name_str[:-len(name) - 1], name_str[prefix:]
            folder = folders.get(folder_str)
            if folder is None:  # one Path per folder: a child path parses one part, not the whole path
                folder = folders[folder_str] = Path(folder_str)
            path = _child(folder, name)
            present.add(rel)
            stamp = listing.index_stamp(name_str)
            row = index.row(rel, stamp, name_str)
            try:
                if row is None:
                    try:
                        sealed = _row_read(path, read_ahead.pop(name_str, None))
                    except ResultsError:
                        index.keep(rel, stamp, None)
                        raise
                    index.keep(rel, stamp, sealed)
                    row = sealed.row
                run = run_of(path, row, known_langs, listing, folder)
            except ResultsError as err:
                scan.problems.append(Problem(str(path), _reason(err, path)))
                continue
            key = (run.model, run.smoke, run.task, run.seed)
            if key in seen:
                scan.problems.append(Problem(str(path), f"duplicate of {seen[key]} (kept the first)"))
                continue
            seen[key] = path
            scan.runs.append(run)
        for line in (index.disagreement(), index.orphaned(present)):
            if line:
                scan.problems.append(Problem(str(index.path), line))
        if save_index:
            index.save(present)
        else:
            scan.saves.append(functools.partial(index.save, present, scanned_ns=time.time_ns()))
    return scan


@lru_cache(maxsize=512)
def _predictions(path: str, mtime_ns: int) -> store.PredictionColumns:
    columns = store.read_prediction_columns(Path(path))
    if not columns.gold:
        raise ResultsError(f"{path}: no predictions")
    return columns


def load_predictions(path: Path) -> store.PredictionColumns:
    """A predictions file (`biobench.store.read_predictions`, its checks) as columns, cached while the file is
    unchanged: comparisons and MDDs read the same files many times."""
    try:
        return _predictions(str(path), path.stat().st_mtime_ns)
    except OSError as err:
        raise ResultsError(f"{path}: unreadable predictions file ({err.strerror or err})") from None


def problem_of(err: ResultsError, path: Path, what: str) -> Problem:
    return Problem(str(path), f"{what}: {_reason(err, path)}")


def reference_csv() -> Path:
    return Path(str(resources.files("biobench.standings") / "reference" / "paper_results.csv"))


def load_reference(path: str | Path | None = None) -> list[ReferenceRow]:
    """The paper's Tables 1-2 (shipped with the package), one row per (language, model), file order."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    with open(path or reference_csv(), encoding="utf-8", newline="") as fh:
        for r in csv.DictReader(fh):
            entry = rows.setdefault(
                (r["lang"], r["model"]),
                {"recipe": r["recipe"], "size": r["size"], "context": int(r["context"]) if r["context"] else None,
                 "scores": {}, "seeds": int(r["seeds"]), "paper_avg": float(r["paper_avg"]) if r["paper_avg"] else None,
                 "source": r["source"]},
            )
            entry["scores"][r["task"]] = float(r["macro_f1"])
    return [ReferenceRow(lang=k[0], model=k[1], **v) for k, v in rows.items()]


def task_order(reference: Sequence[ReferenceRow]) -> dict[str, list[str]]:
    """The benchmark's tasks per language, in the paper's column order."""
    order: dict[str, list[str]] = {}
    for row in reference:
        for task in row.scores:
            if task not in order.setdefault(row.lang, []):
                order[row.lang].append(task)
    return order
