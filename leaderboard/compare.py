"""Significance groups per task and the A-vs-B comparison, from predictions files where they exist.

The metric is macro-F1 on predictions-file values. `biobench.metrics.prediction_metric(kind)` is used when it
exists and returns a `biobench.stats.CountMetric` (vectorised bootstrap); otherwise the equivalent
`biobench.stats.prediction_macro_f1` (exact-match per-label F1, averaged over labels present).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from biobench import stats
from biobench.leaderboard import results as R
from biobench.leaderboard.board import Board, Entry
from scipy import stats as sps


@lru_cache(maxsize=512)
def _predictions(path: str, mtime_ns: int) -> R.Predictions:
    return R.read_predictions(Path(path))


def load_predictions(path: Path) -> R.Predictions:
    return _predictions(str(path), path.stat().st_mtime_ns)


def task_metric(kind: str, gold: Sequence, preds: Sequence[Sequence]) -> stats.CountMetric:
    try:
        from biobench.metrics import prediction_metric  # written by the evaluation module

        metric = prediction_metric(kind)
        if isinstance(metric, stats.CountMetric):
            return metric
    except Exception:  # noqa: BLE001 - absent or different module: fall back to the equivalent metric
        pass
    return stats.prediction_macro_f1(gold, *preds)


def _report(problems: list[R.Problem], problem: R.Problem) -> None:
    if problem not in problems:
        problems.append(problem)


def entry_predictions(entry: Entry, task: str, problems: list[R.Problem]) -> tuple[list, list, list[list]] | None:
    """(ids, gold, [pred per seed]) from the seeds of `entry` on `task` that have a readable predictions file."""
    ids = gold = None
    preds = []
    for run in entry.runs.get(task, []):
        if run.predictions is None:
            continue
        try:
            p = load_predictions(run.predictions)
        except (OSError, ValueError) as err:
            _report(problems, R.Problem(str(run.predictions), f"unreadable predictions: {err}"))
            continue
        if ids is None:
            ids, gold = p.ids, p.gold
        elif p.ids != ids:
            _report(problems, R.Problem(str(run.predictions), "predictions are not aligned with the model's other seeds"))
            continue
        preds.append(p.pred)
    return (ids, gold, preds) if preds else None


def _aligned(board: Board, lang: str, task: str, entries: Sequence[Entry]):
    """Predictions of several entries on one task, keeping those aligned with the first one found."""
    ids = gold = None
    out: dict[str, list[list]] = {}
    for e in entries:
        got = entry_predictions(e, task, board.problems)
        if got is None:
            continue
        if ids is None:
            ids, gold = got[0], got[1]
        elif got[0] != ids:
            _report(
                board.problems,
                R.Problem(str(e.runs[task][0].path.parent), f"{lang}/{task}: predictions of {e.name} use other test ids; left out of significance")
            )
            continue
        out[e.key] = got[2]
    return gold, out


def compute_groups(board: Board, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> None:
    """Fill board.groups[(lang, task)] for every task with predictions from at least two models."""
    for lang in board.langs:
        measured = [e for e in board.lang_entries(lang) if e.source == "measured"]
        for task in board.columns(lang):
            gold, preds = _aligned(board, lang, task, [e for e in measured if task in e.runs])
            if len(preds) < 2:
                continue
            kind = next(e.runs[task][0].kind for e in measured if e.key in preds)
            metric = task_metric(kind, gold, [p for seeds in preds.values() for p in seeds])
            board.groups[(lang, task)] = stats.significance_groups(gold, preds, metric, n_boot, seed, alpha)


COMPARE_COLUMNS = ["task", "A", "B", "diff", "ci_low", "ci_high", "p_value", "method"]


def compare(board: Board, lang: str, key_a: str, key_b: str, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per-task A - B in percentage points: paired bootstrap when both have aligned predictions, Welch's t
    over seeds when both have >= 2 seeds, else the difference of reported means only."""
    a, b = board.entry(key_a, lang), board.entry(key_b, lang)
    rows = []
    if a is None or b is None:
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    for task in board.columns(lang):
        if task not in a.cells or task not in b.cells:
            continue
        ca, cb = a.cells[task], b.cells[task]
        row = {"task": task, "A": ca.mean, "B": cb.mean, "diff": ca.mean - cb.mean,
               "ci_low": math.nan, "ci_high": math.nan, "p_value": math.nan, "method": "reported means only"}
        gold, preds = _aligned(board, lang, task, [a, b]) if a.runs and b.runs else (None, {})
        if len(preds) == 2:
            metric = task_metric(a.runs[task][0].kind, gold, preds[a.key] + preds[b.key])
            r = stats.paired_bootstrap(gold, preds[a.key], preds[b.key], metric, n_boot, seed)
            row.update(diff=100 * r.diff, ci_low=100 * r.ci_low, ci_high=100 * r.ci_high, p_value=r.p_value,
                       method=f"paired bootstrap ({n_boot} x examples, seeds)")
        elif len(ca.seeds) >= 2 and len(cb.seeds) >= 2:
            t = sps.ttest_ind(list(ca.seeds.values()), list(cb.seeds.values()), equal_var=False)
            ci = t.confidence_interval(0.95)
            p = float(t.pvalue) if np.isfinite(t.pvalue) else 1.0
            row.update(ci_low=float(ci.low), ci_high=float(ci.high), p_value=p, method="Welch t over seeds")
        rows.append(row)
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)


def compare_average(board: Board, lang: str, key_a: str, key_b: str, n_boot: int = 1000, seed: int = 0) -> dict | None:
    """A - B on the average over the tasks where both have aligned predictions (percentage points):
    `stats.average_bootstrap`, test examples resampled within each task, seeds per model. None when no task
    qualifies. This average can differ from the table's Avg, which also counts tasks without predictions."""
    a, b = board.entry(key_a, lang), board.entry(key_b, lang)
    if a is None or b is None:
        return None
    per_task = []
    for task in board.columns(lang):
        if task not in a.runs or task not in b.runs:
            continue
        gold, preds = _aligned(board, lang, task, [a, b])
        if len(preds) == 2:
            metric = task_metric(a.runs[task][0].kind, gold, preds[a.key] + preds[b.key])
            per_task.append(stats.TaskPredictions(task, gold, preds[a.key], preds[b.key], metric))
    if not per_task:
        return None
    r = stats.average_bootstrap(per_task, n_boot, seed)
    return {"tasks": list(r.tasks), "A": 100 * r.mean_a, "B": 100 * r.mean_b, "diff": 100 * r.diff,
            "ci_low": 100 * r.ci_low, "ci_high": 100 * r.ci_high, "p_value": r.p_value, "n_boot": n_boot}


def average_markdown(avg: dict | None) -> str:
    if avg is None:
        return "*Task average: no task with predictions for both models.*"
    return (f"**Task average** over {len(avg['tasks'])} task(s) with predictions ({', '.join(avg['tasks'])}): "
            f"A {avg['A']:.2f}, B {avg['B']:.2f}, A - B **{avg['diff']:+.2f}** points, 95% CI "
            f"[{avg['ci_low']:+.2f}, {avg['ci_high']:+.2f}], p = {avg['p_value']:.3f} (paired bootstrap, "
            f"{avg['n_boot']} replicates: test examples resampled within each task, seeds per model).")


def task_mdd(board: Board, lang: str, task: str, n_boot: int = 1000, seed: int = 0) -> dict[str, stats.DetectableDifference]:
    """Per measured model with predictions on `task`: the minimum detectable difference at 80% power
    (`stats.minimum_detectable_difference`), in the metric's units (fractions)."""
    out = {}
    for e in board.lang_entries(lang):
        if e.source != "measured" or task not in e.runs:
            continue
        got = entry_predictions(e, task, board.problems)
        if got is None:
            continue
        _, gold, preds = got
        metric = task_metric(e.runs[task][0].kind, gold, preds)
        out[e.key] = stats.minimum_detectable_difference(gold, preds, metric, n_boot, seed)
    return out
