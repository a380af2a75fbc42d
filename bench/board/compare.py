"""The Compare tab's A-vs-B tables and per-model detectable differences, in percentage points.

The statistics are the results store's (`biobench.store.compare`, `biobench.store.summary`: fractions); this
module pairs the board's runs (`significance.paired_predictions`, the one alignment shared with `biobench compare`)
and formats percent for the app.
"""

from __future__ import annotations

import pandas as pd
from biobench import stats
from biobench.board.entries import Board, Entry
from biobench.board.significance import aligned_predictions, paired_predictions
from biobench.store import compare as store_compare
from biobench.store.summary import detectable_difference

COMPARE_COLUMNS = ["task", "A", "B", "diff", "ci_low", "ci_high", "p_value", "method"]


def _fractions(entry: Entry, task: str) -> list[float]:
    """A model's seed scores on `task` as fractions, in seed order; a reported (paper) row: its mean."""
    runs = entry.runs.get(task)
    return [r.score for r in runs] if runs else [entry.cells[task].mean / 100]


def compare(board: Board, lang: str, key_a: str, key_b: str, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per-task A - B in percentage points (`store.compare.compare_task`: paired bootstrap when both have
    aligned predictions, Welch's t over seeds when both have >= 2 seeds, else the difference of the means).
    A reported (paper) row has its mean only."""
    a, b = board.entry(key_a, lang), board.entry(key_b, lang)
    rows = []
    if a is None or b is None:
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    for task in board.columns(lang):
        if task not in a.cells or task not in b.cells:
            continue
        paired = paired_predictions(board, task, a, b)
        c = store_compare.compare_task(_fractions(a, task), _fractions(b, task), paired, n_boot, seed)
        row = {"task": task, **c.scaled(100)}
        if c.method == store_compare.PAIRED:
            row["method"] = f"paired bootstrap ({n_boot} x examples, seeds)"
        rows.append(row)
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)


def compare_average(board: Board, lang: str, key_a: str, key_b: str, n_boot: int = 1000, seed: int = 0) -> dict | None:
    """A - B on the average over the tasks where both have aligned predictions (percentage points):
    `store.compare.compare_average`. None when no task qualifies. This average can differ from the table's Avg,
    which also counts tasks without predictions."""
    a, b = board.entry(key_a, lang), board.entry(key_b, lang)
    if a is None or b is None:
        return None
    paired = [p for task in board.columns(lang) if (p := paired_predictions(board, task, a, b)) is not None]
    c = store_compare.compare_average(paired, n_boot, seed)
    if c is None:
        return None
    scaled = c.scaled(100)
    return {"tasks": list(c.tasks), "A": scaled["A"], "B": scaled["B"], "diff": scaled["diff"],
            "ci_low": scaled["ci_low"], "ci_high": scaled["ci_high"], "p_value": c.p_value, "n_boot": n_boot}


def average_markdown(avg: dict | None) -> str:
    if avg is None:
        return "*Task average: no task with predictions for both models.*"
    return (f"**Task average** over {len(avg['tasks'])} task(s) with predictions ({', '.join(avg['tasks'])}): "
            f"A {avg['A']:.2f}, B {avg['B']:.2f}, A - B **{avg['diff']:+.2f}** points, 95% CI "
            f"[{avg['ci_low']:+.2f}, {avg['ci_high']:+.2f}], p = {avg['p_value']:.3f} (paired bootstrap, "
            f"{avg['n_boot']} replicates: test examples resampled within each task, seeds per model).")


def task_mdd(board: Board, lang: str, task: str, n_boot: int = 1000, seed: int = 0) -> dict[str, stats.DetectableDifference]:
    """Per measured model with predictions on `task`: the minimum detectable difference at 80% power
    (`store.summary.detectable_difference`), in the metric's units (fractions)."""
    out = {}
    for e in board.lang_entries(lang):
        if e.source != "measured" or task not in e.runs:
            continue
        aligned = aligned_predictions(board, task, [e])
        if aligned is None:
            continue
        first = e.runs[task][0]
        out[e.key] = detectable_difference(aligned.gold, aligned.preds[e.key], first.kind, first.labels, n_boot, seed)
    return out
