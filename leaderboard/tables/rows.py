"""The row model of the score tables: one `ModelRow` per model and language, its counts, seeds and rank texts, and which tasks a table shows (`table_tasks`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from biobench.leaderboard.tables.filters import Filters, kept, sort_key
from biobench.standings.aggregate import _distinct_names
from biobench.standings.entries import Board, Entry
from biobench.store.trust import SMOKE_MARK


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
    shown = list(board.columns(lang) if tasks is None else tasks)
    groups: dict[str, list[Entry]] = {}
    for e in board.lang_entries(lang):
        groups.setdefault(model_key(e), []).append(e)
    rows = []
    for key, entries in groups.items():
        protocol = next((e for e in entries if not e.smoke), None)
        smoke = sorted((e for e in entries if e.smoke), key=lambda e: (-len(e.cells), e.smoke))
        main = protocol or smoke[0]
        if not kept(main, filters):
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
    order = sort_key(filters, board.benchmark.get(lang, []))
    return sorted(rows, key=lambda r: order(r.entry))


# Smoke runs on the tables (issue 62 item 4). A smoke cell is shown, marked ⚑, wherever its model has no protocol
# result on that task; where the model has the protocol's result, that cell wins and the smoke run is left out of
# the table. The default used to hide every smoke result of a language as soon as one protocol result existed
# anywhere (a user's quick check vanished when another model got a protocol run). Unticking "Show smoke runs"
# (`include_smoke=0`, `leaderboard --print --hide-smoke`) shows the protocol's results only.
SMOKE_SHOWN_BY_DEFAULT = Filters().include_smoke


def smoke_cells(board: Board, lang: str, filters: Filters = Filters(), tasks: Sequence[str] | None = None
                ) -> set[tuple[str, str]]:
    """The (model, task) cells of `lang` (among `tasks`, default every column) whose score is a smoke run when
    smoke runs are shown: what "Show smoke runs" adds and unticking it hides."""
    rows = model_rows(board, lang, replace(filters, include_smoke=True), tasks)
    return {(r.key, t) for r in rows for t in r.smoke_tasks(list(r.origin))}


def smoke_hidden(board: Board, lang: str, filters: Filters = Filters(), tasks: Sequence[str] | None = None
                 ) -> tuple[int, int]:
    """(results, models): the smoke cells the tables leave out under `filters` (none while smoke runs are
    shown). The one count of the page's note, the JSON's `counts` and `leaderboard --print` (`smoke_text`)."""
    if filters.include_smoke:
        return 0, 0
    cells = smoke_cells(board, lang, filters, tasks)
    return len(cells), len({key for key, _ in cells})


def smoke_text(results: int, models: int) -> str:
    """The one wording of a count of smoke results: "⚑ 14 smoke results of 5 models"."""
    return (f"{SMOKE_MARK} {results} smoke result{'' if results == 1 else 's'} of {models} "
            f"model{'' if models == 1 else 's'}")


def smoke_counts(board: Board) -> tuple[int, int]:
    """(smoke results, models with one) over every language: the cells "Show smoke runs" governs (the toggle's
    label), counted as `smoke_hidden` counts them."""
    cells = {(lang, key, task) for lang in board.langs for key, task in smoke_cells(board, lang)}
    return len(cells), len({key for _, key, _ in cells})


def row_counts(board: Board, lang: str, include_smoke: bool | None = None) -> dict[str, Any]:
    """The one count of a language's rows, for the page's header, the JSON and `leaderboard --print`: a row is a
    model (`model_rows`: its protocol and smoke runs merged) with a cell in any column of the language, under the
    one default (`include_smoke` None: SMOKE_SHOWN_BY_DEFAULT, a smoke cell where its model has no protocol
    result). `rows` / `measured`: all rows and the measured ones; `table`: rows of the language's own table (paper
    tasks); `other_only`: measured rows with cells on other tasks only (the page shows them under Other tasks);
    `smoke_hidden` / `smoke_hidden_models`: the smoke results left out and their models (`smoke_hidden`)."""
    include = SMOKE_SHOWN_BY_DEFAULT if include_smoke is None else include_smoke
    rows = model_rows(board, lang, Filters(include_smoke=include))
    paper = {r.key for r in model_rows(board, lang, Filters(include_smoke=include), board.benchmark.get(lang, []))}
    results, models = smoke_hidden(board, lang, Filters(include_smoke=include))
    measured = [r for r in rows if r.entry.source == "measured"]
    return {"include_smoke": include, "rows": len(rows), "measured": len(measured), "table": len(paper),
            "other_only": [r.key for r in measured if r.key not in paper], "smoke_hidden": results,
            "smoke_hidden_models": models}


def smoke_only(board: Board) -> bool:
    """Whether every measured row is a smoke row (a demo's, a quick check's): the board then says so in a banner
    and keeps the smoke runs shown (still marked) whatever the toggle says."""
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


Part = Literal["paper", "other"]  # a language's paper tasks (its tab), or the tasks outside the paper


def measured_first(board: Board, lang: str, tasks: Sequence[str]) -> list[str]:
    """`tasks` with those a measured model has a score on first, each group in its own order. Why: a page
    holding one measured task (the README's quick check: quaero-emea, the paper's 7th French column) showed at
    900 px only the paper's reported columns, the one measured column off-screen (issue 62 item 3). A board
    measured on every task keeps the paper's order."""
    measured = {t for e in board.lang_entries(lang) if e.source == "measured" for t in e.cells}
    return [t for t in tasks if t in measured] + [t for t in tasks if t not in measured]


def table_tasks(board: Board, lang: str, part: Part) -> list[str]:
    """The paper's tasks of `lang` (its table holds them only), or the other tasks found in its results (demo,
    user tasks: the "Other tasks" tab)."""
    return list(board.benchmark.get(lang, [])) if part == "paper" else list(board.extra.get(lang, []))
