"""Board -> tables: numeric frames, the export file, the paper-style HTML table and a terminal table.

Display conventions (as in the paper's Tables 1-2): macro-F1 in percent with one decimal, best per column
in bold, second underlined (ranked on the displayed, rounded values, ties share the mark). A partial
average is shown as e.g. "58.1*" with a footnote giving k/n tasks; it is never ranked against complete ones.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from biobench.errors import ConfigError
from biobench.names import human_tokens
from biobench.runtime.files import atomic_write, csv_text
from biobench.standings.entries import Average, Board, Cell, Entry, fmt
from biobench.store.lineage import Lineage
from biobench.store.trust import DEGENERATE_MARK, SMOKE_MARK, protocol_label


@dataclass(frozen=True)
class Filters:
    """What the app's controls select; None means no restriction."""

    sources: Collection[str] = ("measured", "reported")
    sizes: Collection[str] | None = None
    contexts: Collection[str] | None = None
    recipes: Collection[str] | None = None
    sort_by: str = "Avg"
    show_ci: bool = True
    include_smoke: bool = False  # smoke rows (protocol overrides) are shown and ranked only when asked for
    hide_contaminated: bool = False  # cells whose test set overlaps the model's pretraining corpus show no score


def _sort_key(filters: Filters, bench: Sequence[str]) -> Callable[[Entry], tuple]:
    def key(e: Entry) -> tuple:
        if filters.sort_by == "Model":
            return (0, e.name.lower())
        if filters.sort_by in ("Avg", "avg"):
            avg = e.average(bench)
            v = avg.value
            return (avg.partial, -(v if v is not None else -math.inf), e.name.lower())
        cell = e.cells.get(filters.sort_by)
        return (cell is None, -(cell.mean if cell else 0.0), e.name.lower())

    return key


def _kept(e: Entry, filters: Filters) -> bool:
    return (e.source in filters.sources and (filters.sizes is None or e.size in filters.sizes)
            and (filters.contexts is None or str(e.context) in filters.contexts)
            and (filters.recipes is None or e.recipe in filters.recipes))


def select(board: Board, lang: str, filters: Filters = Filters()) -> list[Entry]:
    """The board's entries of a language that pass the filters, sorted (one per model and set of overrides: the
    efficiency table and the detail view read runs per entry; the score tables read `model_rows`)."""
    keep = [e for e in board.lang_entries(lang) if _kept(e, filters) and (filters.include_smoke or not e.smoke)]
    return sorted(keep, key=_sort_key(filters, board.benchmark.get(lang, [])))


@dataclass
class ModelRow:
    """One model in one language as the score tables show it: its protocol runs' cells and, where it has no
    protocol result and smoke runs are shown, its smoke runs' cells (⚑, their overrides in the tooltip). The
    board keeps smoke runs in entries of their own (never averaged into the protocol's seeds); a table shows one
    row per model all the same, named as the model is, never by a results folder's key."""

    entry: Entry  # the model: the name and metadata of its protocol row (else of its smoke row), the cells shown
    origin: dict[str, Entry]  # task -> the board entry its cell comes from (a smoke entry: a ⚑ cell)
    hidden: dict[str, Entry]  # task -> a smoke entry not shown there (smoke runs hidden, or a protocol cell)

    @property
    def key(self) -> str:
        return self.entry.key

    @property
    def name(self) -> str:
        return self.entry.name

    def smoke(self, task: str) -> str:
        """The overrides of the run shown in `task`'s cell ('' for a protocol cell or none)."""
        origin = self.origin.get(task)
        return origin.smoke if origin is not None else ""

    def smoke_tasks(self, tasks: Sequence[str]) -> list[str]:
        return [t for t in tasks if self.smoke(t)]


def model_key(e: Entry) -> str:
    """The model an entry belongs to: its results folder (shared by its protocol and smoke entries)."""
    return e.slug or e.key


def model_rows(board: Board, lang: str, filters: Filters = Filters(), tasks: Sequence[str] | None = None
               ) -> list[ModelRow]:
    """One row per model of `lang` that passes the filters and has a cell among `tasks` (default: every column),
    sorted as `select` sorts. A task a model ran both ways shows its protocol cell; among smoke runs, the one
    with the most seeds. Rows with the same name get their results folder appended (as the board's entries do)."""
    from biobench.standings.aggregate import _distinct_names

    shown = list(board.columns(lang) if tasks is None else tasks)
    groups: dict[str, list[Entry]] = {}
    for e in board.lang_entries(lang):
        groups.setdefault(model_key(e), []).append(e)
    rows = []
    for key, entries in groups.items():
        protocol = next((e for e in entries if not e.smoke), None)
        smoke = sorted((e for e in entries if e.smoke), key=lambda e: (-len(e.cells), e.smoke))
        main = protocol or smoke[0]
        if not _kept(main, filters):
            continue
        origin: dict[str, Entry] = {t: protocol for t in protocol.cells} if protocol else {}
        hidden: dict[str, Entry] = {}
        for task in shown:
            runs = sorted((s for s in smoke if task in s.cells), key=lambda s: -len(s.cells[task].seeds))
            if task not in origin and runs and filters.include_smoke:
                origin[task] = runs.pop(0)
            if runs:
                hidden[task] = runs[0]
        origin = {t: origin[t] for t in shown if t in origin}
        if not origin:  # nothing of this model in these columns (or only smoke runs, hidden)
            continue
        merged = replace(main, key=key, name=main.base_name or main.name, smoke="",
                         cells={t: e.cells[t] for t, e in origin.items()},
                         runs={t: e.runs.get(t, []) for t, e in origin.items()})
        rows.append(ModelRow(merged, origin, hidden))
    _distinct_names([r.entry for r in rows])
    order = _sort_key(filters, board.benchmark.get(lang, []))
    return sorted(rows, key=lambda r: order(r.entry))


def smoke_counts(board: Board) -> tuple[int, int]:
    """(smoke results, models with one): the (model, language, task) cells whose scores come from smoke runs
    only, as the toggle's label counts them."""
    cells = {(model_key(e), e.lang, t) for e in board.entries if e.smoke for t in e.cells}
    protocol = {(model_key(e), e.lang, t) for e in board.entries if e.source == "measured" and not e.smoke
                for t in e.cells}
    only = cells - protocol
    return len(only), len({m for m, _, _ in only})


def row_counts(board: Board, lang: str, include_smoke: bool | None = None) -> dict[str, Any]:
    """The one count of a language's rows, for the page's header, the JSON and `leaderboard --print`: a row is a
    model (`model_rows`: its protocol and smoke runs merged) with a cell in any column of the language, under the
    one default (`include_smoke` None: shown when the board holds smoke runs only, as the page opens).
    `rows` / `measured`: all rows and the measured ones; `table`: rows of the language's own table (paper tasks);
    `other_only`: measured rows with cells on other tasks only (the page shows them under Other tasks);
    `smoke_hidden`: models whose smoke cells the default hides (what "Show smoke runs" would add)."""
    include = smoke_only(board) if include_smoke is None else include_smoke
    rows = model_rows(board, lang, Filters(include_smoke=include))
    paper = {r.key for r in model_rows(board, lang, Filters(include_smoke=include), board.benchmark.get(lang, []))}
    hidden = 0 if include else sum(bool(r.smoke_tasks(board.columns(lang)))
                                   for r in model_rows(board, lang, Filters(include_smoke=True)))
    measured = [r for r in rows if r.entry.source == "measured"]
    return {"include_smoke": include, "rows": len(rows), "measured": len(measured), "table": len(paper),
            "other_only": [r.key for r in measured if r.key not in paper], "smoke_hidden": hidden}


def smoke_only(board: Board) -> bool:
    """Whether every measured row is a smoke row (a demo's, a quick check's): the board then says so in a banner
    and shows the smoke runs from the start (still marked) instead of hiding every result it was opened on."""
    measured = [e for e in board.entries if e.source == "measured"]
    return bool(measured) and all(e.smoke for e in measured)


def seeds_text(e: Entry) -> str:
    counts = e.seed_counts
    if e.reported_seeds is not None:
        return str(e.reported_seeds)
    if not counts:
        return "0"
    return str(counts[0]) if counts[0] == counts[-1] else f"{counts[0]}-{counts[-1]}"


def unranked_reason(board: Board, lang: str, row: ModelRow | None) -> str:
    """Why a row's Rank is "—" (`row` None: why no row of `lang` has one). Ranks on the average come from the
    significance bootstrap (board.significance): protocol runs of measured models only, and only when at least
    two of them have predictions on every benchmark task of the language."""
    if row is not None and row.entry.source == "reported":
        return "a reported row (the paper's numbers) has no predictions to rank"
    if row is not None and row.smoke_tasks(list(row.origin)):
        return "smoke runs are never ranked (ranks use protocol runs only)"
    finished = getattr(board.significance, "finished", None)  # cache.BackgroundGroups' threading.Event
    pending = finished is not None and not finished.is_set()
    if (lang, None) not in board.ranks:
        bench = board.benchmark.get(lang, [])
        if pending:
            return "the significance bootstrap is still running: ranks appear when it ends"
        return (f"a rank needs at least two measured models with protocol runs (not smoke runs) and predictions on "
                f"every one of the {len(bench)} benchmark tasks; this board has fewer")
    return f"not measured (protocol runs with predictions) on every one of the {len(board.benchmark.get(lang, []))} " \
           "benchmark tasks"


def rank_text(board: Board, lang: str, task: str | None, key: str) -> str | None:
    """A model's 95% rank interval on a task (None: the language's average) as "2-5", or None where the board
    has none (a reported row, a partial average, significance not computed yet)."""
    interval = board.ranks.get((lang, task), {}).get(key)
    return None if interval is None else str(interval)


# ------------------------------------------------------------------------------------------------ the columns
View = Literal["frame", "export", "html", "text"]  # language_frame, export_frame, render_html, render_text


@dataclass(frozen=True)
class Cells:
    """What a column reads for one row of one table."""

    row: ModelRow
    lang: str
    avg: Average  # over the language's benchmark tasks
    board: Board


def _protocol(c: Cells) -> str:
    """'protocol', 'reported', or the smoke overrides of the cells shown ('protocol + smoke: ...' when mixed)."""
    if c.row.entry.source == "reported":
        return "reported"
    smoke = sorted({c.row.smoke(t) for t in c.row.entry.cells} - {""})
    if not smoke:
        return "protocol"
    label = "; ".join(protocol_label(s) for s in smoke)
    return f"protocol + {label}" if any(not c.row.smoke(t) for t in c.row.entry.cells) else label


def _min_seeds(c: Cells) -> int | None:
    seeds = [int(s) for s in seeds_text(c.row.entry).split("-") if s.isdigit()]
    return min(seeds) if seeds else None


def _size(c: Cells) -> str:
    e = c.row.entry
    return e.size + (f" ({e.params / 1e6:.3g}M)" if e.params else "")


@dataclass(frozen=True)
class Column:
    """One column of the score tables, declared once: `language_frame`, `export_frame`, `render_html` and
    `render_text` each show the columns whose `views` name them, in this table's order. The task columns
    (one per task) stand where `TASKS` is; a view's special cells (the HTML's model name with its marks, the
    ranked average) are drawn by the renderer under the column's name."""

    name: str  # the frame's and the export's column name
    header: str  # the HTML and text tables' header
    tooltip: str  # the HTML header's title: what the column holds
    value: Callable[[Cells], Any]  # what the frame and the export hold
    views: frozenset[View]
    shown: Callable[[Cells], str] | None = None  # the HTML/text text (default: the value as text); plain text
    css: str = ""  # the HTML header and cells' class
    pinned: bool = False  # the HTML shows it left of the task columns (Model and Avg stay put when it scrolls)


ALL, DATA = frozenset(("frame", "export", "html", "text")), frozenset(("frame", "export"))
TASKS = Column("<tasks>", "", "", lambda c: None, ALL)  # stands for one column per task
COLUMNS: tuple[Column, ...] = (
    Column("lang", "Language", "the table's language", lambda c: c.lang, frozenset({"export"})),
    Column("model", "Model", "the model (reported: the paper's published numbers)", lambda c: c.row.name, ALL,
           css="model", pinned=True),
    TASKS,
    Column("avg", "Avg", "mean over the language's benchmark tasks (a partial mean is marked, never ranked)",
           lambda c: round(c.avg.value, 4) if c.avg.value is not None and not c.avg.partial else None, ALL,
           css="avg", pinned=True),
    Column("n_seeds", "Seeds", "seeds per task (a range when tasks differ)", _min_seeds, frozenset({"export"})),
    Column("n_seeds", "Seeds", "seeds per task (a range when tasks differ)", lambda c: seeds_text(c.row.entry),
           frozenset({"frame", "html", "text"})),
    Column("source", "Source", "measured here, or reported in the paper", lambda c: c.row.entry.source,
           frozenset({"frame", "export", "text"})),
    Column("protocol", "Protocol", "the paper's protocol, or a smoke run's overrides", _protocol, DATA),
    Column("avg_partial", "Partial avg", "the mean over the benchmark tasks a model has, when it lacks some",
           lambda c: round(c.avg.value, 4) if c.avg.value is not None and c.avg.partial else None, DATA),
    Column("avg_tasks", "Avg tasks", "benchmark tasks in the average", lambda c: f"{c.avg.k}/{c.avg.n}", DATA),
    Column("partial", "Partial", "whether the average lacks benchmark tasks", lambda c: c.avg.partial,
           frozenset({"frame"})),
    Column("paper_avg", "Paper avg", "the average the paper prints", lambda c: c.row.entry.paper_avg,
           frozenset({"export"})),
    Column("avg_rank", "Rank", "95% rank interval on the average (bootstrap over test examples and seeds)",
           lambda c: rank_text(c.board, c.lang, None, c.row.key), frozenset({"frame", "export", "html"}),
           shown=lambda c: rank_text(c.board, c.lang, None, c.row.key) or "—", css="rank", pinned=True),
    Column("context", "Context", "the model's maximum sequence length", lambda c: c.row.entry.context,
           frozenset({"frame", "html"}), shown=lambda c: str(c.row.entry.context or "?")),
    Column("size", "Size", "parameter count class (parameters)", lambda c: c.row.entry.size,
           frozenset({"frame", "html"}), shown=_size),
    Column("recipe", "Recipe", "how the model was pretrained", lambda c: c.row.entry.recipe, frozenset({"frame"})),
    Column("lineage", "Recipe / lineage", "the pretraining recipe, base model and tokens (biobench pretrain)",
           lambda c: c.row.entry.lineage, frozenset({"frame", "html"}),
           shown=lambda c: c.row.entry.lineage or c.row.entry.recipe, css="meta"),
)


def columns_of(view: View) -> list[Column]:
    return [c for c in COLUMNS if view in c.views]


def _data_frame(view: View, rows: Sequence[tuple[str, ModelRow]], tasks: Sequence[str], board: Board,
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
    return _data_frame("frame", rows, board.columns(lang), board,
                       lambda r, t: r.entry.cells[t].mean if t in r.entry.cells else math.nan)


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
    frame = _data_frame("export", rows, tasks, board,
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
        from biobench.standings import dataset

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


CSS = """
.lb-table {border-collapse: separate; border-spacing: 0; font-size: 13px;}
.lb-table th, .lb-table td {border-bottom: 1px solid #ddd; padding: 3px 5px; text-align: right; white-space: nowrap;
  background: #fff;}
.lb-table th {background: #f3f4f6; font-weight: 600; font-size: 12px; vertical-align: bottom; line-height: 1.15;}
.lb-table th.task {white-space: nowrap; min-width: 40px;}
.lb-table th abbr {text-decoration: none; cursor: help;}
.lb-table td.model, .lb-table th.model, .lb-table td.meta, .lb-table th.meta {text-align: left;}
.lb-table td.model, .lb-table th.model {position: sticky; left: 0; z-index: 2; width: 230px; min-width: 230px;
  max-width: 230px; box-sizing: border-box; white-space: normal; overflow-wrap: anywhere;}
.lb-table td.avg, .lb-table th.avg {position: sticky; left: 230px; z-index: 2; box-sizing: border-box;
  min-width: 58px; border-right: 2px solid #ccc;}
.lb-table td.meta {color: #555; font-size: 12px; white-space: normal; min-width: 220px;}
.lb-table td.top {background: #e6f4ea;}
.lb-table tr.reported td.model {font-style: italic;}
.lb-table .ci {color: #777; font-size: 10px; margin-left: 2px;}
.lb-table .smoke, .lb-table .degenerate {color: #b45309; cursor: help;}
.lb-table .contaminated {color: #b91c1c; cursor: help;}
.lb-notes {font-size: 12px; color: #444;}
.lb-scroll {overflow-x: auto; max-width: 100%;}
.lb-empty {color: #555; font-style: italic;}
.lb-banner {background: #fff7ed; border: 1px solid #f59e0b; border-radius: 4px; padding: 6px 10px; color: #7c2d12;}
/* every table's headers (Gradio dataframes in the Task, Model and Compare tabs, the About tab's markdown tables):
   whole words only, never broken mid-word ("ba tc h", "war mu p", "me tad ata" at 1,280 px): a narrow column
   grows to its longest word and the table scrolls sideways instead */
table th, table th * {word-break: keep-all !important; overflow-wrap: normal !important; hyphens: none !important;}
"""


def esc(value: Any) -> str:
    """The one escaping of a value put into HTML (text or a quoted attribute): every string here may come
    from a stranger's result file (model names, ids, task ids, labels, lineage, error messages)."""
    return html.escape(str(value), quote=True)


def short_task(task: str) -> str:
    """A task id as a narrow column header (HTML): one line per part, never cut ('fracco-morph-topo-100' ->
    fracco / morph / topo / 100), so the column is as wide as its longest part; the full id is the tooltip."""
    parts = [p for p in str(task).split("-") if p] or [str(task)]
    return "<br>".join(esc(p) for p in parts)


def row_anchor(lang: str, key: str) -> str:
    """The id of a model's row in a language table (the Queue tab links to it): letters, digits and '-' only."""
    return "row-" + "".join(c if c.isalnum() else "-" for c in f"{lang}-{key}")


Part = Literal["paper", "other"]  # a language's paper tasks (its tab), or the tasks outside the paper


def table_tasks(board: Board, lang: str, part: Part) -> list[str]:
    """The paper's tasks of `lang` (its table holds them only), or the other tasks found in its results (demo,
    user tasks: the "Other tasks" tab)."""
    return list(board.benchmark.get(lang, [])) if part == "paper" else list(board.extra.get(lang, []))


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
    tasks, bench = table_tasks(board, lang, part), board.benchmark.get(lang, [])
    table_id = f"lb-{'table' if part == 'paper' else 'other'}-{lang}"
    rows = model_rows(board, lang, filters, tasks)
    hidden = 0 if filters.include_smoke else sum(  # the models the toggle would add ⚑ cells to
        bool(r.smoke_tasks(tasks)) for r in model_rows(board, lang, replace(filters, include_smoke=True), tasks))
    hint = (f" Smoke runs (protocol overrides) of {hidden} model(s) are hidden: tick &quot;Show smoke runs&quot; to "
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
    notes = []
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
                      "because \"Show smoke runs\" is ticked or the board holds nothing else (hover a cell for its "
                      "overrides); the Rank column and the significance groups use protocol runs only.")
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


def _align(rows: list[list[str]]) -> list[str]:
    """Fixed-width lines: first column left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows]


def render_text(board: Board, langs: Sequence[str] | None = None, name_width: int = 44,
                include_smoke: bool | None = None) -> str:
    """The leaderboard as plain text for a terminal (the demo prints this): per language its paper tasks, then
    its other tasks. One row per model; partial averages get '*', smoke cells '⚑' (their overrides listed below),
    degenerate cells '⚠'. Smoke runs by the page's default (`include_smoke` None: shown when the board holds
    nothing else), and the page's counts last (`row_counts`)."""
    blocks = []
    include_smoke = smoke_only(board) if include_smoke is None else include_smoke
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
    blocks.append(f"{measured} measured model row{'' if measured == 1 else 's'}, as on the page"
                  + (f"; smoke runs of {hidden} model(s) hidden (--include-smoke shows them)" if hidden else ""))
    return "\n\n".join(blocks)


def _median(values: list[float]) -> float | None:
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _runs(e: Entry) -> list:
    return [r for task_runs in e.runs.values() for r in task_runs]


def _timing(run, name: str) -> float | None:
    value = (run.details.get("timings") or {}).get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def pretraining_cost(lineage: Any) -> dict[str, Any]:
    """Tokens, device-hours and hardware of a `biobench pretrain` checkpoint, from its lineage
    (biobench.store.lineage; empty for other models; checkpoints written before compute was recorded give
    tokens only)."""
    record = Lineage.from_dict({**lineage, "recipe": lineage.get("recipe") or "?"}) if isinstance(lineage, dict) else None
    if record is None:
        return {}
    device = record.compute.get("device_type")
    kind = "GPU" if device == "cuda" else str(device or "device").upper()
    return {"tokens": record.tokens.get("seen"), "hours": record.device_hours, "hours_unit": f"{kind}-h",
            "hardware": record.hardware}


# One display format per kind of figure in the app's tables (exports keep full precision): scores as the main
# table shows them, differences signed, p-values to 3 decimals, times and rates in their own units.
DISPLAY_FORMATS = {"score": "{:.1f}", "difference": "{:+.2f}", "points": "{:.2f}", "p": "{:.3f}",
                   "seconds": "{:.1f}", "hours": "{:.2f}", "rate": "{:,.0f}", "count": "{:,.0f}"}


def display(frame: pd.DataFrame, kinds: dict[str, str] | None = None, default: str | None = None):
    """The frame as the app shows it: numeric columns formatted by their kind (`kinds` by column, else
    `default`), missing values as '–'. Gradio shows a Styler's formatted values in a read-only Dataframe."""
    kinds = kinds or {}
    formats = {}
    for column in frame.columns:
        kind = kinds.get(column, default)
        if kind and pd.api.types.is_numeric_dtype(frame[column]):
            formats[column] = DISPLAY_FORMATS[kind]
        elif kind and frame[column].dtype == object:  # mixed columns (a 'seed' column with 'mean'): numbers only
            pattern = DISPLAY_FORMATS[kind]
            formats[column] = lambda v, p=pattern: p.format(v) if isinstance(v, int | float) and v == v else (
                "–" if v is None or v != v else str(v))
    return frame.style.format(formats, na_rep="–")


EFFICIENCY_COLUMNS = ["model", "runs", "fine-tune s/run", "fine-tune h total", "tokens/s", "fine-tune device",
                      "pretrain tokens", "pretrain device-h", "pretrain hardware", "key"]


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def efficiency_frame(board: Board, lang: str) -> pd.DataFrame:
    """One row per measured model of a language: fine-tuning cost from the result timings (mean training
    seconds per run, total hours, median tokens/s, device) and pretraining cost from the checkpoint lineage
    (tokens seen, device-hours with their kind, hardware). `key` identifies the row for the detail view."""
    rows = []
    for e in select(board, lang, Filters(sources=("measured",), sort_by="Model", include_smoke=True)):
        runs = _runs(e)
        train = [t for r in runs if (t := _timing(r, "train_s")) is not None]
        speed = [t for r in runs if (t := _timing(r, "tokens_per_s")) is not None]
        devices = sorted({str(r.details.get("device")) for r in runs if r.details.get("device")})
        cost = pretraining_cost(runs[0].model_meta.get("lineage") if runs else None)
        rows.append({
            "model": e.name, "runs": len(runs),
            "fine-tune s/run": round(sum(train) / len(train), 1) if train else None,
            "fine-tune h total": round(sum(train) / 3600, 3) if train else None,
            "tokens/s": round(_median(speed)) if speed else None,
            "fine-tune device": ", ".join(devices),
            "pretrain tokens": human_tokens(cost["tokens"]) if cost.get("tokens") else "",
            "pretrain device-h": f"{cost['hours']:.3g} {cost['hours_unit']}" if cost.get("hours") is not None else "",
            "pretrain hardware": str(cost.get("hardware") or ""),
            "key": e.key,
        })
    return pd.DataFrame(rows, columns=EFFICIENCY_COLUMNS)


def _protocol_text(protocol: dict[str, Any]) -> str:
    fields = [f"{k} {protocol[k]}" for k in ("epochs", "max_steps", "lr", "batch_size", "max_length", "head",
                                             "dev_metric") if protocol.get(k) is not None]
    return f"{protocol.get('name', '?')} ({', '.join(fields)}; hash {str(protocol.get('hash', '?'))[:19]})"


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]|#!~"})


def md(value: Any) -> str:
    """A value shown as plain text inside Markdown (the detail view): `<`, `>`, `&` escaped and Markdown's
    markup characters backslash-escaped, so a name can neither open a tag nor a link nor a table cell."""
    return html.escape(" ".join(str(value).split()).translate(_MD_SPECIAL), quote=False)


def md_code(value: Any) -> str:
    """A value shown as `code` in a Markdown table cell: backticks and line breaks removed, `|` escaped (a table
    splits cells before it sees code spans); a code span shows the rest as is, tags included."""
    return "`" + " ".join(str(value).replace("`", "'").replace("|", "\\|").split()) + "`"


def model_detail(board: Board, lang: str, key: str) -> tuple[str, pd.DataFrame]:
    """The detail view of one row: a Markdown summary (where the model comes from, lineage, pretraining cost,
    protocols, fine-tuning time) and its per-task, per-seed scores with each run's timings and protocol hash."""
    e = board.entry(key, lang)
    if e is None:
        return f"No {md(lang)} model {md(repr(key))}.", pd.DataFrame()
    bench = board.benchmark.get(lang, [])
    avg = e.average(bench)
    lines = [f"### {md(e.name)}", "", "| about | value |", "|---|---|",
             f"| source | {e.source}{' (the paper’s published numbers)' if e.source == 'reported' else ''} |"]
    if e.source == "reported":
        lines.append(f"| recipe / citation | {md(e.lineage or e.recipe)} |")
        lines.append(f"| seeds | {e.reported_seeds} |")
    else:
        meta = _runs(e)[0].model_meta
        lines += [f"| model | {md_code(e.model_id)} |", f"| revision | {md_code(meta.get('revision', '?'))} |",
                  f"| parameters | {e.params:,} |" if e.params else "| parameters | ? |",
                  f"| context | {md(e.context or '?')} |", f"| architecture | {md(meta.get('architecture') or '?')} |"]
        if e.lineage:
            lines.append(f"| lineage | {md(e.lineage)} |")
        cost = pretraining_cost(meta.get("lineage"))
        if cost:
            parts = [f"{md(human_tokens(cost.get('tokens')))} tokens"]
            if cost.get("hours") is not None:
                parts.append(f"{cost['hours']:.3g} {md(cost['hours_unit'])}")
            if cost.get("hardware"):
                parts.append(f"on {md(cost['hardware'])}")
            lines.append(f"| pretraining | {', '.join(parts[:2])}{' ' + parts[2] if len(parts) > 2 else ''}"
                         f"{'' if len(parts) > 1 else ' (time and hardware not recorded)'} |")
        protocols = sorted({_protocol_text(r.details["protocol"]) for r in _runs(e) if isinstance(r.details.get("protocol"), dict)})
        lines += [f"| protocol | {md(p)} |" for p in protocols]
        train = [t for r in _runs(e) if (t := _timing(r, "train_s")) is not None]
        if train:
            lines.append(f"| fine-tuning | {len(train)} run{'' if len(train) == 1 else 's'}, {sum(train) / 3600:.3g} h in all, "
                         f"{sum(train) / len(train):.1f} s per run |")
    lines.append(f"| average ({md(lang)}) | {fmt(avg.value)}{f' (partial: {avg.k}/{avg.n} tasks)' if avg.partial else ''} |")
    rows = []
    for task in board.columns(lang):
        cell = e.cells.get(task)
        if cell is None:
            continue
        if e.source == "reported" or not e.runs.get(task):
            rows.append({"task": task, "seed": "reported", "macro-F1": round(cell.mean, 2)})
            continue
        for r in e.runs[task]:
            protocol = r.details.get("protocol") if isinstance(r.details.get("protocol"), dict) else {}
            rows.append({"task": task, "seed": r.seed, "macro-F1": round(100 * r.score, 2),
                         "dev": round(100 * r.details["dev_score"], 2) if isinstance(r.details.get("dev_score"), int | float) else None,
                         "train s": _round(_timing(r, "train_s"), 1), "tokens/s": _round(_timing(r, "tokens_per_s"), 0),
                         "device": r.details.get("device"), "protocol": str(protocol.get("hash", ""))[:19]})
        rows.append({"task": task, "seed": "mean", "macro-F1": round(cell.mean, 2)})
    return "\n".join(lines), pd.DataFrame(rows)


MODEL_PANEL_COLUMNS = ["task", "macro-F1", "± 95% CI", "seeds", "run"]
_METADATA_LABELS = {"parameters": "parameters", "context_length": "context length", "license": "license",
                    "base_model": "base model", "training_data": "training data", "open_weights": "open weights"}


def _metadata_text(field: str, value: Any) -> str:
    if value is None:
        return "?"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if field == "parameters" and isinstance(value, int):
        return f"{value:,} ({human_tokens(value)})"
    if field == "context_length" and isinstance(value, int):
        return f"{value:,} tokens"
    if isinstance(value, list):
        return ", ".join(md(v) for v in value)
    return md(value)


def model_panel(row: dict[str, Any] | None) -> tuple[str, pd.DataFrame]:
    """The Model tab: a model's metadata (each field said to be stated by its submitter or read from its model
    card / config) and its per-task results, from its row as /api/v1/models gives it (leaderboard/json_routes.py
    `model_row_json`: the same board model, nothing computed twice). Smoke runs are rows marked ⚑ with their
    overrides, never averaged with the protocol's seeds. Every value from results is escaped (`md`)."""
    if row is None:
        return "Pick a model.", pd.DataFrame(columns=MODEL_PANEL_COLUMNS)
    meta = row.get("metadata") or {}
    stated = set(meta.get("stated") or [])
    reported = row.get("source") == "reported"
    lines = [f"### {md(row['name'])}", ""]
    if reported:
        lines += ["The paper's published numbers (arXiv 2605.12438): no model card was read, nothing stated.", ""]
    lines += ["| metadata | value | from |", "|---|---|---|"]
    for field, label in _METADATA_LABELS.items():
        value = meta.get(field)
        source = ("stated by the submitter" if field in stated else "—" if value is None
                  else "model card / config")
        lines.append(f"| {label} | {_metadata_text(field, value)} | {source if not reported else '—'} |")
    if row.get("model_id"):
        lines.append(f"| model | {md_code(row['model_id'])} | |")
    avg = row.get("average") or {}
    if avg.get("value") is not None:
        partial = f" (partial: {avg['tasks']}/{avg['of']} tasks)" if avg.get("partial") else ""
        smoke_tasks = row.get("smoke_tasks") or []
        smoke = f" ({SMOKE_MARK} smoke runs on {', '.join(md(t) for t in smoke_tasks)})" if smoke_tasks else ""
        lines.append(f"| average | {fmt(avg['value'])}{partial}{smoke} | |")
    rows = []

    def half(cell: dict[str, Any]) -> float | None:
        low, high = cell.get("ci_low"), cell.get("ci_high")
        return None if low is None or high is None else round((high - low) / 2, 2)

    def add(task: str, cell: dict[str, Any], run: str) -> None:
        rows.append({"task": task, "macro-F1": cell.get("mean"), "± 95% CI": half(cell),
                     "seeds": cell.get("seeds") or ("reported" if reported else None), "run": run})

    for task, cell in (row.get("cells") or {}).items():
        add(task, cell, f"{SMOKE_MARK} smoke: {cell['smoke']}" if cell.get("smoke") else
            "paper (reported)" if reported else "protocol")
        for sub in row.get("smoke_runs") or []:  # the model's other smoke runs of this task, not shown in its cell
            if task in sub["cells"] and sub["smoke"] != cell.get("smoke"):
                add(task, sub["cells"][task], f"{SMOKE_MARK} smoke (not in the table): {sub['smoke']}")
    return "\n".join(lines), pd.DataFrame(rows, columns=MODEL_PANEL_COLUMNS)
