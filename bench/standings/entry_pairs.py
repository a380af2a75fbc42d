"""The Compare tab's A-vs-B on the board: two entries' runs handed to the one A-vs-B computation
(`biobench.store.comparison.compare_pair`: per task, the task average, the protocol settings in which the two
rows' runs differ), formatted in percentage points for the app; and per-model detectable differences.

The predictions are paired by `significance.paired_predictions` (the one alignment shared with
`biobench compare`). `compare_entries` is what the UI calls; `compare` / `compare_average` are its table and
average in the app's units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
from biobench import stats
from biobench.standings.entries import Board, Entry
from biobench.standings.significance import aligned_predictions, paired_predictions
from biobench.store.comparison import PAIRED, PairComparison, TaskRuns, compare_pair, run_settings
from biobench.store.summary import detectable_difference

COMPARE_COLUMNS = ["task", "A", "B", "diff", "ci_low", "ci_high", "p_value", "method"]


def _fractions(entry: Entry, task: str) -> list[float]:
    """A model's seed scores on `task` as fractions, in seed order; a reported (paper) row: its mean."""
    runs = entry.runs.get(task)
    return [r.score for r in runs] if runs else [entry.cells[task].mean / 100]


def _settings(entry: Entry, task: str) -> list[dict[str, str]]:
    """Each run's protocol settings (`run_settings`); a reported (paper) row records none: [] (never differs)."""
    return [run_settings(r.details.get("protocol"), r.smoke, (r.details.get("key") or {}).get("data_checksum"))
            for r in entry.runs.get(task, [])]


def compare_entries(board: Board, lang: str, key_a: str, key_b: str, n_boot: int = 1000, seed: int = 0,
                    allow_different_protocols: bool = False, rows: Mapping[str, Entry] | None = None
                    ) -> PairComparison | None:
    """Rows `key_a` and `key_b` of `lang` compared on every task both have (`compare_pair`); None when either
    row is missing. `.warning()` says which settings differ; tasks whose protocols differ get no test unless
    `allow_different_protocols`. A reported (paper) row has its means only and no recorded settings. `rows`:
    the rows as the page lists them (one per model: its protocol runs, else its smoke runs, per task, as the
    tables and `biobench compare` take a model's results folder), looked up before the board's entries."""
    a = (rows or {}).get(key_a) or board.entry(key_a, lang)
    b = (rows or {}).get(key_b) or board.entry(key_b, lang)
    if a is None or b is None:
        return None
    tasks = [TaskRuns(task, _fractions(a, task), _fractions(b, task), _settings(a, task), _settings(b, task),
                      paired_predictions(board, task, a, b))
             for task in board.columns(lang) if task in a.cells and task in b.cells]
    return compare_pair(tasks, n_boot, seed, allow_different_protocols=allow_different_protocols)


def _signatures(entry: Entry, tasks: list[str]) -> dict[str, frozenset[tuple[tuple[str, str], ...]]]:
    """Per task of `entry`: the set of its runs' `run_settings`, hashable (what two rows must share to be
    compared with a test); read from the runs' records only, no predictions."""
    return {t: frozenset(tuple(sorted(s.items())) for s in _settings(entry, t)) for t in tasks if t in entry.cells}


def default_measured_pair(board: Board, lang: str, rows: Sequence[Entry] | None = None) -> tuple[str, str] | None:
    """The two measured rows of `lang` that share their protocol settings (`run_settings`, every run of every
    common task) on the most tasks, the earliest such pair on a tie; failing that, the two sharing the most
    tasks. None when no two measured rows share a task.

    Why not `same_protocol` over every pair: that aligns the predictions of both rows (`compare_entries`), and
    over N(N-1)/2 pairs on each page load it cost 578 s of CPU at 300 models (issue 51 item 2). Here each row's
    settings are read once (models x tasks); rows with the same settings on the same tasks fall in one bucket
    whose first two members are the answer when no row has more tasks; only otherwise are pairs compared, on
    those precomputed settings (a set comparison per common task, no file read). A setting recorded by one row
    and not the other counts as a difference here (`protocol_differences` ignores it): the Compare tab then
    shows the pair's own verdict. `rows`: the rows to choose from (default: the board's entries of `lang`)."""
    tasks = board.columns(lang)
    measured = [e for e in (board.lang_entries(lang) if rows is None else rows) if e.source == "measured"]
    sigs = [_signatures(e, tasks) for e in measured]
    buckets: dict[frozenset, list[int]] = {}
    for i, sig in enumerate(sigs):
        if sig:
            buckets.setdefault(frozenset(sig.items()), []).append(i)
    most = max((len(s) for s in sigs), default=0)
    full = [members[:2] for key, members in buckets.items() if len(members) >= 2 and len(key) == most]
    if full:
        i, j = min(full)
        return measured[i].key, measured[j].key
    best: tuple[bool, int, int, int] | None = None
    pick: tuple[int, int] | None = None
    for i in range(len(measured)):
        for j in range(i + 1, len(measured)):
            common = sigs[i].keys() & sigs[j].keys()
            if not common:
                continue
            same = all(sigs[i][t] == sigs[j][t] for t in common)
            candidate = (same, len(common), -i, -j)
            if best is None or candidate > best:
                best, pick = candidate, (i, j)
    return (measured[pick[0]].key, measured[pick[1]].key) if pick is not None else None


def same_protocol(board: Board, lang: str, key_a: str, key_b: str) -> bool:
    """True when the two rows' runs share their protocol settings on every common task (no test is run): what
    a default pair should satisfy."""
    pair = compare_entries(board, lang, key_a, key_b, n_boot=1)
    return pair is not None and pair.same_protocol


def compare_frame(pair: PairComparison | None, n_boot: int = 1000) -> pd.DataFrame:
    """`compare_entries`' tasks as the Compare table: percentage points, one row per task."""
    rows = []
    for compared in pair.tasks if pair is not None else ():
        c = compared.comparison
        row = {"task": compared.task, **c.scaled(100)}
        if c.method == PAIRED:
            row["method"] = f"paired bootstrap ({n_boot} x examples, seeds)"
        rows.append(row)
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)


def average_dict(pair: PairComparison | None) -> dict | None:
    """`compare_entries`' task average in percentage points (None when no task has aligned predictions)."""
    if pair is None or pair.average is None:
        return None
    c = pair.average
    scaled = c.scaled(100)
    return {"tasks": list(c.tasks), "A": scaled["A"], "B": scaled["B"], "diff": scaled["diff"],
            "ci_low": scaled["ci_low"], "ci_high": scaled["ci_high"], "p_value": c.p_value, "n_boot": c.n_boot}


def compare(board: Board, lang: str, key_a: str, key_b: str, n_boot: int = 1000, seed: int = 0,
            allow_different_protocols: bool = False) -> pd.DataFrame:
    """Per-task A - B in percentage points (`compare_entries`: paired bootstrap when both have aligned
    predictions, Welch's t over seeds when both have >= 2 seeds, else the difference of the means; no test
    where the protocols differ unless allowed)."""
    return compare_frame(compare_entries(board, lang, key_a, key_b, n_boot, seed, allow_different_protocols), n_boot)


def compare_average(board: Board, lang: str, key_a: str, key_b: str, n_boot: int = 1000, seed: int = 0,
                    allow_different_protocols: bool = False) -> dict | None:
    """A - B on the average over the tasks where both have aligned predictions and (unless allowed) the same
    protocol, in percentage points. None when no task qualifies. This average can differ from the table's
    Avg, which also counts tasks without predictions."""
    return average_dict(compare_entries(board, lang, key_a, key_b, n_boot, seed, allow_different_protocols))


def average_markdown(avg: dict | None, pair: PairComparison | None = None) -> str:
    """The line under the Compare table: the tested task average, or why there is none (the tasks left
    untested for their settings are named by the note above: not repeated, and not called missing predictions)."""
    if avg is None:
        if pair is not None and pair.refused and len(pair.refused) == len(pair.tasks):
            return "*Task average: not tested (different settings on every task, see above).*"
        return "*Task average: no task with predictions for both models.*"
    return (f"**Task average** over {len(avg['tasks'])} task(s) with predictions ({', '.join(avg['tasks'])}): "
            f"A {avg['A']:.2f}, B {avg['B']:.2f}, A - B **{avg['diff']:+.2f}** points, 95% CI "
            f"[{avg['ci_low']:+.2f}, {avg['ci_high']:+.2f}], p = {avg['p_value']:.3f} (paired bootstrap, "
            f"{avg['n_boot']} replicates: test examples resampled within each task, seeds per model).")


def task_mdd(board: Board, lang: str, task: str, n_boot: int = 1000, seed: int = 0) -> dict[str, stats.DetectableDifference]:
    """Per measured model with predictions on `task`: the minimum detectable difference at 80% power
    (`store.summary.detectable_difference`), in the metric's units (fractions)."""
    out = {}
    for e in board.lang_entries(lang):
        if e.source != "measured" or task not in e.runs:
            continue
        aligned = aligned_predictions(board, task, [e])
        if aligned is None:
            continue
        first = e.runs[task][0]
        out[e.key] = detectable_difference(aligned.gold, aligned.preds[e.key], first.kind, first.labels, n_boot, seed)
    return out
