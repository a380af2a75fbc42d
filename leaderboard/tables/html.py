"""The paper-style HTML table of a language (`render_html`): marks, tooltips, footnotes, legend."""

from __future__ import annotations

import math
from collections.abc import Sequence

from biobench.leaderboard.tables.columns import TASKS, Cells, Column, columns_of
from biobench.leaderboard.tables.escape import esc
from biobench.leaderboard.tables.filters import Filters
from biobench.leaderboard.tables.rows import (
    ModelRow,
    Part,
    measured_first,
    model_rows,
    rank_text,
    smoke_hidden,
    smoke_text,
    table_tasks,
    unranked_reason,
)
from biobench.standings.entries import Average, Board, Cell, fmt
from biobench.store.trust import DEGENERATE_MARK, SMOKE_MARK


def _ranks(values: Sequence[float | None]) -> dict[int, int]:
    """Row index -> 1 (best) or 2 (second) on the rounded values; ties share the mark."""
    distinct = sorted({round(v, 1) for v in values if v is not None and not math.isnan(v)}, reverse=True)
    marks = {}
    for i, v in enumerate(values):
        if v is not None and not math.isnan(v) and round(v, 1) in distinct[:2]:
            marks[i] = distinct.index(round(v, 1)) + 1
    return marks


def _mark(text: str, rank: int | None) -> str:
    return f"<b>{text}</b>" if rank == 1 else f"<u>{text}</u>" if rank == 2 else text


def short_task(task: str) -> str:
    """A task id as a narrow column header (HTML): one line per part, never cut ('fracco-morph-topo-100' ->
    fracco / morph / topo / 100), so the column is as wide as its longest part; the full id is the tooltip."""
    parts = [p for p in str(task).split("-") if p] or [str(task)]
    return "<br>".join(esc(p) for p in parts)


def row_anchor(lang: str, key: str) -> str:
    """The id of a model's row in a language table (the Queue tab links to it): letters, digits and '-' only."""
    return "row-" + "".join(c if c.isalnum() else "-" for c in f"{lang}-{key}")


def smoke_title(overrides: str) -> str:
    """The tooltip of a smoke cell or row: its overrides and what the mark means."""
    return f"smoke run: protocol overrides {overrides}; not the protocol's score, kept apart from its protocol runs"


CONTAMINATED_MARK = "⚠"  # with the overlap in the tooltip (a degenerate cell's ⚠ says its own reason)


def contamination_title(cell: Cell) -> str:
    """A contaminated cell's tooltip: the share of its test examples found in the model's pretraining corpus."""
    return (f"contamination: {100 * (cell.contamination or 0.0):.1f}% of the test examples share a word 13-gram with "
            "the model's pretraining corpus (biobench eval --check-contamination)")


def _task_cell(board: Board, lang: str, row: ModelRow, task: str, rank: int | None, filters: Filters) -> str:
    c = row.entry.cells.get(task)
    if c is None:
        title = "not run"
        if task in row.hidden:
            title = f"no protocol run; {_unshown(row, task)}: tick Show smoke runs to see it"
        return f'<td title="{esc(title)}">—{_hidden_degenerate_mark(row, task)}</td>'
    if filters.hide_contaminated and c.contaminated():
        return (f'<td title="{esc(contamination_title(c))}; hidden by the filter">'
                f'<span class="contaminated">{CONTAMINATED_MARK}</span></td>')
    text = _mark(fmt(c.mean), rank)
    title = "reported in the paper (mean over seeds); contamination not measured"
    if c.summary is not None:
        s = c.summary
        ci = "no CI with one seed" if s.n < 2 else f"95% CI [{fmt(s.ci_low)}, {fmt(s.ci_high)}]"
        title = f"mean of {s.n} seeds, sd {fmt(s.std)}, {ci}"
        if filters.show_ci and s.n >= 2:
            text += f'<span class="ci">±{fmt(s.half_width)}</span>'
    origin = row.origin[task]
    group = board.groups.get((lang, task))
    cls = ' class="top"' if group is not None and group.in_top(origin.key) else ""
    if group is not None and origin.key in group.vs_best:
        title += f"; vs best p={group.vs_best[origin.key].p_value:.3f}"
    interval = rank_text(board, lang, task, origin.key)
    if interval is not None:
        title += f"; 95% rank interval {interval}"
    if origin.smoke:  # the cell carries the mark; its tooltip the overrides that made it a smoke run
        title = smoke_title(origin.smoke) + "; " + title
        text += f' <span class="smoke">{SMOKE_MARK}</span>'
    if task in row.hidden:  # another run of this model on this task (a smoke run not shown): said, ⚠ if degenerate
        title += f"; {_unshown(row, task)}"
    if c.degenerate:  # the seeds whose test predictions were degenerate, each with its likely reason
        title += "; " + "; ".join(f"seed {seed}: {why}" for seed, why in sorted(c.degenerate.items()))
        text += f' <span class="degenerate">{DEGENERATE_MARK}</span>'
    elif task in row.hidden:
        text += _hidden_degenerate_mark(row, task)
    if c.contaminated():
        title += "; " + contamination_title(c)
        text += f' <span class="contaminated">{CONTAMINATED_MARK}</span>'
    return f'<td{cls} title="{esc(title)}">{text}</td>'


def _unshown(row: ModelRow, task: str) -> str:
    smoke = row.hidden[task]
    cell = smoke.cells[task]
    degenerate = "; ".join(f"seed {seed}: {why}" for seed, why in sorted(cell.degenerate.items()))
    return (f"a smoke run ({smoke.smoke}) scored {fmt(cell.mean)}, not shown"
            + (f" ({DEGENERATE_MARK} {degenerate})" if degenerate else ""))


def _hidden_degenerate_mark(row: ModelRow, task: str) -> str:
    """⚠ on a model's cell when a run of it not shown there (another smoke run) is degenerate (issue 52 item 5:
    the README's 0.00 run appeared nowhere but in the Task tab's off-screen column); the hover says which."""
    hidden = row.hidden.get(task)
    return (f' <span class="degenerate">{DEGENERATE_MARK}</span>'
            if hidden is not None and hidden.cells[task].degenerate else "")


def _header(col: Column, tasks: Sequence[str], bench: Sequence[str]) -> str:
    if col is TASKS:
        return "".join(
            f'<th class="task"><abbr title="{esc(t)}: '
            f'{"benchmark task, in the average" if t in bench else "not in the paper benchmark: not averaged"}">'
            f"{short_task(t)}</abbr></th>" for t in tasks)
    tooltip = f"mean over the {len(bench)} benchmark tasks" if col.name == "avg" else col.tooltip
    return f'<th class="{col.css}"><abbr title="{esc(tooltip)}">{esc(col.header)}</abbr></th>'


def render_html(board: Board, lang: str, filters: Filters = Filters(), part: Part = "paper") -> str:
    """One table for a language as an HTML fragment: its paper tasks (table id `lb-table-<lang>`), or its other
    tasks (`lb-other-<lang>`, no average: those tasks are not the paper's). One row per model (`model_rows`); its
    smoke cells carry ⚑ and their overrides. Every value from results goes through `esc`."""
    tasks, bench = measured_first(board, lang, table_tasks(board, lang, part)), board.benchmark.get(lang, [])
    table_id = f"lb-{'table' if part == 'paper' else 'other'}-{lang}"
    rows = model_rows(board, lang, filters, tasks)
    results, models = smoke_hidden(board, lang, filters)  # the language's, as the header and the JSON count them
    hidden = results if part == "paper" or not table_tasks(board, lang, "paper") else 0  # said once, under its table
    hint = (f" {esc(smoke_text(results, models))} hidden (protocol overrides): tick &quot;Show smoke runs&quot; to "
            "see them." if hidden else "")
    if not rows:
        return f'<div id="{esc(table_id)}" class="lb-notes">No {esc(lang)} rows match the filters.{hint}</div>'
    columns = [c for c in columns_of("html") if part == "paper" or c.name not in ("avg", "avg_rank")]
    columns = [c for c in columns if c.pinned] + [c for c in columns if not c.pinned]
    averages = [r.entry.average(bench) for r in rows]
    col_ranks = {t: _ranks([r.entry.cells[t].mean if t in r.entry.cells else None for r in rows]) for t in tasks}
    avg_ranks = _ranks([a.value if not a.partial else None for a in averages])
    out = [f'<div class="lb-scroll"><table id="{esc(table_id)}" class="lb-table"><thead><tr>'
           + "".join(_header(col, tasks, bench) for col in columns) + "</tr></thead><tbody>"]
    notes: list[str] = []
    for i, (row, avg) in enumerate(zip(rows, averages, strict=True)):
        e, cells = row.entry, Cells(row, lang, avg, board)
        parts = []
        for col in columns:
            if col is TASKS:
                parts += [_task_cell(board, lang, row, t, col_ranks[t].get(i), filters) for t in tasks]
            elif col.name == "model":
                name = esc(e.name) + (" <small>(reported)</small>" if e.source == "reported" else "")
                smoke = row.smoke_tasks(tasks)
                if smoke:  # the name says the row holds smoke cells; each cell says which overrides
                    overrides = "; ".join(sorted({row.smoke(t) for t in smoke}))
                    name += (f' <span class="smoke" title="{esc(smoke_title(overrides))}">{SMOKE_MARK} smoke '
                             f"({len(smoke)} task{'' if len(smoke) == 1 else 's'})</span>")
                parts.append(f'<td class="model" title="{esc(e.source)}">{name}</td>')
            elif col.name == "avg":
                parts.append(f'<td class="avg">{_avg_html(row, avg, avg_ranks.get(i), bench, notes)}</td>')
            else:
                text = col.shown(cells) if col.shown else "" if col.value(cells) is None else str(col.value(cells))
                why = f' title="{esc(unranked_reason(board, lang, row))}"' if col.name == "avg_rank" and text == "—" else ""
                parts.append(f'<td class="{col.css}"{why}>{esc(text)}</td>' if col.css else f"<td>{esc(text)}</td>")
        out.append(f'<tr class="{esc(e.source)}" id="{esc(row_anchor(lang, row.key))}">{"".join(parts)}</tr>')
    out.append("</tbody></table></div>")  # the table scrolls sideways under its sticky Model and Avg columns
    legend = ["Macro-F1 (%), mean over seeds; <b>bold</b> best, <u>underlined</u> second per column. "
              "±: half-width of the 95% Student-t CI over seeds (hover a cell for details). "
              + ("Reported rows are the paper's published numbers (arXiv 2605.12438), not measured here."
                 if part == "paper" else "These tasks are not the paper's: no average, no reported rows.")]
    if hidden:
        legend.append(hint.strip())
    if any(row.smoke_tasks(tasks) for row in rows):
        legend.append(f"{SMOKE_MARK} smoke: a run with protocol overrides (fewer epochs or steps, a train or eval "
                      "subset, another max length...): not the protocol's score, shown (and bolded with the others) "
                      "where the model has no protocol result for the task (untick \"Show smoke runs\" for the "
                      "protocol's results only; hover a cell for its overrides); the Rank column and the "
                      "significance groups use protocol runs only.")
    if any(c.degenerate for row in rows for c in row.entry.cells.values()):
        legend.append(f"{DEGENERATE_MARK} degenerate test predictions (no entity, a single class, no label) for at "
                      "least one seed; hover the cell for the likely reason.")
    if any(lang == k[0] and k[1] in tasks for k in board.groups):
        legend.append("Shaded: top significance group — not significantly worse than the best measured model "
                      "of the task (paired bootstrap over test examples and seeds, p ≥ 0.05).")
    # only the paper's table has a Rank column (Other tasks has no average to rank on); both tables' cells
    # carry their task's rank interval in the hover
    if part == "paper" and any(k[0] == lang for k in board.ranks):
        legend.append("Rank: the 95% interval of the model's rank on the average (e.g. 2-5), from the same "
                      "bootstrap over test examples and seeds; hover a cell for its task's interval.")
    if part == "paper" and (lang, None) not in board.ranks:  # every Rank is "—": say why, once
        legend.append(f"Rank —: {esc(unranked_reason(board, lang, None))}")
    elif part == "other" and any(k[0] == lang and k[1] in tasks for k in board.ranks):
        legend.append("Hover a cell for its task's 95% rank interval (bootstrap over test examples and seeds).")
    legend += [f"*{i} {esc(n)}" for i, n in enumerate(notes, 1)]
    return "\n".join(out) + '<div class="lb-notes">' + "<br>".join(legend) + "</div>"


def _avg_html(row: ModelRow, avg: Average, rank: int | None, bench: Sequence[str], notes: list[str]) -> str:
    """The Avg cell: ranked when complete; a partial mean with its footnote; ⚑ when smoke cells are in it."""
    e = row.entry
    if avg.value is None:
        return "—"
    if avg.partial:
        notes.append(f"{e.name}: average over {avg.k}/{avg.n} tasks (missing {', '.join(avg.missing)})")
        text = f'{fmt(avg.value)}<sup title="partial: {avg.k}/{avg.n} tasks">*{len(notes)}</sup>'
    else:
        text = _mark(fmt(avg.value), rank)
        if e.paper_avg is not None and fmt(avg.value) != fmt(e.paper_avg):
            notes.append(f"{e.name}: the mean of the rounded per-task numbers is {fmt(avg.value, 3)}; "
                         f"the paper reports {fmt(e.paper_avg)} (computed before rounding)")
            text += f"<sup>*{len(notes)}</sup>"
    smoke = row.smoke_tasks(bench)
    if smoke:
        text += (f' <span class="smoke" title="{esc(f"{len(smoke)} of its tasks are smoke runs")}">'
                 f"{SMOKE_MARK}</span>")
    return text
