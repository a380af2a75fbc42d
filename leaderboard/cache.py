"""On-disk cache of the per-task significance groups, keyed by the runs they were computed from.

Why: the significance groups (paired bootstrap of every measured model against the best, per task) are
recomputed from every predictions file at each start, which grows with models x tasks x seeds (minutes for a
public board). A task's groups depend only on that task's runs and the bootstrap settings, so each task gets a
fingerprint (sha256 over, per run: model, seed, run key, and the predictions file's size and mtime; plus
n_boot, seed, alpha and the cache version): a new or changed result invalidates only its task. The groups are
computed by `compare.compute_groups` itself, on a board holding just that task, so cached and fresh groups are
identical. Problems found while computing (an unreadable predictions file) are cached with the groups, so a
warm start lists them too. No torch here.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from biobench.leaderboard.board import Board, Entry

VERSION = 1


def default_dir() -> Path:
    return Path(os.environ.get("BIOBENCH_CACHE", Path.home() / ".cache" / "biobench")) / "leaderboard"


def _stamp(path: Path | None) -> list[Any]:
    if path is None:
        return [None]
    try:
        st = path.stat()
    except OSError:
        return [str(path), None]
    return [str(path), st.st_size, st.st_mtime_ns]


def fingerprint(lang: str, task: str, entries: list[Entry], n_boot: int, seed: int, alpha: float) -> str:
    """The cache key of one task's groups."""
    runs = [[e.key, r.seed, r.details.get("key"), *_stamp(r.predictions)] for e in entries for r in e.runs[task]]
    payload = {"v": VERSION, "lang": lang, "task": task, "n_boot": n_boot, "seed": seed, "alpha": alpha, "runs": runs}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _compute(lang: str, task: str, entries: list[Entry], n_boot: int, seed: int, alpha: float):
    """compute_groups on a board that holds only this task's runs: (groups or None, problems)."""
    from biobench.leaderboard.compare import compute_groups

    sub = Board([replace(e, runs={task: e.runs[task]}, cells={task: e.cells[task]}) for e in entries],
                {lang: [task]}, {}, [], {})
    compute_groups(sub, n_boot=n_boot, seed=seed, alpha=alpha)
    return sub.groups.get((lang, task)), sub.problems


def cached_groups(board: Board, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05,
                  cache_dir: str | Path | None = None, log: Callable[[str], None] | None = None) -> dict[str, int]:
    """Fill board.groups like compare.compute_groups, reading and writing each task's result under cache_dir
    (None: compute without a cache). Returns {"tasks", "cached", "computed"}; `log` gets a line per computed
    task and a summary."""
    folder = Path(cache_dir) if cache_dir is not None else None
    counts = {"tasks": 0, "cached": 0, "computed": 0}
    started = time.perf_counter()
    for lang in board.langs:
        measured = [e for e in board.lang_entries(lang) if e.source == "measured"]
        todo = [(task, [e for e in measured if task in e.runs]) for task in board.columns(lang)]
        todo = [(task, entries) for task, entries in todo if entries]
        for i, (task, entries) in enumerate(todo, 1):
            counts["tasks"] += 1
            path = folder / f"groups-{fingerprint(lang, task, entries, n_boot, seed, alpha)[:32]}.pkl" if folder else None
            hit = _read(path)
            if hit is not None:
                groups, problems = hit
                counts["cached"] += 1
            else:
                t0 = time.perf_counter()
                groups, problems = _compute(lang, task, entries, n_boot, seed, alpha)
                counts["computed"] += 1
                _write(path, (groups, problems))
                if log and time.perf_counter() - t0 >= 0.5:  # a progress line where it is slow
                    log(f"significance {lang}/{task} ({i}/{len(todo)}): {len(entries)} models, "
                        f"{time.perf_counter() - t0:.1f} s")
            if groups is not None:
                board.groups[(lang, task)] = groups
            board.problems.extend(p for p in problems if p not in board.problems)
    if log and counts["tasks"]:
        log(f"significance groups: {counts['tasks']} tasks ({counts['cached']} from the cache, {counts['computed']} "
            f"computed) in {time.perf_counter() - started:.1f} s")
    return counts


def _read(path: Path | None):
    if path is None or not path.is_file():
        return None
    try:
        with path.open("rb") as fh:
            return pickle.load(fh)  # noqa: S301 - our own cache file, written by _write
    except Exception:  # noqa: BLE001 - a truncated or stale cache file is recomputed, never fatal
        return None


def _write(path: Path | None, value: Any) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            pickle.dump(value, fh)
        os.replace(tmp, path)
    except OSError:  # a read-only cache folder only costs the next start its speed
        pass
