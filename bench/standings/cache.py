"""On-disk cache of the per-task significance groups and rank intervals, keyed by the runs they were computed from.

Why: the significance groups (paired bootstrap of every measured model against the best, per task) are
recomputed from every predictions file at each start, which grows with models x tasks x seeds (minutes for a
public board). A task's groups depend only on that task's runs and the bootstrap settings, so each task gets a
fingerprint (sha256 over, per run: model, seed, run key, and the predictions file's size and mtime; plus
n_boot, seed, alpha and the cache version): a new or changed result invalidates only its task. The groups are
computed by `significance.task_bootstrap` itself, as `compute_groups` does, so cached and fresh groups are
identical. Below that, each model's replicate scores on a task and each predictions file's facts are kept under
`replicates/` (`ReplicateCache`), keyed by their own inputs: a task invalidated by one new model recomputes only
that model's (and the pairs and ranks, a few vector operations), bit for bit what a full recompute gives. Problems found while computing (an unreadable predictions file) are cached with the groups, so a
warm start lists them too. The cache files are JSON (never unpickled: a cache folder may be shared), written
with the project's one atomic writer. No torch here.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import traceback
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any, overload

from biobench.errors import BiobenchError, DiskFullError
from biobench.runtime.files import atomic_write, cache_home
from biobench.runtime.jsonfile import read_json
from biobench.standings import process_pool
from biobench.standings.entries import Board, Entry
from biobench.standings.scan import Problem, Run
from biobench.standings.significance import RunFacts, TaskBootstrap, average_ranks, task_bootstrap
from biobench.stats import BootstrapResult, RankInterval, SignificanceGroups
from biobench.store.index import IndexRow

VERSION = 3  # 2: JSON files (1 was pickled); 3: rank intervals and the replicate seed-means beside the groups


def default_dir() -> Path:
    return cache_home("leaderboard")


def _stamp(path: Path | None, stamps: dict[str, tuple[int, int]]) -> list[Any]:
    """[path, size, mtime_ns] of a predictions file: as the board's scan saw it, else from the disk."""
    if path is None:
        return [None]
    known = stamps.get(str(path))
    if known is not None:
        return [str(path), *known]
    try:
        st = path.stat()
    except OSError:
        return [str(path), None]
    return [str(path), st.st_size, st.st_mtime_ns]


def fingerprint(lang: str, task: str, entries: list[Entry], n_boot: int, seed: int, alpha: float,
                stamps: dict[str, tuple[int, int]] | None = None) -> str:
    """The cache key of one task's groups."""
    stamps = stamps or {}
    runs = [[e.key, r.seed, r.details.get("key"), *_stamp(r.predictions, stamps)] for e in entries for r in e.runs[task]]
    payload = {"v": VERSION, "lang": lang, "task": task, "n_boot": n_boot, "seed": seed, "alpha": alpha, "runs": runs}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


_PER_LABEL, _MODEL_META, _DETAILS = (IndexRow._fields.index(f) for f in ("per_label", "model_meta", "details"))


# what a groups job carries of one entry: its key, its language, and per run (its file, its language, its
# predictions file, its row's fields with details, model metadata and per-label scores cut)
JobEntry = tuple[str, str, list[tuple[str, str, str | None, tuple[Any, ...]]]]


def _job_entries(task: str, entries: list[Entry]) -> list[JobEntry]:
    """What a groups worker is sent of `entries` on `task`: per run what `significance.task_bootstrap` reads of it
    (its predictions, kind, labels and metric; not its details, model metadata or per-label scores), as plain
    tuples of strings. Why: the parent makes and pickles every task's runs in its thread while the app is built
    beside it: the full rows took about a third of its ~3 s of CPU for a cold 300-model board's groups; then the
    slim Entry and Run objects with their Paths still cost 1.05 s to make and 0.95 s to pickle at 300 models (a
    Path pickles through Python, an Entry with all its fields), work `_entries_of` now does in the worker
    (docs/performance.md)."""
    def slim(run: Run) -> tuple[str, str, str | None, tuple[Any, ...]]:  # the row's fields by position
        row = run.row
        return (str(run.path), run.lang, None if run.predictions is None else str(run.predictions),
                (*row[:_PER_LABEL], {}, *row[_PER_LABEL + 1:_MODEL_META], {}, *row[_MODEL_META + 1:_DETAILS],
                 {"protocol": {"metric": run.metric}}, *row[_DETAILS + 1:]))

    return [(e.key, e.lang, [slim(r) for r in e.runs[task]]) for e in entries]


def _entries_of(task: str, job: list[JobEntry]) -> list[Entry]:
    """The entries of a groups job (`_job_entries`), in the worker: each with its key, language and runs on
    `task`, which is all `task_bootstrap` reads of an entry."""
    return [Entry(key, "", lang, "measured", {}, runs={task: [
        Run(Path(path), run_lang, None if predictions is None else Path(predictions), IndexRow._make(row))
        for path, run_lang, predictions, row in runs]}) for key, lang, runs in job]


MAX_FACTS_BYTES = 256 * 2**20
MAX_SCORES_BYTES = 64 * 2**20


class ReplicateCache:
    """significance.ReplicateStore on disk, for one task: the facts of its predictions files (one JSON per task,
    keyed by path, size and mtime) and each model's (n_boot + 1, S) replicate scores (one .npy per model and
    inputs, read with allow_pickle=False and checked for shape, dtype and finiteness). Anything unreadable,
    foreign or of another shape is a miss, recomputed and rewritten; a read-only or full folder only costs speed."""

    def __init__(self, folder: Path, lang: str, task: str):
        self.folder = folder
        name = hashlib.sha256(json.dumps([lang, task]).encode()).hexdigest()[:32]
        self.facts_path = folder / f"facts-{name}.json"
        self.changed = False
        try:
            data = read_json(self.facts_path, MAX_FACTS_BYTES)
            self.known = data["runs"] if isinstance(data, dict) and data.get("v") == VERSION and isinstance(
                data.get("runs"), dict) else {}
        except (OSError, BiobenchError, KeyError):
            self.known = {}

    def facts(self, path: str, stamp: tuple[int, int] | None) -> RunFacts | None:
        entry = self.known.get(path)
        if stamp is None or not (isinstance(entry, list) and len(entry) == 5 and entry[:2] == list(stamp)
                                 and isinstance(entry[2], str) and isinstance(entry[3], int)
                                 and isinstance(entry[4], list)):
            return None
        return RunFacts(entry[2], entry[3], tuple(entry[4]))

    def put_facts(self, path: str, stamp: tuple[int, int] | None, facts: RunFacts) -> None:
        if stamp is not None:
            self.known[path] = [*stamp, facts.examples, facts.n, list(facts.labels)]
            self.changed = True

    def scores(self, key: str, shape: tuple[int, int]) -> Any:
        import numpy as np

        path = self.folder / f"scores-{key[:40]}.npy"
        try:
            if path.stat().st_size > MAX_SCORES_BYTES:
                return None
            value = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return None
        if value.shape != shape or value.dtype != np.float64 or not np.isfinite(value).all():
            return None
        return value

    def put_scores(self, key: str, value: Any) -> None:
        import io

        import numpy as np

        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=False)
        try:
            atomic_write(self.folder / f"scores-{key[:40]}.npy", buffer.getvalue(), durable=False)
        except (OSError, DiskFullError):
            pass

    def save(self) -> None:
        if self.changed:
            try:
                atomic_write(self.facts_path, json.dumps({"v": VERSION, "runs": self.known}, default=str),
                             durable=False)
            except (OSError, DiskFullError):
                pass


def _compute(lang: str, task: str, job: list[JobEntry], n_boot: int, seed: int, alpha: float,
             folder: str | None = None):
    """task_bootstrap on a board that holds only this task's runs (`job`, `_job_entries`), with the model replicate
    scores kept under `folder`: (TaskBootstrap or None, problems, seconds)."""
    t0 = time.perf_counter()
    sub = Board(_entries_of(task, job), {lang: [task]}, {}, [], {})
    store = ReplicateCache(Path(folder), lang, task) if folder else None
    result = task_bootstrap(sub, task, sub.entries, n_boot=n_boot, seed=seed, alpha=alpha, store=store)
    if store is not None:
        store.save()
    return result, sub.problems, time.perf_counter() - t0


def _computed(misses: list[tuple], n_boot: int, seed: int, alpha: float, process: bool,
              folder: str | None = None) -> Generator[Any, None, None]:
    """`_compute` of each missed task, in order: here, or (`process`) in worker processes (bench/standings/process_pool.py:
    reading thousands of predictions files holds the GIL, and several workers finish a cold board's groups that
    many times sooner, docs/performance.md)."""
    return process_pool.in_workers(_compute, _Jobs(misses, (n_boot, seed, alpha, folder)), process)


class _Jobs(Sequence[tuple]):
    """The `_compute` jobs of `misses`, each made when it is taken (`process_pool._send` takes it when it sends it
    to a worker). Why: making every job first (`_job_entries` of 51,300 runs, ~1 s of CPU at 300 models, in the
    parent while the app is built beside it) kept the workers from starting; now they start once the tasks'
    fingerprints are known, and the jobs after the first two are made while they compute (docs/performance.md)."""

    def __init__(self, misses: list[tuple], settings: tuple):
        self.misses, self.settings = misses, settings

    def __len__(self) -> int:
        return len(self.misses)

    @overload
    def __getitem__(self, i: int) -> tuple: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple]: ...

    def __getitem__(self, i: int | slice) -> tuple | list[tuple]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        lang, task, entries = self.misses[i]
        return (lang, task, _job_entries(task, entries), *self.settings)


def cached_groups(board: Board, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05,
                  cache_dir: str | Path | None = None, log: Callable[[str], None] | None = None,
                  progress: Callable[[int, int], None] | None = None, process: bool = False) -> dict[str, int]:
    """Fill board.groups and board.ranks like significance.compute_groups, reading and writing each task's result
    under cache_dir (None: compute without a cache), then the rank intervals on each language's average.
    Returns {"tasks", "cached", "computed"}; `log` gets a line per slow computed task and a summary;
    `progress(done, total)` is called after each task. `process`: compute the tasks missing from the cache in
    worker processes (`_computed`)."""
    folder = Path(cache_dir) if cache_dir is not None else None
    counts = {"tasks": 0, "cached": 0, "computed": 0}
    started = time.perf_counter()
    todo = []
    for lang in board.langs:
        measured = [e for e in board.lang_entries(lang) if e.source == "measured" and not e.smoke]  # protocol rows
        for task in board.columns(lang):
            entries = [e for e in measured if task in e.runs]
            if entries:
                todo.append((lang, task, entries))
    if progress:
        progress(0, len(todo))
    def path_of(lang: str, task: str, entries: list[Entry]) -> Path | None:
        return (folder / f"groups-{fingerprint(lang, task, entries, n_boot, seed, alpha, board.stamps)[:32]}.json"
                if folder else None)

    # A folder holding no groups at all (a cold start) has nothing to look up: each task's key is made when its
    # groups come back, while the workers compute the others, instead of all first (51,300 runs hashed, ~1 s of
    # this process's CPU at 300 models, before any worker started; docs/performance.md).
    cold = folder is None or not folder.is_dir() or next(folder.glob("groups-*.json"), None) is None
    paths: list[Path | None] = [None] * len(todo) if cold else [path_of(*t) for t in todo]
    hits = [None] * len(todo) if cold else [_read(path, n_boot) for path in paths]
    computed = _computed([t for t, hit in zip(todo, hits, strict=True) if hit is None], n_boot, seed, alpha, process,
                         str(folder / "replicates") if folder else None)
    done: dict[tuple[str, str], TaskBootstrap | None] = {}
    for i, ((lang, task, entries), path, hit) in enumerate(zip(todo, paths, hits, strict=True), 1):
        counts["tasks"] += 1
        if hit is not None:
            result, problems = hit
            counts["cached"] += 1
        else:
            result, problems, seconds = next(computed)
            counts["computed"] += 1
            _write(path or path_of(lang, task, entries), (result, problems))
            if log and seconds >= 0.5:  # a progress line where it is slow
                log(f"significance {lang}/{task} ({i}/{len(todo)}): {len(entries)} models, {seconds:.1f} s")
        done[(lang, task)] = result
        if result is not None:
            board.groups[(lang, task)] = result.groups
            board.ranks[(lang, task)] = result.ranks
        board.problems.extend(p for p in problems if p not in board.problems)
        if progress:
            progress(i, len(todo))
    computed.close()
    for lang in board.langs:
        average = average_ranks([done.get((lang, t)) for t in board.benchmark.get(lang, [])])
        if average:
            board.ranks[(lang, None)] = average
    if log and counts["tasks"]:
        log(f"significance groups: {counts['tasks']} tasks ({counts['cached']} from the cache, {counts['computed']} "
            f"computed) in {time.perf_counter() - started:.1f} s")
    return counts


def _to_json(result: TaskBootstrap | None, problems: list[Problem]) -> str:
    g = r = None
    if result is not None:
        groups = result.groups
        g = {"best": groups.best, "top": sorted(groups.top), "alpha": groups.alpha,
             "vs_best": {m: vars(b) for m, b in groups.vs_best.items()}}
        r = {"models": result.models, "observed": result.observed,
             "ranks": {m: [v.rank, v.low, v.high] for m, v in result.ranks.items()}}
    return json.dumps({"v": VERSION, "groups": g, "ranks": r, "problems": [vars(p) for p in problems]})


def _rank_of(value: Any) -> RankInterval:
    if not (isinstance(value, list) and len(value) == 3 and all(type(v) is int and v >= 1 for v in value)):
        raise ValueError("a rank interval of another shape")
    return RankInterval(*value)


def _from_json(data: Any, replicates: Callable[[int], Any]) -> tuple[TaskBootstrap | None, list[Problem]]:
    """The cached value of a parsed cache file; ValueError when it is not of the shape `_to_json` writes.
    `replicates(models)` reads the task's replicate seed-means (ValueError when they do not fit)."""
    if not isinstance(data, dict) or data.get("v") != VERSION:
        raise ValueError("another cache version or shape")
    g, r, problems = data.get("groups"), data.get("ranks"), data.get("problems")
    if not isinstance(problems, list) or not all(
            isinstance(p, dict) and set(p) == {"path", "reason"} and all(isinstance(v, str) for v in p.values())
            for p in problems):
        raise ValueError("problems of another shape")
    if g is None:
        return None, [Problem(**p) for p in problems]
    if not (isinstance(g, dict) and isinstance(g.get("best"), str) and isinstance(g.get("top"), list)
            and all(isinstance(m, str) for m in g["top"]) and isinstance(g.get("alpha"), int | float)
            and isinstance(g.get("vs_best"), dict) and all(isinstance(b, dict) for b in g["vs_best"].values())):
        raise ValueError("groups of another shape")
    if not (isinstance(r, dict) and isinstance(r.get("models"), list) and all(isinstance(m, str) for m in r["models"])
            and isinstance(r.get("observed"), list) and len(r["observed"]) == len(r["models"])
            and all(isinstance(v, int | float) for v in r["observed"]) and isinstance(r.get("ranks"), dict)
            and set(r["ranks"]) == set(r["models"])):
        raise ValueError("ranks of another shape")
    vs_best = {str(m): BootstrapResult(**b) for m, b in g["vs_best"].items()}  # TypeError on other fields
    groups = SignificanceGroups(g["best"], frozenset(g["top"]), vs_best, g["alpha"])
    ranks = {m: _rank_of(v) for m, v in r["ranks"].items()}
    result = TaskBootstrap(groups, ranks, r["models"], [float(v) for v in r["observed"]], replicates(len(r["models"])))
    return result, [Problem(**p) for p in problems]


MAX_CACHE_BYTES = 64 * 2**20


def _read(path: Path | None, n_boot: int = 0):
    """The cached (TaskBootstrap or None, problems) at `path` (its replicate seed-means beside it, .npy), or None
    (a miss: the caller computes and rewrites the files) when either is absent, not a regular file, too large or
    deep, truncated, stale or of another shape."""
    if path is None:
        return None

    def replicates(models: int) -> Any:
        import numpy as np

        npy = path.with_suffix(".npy")
        if npy.stat().st_size > MAX_CACHE_BYTES:
            raise ValueError("replicates too large")
        value = np.load(npy, allow_pickle=False)
        if value.shape != (n_boot, models) or value.dtype != np.float64 or not np.isfinite(value).all():
            raise ValueError("replicates of another shape")
        return value

    try:
        return _from_json(read_json(path, MAX_CACHE_BYTES), replicates)
    except (OSError, ValueError, TypeError, EOFError, BiobenchError):
        return None


def _write(path: Path | None, value: tuple[TaskBootstrap | None, list[Problem]]) -> None:
    if path is None:
        return
    try:
        if value[0] is not None:  # the replicates first: a groups file names a task whose replicates are there
            import io

            import numpy as np

            buffer = io.BytesIO()
            np.save(buffer, value[0].replicates, allow_pickle=False)
            atomic_write(path.with_suffix(".npy"), buffer.getvalue())
        atomic_write(path, _to_json(*value))
    except (OSError, DiskFullError):  # a read-only or full cache folder only costs the next start its speed
        pass


class BackgroundGroups:
    """`cached_groups` in a daemon thread. Why: computing the groups of a large board from every predictions
    file takes minutes on a cold cache; the app serves its tables at once and marks the top groups when they
    arrive (the app polls `finished` and re-renders). Each task's groups are set on the board in one dict
    assignment, so a reader sees a task with or without its groups, never half of them."""

    def __init__(self, board: Board, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05,
                 cache_dir: str | Path | None = None, log: Callable[[str], None] | None = None,
                 first: Sequence[Callable[[], None]] = ()):
        self.board, self.log = board, log
        self.first = list(first)  # work the start left for after its page (the results index's save): run first
        self.kwargs: dict[str, Any] = {"n_boot": n_boot, "seed": seed, "alpha": alpha, "cache_dir": cache_dir, "log": log,
                       "process": True}
        self.done = 0
        self.total: int | None = None
        self.counts: dict[str, int] | None = None
        self.error: str | None = None
        self.seconds: float | None = None
        self.finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name="biobench-significance", daemon=True)
        self._start_lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def start(self) -> BackgroundGroups:
        """Start computing (once; a second call does nothing). `build_board(significance="deferred")` leaves this to
        whoever serves the board: `build_app` calls it when the app is built, so that the groups' own work in this
        process (fingerprints, jobs for the workers, under the same GIL) and their workers (on the same cores) come
        after the first page, not beside it (docs/performance.md)."""
        with self._start_lock:
            if not self.started:
                self._started = time.perf_counter()
                self._thread.start()
        return self

    def _progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def _run(self) -> None:
        for work in self.first:
            try:
                work()
            except Exception as err:  # noqa: BLE001 - a cache not written costs the next start its speed only
                if self.log:
                    self.log("after the page: " + "".join(traceback.format_exception(err)).rstrip())
        self.first.clear()
        try:
            self.counts = cached_groups(self.board, progress=self._progress, **self.kwargs)
        except Exception as err:  # noqa: BLE001 - shown in the app's status line; the tables stay up
            self.error = f"{type(err).__name__}: {err}"
            if self.log:
                self.log("significance groups failed: " + "".join(traceback.format_exception(err)).rstrip())
        finally:
            self.seconds = time.perf_counter() - self._started
            self.finished.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the groups are computed (True) or `timeout` seconds passed (False)."""
        return self.finished.wait(timeout)

    @property
    def status(self) -> str:
        if self.error:
            return f"Significance groups failed ({self.error}); the scores are complete, the top-group marks are not."
        if not self.finished.is_set():
            total = "?" if self.total is None else self.total
            return (f"Significance groups: computing in the background ({self.done}/{total} tasks); "
                    "the top-group marks appear when they are done.")
        c = self.counts or {}
        return (f"Significance groups: {c.get('tasks', 0)} tasks ({c.get('cached', 0)} from the cache, "
                f"{c.get('computed', 0)} computed) in {self.seconds:.1f} s.")
