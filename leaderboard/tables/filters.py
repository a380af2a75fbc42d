"""What the app's controls select and the order rows come in: `Filters`, `select`."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from biobench.standings.entries import Board, Entry


@dataclass(frozen=True)
class Filters:
    """What the app's controls select; None means no restriction."""

    sources: Collection[str] = ("measured", "reported")
    sizes: Collection[str] | None = None
    contexts: Collection[str] | None = None
    recipes: Collection[str] | None = None
    sort_by: str = "Avg"
    show_ci: bool = True
    # smoke cells (protocol overrides, ⚑) where the model has no protocol result on the task; False: the
    # protocol's results only (tables.rows: SMOKE_SHOWN_BY_DEFAULT). Never ranked either way.
    include_smoke: bool = True
    hide_contaminated: bool = False  # cells whose test set overlaps the model's pretraining corpus show no score


def sort_key(filters: Filters, bench: Sequence[str]) -> Callable[[Entry], tuple]:
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


def kept(e: Entry, filters: Filters) -> bool:
    return (e.source in filters.sources and (filters.sizes is None or e.size in filters.sizes)
            and (filters.contexts is None or str(e.context) in filters.contexts)
            and (filters.recipes is None or e.recipe in filters.recipes))


def select(board: Board, lang: str, filters: Filters = Filters()) -> list[Entry]:
    """The board's entries of a language that pass the filters, sorted (one per model and set of overrides: the
    efficiency table and the detail view read runs per entry; the score tables read `model_rows`)."""
    keep = [e for e in board.lang_entries(lang) if kept(e, filters) and (filters.include_smoke or not e.smoke)]
    return sorted(keep, key=sort_key(filters, board.benchmark.get(lang, [])))
