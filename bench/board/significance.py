"""Significance from the board's predictions: the per-task alignment of models' predictions, the pair of
two models (A-vs-B comparisons in board.entry_pairs) and the top groups (cached by board.cache)."""

from __future__ import annotations

from collections.abc import Sequence

from biobench.board import scan as R
from biobench.board.entries import Board, Entry
from biobench.errors import ResultsError
from biobench.stats import TaskPredictions, prediction_macro_f1, significance_groups
from biobench.store import AlignedPredictions, align_predictions


def _report(problems: list[R.Problem], problem: R.Problem) -> None:
    if problem not in problems:
        problems.append(problem)


def aligned_predictions(board: Board, task: str, entries: Sequence[Entry]) -> AlignedPredictions | None:
    """The predictions of `entries` on `task` paired by `biobench.store.align_predictions`: seeds without a
    readable file, seeds misaligned with their model's others and models scored on other test examples than
    the first are left out and reported as problems."""
    groups: dict[str, list[tuple[str, list]]] = {}
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
        _report(board.problems, R.Problem(source, reason))
    return aligned


def paired_predictions(board: Board, task: str, a: Entry, b: Entry) -> TaskPredictions | None:
    """A's and B's aligned predictions on `task` with the task's metric, when both have them."""
    aligned = aligned_predictions(board, task, [a, b]) if task in a.runs and task in b.runs else None
    if aligned is None or len(aligned.preds) < 2:
        return None
    pa, pb = aligned.preds[a.key], aligned.preds[b.key]
    first = a.runs[task][0]
    return TaskPredictions(task, aligned.gold, pa, pb, prediction_macro_f1(aligned.gold, *pa, *pb, kind=first.kind, labels=first.labels))


def compute_groups(board: Board, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> None:
    """Fill board.groups[(lang, task)] for every task with predictions from at least two models."""
    for lang in board.langs:
        measured = [e for e in board.lang_entries(lang) if e.source == "measured" and not e.smoke]  # protocol rows
        for task in board.columns(lang):
            with_task = [e for e in measured if task in e.runs]
            aligned = aligned_predictions(board, task, with_task)
            if aligned is None or len(aligned.preds) < 2:
                continue
            first = with_task[0].runs[task][0]
            metric = prediction_macro_f1(aligned.gold, *(p for seeds in aligned.preds.values() for p in seeds),
                                         kind=first.kind, labels=first.labels)
            board.groups[(lang, task)] = significance_groups(aligned.gold, aligned.preds, metric, n_boot, seed, alpha)
