"""The columns of the score tables, each declared once (`COLUMNS`) and shown by every view that names it: the frame, the export, the HTML and the text table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from biobench.leaderboard.tables.rows import ModelRow, rank_text, seeds_text
from biobench.standings.entries import Average, Board
from biobench.store.trust import protocol_label

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


ALL: frozenset[View] = frozenset(("frame", "export", "html", "text"))
DATA: frozenset[View] = frozenset(("frame", "export"))


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
