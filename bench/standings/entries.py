"""The leaderboard's data model: one Entry per (language, model) with a Cell per task, on a Board.

Scores here are percentages (results files hold fractions). An entry's average is over the language's
benchmark tasks (the paper's 8 French / 11 English); an entry missing some of them gets a *partial*
average that callers must mark as such (`Average.partial`), never a silent mean over fewer tasks.
Built by `aggregate.build_board`; read by the tables, plots, comparisons and the significance cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biobench.standings import scan as R
from biobench.stats import RankInterval, SeedSummary, SignificanceGroups

# a cell is marked when more than 1% of its test examples share a 13-gram with the model's pretraining corpus
CONTAMINATION_THRESHOLD = 0.01


@dataclass(frozen=True)
class Cell:
    """One model on one task: mean over seeds (percent), the seed summary when measured."""

    mean: float
    summary: SeedSummary | None = None
    seeds: dict[int, float] = field(default_factory=dict)
    per_label: dict[str, float] = field(default_factory=dict)
    degenerate: dict[int, str] = field(default_factory=dict)  # seed -> its degenerate test predictions and why
    # the share of test examples sharing a word n-gram with the model's pretraining corpus (the largest over its
    # seeds' records, `biobench eval --check-contamination`); None: not measured (always for the paper's rows)
    contamination: float | None = None

    def contaminated(self, threshold: float = CONTAMINATION_THRESHOLD) -> bool:
        return self.contamination is not None and self.contamination > threshold


@dataclass(frozen=True)
class Average:
    value: float | None  # None when no benchmark task is covered
    k: int
    n: int
    missing: tuple[str, ...] = ()

    @property
    def partial(self) -> bool:
        return self.k < self.n


@dataclass
class Entry:
    key: str
    name: str
    lang: str
    source: str  # "measured" | "reported"
    cells: dict[str, Cell]
    context: int | None = None
    params: int | None = None
    size: str = "?"
    recipe: str = "baseline"
    lineage: str = ""
    paper_avg: float | None = None
    reported_seeds: int | None = None
    runs: dict[str, list[R.Run]] = field(default_factory=dict)
    model_id: str = ""  # where the weights came from (hub id or the folder it was evaluated from): details only
    smoke: str = ""  # a smoke row's protocol overrides (its own row, never merged with the protocol's seeds)
    slug: str = ""  # a measured model's results folder, shared by its protocol and smoke rows (key: the row's own)
    base_name: str = ""  # the model's display name without the smoke row's mark

    def average(self, tasks: Sequence[str]) -> Average:
        have = [t for t in tasks if t in self.cells]
        value = sum(self.cells[t].mean for t in have) / len(have) if have else None
        return Average(value, len(have), len(tasks), tuple(t for t in tasks if t not in self.cells))

    @property
    def seed_counts(self) -> list[int]:
        return sorted(c.summary.n if c.summary else len(c.seeds) for c in self.cells.values())


@dataclass
class Board:
    entries: list[Entry]
    benchmark: dict[str, list[str]]  # lang -> the paper's tasks (the Avg's denominator)
    extra: dict[str, list[str]]  # lang -> other tasks found in results (shown, not averaged)
    problems: list[R.Problem]
    analyses: dict[str, list[Path]]
    groups: dict[tuple[str, str], SignificanceGroups] = field(default_factory=dict)
    # (lang, task) -> model key -> its 95% rank interval on that task; (lang, None): on the language's average
    ranks: dict[tuple[str, str | None], dict[str, RankInterval]] = field(default_factory=dict)
    stamps: dict[str, tuple[int, int]] = field(default_factory=dict)  # (size, mtime_ns) per file, from the scan
    significance: Any = None  # cache.BackgroundGroups while/after the groups are computed in the background
    roots: list[Path] = field(default_factory=list)  # the results folders scanned (what public paths are relative to)
    # answers worked out once per board for every visitor (e.g. the Compare tab's default pair per language):
    # a rebuilt board starts empty, so nothing outlives the results it was computed from
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    def public_problems(self) -> list[R.Problem]:
        """The problems as a public page shows them: no server path, files relative to their results folder."""
        return [p.public(self.roots) for p in self.problems]

    @property
    def langs(self) -> list[str]:
        return [lang for lang in ("fr", "en") if lang in self.columns_by_lang] + sorted(
            lang for lang in self.columns_by_lang if lang not in ("fr", "en")
        )

    @property
    def columns_by_lang(self) -> dict[str, list[str]]:
        langs = set(self.benchmark) | set(self.extra) | {e.lang for e in self.entries}
        return {lang: self.benchmark.get(lang, []) + self.extra.get(lang, []) for lang in langs}

    def columns(self, lang: str) -> list[str]:
        return self.columns_by_lang.get(lang, [])

    def lang_entries(self, lang: str) -> list[Entry]:
        return [e for e in self.entries if e.lang == lang]

    def entry(self, key: str, lang: str) -> Entry | None:
        return next((e for e in self.entries if e.key == key and e.lang == lang), None)


def fmt(x: float | None, digits: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"
