"""The A-vs-B comparison per task and on the task average, and per-model detectable differences.

The metric is macro-F1 on predictions-file values (`board.task_metric`, the headline score's counts); the
predictions are paired by `board.aligned_predictions` (one alignment, shared with `biobench compare`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from biobench import stats
from biobench.leaderboard.board import Board, aligned_predictions, task_metric


def _pair(board: Board, task: str, a, b) -> tuple[list, list[list], list[list], stats.CountMetric] | None:
    """(gold, A's predictions per seed, B's, the task metric) when both have aligned predictions on `task`."""
    aligned = aligned_predictions(board, task, [a, b]) if task in a.runs and task in b.runs else None
    if aligned is None or len(aligned.preds) < 2:
        return None
    pa, pb = aligned.preds[a.key], aligned.preds[b.key]
    return aligned.gold, pa, pb, task_metric(a.runs[task], aligned.gold, pa + pb)


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
        pair = _pair(board, task, a, b)
        if pair is not None:
            r = stats.paired_bootstrap(*pair, n_boot, seed)
            row.update(diff=100 * r.diff, ci_low=100 * r.ci_low, ci_high=100 * r.ci_high, p_value=r.p_value,
                       method=f"paired bootstrap ({n_boot} x examples, seeds)")
        elif len(ca.seeds) >= 2 and len(cb.seeds) >= 2:
            from scipy import stats as sps  # here, not at import: scipy.stats adds ~1 s to every app start

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
        pair = _pair(board, task, a, b)
        if pair is not None:
            per_task.append(stats.TaskPredictions(task, *pair))
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
        aligned = aligned_predictions(board, task, [e])
        if aligned is None:
            continue
        preds = aligned.preds[e.key]
        metric = task_metric(e.runs[task], aligned.gold, preds)
        out[e.key] = stats.minimum_detectable_difference(aligned.gold, preds, metric, n_boot, seed)
    return out
