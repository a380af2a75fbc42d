"""Aggregate measured runs and reference rows into one entry per (language, model) (standings.entries).

Scores here are percentages (results files hold fractions). An entry's average is over the language's
benchmark tasks (the paper's 8 French / 11 English); an entry missing some of them gets a *partial*
average that callers must mark as such (`Average.partial`), never a silent mean over fewer tasks.
"""

from __future__ import annotations

import gc
import hashlib
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from biobench.errors import ResultsError
from biobench.lineage import Lineage
from biobench.names import distinct_names, folder_name, human_tokens
from biobench.runtime.paths import is_hub_id
from biobench.standings import scan as R
from biobench.standings.cache import BackgroundGroups, cached_groups
from biobench.standings.dataset import resolve_sources
from biobench.standings.entries import Board, Cell, Entry
from biobench.store.summary import TaskScores
from biobench.store.trust import SMOKE_MARK


def size_bucket(params: int | None) -> str:
    """Size classes from the parameter count: the paper's base (~110-200M) and large (300M+); below those,
    'small' (10-100M, e.g. MiniLM's 22.7M) and 'tiny' (under 10M: test and demo models)."""
    if not params:
        return "?"
    return "tiny" if params < 10e6 else "small" if params < 100e6 else "base" if params < 250e6 else "large"


def lineage_text(lineage: Any) -> str:
    """One line from a `biobench pretrain` checkpoint's lineage (biobench.lineage; tolerant of missing keys)."""
    record = Lineage.from_dict({**lineage, "recipe": lineage.get("recipe") or "?"}) if isinstance(lineage, dict) else None
    if record is None:
        return ""
    parts = [record.recipe]
    base = record.base_model
    if base:  # a local base folder by its name: absolute paths stay out of the table
        parts.append(f"from {base if is_hub_id(base) or base.startswith('preset:') else folder_name(base)}")
    toks = [f"{k.upper()} {human_tokens(n)}" for k, n in record.objective_tokens().items()]
    if toks:
        parts.append(" + ".join(toks) + " tokens")
    if record.frozen:
        parts.append("frozen " + ", ".join(f"{f.first}-{f.last}" + (f" ({f.phase})" if f.phase else "")
                                           for f in record.frozen))
    return " · ".join(parts)


def contamination_share(runs: Iterable[R.Run]) -> float | None:
    """The largest share of test examples found in the pretraining corpus among the runs' recorded checks
    (`contamination.splits.test.share`, a fraction); None when no run recorded one."""
    shares = []
    for run in runs:
        found = run.details.get("contamination")
        test = found.get("splits", {}).get("test") if isinstance(found, dict) and isinstance(found.get("splits"), dict) else None
        share = test.get("share") if isinstance(test, dict) else None
        if isinstance(share, int | float) and not isinstance(share, bool) and 0 <= share <= 1:
            shares.append(float(share))
    return max(shares) if shares else None


def smoke_key(slug: str, smoke: str) -> str:
    """The entry key of a model's smoke row: its results folder and a digest of the overrides (one row per
    set of overrides, none merged with the protocol row's seeds)."""
    return f"{slug}~smoke-{hashlib.sha256(smoke.encode()).hexdigest()[:8]}" if smoke else slug


def _measured_entries(runs: Iterable[R.Run], problems: list[R.Problem] | None = None) -> list[Entry]:
    """One entry per (model, language, overrides): a smoke run's scores are never averaged into the seeds of the
    protocol's row; its row is named with the smoke mark so every table, plot and menu shows it. A model is its
    results folder (`Run.model`, `store.model_group`); a second result for one seed of its task (the same
    folder in two results folders scanned together) is left out into `problems`, never put in the first's
    place."""
    grouped: dict[tuple[str, str, str], list[R.Run]] = defaultdict(list)
    for run in runs:
        grouped[(run.model, run.lang, run.smoke)].append(run)
    entries = []
    for (slug, lang, smoke), model_runs in grouped.items():
        by_task: dict[str, list[R.Run]] = defaultdict(list)
        for run in sorted(model_runs, key=lambda r: (r.task, r.seed)):
            by_task[run.task].append(run)
        cells = {}
        for task, runs_of_task in by_task.items():
            scores, task_runs = TaskScores(task), []
            for r in runs_of_task:
                try:
                    scores.add(r.seed, r.score, r.path)
                except ResultsError as err:
                    if problems is not None:
                        problems.append(R.Problem(str(r.path), str(err).removeprefix(f"{r.path}: ")))
                    continue
                task_runs.append(r)
            by_task[task] = task_runs
            labels = sorted({lab for r in task_runs for lab in r.per_label})
            per_label = {
                lab: 100 * sum(r.per_label[lab] for r in task_runs if lab in r.per_label)
                / sum(lab in r.per_label for r in task_runs)
                for lab in labels
            }
            summary = scores.summary(scale=100.0)  # the store's seed summary, in percent
            cells[task] = Cell(summary.mean, summary, {s: 100 * v for s, v in scores.scores.items()}, per_label,
                               {r.seed: r.degenerate for r in task_runs if r.degenerate},
                               contamination_share(task_runs))
        meta = model_runs[0].model_meta
        lineage = Lineage.from_dict(meta.get("lineage"))
        params = meta.get("params") if isinstance(meta.get("params"), int) else None
        context = meta.get("context") if isinstance(meta.get("context"), int) else None
        entries.append(
            Entry(
                key=smoke_key(slug, smoke),
                name=f"{model_runs[0].name} {SMOKE_MARK} smoke" if smoke else model_runs[0].name,
                lang=lang,
                source="measured",
                cells=cells,
                context=context,
                params=params,
                size=size_bucket(params),
                recipe=lineage.recipe if lineage else "baseline",
                lineage=lineage_text(meta.get("lineage")),
                runs=dict(by_task),
                model_id=str(meta.get("id") or meta.get("source") or ""),
                smoke=smoke,
                slug=slug,
                base_name=model_runs[0].name,
            )
        )
    return sorted(_distinct_names(entries), key=lambda e: e.name)


def short_smoke(described: str) -> str:
    """A smoke row's short tag for its name (menus, legends): the first override as it ran and how many more,
    'epochs 1 +2' for 'epochs 1 (protocol 15), limit_train 200, max_length 64 (protocol 512)'. The full overrides
    stay in the row's `smoke` (tooltips, the Model tab): a --quick run's ten overrides made legends take ~85% of a
    plot and cut the Compare menu's labels (issue 52 item 6)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(described):
        depth += ch == "("
        depth -= ch == ")"
        if described.startswith(", ", i) and depth == 0:
            parts.append(described[start:i])
            start = i + 2
    parts.append(described[start:])
    first = re.sub(r" \(protocol [^)]*\)", "", parts[0]).strip()
    return first + (f" +{len(parts) - 1}" if len(parts) > 1 else "") if first else ""


def _distinct_names(entries: list[Entry]) -> list[Entry]:
    """Two rows with the same display name in one language get told apart: a model's smoke rows by a short tag of
    their overrides (`short_smoke`: 'X ⚑ smoke (epochs 1 +1)'), two models (e.g. the seed-noise control: same recipe, base
    and budget) by their results folder, never by an internal key. Names that look the same (one skeleton:
    `names.skeleton`) count as the same name (issue 58 item 2)."""
    by_lang: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_lang[e.lang].append(e)
    for tell in (lambda e: short_smoke(e.smoke), lambda e: e.slug or e.key,
                 lambda e: e.key.rsplit("~", 1)[-1] if "~" in e.key else ""):  # two smoke rows with one short tag
        for group in by_lang.values():
            for e, name in zip(group, distinct_names([(e.name, tell(e)) for e in group]), strict=True):
                e.name = name
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


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while the board's runs are built, on again after (as it was). Why:
    a 300-model board makes ~51,300 runs and their dicts, none of them in a cycle, and the collections their
    allocations trigger re-walk every object the process holds: 0.6-1.0 s of a 2.5-3.0 s warm build
    (docs/performance.md)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def build_board(
    dirs: Sequence[str | Path] = (),
    reference: bool = True,
    significance: bool | Literal["background", "deferred"] = True,
    n_boot: int = 1000,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    log: Callable[[str], None] | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> Board:
    """Scan the folders (or results datasets: hf://datasets/ORG/NAME, a results.parquet or a folder holding
    one), aggregate, and (optionally) compute significance groups from predictions, per task through the
    on-disk cache under `cache_dir` when given (bench/standings/cache.py; `log` gets its progress lines).
    significance="background": return at once and compute the groups in a thread (`board.significance`,
    a cache.BackgroundGroups: status line, wait()). significance="deferred": the same, but the thread starts only
    when `board.significance.start()` is called (`build_app` calls it once the app is built), and the results
    index is saved first in that thread: what a served start does (`biobench leaderboard`, a Space), so that
    neither competes with building the first page (docs/performance.md). `meanwhile`: work of the caller's run in a
    thread while the result files are read (`scan.scan_results`): on a cold start this process mostly waits for
    the scan's workers then, and `biobench leaderboard` loads the app's modules in that time."""
    unsafe_rows: list[R.Problem] = []  # results-dataset rows that could not be written out safely
    dirs = resolve_sources(dirs, unsafe_rows)
    ref_rows = R.load_reference()
    benchmark = R.task_order(ref_rows)
    known = {t: lang for lang, tasks in benchmark.items() for t in tasks}
    with _collector_paused():
        scan = R.scan_results(dirs, known_langs=known, cache_dir=cache_dir, save_index=significance != "deferred",
                              meanwhile=meanwhile)
        entries = (_reference_entries(ref_rows) if reference else []) + _measured_entries(scan.runs, scan.problems)
    extra: dict[str, list[str]] = defaultdict(list)
    for run in scan.runs:
        if run.task not in benchmark.get(run.lang, []) and run.task not in extra[run.lang]:
            extra[run.lang].append(run.task)
    analyses = {**scan.analyses, "train_log": sorted(scan.analyses.get("train_log", []))}
    stamps = {path: stamp for listing in scan.listings for path, stamp in listing.stamps.items()}
    board = Board(entries, benchmark, {k: sorted(v) for k, v in extra.items()},
                  R.collapse([*unsafe_rows, *scan.problems]), analyses, stamps=stamps, roots=[Path(d) for d in dirs])
    if significance in ("background", "deferred"):
        board.significance = BackgroundGroups(board, n_boot=n_boot, seed=seed, cache_dir=cache_dir, log=log,
                                              first=scan.saves)
        if significance == "background":
            board.significance.start()
    elif significance:
        cached_groups(board, n_boot=n_boot, seed=seed, cache_dir=cache_dir, log=log)
    return board
