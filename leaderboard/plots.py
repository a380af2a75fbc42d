"""Matplotlib figures for the app: per-task bars with CI whiskers, CKA per-layer curves, needle accuracy.

Analysis files (docs/FORMATS.md) are read tolerantly: anything unexpected becomes a Problem, not a crash.
Figures are built with `matplotlib.figure.Figure` (no pyplot global state; safe in server threads).
matplotlib is imported when the first figure is drawn, not with this module: it costs ~1 s, and the app serves
its tables before any figure is asked for.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from biobench.errors import ResultsError
from biobench.names import display_name
from biobench.standings.entries import Board
from biobench.standings.scan import TRAIN_LOG, Problem
from biobench.store import read_json_file
from biobench.store.analysis import ANALYSIS_RECORDS, CKAReport

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _new_figure(**kwargs: Any) -> Figure:
    """matplotlib.figure.Figure(**kwargs), matplotlib imported on first use."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def _palette(name: str) -> Any:
    from matplotlib import colormaps

    return colormaps[name]


def _empty(message: str) -> Figure:
    fig = _new_figure(figsize=(8, 2.5))
    ax = fig.subplots()
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=11, color="#555")
    return fig


LEGEND_CHARS = 44


def legend_label(name: str, limit: int = LEGEND_CHARS) -> str:
    """A legend entry at most `limit` characters, cut in the middle (the start names the model, the end tells
    its rows apart: a smoke tag, '(reported)'), so the legend leaves the plot its width (issue 52 item 6: full
    override strings took ~85% of it, and end-cut labels read as three identical 'all-MiniLM-L6-')."""
    if len(name) <= limit:
        return name
    head = (limit - 1) * 3 // 5
    return f"{name[:head]}…{name[len(name) - (limit - 1 - head):]}"


def task_bars(board: Board, lang: str, keys: Sequence[str] | None = None, tasks: Sequence[str] | None = None) -> Figure:
    """Grouped bars: x = tasks, one bar per model with a score on one of them (mean over seeds), whiskers = 95%
    CI over seeds. A model with no cell among `tasks` has no bar, hence no legend entry (issue 62 item 3: the Task
    tab's legend listed 16 models, 11 of them without a bar)."""
    tasks = list(tasks or board.columns(lang))
    entries = [e for e in board.lang_entries(lang)
               if (keys is None or e.key in keys) and any(t in e.cells for t in tasks)]
    if not entries or not tasks:
        return _empty(f"No {lang} results to plot")
    fig = _new_figure(figsize=(max(8, 1.1 * len(tasks) + 2) + 3, 4.2), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(entries)
    palette = _palette("tab10" if len(entries) <= 10 else "tab20")  # one colour per model up to 20
    x = np.arange(len(tasks))
    for i, e in enumerate(entries):
        means = [e.cells[t].mean if t in e.cells else math.nan for t in tasks]
        err = np.array([
            [c.summary.mean - c.summary.ci_low, c.summary.ci_high - c.summary.mean]
            if (c := e.cells.get(t)) is not None and c.summary is not None and c.summary.n >= 2 else [0.0, 0.0]
            for t in tasks
        ]).T
        label = legend_label(e.name + (" (reported)" if e.source == "reported" else ""))
        ax.bar(x + (i - (len(entries) - 1) / 2) * width, means, width, yerr=err, capsize=2, label=label,
               hatch="//" if e.source == "reported" else None, alpha=0.9, color=palette(i % palette.N))
    ax.set_xticks(x, tasks, rotation=30, ha="right")
    ax.set_ylabel("macro-F1 (%)")
    ax.set_title(f"{lang}: mean over seeds, 95% CI whiskers")
    # outside the axes (right), so it never hides a bar; constrained layout makes room for it
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False,
              ncols=1 if len(entries) <= 18 else 2)
    return fig


def _records(paths: Sequence[Path], kind: str, problems: list[Problem]) -> list[Any]:
    """The typed records (biobench.store.analysis) of the analysis files of `kind`; a file the store's bounded
    reader refuses, or whose record lacks what the figure needs, is a Problem."""
    out = []
    for path in paths:
        try:
            data = read_json_file(path, what="analysis file")
            if not isinstance(data, dict):
                raise ResultsError(f"{path}: not a JSON object")
        except ResultsError as err:
            problems.append(Problem(str(path), f"unreadable analysis file: {str(err).removeprefix(f'{path}: ')}"))
            continue
        try:
            out.append(ANALYSIS_RECORDS[kind](data, str(path)))
        except ResultsError as err:
            problems.append(Problem(str(path), str(err).removeprefix(f"{path}: ")))
    return out


def _model_name(model: Any) -> str:
    """A display name from a model record ({"id", ...}) or an id string (cka/1 files, older needle files)."""
    return display_name(model) if isinstance(model, dict) else display_name(None, str(model))


def _label(report: CKAReport) -> str:
    """'A vs B' from a cka.json's models; the noise model is named in the ratio, not in the label."""
    if report.models:
        pair = [v for k, v in report.models.items() if k != "noise"] or list(report.models.values())
        return " vs ".join(_model_name(v) for v in pair)
    return Path(report.source).parent.name


def cka_figure(paths: Sequence[Path], problems: list[Problem]) -> Figure:
    """Per-layer divergence (1 - CKA) and, when present, the seed-noise ratio r_l, one curve per file."""
    curves = [(_label(r), r.layers) for r in _records(paths, "cka", problems) if r.layers]
    if not curves:
        return _empty("No CKA analysis found (cka.json in a results folder)")
    has_ratio = any(p.ratio is not None for _, pts in curves for p in pts)
    fig = _new_figure(figsize=(9, 3.8), layout="constrained")
    axes = fig.subplots(1, 2 if has_ratio else 1, squeeze=False)[0]
    for label, pts in curves:
        axes[0].plot([p.layer for p in pts], [p.divergence for p in pts], marker="o", ms=3, label=label)
        if has_ratio:
            rp = [p for p in pts if p.ratio is not None]
            axes[1].plot([p.layer for p in rp], [p.ratio for p in rp], marker="o", ms=3, label=label)
    axes[0].set(xlabel="layer", ylabel="divergence (1 - linear CKA)", title="CKA divergence per layer")
    axes[0].legend(fontsize=7)
    if has_ratio:
        axes[1].axhline(1.0, color="#999", lw=0.8, ls="--")
        axes[1].set(xlabel="layer", ylabel="ratio r_l", title="divergence / seed-noise divergence")
    return fig


def needle_figure(paths: Sequence[Path], problems: list[Problem]) -> Figure:
    """Needle-in-a-haystack accuracy by haystack length and by needle position, one line per model."""
    runs: list[tuple[str, Any, Any]] = []
    for record in _records(paths, "needle", problems):
        runs.extend((_model_name(r.model), r.by_length, r.by_position) for r in record.runs)
        problems.extend(Problem(record.source, f"needle results for {name!r} have no by_length/by_position")
                        for name in record.empty)
    if not runs:
        return _empty("No needle analysis found (needle_results.json in a results folder)")
    fig = _new_figure(figsize=(9, 3.6), layout="constrained")
    ax_len, ax_pos = fig.subplots(1, 2)
    for name, by_len, by_pos in runs:
        scale = 100 if all(v <= 1 for _, v in by_len + by_pos) else 1
        if by_len:
            by_len = sorted(by_len, key=lambda kv: float(kv[0]) if kv[0].replace(".", "").isdigit() else math.inf)
            ax_len.plot([k for k, _ in by_len], [scale * v for _, v in by_len], marker="o", label=name)
        if by_pos:
            ax_pos.plot([k for k, _ in by_pos], [scale * v for _, v in by_pos], marker="o", label=name)
    ax_len.set(xlabel="haystack length (tokens)", ylabel="accuracy (%)", title="Needle accuracy by length")
    ax_len.axhline(50, color="#999", lw=0.8, ls="--")
    ax_len.legend(fontsize=7)
    ax_pos.set(ylabel="accuracy (%)", title="Needle accuracy by position")
    ax_pos.axhline(50, color="#999", lw=0.8, ls="--")
    return fig


def cka_trajectory_figure(paths: Sequence[Path], problems: list[Problem]) -> Figure:
    """Paper Figure 3a: mean CKA divergence from the start model vs tokens seen, one curve per run
    (cka_trajectory.json from `biobench analyze cka-trajectory`), shaded 95% CI over sample seeds."""
    curves = [(Path(t.run).name, t.points) for t in _records(paths, "cka_trajectory", problems) if t.points]
    if not curves:
        return _empty("No CKA trajectory found (cka_trajectory.json from `biobench analyze cka-trajectory`)")
    fig = _new_figure(figsize=(8, 3.6), layout="constrained")
    ax = fig.subplots()
    for label, pts in curves:
        xs = [p.tokens for p in pts]
        (line,) = ax.plot(xs, [p.mean_divergence for p in pts], marker="o", ms=3, label=label)
        if all(p.ci_low is not None and p.ci_high is not None for p in pts):
            ax.fill_between(xs, [p.ci_low for p in pts], [p.ci_high for p in pts], color=line.get_color(), alpha=0.15, lw=0)
    ax.set(xlabel="tokens seen", ylabel="mean divergence vs start (1 - CKA)", title="CKA trajectory during pretraining")
    ax.legend(fontsize=7)
    return fig


def train_logs(board: Board) -> list[tuple[str, Path]]:
    """(label, path) of every pretraining log to draw: the run folder of each measured `biobench pretrain`
    checkpoint (`<run>/final` -> `<run>/train_log.jsonl`, when that folder exists here) and every train_log.jsonl
    under the results folders. A log is labelled with the display name of the model its run folder trained,
    without a smoke row's tag: a fine-tuning smoke run says nothing of the pretraining (issue 62 item 3: the curve
    read "⚑ smoke (epochs 3 +2) · phase 1 (CLM)")."""
    named: dict[str, str] = {}
    candidates = []
    for e in board.entries:
        if e.source == "measured" and e.model_id and e.lineage:  # lineage: a pretraining checkpoint
            run_dir = Path(e.model_id).parent
            named.setdefault(run_dir.name, e.base_name or e.name)
            candidates.append(run_dir / TRAIN_LOG)
    found: dict[Path, str] = {}
    for path in [*candidates, *board.analyses.get("train_log", [])]:
        if path.is_file():
            found.setdefault(path.resolve(), named.get(path.parent.name, path.parent.name))
    return [(label, path) for path, label in found.items()]


def loss_figure(logs: Sequence[tuple[str, Path]], problems: list[Problem]) -> Figure:
    """Training loss against tokens seen, one colour per pretraining run; phase 1 solid, phase 2 dashed (the
    objectives differ: a CLM loss and an MLM loss are not on one scale, so the phase change shows as a jump)."""
    curves = []
    for label, path in logs:
        points: dict[int, list[tuple[float, float, str]]] = {}
        try:
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                    points.setdefault(int(r.get("phase", 1)), []).append((float(r["tokens"]), float(r["loss"]),
                                                                          str(r.get("objective", ""))))
                except (ValueError, KeyError, TypeError, AttributeError) as err:
                    problems.append(Problem(str(path), f"line {lineno}: not a train_log record ({type(err).__name__}); skipped"))
        except OSError as err:
            problems.append(Problem(str(path), f"unreadable train log: {err}"))
            continue
        if points:
            curves.append((label, points))
    if not curves:
        return _empty("No pretraining log found (train_log.jsonl beside a checkpoint's run folder or in a results folder)")
    fig = _new_figure(figsize=(11, 3.8), layout="constrained")
    ax = fig.subplots()
    for i, (label, phases) in enumerate(curves):
        colour = f"C{i % 10}"
        for phase, pts in sorted(phases.items()):
            pts.sort()
            objective = pts[0][2].upper() or f"phase {phase}"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colour, lw=1.2, ls="-" if phase == 1 else "--",
                    label=f"{label} · phase {phase} ({objective})")
    ax.set(xlabel="tokens seen", ylabel="training loss", title="Pretraining loss (phase 1 solid, phase 2 dashed)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)
    return fig
