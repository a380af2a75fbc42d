"""The leaderboard as plain text for a terminal (`render_text`; the demo prints it)."""

from __future__ import annotations

from collections.abc import Sequence

from biobench.leaderboard.tables.columns import TASKS, Cells, columns_of
from biobench.leaderboard.tables.filters import Filters
from biobench.leaderboard.tables.rows import (
    SMOKE_SHOWN_BY_DEFAULT,
    model_rows,
    row_counts,
    smoke_text,
    table_tasks,
)
from biobench.standings.entries import Board, fmt
from biobench.store.trust import DEGENERATE_MARK, SMOKE_MARK


def _align(rows: list[list[str]]) -> list[str]:
    """Fixed-width lines: first column left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows]


def render_text(board: Board, langs: Sequence[str] | None = None, name_width: int = 44,
                include_smoke: bool | None = None) -> str:
    """The leaderboard as plain text for a terminal (the demo prints this): per language its paper tasks, then
    its other tasks. One row per model; partial averages get '*', smoke cells '⚑' (their overrides listed below),
    degenerate cells '⚠'. Smoke runs by the page's default (`include_smoke` None: a smoke cell where its model
    has no protocol result), and the page's counts last (`row_counts`)."""
    blocks = []
    include_smoke = SMOKE_SHOWN_BY_DEFAULT if include_smoke is None else include_smoke
    counts = {lang: row_counts(board, lang, include_smoke) for lang in langs or board.langs}
    for lang in langs or board.langs:
        bench = board.benchmark.get(lang, [])
        language = {"fr": "French", "en": "English"}.get(lang, lang)
        for part in ("paper", "other"):
            tasks = table_tasks(board, lang, part)
            rows = model_rows(board, lang, Filters(include_smoke=include_smoke), tasks)
            if not rows:
                continue
            columns = [c for c in columns_of("text") if part == "paper" or c.name != "avg"]
            header = [h for c in columns for h in (tasks if c is TASKS else [c.header.lower()])]
            lines, notes = [], []
            for row in rows:
                e, avg = row.entry, row.entry.average(bench)
                text = []
                for col in columns:
                    if col is TASKS:
                        text += [fmt(e.cells[t].mean) + (SMOKE_MARK if row.smoke(t) else "")
                                 + (DEGENERATE_MARK if e.cells[t].degenerate else "") if t in e.cells else "—"
                                 for t in tasks]
                    elif col.name == "model":
                        text.append(e.name if len(e.name) <= name_width else e.name[: name_width - 1] + "…")
                    elif col.name == "avg":
                        text.append(fmt(avg.value) + ("*" if avg.partial and avg.value is not None else ""))
                        if avg.partial and avg.value is not None:
                            notes.append(f"* {e.name}: partial average over {avg.k}/{avg.n} tasks")
                    else:
                        cells = Cells(row, lang, avg, board)
                        text.append(col.shown(cells) if col.shown else str(col.value(cells)))
                for overrides in sorted({row.smoke(t) for t in row.smoke_tasks(tasks)}):
                    done = [t for t in tasks if row.smoke(t) == overrides]
                    notes.append(f"{SMOKE_MARK} {e.name} · {', '.join(done)}: protocol overrides {overrides} "
                                 "(not the protocol's score)")
                notes += [f"{DEGENERATE_MARK} {e.name} · {t} seed {seed}: {why}" for t in tasks if t in e.cells
                          for seed, why in sorted(e.cells[t].degenerate.items())]
                lines.append(text)
            title = f"{language} (macro-F1 %, mean over seeds)" if part == "paper" else \
                f"{language}, other tasks (not the paper's; macro-F1 %, mean over seeds)"
            blocks.append("\n".join([title, *_align([header, *lines]), *notes]))
    measured = sum(c["measured"] for c in counts.values())
    hidden = sum(c["smoke_hidden"] for c in counts.values())
    models = sum(c["smoke_hidden_models"] for c in counts.values())
    blocks.append(f"{measured} measured model row{'' if measured == 1 else 's'}, as on the page"
                  + (f"; {smoke_text(hidden, models)} hidden (drop --hide-smoke to show them)" if hidden else ""))
    return "\n\n".join(blocks)
