"""The Gradio app: language tables, task view, compare view, plots, problems, CSV download.

Everything is computed from a `Board` (built at start-up, replaced by Refresh: callbacks read `Live.board` when
they run); callbacks only filter and re-render, and every callback is wrapped so a bad file or value shows a
message instead of breaking the page. Each tab has its own builder; `build_app` lays them out and wires what
links them.
"""

from __future__ import annotations

import functools
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import pandas as pd
from biobench.leaderboard import plots
from biobench.leaderboard.about import about_markdown
from biobench.leaderboard.json_routes import model_choices, model_row_json, serve
from biobench.leaderboard.service_views import (
    PaperTab,
    build_paper_tab,
    build_queue_tab,
    build_submit_tab,
    queue_writable,
)
from biobench.leaderboard.tables.costs import efficiency_frame
from biobench.leaderboard.tables.css import CSS
from biobench.leaderboard.tables.detail import model_detail, model_panel
from biobench.leaderboard.tables.escape import esc, md
from biobench.leaderboard.tables.export import export_frame
from biobench.leaderboard.tables.filters import Filters
from biobench.leaderboard.tables.frames import display
from biobench.leaderboard.tables.html import render_html
from biobench.leaderboard.tables.rows import (
    SMOKE_SHOWN_BY_DEFAULT,
    model_rows,
    row_counts,
    smoke_counts,
    smoke_only,
    smoke_text,
)
from biobench.runtime.files import csv_text
from biobench.service.submission import PublicPolicy, task_protocols
from biobench.standings.aggregate import build_board
from biobench.standings.cache import default_dir
from biobench.standings.entries import Board, Entry
from biobench.standings.entry_pairs import (
    average_dict,
    average_markdown,
    compare_entries,
    compare_frame,
    default_measured_pair,
    task_mdd,
)
from biobench.standings.reproduction import paper_entry
from biobench.store.trust import SMOKE_MARK

LANG_NAMES = {"fr": "French", "en": "English"}
# the Compare table's columns as the app shows them (biobench.standings.entry_pairs' names are the export's)
COMPARE_HEADERS = {"task": "Task", "A": "A (%)", "B": "B (%)", "diff": "A - B (points)",
                   "ci_low": "95% CI low (points)", "ci_high": "95% CI high (points)", "p_value": "p",
                   "method": "Test"}


def _safe(default_factory):
    """Turn an exception in a callback into a visible message (the app never crashes on bad data)."""

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args):
            try:
                return fn(*args)
            except Exception as err:  # noqa: BLE001 - shown to the user instead of a broken page
                traceback.print_exc()
                return default_factory(f"{type(err).__name__}: {err}")

        return inner

    return wrap


def _choices(board: Board, attr: str) -> list[str]:
    return sorted({str(getattr(e, attr)) for e in board.entries})


# the Task tab's detectable-difference columns (percentage points): with this model's seeds, and with many seeds
MDD_POWER, MDD_MANY = "MDD at 80% power (points)", "MDD with many seeds (points)"
TASK_NOTE = ("**Mean**, **SD** and the **95% CI** (Student t over seeds) are test macro-F1 in %; **n seeds**: how "
             "many. **Top group**: not significantly worse than the best measured model (paired bootstrap). "
             "**MDD**: the smallest difference from this model that a paired test would detect 80% of the time — "
             "with its seeds, and with many seeds (the test set's own limit), in percentage points.")


def task_seed_frame(board: Board, lang: str, task: str) -> pd.DataFrame:
    """Per-seed scores, mean, SD and 95% CI of every model on one task, under human headers with units."""
    rows = []
    mdd = task_mdd(board, lang, task)
    for e in board.lang_entries(lang):
        c = e.cells.get(task)
        if c is None:
            continue
        row = {"Model": e.name, "Source": e.source, "Mean (%)": round(c.mean, 2)}
        if c.summary is not None:
            # one seed has no spread: no SD and no interval ("–", as the CLI and the JSON say), never "0.00"
            spread = c.summary.n >= 2
            row.update({"SD (points)": round(c.summary.std, 2) if spread else None,
                        "95% CI low (%)": round(c.summary.ci_low, 2) if spread else None,
                        "95% CI high (%)": round(c.summary.ci_high, 2) if spread else None, "n seeds": c.summary.n})
            row.update({f"Seed {s} (%)": round(v, 2) for s, v in sorted(c.seeds.items())})
        group = board.groups.get((lang, task))
        if group is not None:
            row["Top group"] = "yes" if group.in_top(e.key) else ("no" if e.key in group.vs_best else "")
        if e.key in mdd:  # the smallest difference this model's seeds and the test set can resolve
            m = mdd[e.key]
            row[MDD_POWER] = round(100 * m.mdd, 2) if m.mdd == m.mdd else None
            row[MDD_MANY] = round(100 * m.mdd_many_seeds, 2)
        if c.degenerate:  # which seeds; their findings go under the table (task_degenerate_notes): a sentence
            # per seed in a cell made the column 1,189 px wide and pushed Mean off-screen (issue 52 item 6)
            row["Degenerate"] = "⚠ seed " + ", ".join(str(s) for s in sorted(c.degenerate))
        rows.append(row)
    frame = pd.DataFrame(rows)
    seeds = [c for c in frame.columns if c.startswith("Seed ")]  # after the summary, Degenerate last
    rest = [c for c in frame.columns if c not in seeds and c != "Degenerate"]
    return frame[rest + seeds + (["Degenerate"] if "Degenerate" in frame.columns else [])]


def task_degenerate_notes(board: Board, lang: str, task: str) -> str:
    """The Task tab's lines under its table: each degenerate seed's finding and likely reason, by model."""
    lines = [f"⚠ **{md(e.name)}** seed {seed}: {md(why)}" for e in board.lang_entries(lang)
             if (c := e.cells.get(task)) is not None for seed, why in sorted(c.degenerate.items())]
    return "\n\n".join(lines)


def task_label_frame(board: Board, lang: str, task: str) -> pd.DataFrame:
    """Per-label F1 (%), mean over seeds, for measured models (labels as rows)."""
    cols = {e.name: e.cells[task].per_label for e in board.lang_entries(lang) if task in e.cells and e.cells[task].per_label}
    if not cols:
        return pd.DataFrame({"label": [], "note": []})
    frame = pd.DataFrame(cols).round(1)
    frame.index.name = "label"
    return frame.reset_index()


def first_measured_task(board: Board, lang: str) -> str | None:
    """The task the Task tab opens on: the first with a measured result, else the first."""
    tasks = board.columns(lang)
    measured = {t for e in board.lang_entries(lang) if e.source == "measured" for t in e.cells}
    return next((t for t in tasks if t in measured), tasks[0] if tasks else None)


def compare_rows(board: Board, lang: str) -> dict[str, Entry]:
    """Key -> row entry of the Compare tab (`Live.compare_rows`), memoised per board and language."""
    found = board.memo.get(("compare_rows", lang))
    if found is None:
        found = {r.key: r.entry for r in model_rows(board, lang, Filters(include_smoke=True))}
        found = board.memo[("compare_rows", lang)] = found
    return found


def default_pair(board: Board, lang: str) -> tuple[str | None, str | None]:
    """The Compare tab's opening pair: the two measured models sharing the most tasks (a paired test is
    possible); one measured model and the reported row the paper gives for it, or else the reported row sharing
    the most tasks with it (none shares any: B is left empty and the tab says what to do); no measured model:
    two reported rows. Worked out once per board and language (`Board.memo`): every page load, language change
    and refresh of an unchanged board asks for it (issue 51 item 2: 578 s of CPU per page load at 300 models)."""
    cached = board.memo.get(("default_pair", lang))
    if cached is None:
        cached = board.memo[("default_pair", lang)] = _default_pair(board, lang)
    return cached


def _default_pair(board: Board, lang: str) -> tuple[str | None, str | None]:
    reported = [e for e in board.lang_entries(lang) if e.source == "reported"]

    def shared(a, b) -> int:
        return len(set(a.cells) & set(b.cells))

    # the tab's own rows: a measured model's key there is its results folder (tables.rows.model_key), not the key of
    # one of its entries, so a pair drawn from the entries would name no choice of the tab's menus
    rows = [e for e in compare_rows(board, lang).values() if e.source == "measured"]
    if len(rows) >= 2 and (pair := default_measured_pair(board, lang, rows)) is not None:
        return pair  # the same protocol first (a test is possible), then the most tasks shared
    if rows:
        a = rows[0]
        paper = paper_entry(board, a)
        if paper is not None and shared(a, paper):
            return a.key, paper.key
        best_b = max(reported, key=lambda b: shared(a, b), default=None)
        return a.key, best_b.key if best_b is not None and shared(a, best_b) else None
    keys = [e.key for e in reported]
    if not keys:
        return None, None
    return keys[0], keys[1] if len(keys) > 1 else keys[0]


def compare_note(board: Board, lang: str, a: str | None, b: str | None, rows: int) -> str:
    """What the Compare tab says above an empty or untestable comparison: why, and what to do."""
    measured = [e for e in board.lang_entries(lang) if e.source == "measured"]
    language = LANG_NAMES.get(lang, lang)
    evaluate = f"evaluate another model (`biobench eval --model ORG/NAME --lang {lang}`, or the Submit tab)"
    if not a or not b:
        if len(measured) == 1:
            return (f"**Only one measured {language} model ({md(measured[0].name)})**, and no reported row shares "
                    f"a task with it: {evaluate} to compare two measured models task by task.")
        return "Pick two models (A and B)."
    listed = compare_rows(board, lang)
    entry_a, entry_b = listed.get(a) or board.entry(a, lang), listed.get(b) or board.entry(b, lang)
    if entry_a is None or entry_b is None:
        return "Pick two models (A and B)."
    if not rows:
        return (f"**{md(entry_a.name)} and {md(entry_b.name)} share no task**: pick a model measured on the same "
                f"tasks{'' if len(measured) > 1 else ', or ' + evaluate}.")
    reported = [e.name for e in (entry_a, entry_b) if e.source == "reported"]
    if reported:
        lead = (f"Only one measured {language} model: B is " if len(measured) == 1 else "")
        return (f"{lead}*{md(reported[0])}* is a reported row (the paper's means, no predictions): the differences "
                f"below have no paired test. For one, {evaluate} and compare two measured models.")
    return ""


def header_text(board: Board) -> str:
    """The page's first lines: its counts are `tables.rows.row_counts`, the JSON's (one definition of a row)."""
    counts = {lang: row_counts(board, lang) for lang in board.langs}
    # "French 2, 1 of them under Other tasks only; English 1": no parenthesis inside the sentence's own
    parts = [f"{LANG_NAMES.get(lang, lang)} {c['measured']}" + (f", {len(c['other_only'])} of them under Other tasks only"
                                                                if c["other_only"] else "")
             for lang, c in counts.items() if c["measured"]]
    measured = sum(c["measured"] for c in counts.values())
    return ("# biobench leaderboard\nBiomedical encoders on the French and English tasks of "
            "*A Causal Language Modeling Detour Improves Encoder Continued Pretraining* (arXiv 2605.12438). "
            f"{measured} measured model row{'' if measured == 1 else 's'}"
            + (f" ({'; '.join(parts)})" if parts else "") + "; reported rows are the paper's published numbers."
            + (f" **{len(board.problems)} problem(s)** while reading results: see the Problems tab (the last tab; "
               "under \"⋯\" in a narrow window)." if board.problems else ""))


# The Plots tab's analysis figures: (label, what produces the files it reads)
ANALYSES = (("Pretraining loss", "train_log.jsonl beside a checkpoint's run folder or in a results folder"),
            ("CKA", "cka.json from `biobench analyze cka`"),
            ("Needle in a haystack", "needle_results.json from `biobench analyze needle`"),
            ("CKA trajectory (divergence from the start model)",
             "cka_trajectory.json from `biobench analyze cka-trajectory`"))


def analysis_figures(board: Board) -> Callable[[], tuple]:
    """The Plots tab's analysis figures (loss curves, CKA, needle, CKA trajectory), drawn once on the first page
    load rather than at start-up (they do not depend on the filters; matplotlib alone costs ~1 s); the problems
    found in analysis files join the board's. An analysis with no file at all is None (the tab says so in one
    line instead of drawing an empty box)."""
    lock = threading.Lock()
    drawn: list[tuple] = []

    def figures() -> tuple:
        with lock:
            if not drawn:
                logs, trajectory = plots.train_logs(board), board.analyses.get("cka_trajectory", [])
                drawn.append((plots.loss_figure(logs, board.problems) if logs else None,
                              plots.cka_figure(board.analyses["cka"], board.problems) if board.analyses["cka"] else None,
                              plots.needle_figure(board.analyses["needle"], board.problems)
                              if board.analyses["needle"] else None,
                              plots.cka_trajectory_figure(trajectory, board.problems) if trajectory else None))
            return drawn[0]

    return figures


def missing_analyses_text(figures: tuple) -> str:
    """One line naming the analyses without files and what writes them ('' when every one has a figure)."""
    missing = [f"{label} ({source})" for (label, source), fig in zip(ANALYSES, figures, strict=True) if fig is None]
    return ("No analysis files for: " + "; ".join(missing) + ".") if missing else ""


@dataclass
class Live:
    """The board every callback reads when it runs: a refresh replaces it, and every view follows."""

    board: Board
    status_logged: bool = False  # the significance groups' final line went to the server log

    @property
    def significance(self):  # cache.BackgroundGroups while/after the groups are computed in the background
        return self.board.significance

    def compare_rows(self, lang: str) -> dict[str, Entry]:
        """The Compare tab's rows: one per model as the tables list them (`model_rows`, smoke runs included:
        a model whose tasks ran with other overrides each, as the demo's NER, is one row with all its tasks,
        as `biobench compare` takes its results folder), then the reported rows; memoised per board."""
        return compare_rows(self.board, lang)

    def compare_choices(self, lang: str) -> list[tuple[str, str]]:
        return [(e.name + (" (reported)" if e.source == "reported" else ""), key)
                for key, e in self.compare_rows(lang).items()]

    def model_choices(self, lang: str) -> list[tuple[str, str]]:
        return [(e.name + (" (reported)" if e.source == "reported" else ""), e.key)
                for e in self.board.lang_entries(lang)]


@dataclass
class Controls:
    """The filters above the tables, the smoke toggle and the CSV download. Callbacks read their values by
    component (`values[controls.sizes]`: gradio passes a dict when inputs are a set), never by position."""

    sources: gr.CheckboxGroup
    sizes: gr.CheckboxGroup
    contexts: gr.CheckboxGroup
    recipes: gr.CheckboxGroup
    sort_by: gr.Dropdown
    show_ci: gr.Checkbox
    include_smoke: gr.Checkbox
    hide_contaminated: gr.Checkbox
    download: gr.DownloadButton

    @property
    def inputs(self) -> set:
        return {self.sources, self.sizes, self.contexts, self.recipes, self.sort_by, self.show_ci, self.include_smoke,
                self.hide_contaminated}

    def filters(self, values: dict, **changed) -> Filters:
        """The filters the controls' `values` select (`changed`: values that replace the controls', by name)."""
        picked = {name: values.get(getattr(self, name)) for name in ("sources", "sizes", "contexts", "recipes",
                                                                       "sort_by", "show_ci", "include_smoke",
                                                                       "hide_contaminated")}
        picked.update(changed)
        return Filters(sources=picked["sources"] or [], sizes=picked["sizes"], contexts=picked["contexts"],
                       recipes=picked["recipes"], sort_by=picked["sort_by"] or "Avg", show_ci=bool(picked["show_ci"]),
                       include_smoke=bool(picked["include_smoke"]),
                       hide_contaminated=bool(picked["hide_contaminated"]))


def smoke_toggle_label(board: Board) -> str:
    """The toggle's label with its count (`tables.rows.smoke_counts`, worded by `smoke_text` as the tables' note
    and `leaderboard --print` word theirs): the smoke cells it shows, and unticked hides."""
    return f"Show smoke runs ({smoke_text(*smoke_counts(board))})"


SMOKE_BANNER = (f"**{SMOKE_MARK} Every measured result on this board is a smoke run** (protocol overrides: fewer "
                "epochs or steps, a train subset, a shorter max length...). They check that a model and the pipeline "
                "work; they are not the protocol's scores and do not compare with the paper's. Hover a ⚑ cell for "
                "its overrides.")


def _toolbar(board: Board, refreshable: bool) -> tuple[gr.Checkbox, gr.Button | None, gr.Markdown | None]:
    """Above the tabs: the smoke toggle (visible, with its count) and, with a rebuild, Refresh and its note."""
    with gr.Row(equal_height=True):
        include_smoke = gr.Checkbox(value=SMOKE_SHOWN_BY_DEFAULT, label=smoke_toggle_label(board), scale=0,
                                    min_width=320, elem_id="lb-include-smoke",
                                    info="runs with protocol overrides (⚑): shown where the model has no protocol "
                                         "result for the task, never ranked; untick for the protocol's results only")
        button = note = None
        if refreshable:
            button = gr.Button("Refresh results", size="sm", scale=0, elem_id="lb-refresh")
            note = gr.Markdown(elem_id="lb-refresh-note")
    return include_smoke, button, note


def _controls(board: Board, include_smoke: gr.Checkbox) -> Controls:
    """The filters, in a closed accordion: open, they take ~470 px above every tab."""
    with gr.Accordion("Filters, sorting and CSV download", open=False, elem_id="lb-filters"):
        with gr.Row():
            sources = gr.CheckboxGroup(["measured", "reported"], value=["measured", "reported"], label="Rows")
            sizes = gr.CheckboxGroup(_choices(board, "size"), value=_choices(board, "size"), label="Size")
            contexts = gr.CheckboxGroup(_choices(board, "context"), value=_choices(board, "context"), label="Context")
            recipes = gr.CheckboxGroup(_choices(board, "recipe"), value=_choices(board, "recipe"), label="Recipe")
        with gr.Row():
            all_tasks = [t for lang in board.langs for t in board.columns(lang)]
            sort_by = gr.Dropdown(["Avg", "Model", *all_tasks], value="Avg", label="Sort by")
            show_ci = gr.Checkbox(value=True, label="Show 95% CI half-widths")
            # a cell whose test examples share 13-grams with the model's pretraining corpus (biobench
            # contamination, recorded by eval --check-contamination) shows ⚠ and its share; this hides its score
            hide_contaminated = gr.Checkbox(value=False, label="Hide contaminated cells", elem_id="lb-hide-contaminated")
            download = gr.DownloadButton("Download CSV (filtered rows)")
    return Controls(sources, sizes, contexts, recipes, sort_by, show_ci, include_smoke, hide_contaminated, download)


def visitor_status(significance) -> str:
    """The significance line a visitor sees: progress while the groups are computed, a failure; nothing once
    they are done (the cache counts and seconds are the server log's, not the page's)."""
    if significance is None or (significance.finished.is_set() and not significance.error):
        return ""
    return significance.status


def _first_lang(board: Board) -> str | None:
    return board.langs[0] if board.langs else None


def _task_tab(live: Live, app: gr.Blocks) -> None:
    """Per-seed and per-label scores of one task, opening on a task with measured results."""
    board = live.board
    with gr.Tab("Task", id="tab-task"):
        with gr.Row():
            lang = gr.Dropdown(board.langs, value=_first_lang(board), label="Language")
            first = board.columns(board.langs[0]) if board.langs else []
            task = gr.Dropdown(first, value=first_measured_task(board, board.langs[0]) if first else None,
                               label="Task")
        note = gr.Markdown(elem_id="lb-task-note")
        seeds = gr.Dataframe(label="Per-seed scores (macro-F1 %)", wrap=True, elem_id="lb-task-seeds")
        gr.Markdown(TASK_NOTE, elem_classes=["lb-notes"])
        labels = gr.Dataframe(label="Per-label F1 (%), mean over seeds")
        plot = gr.Plot(label="Scores with 95% CI")

    @_safe(lambda msg: (pd.DataFrame({"error": [msg]}), pd.DataFrame(), plots._empty(msg), ""))
    def on_task(lang_v, task_v):
        board = live.board
        if not lang_v or not task_v:
            return pd.DataFrame(), pd.DataFrame(), plots._empty("Pick a task"), ""
        measured = [e.name for e in board.lang_entries(lang_v) if e.source == "measured" and task_v in e.cells]
        text = "" if measured else (f"No measured results for {md(task_v)} yet: the rows are the paper's reported "
                                    "means (no seeds, no per-label scores).")
        if notes := task_degenerate_notes(board, lang_v, task_v):
            text = (text + "\n\n" if text else "") + notes
        seed_frame = display(task_seed_frame(board, lang_v, task_v), {MDD_POWER: "points", MDD_MANY: "points",
                                                                      "SD (points)": "points", "n seeds": "count"},
                             default="score")
        label_frame = task_label_frame(board, lang_v, task_v)
        return (seed_frame, display(label_frame, default="score") if not label_frame.empty else label_frame,
                plots.task_bars(board, lang_v, tasks=[task_v]), text)

    @_safe(lambda msg: (gr.update(), pd.DataFrame({"error": [msg]}), pd.DataFrame(), plots._empty(msg), ""))
    def on_lang(lang_v):
        chosen = first_measured_task(live.board, lang_v)
        return (gr.update(choices=live.board.columns(lang_v), value=chosen), *on_task(lang_v, chosen))

    outputs = [seeds, labels, plot, note]
    lang.change(on_lang, lang, [task, *outputs])
    task.change(on_task, [lang, task], outputs)
    app.load(on_task, [lang, task], outputs)


def _model_tab(live: Live, app: gr.Blocks) -> None:
    """The Model tab: pick a language and a model (one per model, as the tables list them) for its metadata —
    parameters, context, license, base model, training data, open weights, each stated or from its card — and
    its per-task results, smoke runs marked; the view of /api/v1/models (leaderboard/json_routes.py), nothing recomputed."""
    board = live.board
    with gr.Tab("Model", id="tab-model") as tab:
        with gr.Row():
            lang = gr.Dropdown(board.langs, value=_first_lang(board), label="Language", elem_id="lb-model-lang")
            model = gr.Dropdown([], label="Model", elem_id="lb-model-name")
        panel = gr.Markdown(elem_id="lb-model-panel")
        results = gr.Dataframe(label="Per-task results (macro-F1 %, mean over seeds)", interactive=False, wrap=True,
                               elem_id="lb-model-results")

    @_safe(lambda msg: (f"error: {md(msg)}", pd.DataFrame()))
    def on_model(lang_v, key):
        if not (lang_v and key):
            return model_panel(None)
        text, frame = model_panel(model_row_json(live.board, lang_v, key))
        return text, display(frame, {"macro-F1": "score", "± 95% CI": "score"})

    @_safe(lambda msg: (gr.update(), f"error: {md(msg)}", pd.DataFrame()))
    def on_lang(lang_v, key=None):
        """The language's models (read again each time: a refresh may have brought new ones), keeping the chosen
        model when it is a measured one still there, else the first measured one (a paper row is only the
        fallback of a board with nothing measured yet)."""
        choices = model_choices(live.board, lang_v) if lang_v else []
        measured = [k for label, k in choices if "(reported)" not in label]
        chosen = key if key in measured else measured[0] if measured else choices[0][1] if choices else None
        return (gr.update(choices=choices, value=chosen), *on_model(lang_v, chosen))

    @_safe(lambda msg: (gr.update(), gr.update(), f"error: {md(msg)}", pd.DataFrame()))
    def on_tab(lang_v, key):
        """Opening the tab reads the board again: its languages too (a board that started empty has one after
        the first refresh)."""
        langs = live.board.langs
        lang_v = lang_v if lang_v in langs else _first_lang(live.board)
        return (gr.update(choices=langs, value=lang_v), *on_lang(lang_v, key))

    lang.change(on_lang, lang, [model, panel, results])
    tab.select(on_tab, [lang, model], [lang, model, panel, results])
    model.input(on_model, [lang, model], [panel, results])
    app.load(on_lang, lang, [model, panel, results])


@dataclass
class CompareTab:
    """The Compare tab's inputs, its outputs, and the function that fills them from (language, A, B)."""

    lang: gr.Dropdown
    a: gr.Dropdown
    b: gr.Dropdown
    outputs: list
    show: Callable[[str | None, str | None, str | None], tuple]


ALLOW_HINT = 'tick "Test across different protocols"'  # the Compare tab's way to test anyway (no CLI flag)


def _compare_tab(live: Live, app: gr.Blocks) -> CompareTab:
    """A - B per task and for the average, opening on a pair that can be tested."""
    with gr.Tab("Compare", id="tab-compare"):
        with gr.Row():
            lang = gr.Dropdown(live.board.langs, value=_first_lang(live.board), label="Language")
            a = gr.Dropdown([], label="Model A", elem_id="lb-compare-a")
            b = gr.Dropdown([], label="Model B", elem_id="lb-compare-b")
            allow = gr.Checkbox(False, label="Test across different protocols", scale=0, min_width=240,
                                elem_id="lb-compare-allow")
        note = gr.Markdown(elem_id="lb-compare-note")
        table = gr.Dataframe(label="A - B per task (percentage points)", interactive=False, wrap=True,
                             headers=list(COMPARE_HEADERS.values()), elem_id="lb-compare-table")
        average = gr.Markdown()

    @_safe(lambda msg: (f"error: {md(msg)}", pd.DataFrame({"error": [msg]}), ""))
    def show(lang_v: str | None, a_v: str | None, b_v: str | None, allow: bool = False) -> tuple:
        """The note, table and average for a pair; where A and B differ in protocol settings, the note lists
        them and no task gets a significance test unless the visitor ticks `allow`."""
        board = live.board
        if not lang_v:
            return "", pd.DataFrame(columns=list(COMPARE_HEADERS.values())), ""
        if not (a_v and b_v):
            return (compare_note(board, lang_v, a_v, b_v, 0), pd.DataFrame(columns=list(COMPARE_HEADERS.values())),
                    "")
        pair = compare_entries(board, lang_v, a_v, b_v, allow_different_protocols=bool(allow),
                               rows=compare_rows(board, lang_v))
        rows = compare_frame(pair)
        frame = display(rows.rename(columns=COMPARE_HEADERS),
                        {"A (%)": "score", "B (%)": "score", "A - B (points)": "difference",
                         "95% CI low (points)": "difference", "95% CI high (points)": "difference", "p": "p"})
        note = compare_note(board, lang_v, a_v, b_v, len(rows))
        if pair is not None and not pair.same_protocol:  # said once, with the tab's own checkbox as the way
            note = f"**{SMOKE_MARK}** {md(pair.warning(to_test=ALLOW_HINT))}" + ("\n\n" + note if note else "")
        return note, frame, average_markdown(average_dict(pair), pair) if len(rows) else ""

    @_safe(lambda msg: (gr.update(), gr.update(), f"error: {md(msg)}", pd.DataFrame({"error": [msg]}), ""))
    def on_lang(lang_v):
        choices = live.compare_choices(lang_v)
        pair = default_pair(live.board, lang_v)
        return gr.update(choices=choices, value=pair[0]), gr.update(choices=choices, value=pair[1]), *show(
            lang_v, *pair)

    def on_compare(values: dict) -> tuple:
        return show(values[lang], values[a], values[b], values[allow])

    # A and B answer the visitor's picks only (.input, not .change): a refresh or a language change sets both
    # and fills the note and table in the same response, where two .change events, one per dropdown, raced
    # each other with a half-updated pair and the last to return, sometimes the stale one, kept the note
    lang.change(on_lang, lang, [a, b, note, table, average])
    a.input(on_compare, {lang, a, b, allow}, [note, table, average])
    b.input(on_compare, {lang, a, b, allow}, [note, table, average])
    allow.input(on_compare, {lang, a, b, allow}, [note, table, average])
    app.load(on_lang, lang, [a, b, note, table, average])
    return CompareTab(lang, a, b, [note, table, average], show)


def _plots_tab(live: Live, app: gr.Blocks) -> list:
    """Per-task bars, the efficiency table with its detail view, and the analysis figures with the line naming
    the missing ones (returned, that line last: they are drawn on the first page load, with the Problems tab)."""
    with gr.Tab("Plots", id="tab-plots"):
        lang = gr.Dropdown(live.board.langs, value=_first_lang(live.board), label="Language")
        bars = gr.Plot(label="Per-task scores", elem_id="lb-bars")
        efficiency = gr.Dataframe(label="Models: fine-tuning and pretraining cost (select a row for its details)",
                                  interactive=False, elem_id="lb-efficiency")
        model = gr.Dropdown([], label="Model details", elem_id="lb-detail-model")
        detail = gr.Markdown(elem_id="lb-detail")
        detail_seeds = gr.Dataframe(label="Per-task, per-seed scores (macro-F1 %)", interactive=False,
                                    elem_id="lb-detail-seeds")
        missing = gr.Markdown(elem_id="lb-analyses-missing", elem_classes=["lb-notes"])
        analysis_plots = [gr.Plot(label=label, elem_id=elem, visible=False)
                          for (label, _), elem in zip(ANALYSES, ("lb-loss", "lb-cka", "lb-needle", "lb-trajectory"),
                                                      strict=True)]

    @_safe(lambda msg: (plots._empty(msg), pd.DataFrame({"error": [msg]}), gr.update()))
    def on_lang(lang_v):
        choices = live.model_choices(lang_v)
        first = next((key for _, key in choices if not key.startswith("paper:")), choices[0][1] if choices else None)
        frame = display(efficiency_frame(live.board, lang_v), {"runs": "count", "fine-tune s/run": "seconds",
                                                               "fine-tune h total": "hours", "tokens/s": "rate"})
        return plots.task_bars(live.board, lang_v), frame, gr.update(choices=choices, value=first)

    @_safe(lambda msg: (f"error: {md(msg)}", pd.DataFrame()))
    def on_detail(lang_v, key):
        if not (lang_v and key):
            return "Select a model (a row of the table above, or here).", pd.DataFrame()
        text, seeds = model_detail(live.board, lang_v, key)
        return text, display(seeds, {"macro-F1": "score", "dev": "score", "train s": "seconds", "tokens/s": "rate"})

    def on_select_row(evt: gr.SelectData):
        row = evt.row_value or []
        return gr.update(value=row[-1]) if row else gr.update()

    lang.change(on_lang, lang, [bars, efficiency, model])
    efficiency.select(on_select_row, None, model)
    model.change(on_detail, [lang, model], [detail, detail_seeds])
    app.load(on_lang, lang, [bars, efficiency, model])
    return [*analysis_plots, missing]


def other_tasks_html(board: Board, filters: Filters) -> str:
    """The "Other tasks" tab: per language, the tasks outside the paper (demo, user tasks), one row per model,
    no average; one line when there are none."""
    langs = [lang for lang in board.langs if board.extra.get(lang)]
    if not langs:
        return ('<div id="lb-other" class="lb-notes">No results on tasks outside the paper: the language tabs show '
                "every task here.</div>")
    return '<div id="lb-other">' + "".join(
        f"<h3>{esc(LANG_NAMES.get(lang, lang))}</h3>" + render_html(board, lang, filters, part="other")
        for lang in langs) + "</div>"


@dataclass
class Tables:
    """The score tables (one per paper language, and the Other tasks tab), the CSV download and the function
    that renders them all for the controls' values."""

    langs: dict[str, gr.HTML]
    other: gr.HTML
    download: gr.DownloadButton
    render: Callable[[Filters], dict]

    @property
    def outputs(self) -> list:
        return [*self.langs.values(), self.other, self.download]


def _table_tabs(live: Live, controls: Controls, tmp: Path) -> Tables:
    """A tab per language of the paper (its tasks only), then "Other tasks"."""
    board = live.board
    langs = {}
    for lang in [lang for lang in board.langs if board.benchmark.get(lang)]:
        with gr.Tab(LANG_NAMES.get(lang, lang), id=f"tab-{lang}"):
            langs[lang] = gr.HTML(render_html(board, lang), elem_id=f"lb-{lang}")
    with gr.Tab("Other tasks", id="tab-other"):
        other = gr.HTML(other_tasks_html(board, Filters()), elem_id="lb-other-tasks")

    def render(f: Filters) -> dict:
        board = live.board
        frame = export_frame(board)
        keep = {(lang, r.name) for lang in board.langs for r in model_rows(board, lang, f)}
        frame = frame[[(r.lang, r.model) in keep for r in frame.itertuples()]]
        if not f.include_smoke:  # the download holds what the tables show
            frame = frame[~frame.protocol.str.startswith("smoke")]
        path = tmp / "biobench-leaderboard.csv"
        path.write_text(csv_text(frame), encoding="utf-8")  # formula cells neutralised (OWASP)
        return {**{langs[lang]: render_html(board, lang, f) for lang in langs},
                other: other_tasks_html(board, f), controls.download: str(path)}

    return Tables(langs, other, controls.download, render)


def _about_tab(queue: str | None) -> None:
    with gr.Tab("About", id="tab-about"):
        gr.Markdown(about_markdown(task_protocols(), queue=queue_writable(queue)[0]), elem_id="lb-about")


@dataclass
class ProblemsTab:
    table: gr.Dataframe
    tab: gr.Tab
    header: gr.Markdown

    @property
    def outputs(self) -> list:
        return [self.table, self.tab, self.header]

    def now(self, board: Board) -> dict:
        """The problems list, its tab label and the header: files found unusable after start-up (analysis
        files when their figures are drawn, predictions when the significance groups are computed)."""
        return {self.table: problems_frame(board), self.tab: gr.Tab(label=f"Problems ({len(board.problems)})"),
                self.header: header_text(board)}


def _problems_tab(board: Board, header: gr.Markdown) -> ProblemsTab:
    with gr.Tab(f"Problems ({len(board.problems)})", id="tab-problems") as tab:
        table = gr.Dataframe(problems_frame(board), label="Files that could not be used")
    return ProblemsTab(table, tab, header)


def _wire_analysis(app: gr.Blocks, live: Live, analysis_plots: list, problems: ProblemsTab) -> None:
    figures = analysis_figures(live.board)

    @_safe(lambda msg: [gr.update()] * (len(analysis_plots) - 1) + [f"error: {md(msg)}"]
           + [gr.update()] * len(problems.outputs))
    def on_analysis():
        drawn = figures()
        return [*(gr.update(value=fig, visible=True) if fig is not None else gr.update(visible=False)
                  for fig in drawn), missing_analyses_text(drawn), *problems.now(live.board).values()]

    app.load(on_analysis, None, [*analysis_plots, *problems.outputs])


def _wire_tables(app: gr.Blocks, live: Live, controls: Controls, tables: Tables, status: gr.Markdown,
                 poll: gr.Timer, problems: ProblemsTab) -> Callable[[dict], dict]:
    """The controls re-render the tables; while the significance groups are computed, a poll shows their
    progress and, once done, the tables with their top-group marks. Returns the tables' callback."""

    # mypy cannot infer one key type for gradio's HTML and DownloadButton here (the dict is the components' update)
    @_safe(lambda msg: {**{t: f"<p>error: {esc(msg)}</p>" for t in (*tables.langs.values(), tables.other)},  # type: ignore[misc]
                        tables.download: None})
    def refresh(values: dict) -> dict:
        return tables.render(controls.filters(values))

    for control in controls.inputs:
        control.change(refresh, controls.inputs, tables.outputs)

    def on_poll(values: dict) -> dict:
        significance = live.significance
        if significance is None or not significance.finished.is_set():
            return {status: visitor_status(significance)}
        if significance.error is None and not live.status_logged:
            live.status_logged = True
            print(significance.status, flush=True)  # the cache counts: the operator's, not the visitors'
        return {status: visitor_status(significance), **refresh(values), poll: gr.Timer(active=False),
                **problems.now(live.board)}

    poll.tick(on_poll, controls.inputs, [status, *tables.outputs, poll, *problems.outputs])
    app.load(refresh, controls.inputs, tables.outputs)
    return refresh


def _wire_queue_link(tabs: gr.Tabs, queue_tab, tables: Tables, include_smoke: gr.Checkbox) -> None:
    """Selecting a finished request in the Queue opens the table holding its row (ticking Show smoke runs for a
    smoke row) and scrolls to the row, which the script outlines."""
    anchor = gr.Textbox(visible=False, elem_id="lb-jump")

    def on_queue_row(evt: gr.SelectData):
        found = queue_tab.row_of(evt.index[0] if isinstance(evt.index, list | tuple) else evt.index)
        if found is None:
            return gr.update(), gr.update(), ""
        tab = f"tab-{found.lang}" if found.part == "paper" and found.lang in tables.langs else "tab-other"
        return gr.Tabs(selected=tab), gr.update(value=True) if found.smoke else gr.update(), found.anchor

    queue_tab.table.select(on_queue_row, None, [tabs, include_smoke, anchor]).then(None, anchor, None, js=JUMP_JS)


@dataclass
class Page:
    """What the Refresh callback updates, by component."""

    live: Live
    header: gr.Markdown
    banner: gr.Markdown
    status: gr.Markdown
    poll: gr.Timer
    controls: Controls
    tables: Tables
    refresh_tables: Callable[[dict], dict]
    compare: CompareTab
    paper: PaperTab
    problems: ProblemsTab


def _wire_refresh(page: Page, button: gr.Button, note: gr.Markdown, timer: gr.Timer,
                  rebuild: Callable[[], Board]) -> None:
    live, controls, compare_tab = page.live, page.controls, page.compare

    def on_refresh(values: dict) -> dict:
        """Scan the results again; the new board replaces the old one for every view. Filter values the old
        board did not have (a new size, context or recipe) are added checked, so new rows are not hidden by
        filters built before they existed; Compare is offered the new models."""
        started = time.perf_counter()
        before = {attr: set(_choices(live.board, attr)) for attr in ("size", "context", "recipe")}
        live.board = rebuild()
        board = live.board
        picked = {attr: [c for c in _choices(board, attr) if c in (values.get(component) or []) or c not in before[attr]]
                  for attr, component in (("size", controls.sizes), ("context", controls.contexts),
                                          ("recipe", controls.recipes))}
        runs = sum(len(r) for e in board.entries for r in e.runs.values())
        new_langs = [lang for lang in board.langs if board.benchmark.get(lang) and lang not in page.tables.langs]
        text = (f"rescanned in {time.perf_counter() - started:.1f} s at {time.strftime('%H:%M:%S')}: "
                f"{runs} run{'' if runs == 1 else 's'}"
                + (f"; new language(s) {', '.join(new_langs)} appear after a restart" if new_langs else ""))
        verdicts = page.paper.choices()
        lang, a, b = values.get(compare_tab.lang), values.get(compare_tab.a), values.get(compare_tab.b)
        pair = live.compare_choices(lang) if lang else []
        keys = {key for _, key in pair}
        keep = (a in keys and b in keys and not (a.startswith("paper:") and b.startswith("paper:")
                                                 and any(not k.startswith("paper:") for k in keys)))
        a, b = (a, b) if keep else default_pair(board, lang) if lang else (None, None)
        include = bool(values.get(controls.include_smoke)) or smoke_only(board)
        updates = {note: text, page.status: visitor_status(live.significance),
                   page.poll: gr.Timer(active=live.significance is not None),
                   page.banner: gr.update(visible=smoke_only(board)),
                   controls.include_smoke: gr.update(label=smoke_toggle_label(board), value=include),
                   page.paper.model: gr.update(choices=verdicts, visible=bool(verdicts),
                                               value=verdicts[0][1] if verdicts else None),
                   controls.sizes: gr.update(choices=_choices(board, "size"), value=picked["size"]),
                   controls.contexts: gr.update(choices=_choices(board, "context"), value=picked["context"]),
                   controls.recipes: gr.update(choices=_choices(board, "recipe"), value=picked["recipe"]),
                   compare_tab.a: gr.update(choices=pair, value=a), compare_tab.b: gr.update(choices=pair, value=b)}
        updates.update(zip(compare_tab.outputs, compare_tab.show(lang, a, b), strict=True))
        updates.update(page.refresh_tables({**values, controls.sizes: picked["size"], controls.contexts:
                                            picked["context"], controls.recipes: picked["recipe"],
                                            controls.include_smoke: include}))
        updates.update(page.problems.now(board))
        return updates

    outputs = [note, page.status, page.poll, page.banner, *page.tables.outputs, *page.problems.outputs,
               page.paper.model, controls.include_smoke, controls.sizes, controls.contexts, controls.recipes,
               compare_tab.a, compare_tab.b, *compare_tab.outputs]
    inputs = {*controls.inputs, compare_tab.lang, compare_tab.a, compare_tab.b}
    button.click(on_refresh, inputs, outputs)
    timer.tick(on_refresh, inputs, outputs)


def build_app(board: Board, *, queue: str | None = None, rebuild: Callable[[], Board] | None = None,
              refresh_minutes: float = 0, submit_policy: PublicPolicy | None = None) -> gr.Blocks:
    """The app over `board`. With `rebuild` (a function that scans the results again), a Refresh button and,
    with `refresh_minutes`, a timer replace the board by a new one: its scan reuses the scan index and its
    significance groups the per-task cache, so only changed tasks are recomputed. `queue`: where the Submit
    tab writes requests (biobench.service); without one the tab shows the `biobench submit` command.
    Each tab is built (and wired) by its own function; what links them — the tables and their controls, the
    significance status, the Problems tab, the Queue's links and Refresh — by the `_wire_*` functions."""
    tmp = Path(tempfile.mkdtemp(prefix="biobench-leaderboard-"))
    live = Live(board)
    with gr.Blocks(title="biobench leaderboard") as app:
        header = gr.Markdown(header_text(board))
        banner = gr.Markdown(SMOKE_BANNER, visible=smoke_only(board), elem_id="lb-smoke-banner",
                             elem_classes=["lb-banner"])
        include_smoke, refresh_button, refresh_note = _toolbar(board, rebuild is not None)
        status = gr.Markdown(visitor_status(live.significance), elem_id="lb-significance")
        poll = gr.Timer(1.0, active=live.significance is not None)
        controls = _controls(board, include_smoke)
        with gr.Tabs() as tabs:
            tables = _table_tabs(live, controls, tmp)
            _task_tab(live, app)
            _model_tab(live, app)
            compare_tab = _compare_tab(live, app)
            analysis_plots = _plots_tab(live, app)
            paper = build_paper_tab(lambda: live.board)
            queue_tab = build_queue_tab(queue, lambda: live.board)
            build_submit_tab(queue, queue_tab.table, submit_policy)
            _about_tab(queue)
            problems = _problems_tab(board, header)
        refresh_tables = _wire_tables(app, live, controls, tables, status, poll, problems)
        _wire_analysis(app, live, analysis_plots, problems)
        _wire_queue_link(tabs, queue_tab, tables, include_smoke)
        app.load(paper.show, paper.model, [paper.table, paper.note])
        app.load(queue_tab.frame, None, queue_tab.table)
        if rebuild is not None:
            timer = gr.Timer(60 * refresh_minutes if refresh_minutes else 3600, active=bool(refresh_minutes))
            page = Page(live, header, banner, status, poll, controls, tables, refresh_tables, compare_tab, paper,
                        problems)
            assert refresh_button is not None and refresh_note is not None  # _toolbar draws both with a rebuild
            _wire_refresh(page, refresh_button, refresh_note, timer, rebuild)
    app.biobench_board = lambda: live.board  # what the JSON routes read (leaderboard/json_routes.py), refreshes included
    if live.significance is not None:  # a "deferred" board's groups start now that its page can be served
        live.significance.start()
    return app


def problems_frame(board: Board) -> pd.DataFrame:
    """The Problems tab: each file relative to its results folder, never a server path (Board.public_problems)."""
    return pd.DataFrame([{"path": p.path, "reason": p.reason} for p in board.public_problems()],
                        columns=["path", "reason"])


LAUNCH_OPTIONS = {"css": CSS, "show_error": True}
# scroll a table to a row (the Queue tab's link) and outline it for a few seconds; the row may appear only once
# the tables re-render (a smoke row, after the toggle is ticked): looked for every 250 ms for up to 10 s
JUMP_JS = """(id) => { if (!id) return; let tries = 0; const find = () => { const row = document.getElementById(id);
  if (!row) { if (++tries < 40) setTimeout(find, 250); return; }
  row.scrollIntoView({block: "center"}); row.style.outline = "2px solid #f59e0b";
  setTimeout(() => { row.style.outline = ""; }, 4000); }; setTimeout(find, 300); }"""


def launch(board: Board, host: str = "127.0.0.1", port: int | None = None, **app_options) -> None:
    """Serve the app (blocking); `app_options` go to build_app (queue, rebuild, refresh_minutes). Gradio's own
    start-up lines (among them its advice to `set share=True`, which would publish the board through a public
    tunnel) stay quiet: the address is printed here."""
    serve(build_app(board, **app_options), announce=True, server_name=host, server_port=port, quiet=True,
          **LAUNCH_OPTIONS)


def build_space_app(results: str, queue: str | None = None, refresh_minutes: float = 10.0) -> gr.Blocks:
    """The app a Space serves (biobench space init): the results dataset rescanned every `refresh_minutes`,
    significance in the background through the on-disk cache, the Submit tab writing to `queue`."""

    def rebuild() -> Board:
        return build_board([results], significance="background", cache_dir=default_dir())

    # the first board's groups (and its results index's save) wait for the app: build_app starts them
    first = build_board([results], significance="deferred", cache_dir=default_dir())
    return build_app(first, queue=queue, rebuild=rebuild, refresh_minutes=refresh_minutes)
