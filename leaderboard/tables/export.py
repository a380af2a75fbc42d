"""The export files: the aggregated table as .csv / .json, one row per seed as .parquet."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
from biobench.errors import ConfigError
from biobench.leaderboard.tables.frames import data_frame
from biobench.leaderboard.tables.rows import ModelRow, rank_text
from biobench.runtime.files import atomic_write, csv_text
from biobench.standings import dataset
from biobench.standings.entries import Board


def export_frame(board: Board) -> pd.DataFrame:
    """One row per (language, model, protocol): a model's smoke runs are a row of their own beside its protocol
    row (model named alike, `protocol` 'smoke: <overrides>'), so the file never mixes the two; a partial average
    is never written to `avg` (avg_partial / avg_tasks); paper_avg for reported rows."""
    tasks = [t for lang in board.langs for t in board.columns(lang)]
    rows = []
    for lang in board.langs:
        for e in board.lang_entries(lang):
            named = replace(e, name=e.base_name or e.name) if e.smoke else e
            rows.append((lang, ModelRow(named, {t: e for t in e.cells}, {})))
    frame = data_frame("export", rows, tasks, board,
                        lambda r, t: round(r.entry.cells[t].mean, 4) if t in r.entry.cells else None)
    for t in tasks:  # the 95% rank intervals on each task ("2-5", docs/EVALUATION.md), after the table's columns
        frame[f"{t}_rank"] = [rank_text(board, lang, t, r.entry.key) for lang, r in rows]
    return frame.astype({"n_seeds": "Int64"})


def write_export(board: Board, path: str | Path, problems: list[tuple[str, str]] | None = None) -> Path:
    """.csv / .json: the aggregated table (one row per language and model); .parquet: one row per measured
    (model, task, seed) with the run key and the whole result (bench/standings/dataset.py); a refused predictions
    file leaves its row's predictions out, into `problems` (dataset.results_frame)."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":

        return dataset.write_parquet(dataset.board_runs(board), path, [] if problems is None else problems)
    frame = export_frame(board)
    if path.suffix.lower() == ".csv":
        atomic_write(path, csv_text(frame))  # formula cells neutralised; a full disk: one line, no 0-byte file
    elif path.suffix.lower() == ".json":
        atomic_write(path, frame.to_json(orient="records", indent=1))
    else:
        raise ConfigError(f"--export {path}: unknown format; use a .csv or .json file name (the aggregated "
                          "table) or .parquet (one row per seed)")
    return path
