"""Significance from the board's predictions: the per-task alignment of models' predictions, the pair of
two models (A-vs-B comparisons in standings.entry_pairs), the top groups and the rank intervals (cached by
standings.cache).

A task's groups and rank intervals come from each model's replicate scores (its (n_boot, S) macro-F1 on every
bootstrap resample of the test examples, `stats.replicate_scores`), which depend on that model's predictions,
the task's label axis and the bootstrap settings only: `task_bootstrap` takes them from a store when it has
them (bench/standings/cache.py keys them by those inputs), so a new model costs its own predictions, not the
board's. Pairs and ranks are then a few vector operations over the cached scores, the same ones a full
recompute runs, so incremental and full results are equal to the last bit (tests/standings/test_rank_intervals.py).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from biobench.errors import ResultsError
from biobench.metrics import labels_in
from biobench.standings import scan as R
from biobench.standings.entries import Board, Entry
from biobench.stats import (
    RankInterval,
    SignificanceGroups,
    TaskPredictions,
    f1_metric,
    groups_from_replicates,
    prediction_metric,
    rank_intervals,
    rank_replicates,
    replicate_scores,
    seed_scores,
)
from biobench.store import AlignedPredictions, PredictionColumns, align_predictions
from biobench.store.pairing import OTHER_EXAMPLES

REPLICATES_VERSION = 1  # the inputs and layout of a model's cached replicate scores


@dataclass(frozen=True)
class RunFacts:
    """What pairing and the label axis need of a predictions file: a digest of its test examples (ids and gold,
    in order), their number, and the labels it holds (gold and predictions)."""

    examples: str
    n: int
    labels: tuple


_DIGESTS: dict[tuple[tuple, tuple], str] = {}  # (ids, gold) -> their digest: a task's files share a few
_MAX_DIGESTS = 64
_TEXT_TYPES = {str, type(None)}  # values whose equality is their JSON's (1 == 1.0 == True, their JSON differs)


def run_facts(columns: PredictionColumns) -> RunFacts:
    """The facts of one predictions file. Its examples' digest is computed once per distinct (ids, gold) of text
    values: every model and seed of a task has the same test examples, and a task of a 300-model board has 2,700
    files (the columns' texts are shared, `PredictionColumns.of`, so equal columns compare in a pass of identity
    checks)."""
    key = (columns.ids, columns.gold)
    text = set(map(type, columns.ids)) <= _TEXT_TYPES and set(map(type, columns.gold)) <= _TEXT_TYPES
    digest = _DIGESTS.get(key) if text else None
    if digest is None:
        digest = hashlib.sha256(json.dumps([columns.ids, columns.gold], default=str).encode()).hexdigest()
        if text:
            if len(_DIGESTS) >= _MAX_DIGESTS:
                _DIGESTS.clear()
            _DIGESTS[key] = digest
    return RunFacts(digest, len(columns.gold), tuple(labels_in(columns.gold, columns.pred)))


class ReplicateStore(Protocol):
    """Where task_bootstrap finds and keeps run facts and model replicate scores (cache.ReplicateCache)."""

    def facts(self, path: str, stamp: tuple[int, int] | None) -> RunFacts | None: ...
    def put_facts(self, path: str, stamp: tuple[int, int] | None, facts: RunFacts) -> None: ...
    def scores(self, key: str, shape: tuple[int, int]) -> np.ndarray | None: ...
    def put_scores(self, key: str, value: np.ndarray) -> None: ...


@dataclass
class TaskBootstrap:
    """One task's significance: the top group, each model's rank interval, and the (n_boot, M) replicate
    seed-means of `models` (the language average's rank intervals average them over tasks)."""

    groups: SignificanceGroups
    ranks: dict[str, RankInterval]
    models: list[str]
    observed: list[float]  # each model's seed-mean macro-F1 (fraction), in `models` order
    replicates: np.ndarray


def _report(problems: list[R.Problem], problem: R.Problem) -> None:
    if problem not in problems:
        problems.append(problem)


def aligned_predictions(board: Board, task: str, entries: Sequence[Entry]) -> AlignedPredictions | None:
    """The predictions of `entries` on `task` paired by `biobench.store.align_predictions`: seeds without a
    readable file, seeds misaligned with their model's others and models scored on other test examples than
    the first are left out; the first two are reported as problems (damaged input), the last is not (another
    test subset, e.g. a smoke run's --limit-eval)."""
    groups: dict[str, list[tuple[str, PredictionColumns]]] = {}
    for entry in entries:
        for run in entry.runs.get(task, []):
            if run.predictions is None:
                continue
            try:
                groups.setdefault(entry.key, []).append((str(run.predictions), R.load_predictions(run.predictions)))
            except ResultsError as err:
                _report(board.problems, R.problem_of(err, run.predictions, "unreadable predictions"))
    aligned = align_predictions(groups, strict=False)
    for _, source, reason in aligned.dropped if aligned else ():
        if reason.startswith(OTHER_EXAMPLES):  # another test subset (a smoke run's --limit-eval): not damaged
            continue  # input, so not a Problem; such a pair is compared without a paired test, as Compare says
        _report(board.problems, R.Problem(source, reason))
    return aligned


def paired_predictions(board: Board, task: str, a: Entry, b: Entry) -> TaskPredictions | None:
    """A's and B's aligned predictions on `task` with the task's metric, when both have them."""
    aligned = aligned_predictions(board, task, [a, b]) if task in a.runs and task in b.runs else None
    if aligned is None or len(aligned.preds) < 2:
        return None
    pa, pb = aligned.preds[a.key], aligned.preds[b.key]
    first = a.runs[task][0]
    return TaskPredictions(task, aligned.gold, pa, pb, prediction_metric(aligned.gold, *pa, *pb, kind=first.kind,
                                                                         labels=first.labels, metric=first.metric))


def compute_groups(board: Board, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> None:
    """Fill board.groups[(lang, task)] and board.ranks[(lang, task)] for every task with predictions from at
    least two models, and board.ranks[(lang, None)] for each language's average (no cache: standings.cache's
    cached_groups is this with each model's replicate scores kept on disk)."""
    for lang in board.langs:
        measured = [e for e in board.lang_entries(lang) if e.source == "measured" and not e.smoke]  # protocol rows
        done: dict[str, TaskBootstrap | None] = {}
        for task in board.columns(lang):
            with_task = [e for e in measured if task in e.runs]
            if not with_task:
                continue
            done[task] = result = task_bootstrap(board, task, with_task, n_boot, seed, alpha)
            if result is not None:
                board.groups[(lang, task)] = result.groups
                board.ranks[(lang, task)] = result.ranks
        average = average_ranks([done.get(t) for t in board.benchmark.get(lang, [])])
        if average:
            board.ranks[(lang, None)] = average


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def task_bootstrap(board: Board, task: str, entries: Sequence[Entry], n_boot: int = 1000, seed: int = 0,
                   alpha: float = 0.05, store: ReplicateStore | None = None) -> TaskBootstrap | None:
    """The groups and rank intervals of `task` over `entries` (None with fewer than two aligned models):
    pairing as `aligned_predictions` does (on each file's examples digest), each model's replicate scores
    from `store` when it holds them for these inputs, computed (and kept there) otherwise."""
    runs: list[tuple[R.Run, RunFacts]] = []
    loaded: dict[str, PredictionColumns] = {}
    groups: dict[str, list[tuple[str, PredictionColumns]]] = {}
    for entry in entries:
        for run in entry.runs.get(task, []):
            if run.predictions is None:
                continue
            path = str(run.predictions)
            stamp = _stamp(path)
            facts = store.facts(path, stamp) if store is not None else None
            if facts is None:
                try:
                    loaded[path] = R.load_predictions(run.predictions)
                except ResultsError as err:
                    _report(board.problems, R.problem_of(err, run.predictions, "unreadable predictions"))
                    continue
                facts = run_facts(loaded[path])
                if store is not None:
                    store.put_facts(path, stamp, facts)
            # the one alignment (store.align_predictions) on digests: its `pred` carries the run's index here
            groups.setdefault(entry.key, []).append((path, PredictionColumns((facts.examples,), (), (len(runs),))))
            runs.append((run, facts))
    aligned = align_predictions(groups, strict=False)
    for _, source, reason in aligned.dropped if aligned else ():
        if reason.startswith(OTHER_EXAMPLES):  # another test subset (a smoke run's --limit-eval): not damaged
            continue  # input, so not a Problem; such a pair is compared without a paired test, as Compare says
        _report(board.problems, R.Problem(source, reason))
    if aligned is None or len(aligned.preds) < 2:
        return None
    kept = {m: [runs[i] for (i,) in seeds] for m, seeds in aligned.preds.items()}
    first = entries[0].runs[task][0]
    found = sorted({lab for model_runs in kept.values() for _, f in model_runs for lab in f.labels}, key=str)
    axis = list(dict.fromkeys([*first.labels, *found]))  # prediction_metric's axis, from the runs' facts
    metric = f1_metric(axis, first.metric, keep_absent=first.kind == "multilabel")  # the score the board ranks
    n = next(iter(kept.values()))[0][1].n
    settings = json.dumps({"v": REPLICATES_VERSION, "axis": axis, "multilabel": first.kind == "multilabel", "n": n,
                           **({"metric": first.metric} if first.metric != "macro_f1" else {}),
                           "n_boot": n_boot, "seed": seed}, default=str)
    keys = {m: hashlib.sha256(json.dumps([settings, [[str(r.predictions), *(_stamp(str(r.predictions)) or ())]
                                                     for r, _ in model_runs]]).encode()).hexdigest()
            for m, model_runs in kept.items()}
    values: dict[str, Any] = {m: store.scores(keys[m], (n_boot + 1, len(kept[m]))) if store is not None else None
                              for m in kept}
    missing = [m for m in kept if values[m] is None]
    if missing:
        def columns(run: R.Run) -> PredictionColumns:
            assert run.predictions is not None  # a kept run has its predictions
            return loaded.get(str(run.predictions)) or R.load_predictions(run.predictions)

        gold = list(columns(next(iter(kept.values()))[0][0]).gold)
        counts = [_compact(np.stack([metric.counts(gold, list(columns(r).pred)) for r, _ in kept[m]])) for m in missing]
        for m, c, reps in zip(missing, counts, replicate_scores(metric, counts, n, n_boot, seed), strict=True):
            values[m] = np.vstack([np.asarray(seed_scores(metric, c.astype(np.float64)))[None, :], reps])
            if store is not None:
                store.put_scores(keys[m], values[m])
    observed = {m: [float(v) for v in values[m][0]] for m in kept}
    scores = {m: values[m][1:] for m in kept}
    best, vs_best = groups_from_replicates(observed, scores, n, n_boot, seed)
    top = frozenset([best, *(m for m, r in vs_best.items() if r.p_value >= alpha)])
    models = list(kept)
    means = [float(np.mean(observed[m])) for m in models]
    replicates = rank_replicates(scores, n, n_boot, seed)
    ranks = dict(zip(models, rank_intervals(replicates, means), strict=True))
    return TaskBootstrap(SignificanceGroups(best, top, vs_best, alpha), ranks, models, means, replicates)


def _compact(counts: np.ndarray) -> np.ndarray:
    """Per-example counts as float32 when that holds them exactly (small integers always are), else as they are.
    Why: a cold task of a 300-model board holds every model's (seeds, examples, labels x 3) counts at once, 104 MiB
    in float64 in each groups worker; the products convert them to float32 where exact anyway
    (`stats._exact_in_float32`), and the observed scores are summed from them in float64 as before."""
    small = counts.astype(np.float32)
    return small if np.array_equal(small, counts) else counts


def average_ranks(tasks: Sequence[TaskBootstrap | None]) -> dict[str, RankInterval]:
    """Rank intervals on a language's average: the models measured on every one of `tasks` (the language's
    benchmark tasks; none when one of them has no bootstrap), each replicate's score the mean over tasks of the
    model's replicate seed-means (every task resampled on its own, with its own test examples)."""
    present = [t for t in tasks if t is not None]
    if not tasks or len(present) < len(tasks):
        return {}
    models = [m for m in present[0].models if all(m in t.models for t in present)]
    if len(models) < 2:
        return {}
    index = [{m: i for i, m in enumerate(t.models)} for t in present]
    replicates = sum(t.replicates[:, [ix[m] for m in models]] for t, ix in zip(present, index, strict=True)) / len(tasks)
    observed = [sum(t.observed[ix[m]] for t, ix in zip(present, index, strict=True)) / len(tasks) for m in models]
    # sum() keeps its int start in its type: over one task at least, replicates is an array
    return dict(zip(models, rank_intervals(replicates, observed), strict=True))  # type: ignore[arg-type]
