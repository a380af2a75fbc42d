"""Numeric tables for the app: a language's score frame and the display format of every frame it shows."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
from biobench.leaderboard.tables.columns import TASKS, Cells, View, columns_of
from biobench.leaderboard.tables.filters import Filters
from biobench.leaderboard.tables.rows import ModelRow, model_rows
from biobench.standings.entries import Board


def data_frame(view: View, rows: Sequence[tuple[str, ModelRow]], tasks: Sequence[str], board: Board,
                scores: Callable[[ModelRow, str], Any]) -> pd.DataFrame:
    names = [t if col is TASKS else col.name for col in columns_of(view) for t in (tasks if col is TASKS else [""])]
    records = []
    for lang, row in rows:
        cells = Cells(row, lang, row.entry.average(board.benchmark.get(lang, [])), board)
        record: dict[str, Any] = {}
        for col in columns_of(view):
            if col is TASKS:
                record.update({t: scores(row, t) for t in tasks})
            else:
                record[col.name] = col.value(cells)
        records.append(record)
    return pd.DataFrame(records, columns=names)


def language_frame(board: Board, lang: str, filters: Filters = Filters()) -> pd.DataFrame:
    """Numeric table for one language (percent), one row per model in display order (`model_rows`); avg only when
    complete (avg_partial otherwise)."""
    rows = [(lang, r) for r in model_rows(board, lang, filters)]
    return data_frame("frame", rows, board.columns(lang), board,
                       lambda r, t: r.entry.cells[t].mean if t in r.entry.cells else math.nan)


def hours_text(value: float) -> str:
    """Hours to 2 decimals, or to 2 significant digits under 0.01 h: a CPU smoke run's fine-tuning (seconds)
    showed as "0.00" hours (issue 62 item 3), as if it had cost nothing."""
    return f"{value:.2f}" if value == 0 or abs(value) >= 0.01 else f"{value:.2g}"


# One display format per kind of figure in the app's tables (exports keep full precision): scores as the main
# table shows them, differences signed, p-values to 3 decimals, times and rates in their own units.
DISPLAY_FORMATS: dict[str, str | Callable[[float], str]] = {
    "score": "{:.1f}", "difference": "{:+.2f}", "points": "{:.2f}", "p": "{:.3f}", "seconds": "{:.1f}",
    "hours": hours_text, "rate": "{:,.0f}", "count": "{:,.0f}"}


def display(frame: pd.DataFrame, kinds: dict[str, str] | None = None, default: str | None = None):
    """The frame as the app shows it: numeric columns formatted by their kind (`kinds` by column, else
    `default`), missing values as '–'. Gradio shows a Styler's formatted values in a read-only Dataframe."""
    kinds = kinds or {}
    formats: dict[str, Any] = {}  # a format string or a function, by column
    for column in frame.columns:
        kind = kinds.get(column, default)
        if kind and pd.api.types.is_numeric_dtype(frame[column]):
            formats[column] = DISPLAY_FORMATS[kind]
        elif kind and frame[column].dtype == object:  # mixed columns (a 'seed' column with 'mean'): numbers only
            pattern = DISPLAY_FORMATS[kind]
            formats[column] = lambda v, p=pattern: (p(v) if callable(p) else p.format(v)) \
                if isinstance(v, int | float) and v == v else ("–" if v is None or v != v else str(v))
    return frame.style.format(formats, na_rep="–")
