"""On-disk cache of the per-task significance groups, keyed by the runs they were computed from.

Why: the significance groups (paired bootstrap of every measured model against the best, per task) are
recomputed from every predictions file at each start, which grows with models x tasks x seeds (minutes for a
public board). A task's groups depend only on that task's runs and the bootstrap settings, so each task gets a
fingerprint (sha256 over, per run: model, seed, run key, and the predictions file's size and mtime; plus
n_boot, seed, alpha and the cache version): a new or changed result invalidates only its task. The groups are
computed by `significance.compute_groups` itself, on a board holding just that task, so cached and fresh groups are
identical. Problems found while computing (an unreadable predictions file) are cached with the groups, so a
warm start lists them too. The cache files are JSON (never unpickled: a cache folder may be shared), written
with the project's one atomic writer. No torch here.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from biobench.board.entries import Board, Entry
from biobench.board.scan import Problem
from biobench.board.significance import compute_groups
from biobench.errors import BiobenchError, DiskFullError
from biobench.runtime.files import atomic_write, cache_home
from biobench.runtime.jsonfile import read_json
from biobench.stats import BootstrapResult, SignificanceGroups

VERSION = 2  # 2: JSON files (1 was pickled)


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


def _task_only(task: str, entries: list[Entry]) -> list[Entry]:
    return [replace(e, runs={task: e.runs[task]}, cells={task: e.cells[task]}) for e in entries]


def _compute(lang: str, task: str, entries: list[Entry], n_boot: int, seed: int, alpha: float):
    """compute_groups on a board that holds only this task's runs: (groups or None, problems, seconds)."""
    t0 = time.perf_counter()
    sub = Board(_task_only(task, entries), {lang: [task]}, {}, [], {})
    compute_groups(sub, n_boot=n_boot, seed=seed, alpha=alpha)
    return sub.groups.get((lang, task)), sub.problems, time.perf_counter() - t0


def _compute_star(args: tuple) -> tuple:
    return _compute(*args)


WORKER_PROCESS = True  # BackgroundGroups computes in worker processes (tests that patch `_compute` turn it off)
MAX_WORKERS = 4  # worker processes at most; each holds one task's predictions at a time

# a worker: sys.path first (this process may import biobench from elsewhere), its stdout kept for the results;
# niced, so that on a machine with few cores the app's own pages come first
_WORKER = ("import os, pickle, sys; out = sys.stdout.buffer; sys.stdout = sys.stderr; "
           "hasattr(os, 'nice') and os.nice(5); sys.path[:0] = pickle.load(sys.stdin.buffer); "
           "from biobench.board.cache import _serve; _serve(sys.stdin.buffer, out)")


def _serve(inp: BinaryIO, out: BinaryIO) -> None:
    """A worker's loop: the pickled jobs from the parent in, each task's (groups, problems, seconds) out; it
    ends quietly when the parent has gone (its pipes closed)."""
    try:
        for job in pickle.load(inp):
            pickle.dump(_compute_star(job), out)
            out.flush()
    except (EOFError, BrokenPipeError):
        pass


def worker_count(jobs: int) -> int:
    """Worker processes for `jobs` tasks: one per core (at most MAX_WORKERS), never more than the tasks. Why
    every core, the server's included: once the app is built the server waits on the network, and the workers
    are niced below it (`_WORKER`)."""
    return max(1, min(jobs, os.cpu_count() or 1, MAX_WORKERS))


def _computed(misses: list[tuple], n_boot: int, seed: int, alpha: float, process: bool) -> Iterator[tuple]:
    """`_compute` of each missed task, in order: here, or (`process`, more than one task) in worker processes,
    task i in worker i mod `worker_count`. Why processes: reading thousands of predictions files is Python work
    that holds the GIL, so in a thread it slows the app being built beside it (measured: the first page later
    than with the slower per-pair bootstrap, which waited in BLAS); processes run on the other cores, and
    several of them finish a cold board's groups that many times sooner (docs/performance.md). A worker is
    `python -c` (not multiprocessing's spawn, which re-runs the parent's main script: an app.py calling
    launch() at top level would start a second server). The pipes carry pickles between this process and its
    own children only. If a worker fails, the tasks not yet returned are computed here."""
    jobs = [(lang, task, _task_only(task, entries), n_boot, seed, alpha) for lang, task, entries in misses]
    done = 0
    if process and WORKER_PROCESS and len(jobs) > 1:
        n = worker_count(len(jobs))
        children = []
        try:
            for w in range(n):
                child = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE)
                children.append(child)
                pickle.dump(list(sys.path), child.stdin)
                pickle.dump(jobs[w::n], child.stdin)
                child.stdin.close()
            while done < len(jobs):
                result = pickle.load(children[done % n].stdout)
                done += 1
                yield result
        except (OSError, EOFError, pickle.UnpicklingError):
            pass  # computed below
        finally:
            for child in children:
                child.kill()
                child.wait()
                child.stdout.close()
    yield from map(_compute_star, jobs[done:])


def cached_groups(board: Board, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05,
                  cache_dir: str | Path | None = None, log: Callable[[str], None] | None = None,
                  progress: Callable[[int, int], None] | None = None, process: bool = False) -> dict[str, int]:
    """Fill board.groups like significance.compute_groups, reading and writing each task's result under cache_dir
    (None: compute without a cache). Returns {"tasks", "cached", "computed"}; `log` gets a line per slow
    computed task and a summary; `progress(done, total)` is called after each task. `process`: compute the
    tasks missing from the cache in a worker process (`_computed`)."""
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
    paths = [folder / f"groups-{fingerprint(lang, task, entries, n_boot, seed, alpha, board.stamps)[:32]}.json"
             if folder else None for lang, task, entries in todo]
    hits = [_read(path) for path in paths]
    computed = _computed([t for t, hit in zip(todo, hits, strict=True) if hit is None], n_boot, seed, alpha, process)
    for i, ((lang, task, entries), path, hit) in enumerate(zip(todo, paths, hits, strict=True), 1):
        counts["tasks"] += 1
        if hit is not None:
            groups, problems = hit
            counts["cached"] += 1
        else:
            groups, problems, seconds = next(computed)
            counts["computed"] += 1
            _write(path, (groups, problems))
            if log and seconds >= 0.5:  # a progress line where it is slow
                log(f"significance {lang}/{task} ({i}/{len(todo)}): {len(entries)} models, {seconds:.1f} s")
        if groups is not None:
            board.groups[(lang, task)] = groups
        board.problems.extend(p for p in problems if p not in board.problems)
        if progress:
            progress(i, len(todo))
    computed.close()
    if log and counts["tasks"]:
        log(f"significance groups: {counts['tasks']} tasks ({counts['cached']} from the cache, {counts['computed']} "
            f"computed) in {time.perf_counter() - started:.1f} s")
    return counts


def _to_json(groups: SignificanceGroups | None, problems: list[Problem]) -> str:
    g = None if groups is None else {
        "best": groups.best, "top": sorted(groups.top), "alpha": groups.alpha,
        "vs_best": {m: vars(b) for m, b in groups.vs_best.items()}}
    return json.dumps({"v": VERSION, "groups": g, "problems": [vars(p) for p in problems]})


def _from_json(data: Any) -> tuple[SignificanceGroups | None, list[Problem]]:
    """The cached value of a parsed cache file; ValueError when it is not of the shape `_to_json` writes."""
    if not isinstance(data, dict) or data.get("v") != VERSION:
        raise ValueError("another cache version or shape")
    g, problems = data.get("groups"), data.get("problems")
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
    vs_best = {str(m): BootstrapResult(**b) for m, b in g["vs_best"].items()}  # TypeError on other fields
    return SignificanceGroups(g["best"], frozenset(g["top"]), vs_best, g["alpha"]), [Problem(**p) for p in problems]


MAX_CACHE_BYTES = 64 * 2**20


def _read(path: Path | None):
    """The cached (groups, problems) at `path`, or None (a miss: the caller computes and rewrites the file) when
    it is absent, not a regular file, too large or deep, truncated, stale or of another shape."""
    if path is None:
        return None
    try:
        return _from_json(read_json(path, MAX_CACHE_BYTES))
    except (OSError, ValueError, TypeError, BiobenchError):
        return None


def _write(path: Path | None, value: tuple[SignificanceGroups | None, list[Problem]]) -> None:
    if path is None:
        return
    try:
        atomic_write(path, _to_json(*value))
    except (OSError, DiskFullError):  # a read-only or full cache folder only costs the next start its speed
        pass


class BackgroundGroups:
    """`cached_groups` in a daemon thread. Why: computing the groups of a large board from every predictions
    file takes minutes on a cold cache; the app serves its tables at once and marks the top groups when they
    arrive (the app polls `finished` and re-renders). Each task's groups are set on the board in one dict
    assignment, so a reader sees a task with or without its groups, never half of them."""

    def __init__(self, board: Board, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05,
                 cache_dir: str | Path | None = None, log: Callable[[str], None] | None = None):
        self.board, self.log = board, log
        self.kwargs = {"n_boot": n_boot, "seed": seed, "alpha": alpha, "cache_dir": cache_dir, "log": log,
                       "process": True}
        self.done, self.total = 0, None
        self.counts: dict[str, int] | None = None
        self.error: str | None = None
        self.seconds: float | None = None
        self.finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name="biobench-significance", daemon=True)

    def start(self) -> BackgroundGroups:
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def _progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def _run(self) -> None:
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
