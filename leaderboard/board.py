"""Aggregate measured runs and reference rows into one entry per (language, model).

Scores here are percentages (results files hold fractions). An entry's average is over the language's
benchmark tasks (the paper's 8 French / 11 English); an entry missing some of them gets a *partial*
average that callers must mark as such (`Average.partial`), never a silent mean over fewer tasks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biobench.errors import ResultsError
from biobench.leaderboard import results as R
from biobench.names import folder_name, human_tokens, is_hub_id
from biobench.results import AlignedPredictions, align_predictions
from biobench.stats import (
    CountMetric,
    SeedSummary,
    SignificanceGroups,
    prediction_macro_f1,
    seed_summary,
    significance_groups,
)


@dataclass(frozen=True)
class Cell:
    """One model on one task: mean over seeds (percent), the seed summary when measured."""

    mean: float
    summary: SeedSummary | None = None
    seeds: dict[int, float] = field(default_factory=dict)
    per_label: dict[str, float] = field(default_factory=dict)


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
    stamps: dict[str, tuple[int, int]] = field(default_factory=dict)  # (size, mtime_ns) per file, from the scan
    significance: Any = None  # cache.BackgroundGroups while/after the groups are computed in the background

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


TRAIN_LOG = R.TRAIN_LOG


def size_bucket(params: int | None) -> str:
    """Paper-style size classes: base ~ 110-200M, large ~ 300M+; anything under 100M is 'small'."""
    if not params:
        return "?"
    return "small" if params < 100e6 else "base" if params < 250e6 else "large"


def lineage_text(lineage: Any) -> str:
    """One line from a `biobench pretrain` checkpoint's biobench_pretrain.json (tolerant of missing keys)."""
    if not isinstance(lineage, dict):
        return ""
    parts = [str(lineage.get("recipe", "?"))]
    base = str(lineage.get("base_model") or "")
    if base:  # a local base folder by its name: absolute paths stay out of the table
        parts.append(f"from {base if is_hub_id(base) or base.startswith('preset:') else folder_name(base)}")
    tokens = lineage.get("tokens") if isinstance(lineage.get("tokens"), dict) else {}
    toks = [f"{k.upper()} {human_tokens(tokens[k])}" for k in ("clm", "mlm") if tokens.get(k)]
    if toks:
        parts.append(" + ".join(toks) + " tokens")
    frozen = lineage.get("frozen") or []
    if isinstance(frozen, list) and frozen:
        descr = []
        for f in frozen:
            if isinstance(f, dict) and isinstance(f.get("layers"), list) and len(f["layers"]) == 2:
                descr.append(f"{f['layers'][0]}-{f['layers'][1]}" + (f" ({f['phase']})" if f.get("phase") else ""))
        if descr:
            parts.append("frozen " + ", ".join(descr))
    return " · ".join(parts)


def _measured_entries(runs: Iterable[R.Run]) -> list[Entry]:
    grouped: dict[tuple[str, str], list[R.Run]] = defaultdict(list)
    for run in runs:
        grouped[(run.model, run.lang)].append(run)
    entries = []
    for (slug, lang), model_runs in grouped.items():
        by_task: dict[str, list[R.Run]] = defaultdict(list)
        for run in sorted(model_runs, key=lambda r: (r.task, r.seed)):
            by_task[run.task].append(run)
        cells = {}
        for task, task_runs in by_task.items():
            seeds = {r.seed: 100 * r.score for r in task_runs}
            labels = sorted({lab for r in task_runs for lab in r.per_label})
            per_label = {
                lab: 100 * sum(r.per_label[lab] for r in task_runs if lab in r.per_label)
                / sum(lab in r.per_label for r in task_runs)
                for lab in labels
            }
            summary = seed_summary(list(seeds.values()), bounds=(0.0, 100.0))
            cells[task] = Cell(summary.mean, summary, seeds, per_label)
        meta = model_runs[0].model_meta
        lineage = meta.get("lineage")
        params = meta.get("params") if isinstance(meta.get("params"), int) else None
        context = meta.get("context") if isinstance(meta.get("context"), int) else None
        entries.append(
            Entry(
                key=slug,
                name=model_runs[0].name,
                lang=lang,
                source="measured",
                cells=cells,
                context=context,
                params=params,
                size=size_bucket(params),
                recipe=str(lineage.get("recipe", "?")) if isinstance(lineage, dict) else "baseline",
                lineage=lineage_text(lineage),
                runs=dict(by_task),
                model_id=str(meta.get("id") or meta.get("source") or ""),
            )
        )
    return sorted(_distinct_names(entries), key=lambda e: e.name)


def _distinct_names(entries: list[Entry]) -> list[Entry]:
    """Two models with the same display name in one language (e.g. the seed-noise control: same recipe, base
    and budget) get their results folder name appended, so rows and legends stay tellable apart."""
    count: dict[tuple[str, str], int] = defaultdict(int)
    for e in entries:
        count[(e.lang, e.name)] += 1
    for e in entries:
        if count[(e.lang, e.name)] > 1:
            e.name = f"{e.name} ({e.key})"
    return entries


def _reference_entries(rows: Iterable[R.ReferenceRow]) -> list[Entry]:
    return [
        Entry(
            key=f"paper:{row.model}",
            name=row.model,
            lang=row.lang,
            source="reported",
            cells={t: Cell(v, None, {}) for t, v in row.scores.items()},
            context=row.context,
            size=row.size,
            recipe=row.recipe,
            lineage=f"{row.recipe} · {row.source}",
            paper_avg=row.paper_avg,
            reported_seeds=row.seeds,
        )
        for row in rows
    ]


def build_board(
    dirs: Sequence[str | Path] = (),
    reference: bool = True,
    significance: bool | str = True,
    n_boot: int = 1000,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    log: Callable[[str], None] | None = None,
) -> Board:
    """Scan the folders (or results datasets: hf://datasets/ORG/NAME, a results.parquet or a folder holding
    one), aggregate, and (optionally) compute significance groups from predictions, per task through the
    on-disk cache under `cache_dir` when given (leaderboard/cache.py; `log` gets its progress lines).
    significance="background": return at once and compute the groups in a thread (`board.significance`,
    a cache.BackgroundGroups: status line, wait())."""
    from biobench.leaderboard.dataset import resolve_sources

    unsafe_rows: list[R.Problem] = []  # results-dataset rows that could not be written out safely
    dirs = resolve_sources(dirs, unsafe_rows)
    ref_rows = R.load_reference()
    benchmark = R.task_order(ref_rows)
    known = {t: lang for lang, tasks in benchmark.items() for t in tasks}
    scan = R.scan_results(dirs, known_langs=known, cache_dir=cache_dir)
    extra: dict[str, list[str]] = defaultdict(list)
    for run in scan.runs:
        if run.task not in benchmark.get(run.lang, []) and run.task not in extra[run.lang]:
            extra[run.lang].append(run.task)
    entries = (_reference_entries(ref_rows) if reference else []) + _measured_entries(scan.runs)
    analyses = {**scan.analyses, "train_log": sorted(scan.analyses.get("train_log", []))}
    stamps = {path: stamp for listing in scan.listings for path, stamp in listing.stamps.items()}
    board = Board(entries, benchmark, {k: sorted(v) for k, v in extra.items()}, [*unsafe_rows, *scan.problems], analyses,
                  stamps=stamps)
    if significance == "background":
        from biobench.leaderboard.cache import BackgroundGroups

        board.significance = BackgroundGroups(board, n_boot=n_boot, seed=seed, cache_dir=cache_dir, log=log).start()
    elif significance:
        from biobench.leaderboard.cache import cached_groups

        cached_groups(board, n_boot=n_boot, seed=seed, cache_dir=cache_dir, log=log)
    return board


# --- predictions: significance groups here, A-vs-B comparisons in leaderboard.compare --------------------


def _report(problems: list[R.Problem], problem: R.Problem) -> None:
    if problem not in problems:
        problems.append(problem)


def aligned_predictions(board: Board, task: str, entries: Sequence[Entry]) -> AlignedPredictions | None:
    """The predictions of `entries` on `task` paired by `biobench.results.align_predictions`: seeds without a
    readable file, seeds misaligned with their model's others and models scored on other test examples than
    the first are left out and reported as problems."""
    groups: dict[str, list[tuple[str, list]]] = {}
    for entry in entries:
        for run in entry.runs.get(task, []):
            if run.predictions is None:
                continue
            try:
                groups.setdefault(entry.key, []).append((str(run.predictions), R.load_predictions(run.predictions)))
            except ResultsError as err:
                _report(board.problems, R.problem_of(err, run.predictions, "unreadable predictions"))
    aligned = align_predictions(groups, strict=False)
    for _, source, reason in aligned.dropped if aligned else ():
        _report(board.problems, R.Problem(source, reason))
    return aligned


def task_metric(runs: Sequence[R.Run], gold: Sequence, preds: Sequence[Sequence]) -> CountMetric:
    """The task's macro-F1 (`stats.prediction_macro_f1`, the headline score's counts) over the label inventory
    the results record, gold and every prediction list."""
    return prediction_macro_f1(gold, *preds, kind=runs[0].kind, labels=runs[0].labels)


def compute_groups(board: Board, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> None:
    """Fill board.groups[(lang, task)] for every task with predictions from at least two models."""
    for lang in board.langs:
        measured = [e for e in board.lang_entries(lang) if e.source == "measured"]
        for task in board.columns(lang):
            with_task = [e for e in measured if task in e.runs]
            aligned = aligned_predictions(board, task, with_task)
            if aligned is None or len(aligned.preds) < 2:
                continue
            metric = task_metric(with_task[0].runs[task], aligned.gold,
                                 [p for seeds in aligned.preds.values() for p in seeds])
            board.groups[(lang, task)] = significance_groups(aligned.gold, aligned.preds, metric, n_boot, seed, alpha)


def fmt(x: float | None, digits: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"
