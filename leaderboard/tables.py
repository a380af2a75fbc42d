"""Board -> tables: numeric frames, the export file, the paper-style HTML table and a terminal table.

Display conventions (as in the paper's Tables 1-2): macro-F1 in percent with one decimal, best per column
in bold, second underlined (ranked on the displayed, rounded values, ties share the mark). A partial
average is shown as e.g. "58.1*" with a footnote giving k/n tasks; it is never ranked against complete ones.
"""

from __future__ import annotations

import html
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from biobench.board.entries import Board, Cell, Entry, fmt
from biobench.errors import ConfigError
from biobench.names import human_tokens
from biobench.runtime.files import atomic_write, csv_text
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


def select(board: Board, lang: str, filters: Filters = Filters()) -> list[Entry]:
    keep = []
    for e in board.lang_entries(lang):
        if e.source not in filters.sources:
            continue
        if filters.sizes is not None and e.size not in filters.sizes:
            continue
        if filters.contexts is not None and str(e.context) not in filters.contexts:
            continue
        if filters.recipes is not None and e.recipe not in filters.recipes:
            continue
        if e.smoke and not filters.include_smoke:
            continue
        keep.append(e)
    tasks = board.benchmark.get(lang, [])

    def key(e: Entry) -> tuple:
        if filters.sort_by == "Model":
            return (0, e.name.lower())
        if filters.sort_by in ("Avg", "avg"):
            avg = e.average(tasks)
            v = avg.value
            return (avg.partial, -(v if v is not None else -math.inf), e.name.lower())
        cell = e.cells.get(filters.sort_by)
        return (cell is None, -(cell.mean if cell else 0.0), e.name.lower())

    return sorted(keep, key=key)


def seeds_text(e: Entry) -> str:
    counts = e.seed_counts
    if e.reported_seeds is not None:
        return str(e.reported_seeds)
    if not counts:
        return "0"
    return str(counts[0]) if counts[0] == counts[-1] else f"{counts[0]}-{counts[-1]}"


def rank_text(board: Board, lang: str, task: str | None, key: str) -> str | None:
    """A model's 95% rank interval on a task (None: the language's average) as "2-5", or None where the board
    has none (a reported row, a partial average, significance not computed yet)."""
    interval = board.ranks.get((lang, task), {}).get(key)
    return None if interval is None else str(interval)


def language_frame(board: Board, lang: str, filters: Filters = Filters()) -> pd.DataFrame:
    """Numeric table for one language (percent), in display order; avg is the partial mean when partial."""
    tasks, bench = board.columns(lang), board.benchmark.get(lang, [])
    rows = []
    for e in select(board, lang, filters):
        avg = e.average(bench)
        row = {"model": e.name, "source": e.source}
        row.update({t: (e.cells[t].mean if t in e.cells else math.nan) for t in tasks})
        row.update(
            avg=avg.value if avg.value is not None else math.nan, avg_rank=rank_text(board, lang, None, e.key),
            avg_tasks=f"{avg.k}/{avg.n}", partial=avg.partial,
            n_seeds=seeds_text(e), context=e.context, size=e.size, recipe=e.recipe, lineage=e.lineage,
            protocol=protocol_label(e.smoke),
        )
        rows.append(row)
    cols = ["model", "source", *tasks, "avg", "avg_rank", "avg_tasks", "partial", "n_seeds", "context", "size", "recipe", "lineage",
            "protocol"]
    return pd.DataFrame(rows, columns=cols)


def export_frame(board: Board) -> pd.DataFrame:
    """One row per (language, model): lang, model, one column per task id, avg, n_seeds, source, protocol
    ('protocol', or 'smoke: <overrides>' for a smoke row), then avg_partial / avg_tasks (a partial average is never
    written to `avg`), paper_avg for reported rows, and the 95% rank intervals ("2-5", docs/EVALUATION.md) on
    the average (avg_rank) and on each task (<task>_rank) where the significance was computed."""
    tasks = [t for lang in board.langs for t in board.columns(lang)]
    rows = []
    for lang in board.langs:
        bench = board.benchmark.get(lang, [])
        for e in board.lang_entries(lang):
            avg = e.average(bench)
            row: dict = {"lang": lang, "model": e.name}
            row.update({t: round(e.cells[t].mean, 4) if t in e.cells else None for t in tasks})
            seeds = [int(s) for s in seeds_text(e).split("-") if s.isdigit()]
            row.update(
                avg=round(avg.value, 4) if avg.value is not None and not avg.partial else None,
                n_seeds=min(seeds) if seeds else None,
                source=e.source,
                protocol=protocol_label(e.smoke) if e.source == "measured" else "reported",
                avg_partial=round(avg.value, 4) if avg.value is not None and avg.partial else None,
                avg_tasks=f"{avg.k}/{avg.n}",
                paper_avg=e.paper_avg,
                avg_rank=rank_text(board, lang, None, e.key),
            )
            row.update({f"{t}_rank": rank_text(board, lang, t, e.key) for t in tasks})
            rows.append(row)
    cols = ["lang", "model", *tasks, "avg", "n_seeds", "source", "protocol", "avg_partial", "avg_tasks", "paper_avg",
            "avg_rank", *(f"{t}_rank" for t in tasks)]
    return pd.DataFrame(rows, columns=cols).astype({"n_seeds": "Int64"})


def write_export(board: Board, path: str | Path) -> Path:
    """.csv / .json: the aggregated table (one row per language and model); .parquet: one row per measured
    (model, task, seed) with the run key and the whole result (bench/board/dataset.py)."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        from biobench.board import dataset

        return dataset.write_parquet(dataset.board_runs(board), path)
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
.lb-table th.task {white-space: normal; min-width: 44px; max-width: 64px;}
.lb-table th.task abbr {text-decoration: none; cursor: help;}
.lb-table td.model, .lb-table th.model, .lb-table td.meta, .lb-table th.meta {text-align: left;}
.lb-table td.model, .lb-table th.model {position: sticky; left: 0; z-index: 2; width: 230px; min-width: 230px;
  max-width: 230px; box-sizing: border-box; white-space: normal; overflow-wrap: anywhere;}
.lb-table td.avg, .lb-table th.avg {position: sticky; left: 230px; z-index: 2; box-sizing: border-box;
  min-width: 58px; border-right: 2px solid #ccc;}
.lb-table td.meta {color: #555; font-size: 12px; white-space: normal; min-width: 220px;}
.lb-table td.top {background: #e6f4ea;}
.lb-table tr.reported td.model {font-style: italic;}
.lb-table .ci {color: #777; font-size: 10px; margin-left: 2px;}
.lb-table .extra {color: #777;}
.lb-table .smoke, .lb-table .degenerate {color: #b45309; cursor: help;}
.lb-table .contaminated {color: #b91c1c; cursor: help;}
.lb-notes {font-size: 12px; color: #444;}
.lb-scroll {overflow-x: auto; max-width: 100%;}
.lb-empty {color: #555; font-style: italic;}
"""


def esc(value: Any) -> str:
    """The one escaping of a value put into HTML (text or a quoted attribute): every string here may come
    from a stranger's result file (model names, ids, task ids, labels, lineage, error messages)."""
    return html.escape(str(value), quote=True)


def short_task(task: str) -> str:
    """A task id as a narrow column header (HTML): one line per part, words cut to 8 letters
    ('fracco-morph-topo-100' -> fracco / morph / topo / 100); the full id is the header's tooltip."""
    parts = [p if p.isdigit() else p[:8] for p in str(task).split("-") if p] or [str(task)]
    return "<br>".join(esc(p) for p in parts)


def row_anchor(lang: str, key: str) -> str:
    """The id of a model's row in a language table (the Queue tab links to it): letters, digits and '-' only."""
    return "row-" + "".join(c if c.isalnum() else "-" for c in f"{lang}-{key}")


CONTAMINATED_MARK = "⚠"  # with the overlap in the tooltip (a degenerate cell's ⚠ says its own reason)


def contamination_title(cell: Cell) -> str:
    """A contaminated cell's tooltip: the share of its test examples found in the model's pretraining corpus."""
    return (f"contamination: {100 * (cell.contamination or 0.0):.1f}% of the test examples share a word 13-gram with "
            "the model's pretraining corpus (biobench eval --check-contamination)")


def render_html(board: Board, lang: str, filters: Filters = Filters()) -> str:
    """The paper-style table for one language as an HTML fragment (table id `lb-table-<lang>`). Every value
    from results goes through `esc`."""
    tasks, bench = board.columns(lang), board.benchmark.get(lang, [])
    entries = select(board, lang, filters)
    hidden = 0 if filters.include_smoke else sum(bool(e.smoke) for e in board.lang_entries(lang))
    hint = (f" {hidden} smoke row(s) (protocol overrides) are hidden: tick &quot;Include smoke runs&quot; to see them."
            if hidden else "")
    if not entries:
        return f'<div id="lb-table-{esc(lang)}" class="lb-notes">No {esc(lang)} rows match the filters.{hint}</div>'
    averages = [e.average(bench) for e in entries]
    col_ranks = {t: _ranks([e.cells[t].mean if t in e.cells else None for e in entries]) for t in tasks}
    avg_ranks = _ranks([a.value if not a.partial else None for a in averages])
    head = "".join(
        f'<th class="task{" extra" if t not in bench else ""}"><abbr title="{esc(t)}: '
        f'{"benchmark task, in the average" if t in bench else "not in the paper benchmark: not averaged"}">'
        f"{short_task(t)}</abbr></th>"
        for t in tasks
    )
    out = [
        f'<div class="lb-scroll"><table id="lb-table-{esc(lang)}" class="lb-table"><thead><tr><th class="model">Model</th>'
        f'<th class="avg" title="mean over the {len(bench)} benchmark tasks">Avg</th>'
        '<th class="rank" title="95% rank interval on the average (bootstrap over test examples and seeds)">'
        f'Rank</th>{head}'
        "<th>Seeds</th><th>Context</th><th>Size</th>"
        '<th class="meta">Recipe / lineage</th></tr></thead><tbody>'
    ]
    notes = []
    for i, (e, avg) in enumerate(zip(entries, averages, strict=True)):
        cells = []
        for t in tasks:
            c = e.cells.get(t)
            if c is None:
                cells.append('<td title="not run">—</td>')
                continue
            if filters.hide_contaminated and c.contaminated():
                cells.append(f'<td title="{esc(contamination_title(c))}; hidden by the filter">'
                             f'<span class="contaminated">{CONTAMINATED_MARK}</span></td>')
                continue
            text = _mark(fmt(c.mean), col_ranks[t].get(i))
            title = "reported in the paper (mean over seeds); contamination not measured"
            if c.summary is not None:
                s = c.summary
                ci = "no CI with one seed" if s.n < 2 else f"95% CI [{fmt(s.ci_low)}, {fmt(s.ci_high)}]"
                title = f"mean of {s.n} seeds, sd {fmt(s.std)}, {ci}"
                if filters.show_ci and s.n >= 2:
                    text += f'<span class="ci">±{fmt(s.half_width)}</span>'
            group = board.groups.get((lang, t))
            cls = ' class="top"' if group is not None and group.in_top(e.key) else ""
            if group is not None and e.key in group.vs_best:
                title += f"; vs best p={group.vs_best[e.key].p_value:.3f}"
            rank = rank_text(board, lang, t, e.key)
            if rank is not None:
                title += f"; 95% rank interval {rank}"
            if c.degenerate:  # the seeds whose test predictions were degenerate, each with its likely reason
                title += "; " + "; ".join(f"seed {seed}: {why}" for seed, why in sorted(c.degenerate.items()))
                text += f' <span class="degenerate">{DEGENERATE_MARK}</span>'
            if c.contaminated():
                title += "; " + contamination_title(c)
                text += f' <span class="contaminated">{CONTAMINATED_MARK}</span>'
            cells.append(f'<td{cls} title="{esc(title)}">{text}</td>')
        if avg.value is None:
            avg_text = "—"
        elif avg.partial:
            notes.append(f"{e.name}: average over {avg.k}/{avg.n} tasks (missing {', '.join(avg.missing)})")
            avg_text = f'{fmt(avg.value)}<sup title="partial: {avg.k}/{avg.n} tasks">*{len(notes)}</sup>'
        else:
            avg_text = _mark(fmt(avg.value), avg_ranks.get(i))
            if e.paper_avg is not None and fmt(avg.value) != fmt(e.paper_avg):
                notes.append(f"{e.name}: the mean of the rounded per-task numbers is {fmt(avg.value, 3)}; "
                             f"the paper reports {fmt(e.paper_avg)} (computed before rounding)")
                avg_text += f"<sup>*{len(notes)}</sup>"
        name = esc(e.name) + (" <small>(reported)</small>" if e.source == "reported" else "")
        if e.smoke:  # the row's name carries the mark; the tooltip says what made it a smoke run
            name = (f'<span class="smoke" title="{esc(smoke_title(e))}">{name}</span>')
        size = e.size + (f" ({e.params / 1e6:.3g}M)" if e.params else "")
        out.append(
            f'<tr class="{esc(e.source)}" id="{esc(row_anchor(lang, e.key))}"><td class="model" title="{esc(e.source)}">'
            f'{name}</td><td class="avg">{avg_text}</td><td class="rank">{esc(rank_text(board, lang, None, e.key) or "—")}</td>'
            f'{"".join(cells)}'
            f"<td>{esc(seeds_text(e))}</td><td>{esc(e.context or '?')}</td><td>{esc(size)}</td>"
            f'<td class="meta">{esc(e.lineage or e.recipe)}</td></tr>'
        )
    out.append("</tbody></table></div>")  # the table scrolls sideways under its sticky Model and Avg columns
    legend = [
        "Macro-F1 (%), mean over seeds; <b>bold</b> best, <u>underlined</u> second per column. "
        "±: half-width of the 95% Student-t CI over seeds (hover a cell for details). "
        "Reported rows are the paper's published numbers (arXiv 2605.12438), not measured here.",
    ]
    if hidden:
        legend.append(hint.strip())
    if any(e.smoke for e in entries):
        legend.append(f"{SMOKE_MARK} smoke: a run with protocol overrides (fewer epochs or steps, a train or eval "
                      "subset, another max length...): not the protocol's score, ranked here only because "
                      "\"include smoke runs\" is ticked (hover the name for its overrides).")
    if any(c.degenerate for e in entries for c in e.cells.values()):
        legend.append(f"{DEGENERATE_MARK} degenerate test predictions (no entity, a single class, no label) for at "
                      "least one seed; hover the cell for the likely reason.")
    if any(lang == k[0] for k in board.groups):
        legend.append("Shaded: top significance group — not significantly worse than the best measured model "
                      "of the task (paired bootstrap over test examples and seeds, p ≥ 0.05).")
    if (lang, None) in board.ranks or any(k[0] == lang for k in board.ranks):
        legend.append("Rank: the 95% interval of the model's rank on the average (e.g. 2-5), from the same "
                      "bootstrap over test examples and seeds; hover a cell for its task's interval.")
    legend += [f"*{i} {esc(n)}" for i, n in enumerate(notes, 1)]
    return "\n".join(out) + '<div class="lb-notes">' + "<br>".join(legend) + "</div>"


def smoke_title(e: Entry) -> str:
    """The tooltip of a smoke row: its overrides and what the mark means."""
    return f"smoke run: protocol overrides {e.smoke}; not the protocol's score, kept apart from its protocol runs"


def _align(rows: list[list[str]]) -> list[str]:
    """Fixed-width lines: first column left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows]


def render_text(board: Board, langs: Sequence[str] | None = None, name_width: int = 44,
                include_smoke: bool = True) -> str:
    """The leaderboard as plain text for a terminal (the demo prints this). Partial averages get '*', smoke rows
    carry their mark in the name (listed below with their overrides), degenerate cells '⚠'."""
    blocks = []
    for lang in langs or board.langs:
        tasks, bench = board.columns(lang), board.benchmark.get(lang, [])
        entries = select(board, lang, Filters(include_smoke=include_smoke))
        if not entries:
            continue
        header = ["model", *tasks, "avg", "seeds", "source"]
        rows, notes = [], []
        for e in entries:
            avg = e.average(bench)
            avg_text = fmt(avg.value)
            if avg.partial and avg.value is not None:
                notes.append(f"* {e.name}: partial average over {avg.k}/{avg.n} tasks")
                avg_text += "*"
            name = e.name if len(e.name) <= name_width else e.name[: name_width - 1] + "…"
            cells = [fmt(e.cells[t].mean) + (DEGENERATE_MARK if e.cells[t].degenerate else "") if t in e.cells else "—"
                     for t in tasks]
            if e.smoke:
                notes.append(f"{e.name}: protocol overrides {e.smoke} (not the protocol's score)")
            notes += [f"{DEGENERATE_MARK} {e.name} · {t} seed {seed}: {why}" for t in tasks if t in e.cells
                      for seed, why in sorted(e.cells[t].degenerate.items())]
            rows.append([name, *cells, avg_text, seeds_text(e), e.source])
        title = {"fr": "French", "en": "English"}.get(lang, lang)
        blocks.append("\n".join([f"{title} (macro-F1 %, mean over seeds)", *_align([header, *rows]), *notes]))
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
            lines.append(f"| fine-tuning | {len(train)} runs, {sum(train) / 3600:.3g} h in all, "
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
