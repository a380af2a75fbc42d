"""Did a model reproduce what the paper reports? Per task and for the language average: the measured mean and
its uncertainty, the reported value, the difference, and a verdict.

The rule (docs/PROTOCOL.md, "Reproduction verdicts"):
- `reproduced` when the reported value lies inside the measured 95% CI over seeds (Student t, as the leaderboard
  shows it); with one seed there is no seed interval, so the tolerance is the task's minimum detectable
  difference floor (the part of the MDD that comes from sampling the test set, `mdd_many_seeds`, from the saved
  predictions) around the measured score;
- `differs` otherwise; `no data` when the task has no measured result (or one seed without predictions to
  bootstrap).
- The language average: the mean of the task means over the paper's tasks, only when every one of them is
  measured; its 95% interval is the normal interval of a mean of independent task means,
  ±1.96·sqrt(Σ s_t²/n_t)/T, when every task has at least two seeds, else ±sqrt(Σ floor_t²)/T from the floors.
The reported average is the paper's own (its Avg column) where it gives one.

Scores are percentages, as everywhere on the board.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from biobench.aliases import ALIASES
from biobench.standings.entries import Board, Entry
from biobench.standings.entry_pairs import task_mdd
from biobench.store.trust import DEGENERATE_MARK, SMOKE_MARK

REPRODUCED, DIFFERS, NO_DATA = "reproduced", "differs", "no data"


@dataclass(frozen=True)
class Verdict:
    task: str  # a task id, or "average"
    measured: float | None
    low: float | None  # the interval the reported value is tested against
    high: float | None
    seeds: int
    reported: float | None
    tolerance: str  # how the interval was made: "95% CI (k seeds)", "MDD floor ±x (1 seed)", ""
    verdict: str
    clipped: bool = False  # the interval was cut to the score's range [0, 100] (a floor or CI reaching past it)
    marks: str = ""  # ⚑ a smoke run (protocol overrides), ⚠ degenerate test predictions (biobench.store.trust)
    notes: tuple[str, ...] = ()  # what the marks stand for: the overrides, each degenerate seed's finding

    @property
    def difference(self) -> float | None:
        return None if self.measured is None or self.reported is None else self.measured - self.reported


def paper_entry(board: Board, entry: Entry) -> Entry | None:
    """The reported row of the same model and language: its display name or its hub id is the paper's."""
    names = {entry.name.lower(), entry.key.lower(), entry.base_name.lower(), entry.slug.lower()} - {""}
    for alias in ALIASES:
        if alias.hub_id and entry.model_id.lower() == alias.hub_id.lower():
            names.add(alias.name.lower())
            names.add(alias.hub_id.split("/")[-1].lower())  # the paper's own rows: "CLM detour (Base, 10B) = <name>"

    def named(e: Entry) -> bool:
        return e.name.lower() in names or e.name.rsplit(" = ", 1)[-1].lower() in names

    return next((e for e in board.lang_entries(entry.lang) if e.source == "reported" and named(e)), None)


SCORE_RANGE = (0.0, 100.0)  # macro-F1 in points: an interval reaching past it says "wide", not "below 0"


def _clip(low: float, high: float, mean: float) -> tuple[float, float, bool]:
    """The interval cut to SCORE_RANGE, and whether it was cut (the table says so). An end exactly on the range's
    edge away from the mean was cut already (the board's seed CIs are clipped when they are summarised)."""
    lo, hi = max(low, SCORE_RANGE[0]), min(high, SCORE_RANGE[1])
    return lo, hi, lo == SCORE_RANGE[0] < mean or mean < SCORE_RANGE[1] == hi


def task_verdict(task: str, entry: Entry, reported: float | None, floor: float | None) -> Verdict:
    """`floor`: the task's MDD floor in points (needed only with one seed)."""
    cell = entry.cells.get(task)
    if cell is None or cell.summary is None:
        return Verdict(task, None, None, None, 0, reported, "", NO_DATA)
    s = cell.summary
    if s.n > 1:
        low, high, how = s.ci_low, s.ci_high, f"95% CI ({s.n} seeds)"
    elif floor is not None and math.isfinite(floor):
        low, high, how = s.mean - floor, s.mean + floor, f"MDD floor ±{floor:.2f} (1 seed)"
    else:
        return Verdict(task, s.mean, None, None, s.n, reported, "1 seed, no predictions to bootstrap", NO_DATA)
    low, high, clipped = _clip(low, high, s.mean)
    if reported is None:
        return Verdict(task, s.mean, low, high, s.n, None, how, NO_DATA, clipped)
    return Verdict(task, s.mean, low, high, s.n, reported, how, REPRODUCED if low <= reported <= high else DIFFERS,
                   clipped)


def average_verdict(tasks: list[str], entry: Entry, reported_avg: float | None,
                    floors: dict[str, float | None]) -> Verdict:
    cells = [entry.cells.get(t) for t in tasks]
    summaries = [c.summary for c in cells if c is not None and c.summary is not None]
    if not tasks or len(summaries) < len(cells):
        have = sum(c is not None for c in cells)
        return Verdict("average", None, None, None, 0, reported_avg, f"{have}/{len(tasks)} tasks measured", NO_DATA)
    finite_floors = [f for t in tasks if (f := floors.get(t)) is not None and math.isfinite(f)]
    mean = sum(s.mean for s in summaries) / len(tasks)
    if all(s.n > 1 for s in summaries):
        half = 1.96 * math.sqrt(sum(s.std ** 2 / s.n for s in summaries)) / len(tasks)
        how = "95% normal interval of the task means"
    elif len(finite_floors) == len(tasks):
        half = math.sqrt(sum(f ** 2 for f in finite_floors)) / len(tasks)
        how = f"MDD floors ±{half:.2f}"
    else:
        return Verdict("average", mean, None, None, min(s.n for s in summaries), reported_avg,
                       "a one-seed task without predictions", NO_DATA)
    seeds = min(s.n for s in summaries)
    low, high, clipped = _clip(mean - half, mean + half, mean)
    if reported_avg is None:
        return Verdict("average", mean, low, high, seeds, None, how, NO_DATA, clipped)
    verdict = REPRODUCED if low <= reported_avg <= high else DIFFERS
    return Verdict("average", mean, low, high, seeds, reported_avg, how, verdict, clipped)


def reproduction(board: Board, entry: Entry, floor_of: Callable[[str], float | None] | None = None) -> list[Verdict]:
    """Per paper task of the entry's language, then the average. `floor_of(task)`: the MDD floor in points for
    one-seed tasks (default: none, so one-seed tasks are `no data`); only asked for tasks measured with one seed."""
    paper = paper_entry(board, entry)
    tasks = list(board.benchmark.get(entry.lang, []))
    floors = {t: (floor_of(t) if floor_of and t in entry.cells and (summary := entry.cells[t].summary) is not None
                  and summary.n == 1 else None) for t in tasks}
    rows = [task_verdict(t, entry, paper.cells[t].mean if paper and t in paper.cells else None, floors[t])
            for t in tasks]
    reported_avg = None
    if paper is not None:
        reported_avg = paper.paper_avg if paper.paper_avg is not None else (
            sum(paper.cells[t].mean for t in tasks) / len(tasks) if tasks and all(t in paper.cells for t in tasks)
            else None)
    return [with_marks(v, entry, tasks) for v in (*rows, average_verdict(tasks, entry, reported_avg, floors))]


def with_marks(verdict: Verdict, entry: Entry, tasks: list[str]) -> Verdict:
    """The verdict with the marks of what produced its score: ⚑ when the entry is a smoke row (its overrides),
    ⚠ when a seed of the task (for the average: of any of `tasks`) has degenerate test predictions."""
    if verdict.measured is None:
        return verdict
    covered = tasks if verdict.task == "average" else [verdict.task]
    degenerate = [f"{task} seed {seed}: {why}" for task in covered if task in entry.cells
                  for seed, why in sorted(entry.cells[task].degenerate.items())]
    marks = (SMOKE_MARK if entry.smoke else "") + (DEGENERATE_MARK if degenerate else "")
    notes = ((f"smoke run: {entry.smoke}",) if entry.smoke else ()) + tuple(degenerate)
    return replace(verdict, marks=marks, notes=notes)


def board_floor(board: Board, entry: Entry) -> Callable[[str], float | None]:
    """The MDD floor (points) of one-seed tasks from the entry's saved predictions."""
    def floor(task: str) -> float | None:
        mdd = task_mdd(board, entry.lang, task).get(entry.key)
        return None if mdd is None else 100 * mdd.mdd_many_seeds

    return floor


def model_verdicts(board: Board, key: str, lang: str | None = None) -> dict[str, list[Verdict]]:
    """Verdicts per language for the measured model whose results folder is `key`: its protocol row, or where
    it has only smoke rows (protocol overrides), its first smoke row."""
    entries = [e for e in board.entries if e.source == "measured" and key in (e.key, e.slug)
               and (lang is None or e.lang == lang)]
    chosen: dict[str, Entry] = {}
    for e in sorted(entries, key=lambda e: bool(e.smoke)):
        chosen.setdefault(e.lang, e)
    return {lang: reproduction(board, e, board_floor(board, e)) for lang, e in chosen.items()}


def verdict_rows(verdicts: list[Verdict]) -> list[dict[str, object]]:
    """Plain rows (the CLI's JSON, the app's table): numbers rounded to 2 decimals, as on the board."""
    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 2)

    return [{"task": v.task, "seeds": v.seeds, "measured": r(v.measured), "low": r(v.low), "high": r(v.high),
             "reported": r(v.reported), "difference": r(v.difference), "tolerance": v.tolerance,
             "verdict": v.verdict, "clipped": v.clipped, "marks": v.marks, "notes": list(v.notes)} for v in verdicts]
