"""The Gradio app builds from handmade results without importing torch; its views and plots render."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from biobench.leaderboard import plots
from biobench.leaderboard.app import build_app, task_label_frame, task_seed_frame
from biobench.standings.aggregate import build_board

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"


def test_leaderboard_never_imports_torch():
    code = (
        "import sys, json\n"
        "from biobench.commands import leaderboard as cmd\n"
        "from biobench.standings import aggregate, entry_pairs, folder_pairs, scan\nfrom biobench.leaderboard import app, plots\nfrom biobench.leaderboard.tables import detail, export, html, text\n"
        f"b = aggregate.build_board([{str(FIXTURES)!r}], n_boot=50)\n"
        "app.build_app(b)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'matplotlib'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []  # matplotlib too: figures are drawn on page load


def test_app_builds_and_views_render():
    board = build_board([FIXTURES], n_boot=100)
    app = build_app(board)
    assert app.title == "biobench leaderboard"
    seeds = task_seed_frame(board, "fr", "diamed")
    detour = seeds[seeds.Model == "tiny-detour"].iloc[0]
    assert (detour["n seeds"], detour["Top group"]) == (3, "yes")
    assert {"Seed 42 (%)", "Seed 43 (%)", "Seed 44 (%)", "SD (points)", "95% CI low (%)", "95% CI high (%)",
            "MDD at 80% power (points)", "MDD with many seeds (points)"} <= set(seeds.columns)
    assert not {"sd", "ci_low", "ci_high", "n"} & set(seeds.columns)  # human headers with units
    assert seeds[seeds.Model == "all-MiniLM-L6-v2"]["Top group"].item() == "no"
    labels = task_label_frame(board, "fr", "diamed")
    assert list(labels.label) == ["cardio", "neuro", "onco"] and "tiny-mlm" in labels.columns
    assert task_label_frame(board, "fr", "fracco-30").empty


def test_plots_from_results_and_analysis_files(tmp_path):
    board = build_board([FIXTURES], significance=False)
    fig = plots.task_bars(board, "fr", keys=["local__tiny-detour", "paper:DrBERT"])
    assert len(fig.axes[0].patches) == 2 * len(board.columns("fr"))
    problems = []
    cka = plots.cka_figure(board.analyses["cka"], problems)
    assert [ax.get_title() for ax in cka.axes] == ["CKA divergence per layer", "divergence / seed-noise divergence"]
    needle = plots.needle_figure(board.analyses["needle"], problems)
    assert len(needle.axes[0].lines) == 2 + 1  # two models + the 50% chance line
    assert problems == []
    bad = tmp_path / "cka.json"
    bad.write_text('{"layers": "nope"}')
    junk = tmp_path / "needle_results.json"
    junk.write_text("[1, 2")
    empty = plots.cka_figure([bad], problems)
    plots.needle_figure([junk], problems)
    assert empty.axes[0].texts[0].get_text().startswith("No CKA analysis")
    assert [p.reason.split(":")[0] for p in problems] == ["cka.json has no 'layers' list", "unreadable analysis file"]


def test_app_survives_only_broken_results(tmp_path):
    (tmp_path / "m" / "diamed").mkdir(parents=True)
    (tmp_path / "m" / "diamed" / "seed-42.json").write_text("{not json")
    board = build_board([tmp_path], reference=False)
    assert board.entries == [] and len(board.problems) == 1
    app = build_app(board)
    shown = {(type(c).__name__, getattr(c, "label", None)): getattr(c, "value", None) for c in app.blocks.values()}
    header = next(c.value for c in app.blocks.values() if type(c).__name__ == "Markdown" and c.value)
    assert "0 measured model rows" in header and "**1 problem(s)** while reading results" in header
    # each language tab says it is empty instead of showing a table
    tables = [c.value for c in app.blocks.values() if type(c).__name__ == "HTML"]
    assert tables == ['<div id="lb-table-fr" class="lb-notes">No fr rows match the filters.</div>',
                      '<div id="lb-table-en" class="lb-notes">No en rows match the filters.</div>',
                      '<div id="lb-other" class="lb-notes">No results on tasks outside the paper: the language tabs '
                      'show every task here.</div>']
    assert ("Tab", "Problems (1)") in shown  # the broken file is listed with its reason
    problems = shown[("Dataframe", "Files that could not be used")]
    assert [row[0] for row in problems["data"]] == ["m/diamed/seed-42.json"]  # inside the results folder
    assert problems["data"][0][1].startswith("corrupt result file (not valid JSON")
    assert shown[("Dataframe", "Per-seed scores (macro-F1 %)")]["data"] == []  # no rows
    assert task_seed_frame(board, "fr", "diamed").empty


def test_needle_file_as_written_by_analyze(tmp_path):
    path = tmp_path / "runs" / "m" / "needle_results.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema": "biobench.needle/1", "model": {"id": "x/y", "slug": "x__y"}, "accuracy": 0.6,
                                "by_length": {"512": 0.7, "8192": 0.5}, "by_position": {"start": 0.6, "end": 0.55}}))
    problems = []
    fig = plots.needle_figure([path], problems)
    assert problems == [] and fig.axes[0].get_legend().get_texts()[0].get_text() == "x/y"
    assert list(fig.axes[0].lines[0].get_ydata()) == [70.0, 50.0]


def test_cka_trajectory_figure_from_the_json(tmp_path):
    from biobench.standings.scan import scan_results

    run = tmp_path / "runs" / "detour"
    run.mkdir(parents=True)
    points = [{"checkpoint": c, "tokens": t, "mean_divergence": d, "ci_low": d - 0.01, "ci_high": d + 0.01}
              for c, t, d in (("step-100", 100, 0.1), ("phase1", 200, 0.2), ("final", 220, 0.25))]
    (run / "cka_trajectory.json").write_text(json.dumps({"schema": "biobench.cka-trajectory/1", "run": str(run),
                                                         "points": points}))
    (tmp_path / "cka_trajectory.json").write_text('{"points": 3}')
    scan = scan_results([tmp_path])
    assert len(scan.analyses["cka_trajectory"]) == 2
    problems = []
    fig = plots.cka_trajectory_figure(scan.analyses["cka_trajectory"], problems)
    (line,) = fig.axes[0].lines
    assert list(line.get_xdata()) == [100, 200, 220] and list(line.get_ydata()) == [0.1, 0.2, 0.25]
    assert [p.reason for p in problems] == ["cka_trajectory.json has no 'points' list"]
    assert plots.cka_trajectory_figure([], []).axes[0].texts[0].get_text().startswith("No CKA trajectory")


def test_efficiency_columns_and_model_detail():
    from biobench.leaderboard.tables.costs import efficiency_frame
    from biobench.leaderboard.tables.detail import model_detail

    board = build_board([FIXTURES], significance=False)
    eff = efficiency_frame(board, "fr").set_index("key")
    detour = eff.loc["local__tiny-detour"]
    assert detour["model"] == "tiny-detour" and detour["runs"] == 5 and detour["fine-tune s/run"] == 0.8
    assert detour["tokens/s"] == 15043 and detour["fine-tune device"] == "cpu"  # median over seeds 42, 42, 43, 43, 44
    assert (detour["pretrain tokens"], detour["pretrain device-h"], detour["pretrain hardware"]) == \
        ("2.2M", "1.5 GPU-h", "1 x NVIDIA H100 80GB HBM3")
    assert eff.loc["local__tiny-mlm", "pretrain tokens"] == "2.4M" and eff.loc["local__tiny-mlm", "pretrain device-h"] == ""
    assert "paper:DrBERT" not in eff.index  # reported rows have no timings
    text, seeds = model_detail(board, "fr", "local__tiny-detour")
    assert "| model | `runs/tiny-detour/final` |" in text and "| protocol | fr (epochs 1; hash sha256:222222222222) |" in text
    assert "| pretraining | 2.2M tokens, 1.5 GPU-h on 1 x NVIDIA H100 80GB HBM3 |" in text
    assert list(seeds[seeds.task == "diamed"].seed) == [42, 43, 44, "mean"]
    assert seeds[(seeds.task == "diamed") & (seeds.seed == 43)]["tokens/s"].item() == 15043.0
    text, seeds = model_detail(board, "fr", "paper:DrBERT")
    assert "reported" in text and set(seeds.seed) == {"reported"} and len(seeds) == 8
    assert model_detail(board, "fr", "nope")[0] == "No fr model 'nope'."


def test_bar_legend_outside_and_loss_curves(tmp_path):
    board = build_board([FIXTURES], significance=False)
    fig = plots.task_bars(board, "fr")
    fig.canvas.draw()
    legend, axes = fig.axes[0].get_legend().get_window_extent(), fig.axes[0].get_window_extent()
    assert legend.x0 >= axes.x1  # right of the bars, never over them
    logs = plots.train_logs(board)
    assert [(label, path.name) for label, path in logs] == [("tiny-detour", "train_log.jsonl")]
    bad = tmp_path / "run" / "train_log.jsonl"
    bad.parent.mkdir()
    bad.write_text('{"step": 1, "phase": 1, "tokens": 10, "loss": 3.0}\n{"step": 2}\n')
    problems = []
    fig = plots.loss_figure([*logs, ("x", bad)], problems)
    lines = fig.axes[0].lines
    assert [line.get_label() for line in lines] == ["tiny-detour · phase 1 (CLM)", "tiny-detour · phase 2 (MLM)",
                                                    "x · phase 1 (phase 1)"]
    assert len(lines[0].get_xdata()) == 20 and lines[1].get_linestyle() == "--"
    assert [p.reason for p in problems] == ["line 2: not a train_log record (KeyError); skipped"]
    assert plots.loss_figure([], []).axes[0].texts[0].get_text().startswith("No pretraining log found")


def test_analysis_figures_are_drawn_on_page_load_and_their_problems_listed(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "r")
    (tmp_path / "r" / "cka.json").write_text('{"layers": "nope"}')
    board = build_board([tmp_path / "r"], significance=False)
    app = build_app(board)
    assert not any("cka.json" in p.path for p in board.problems)  # not read at start-up
    on_analysis = next(f.fn for f in app.fns.values() if f.name == "on_analysis")
    loss, cka, needle, trajectory, missing, problems, tab, header = on_analysis()
    assert [ax.get_title() for ax in cka["value"].axes][0] == "CKA divergence per layer"  # the good cka.json
    assert len(needle["value"].axes[0].lines) == 2 + 1 and loss["value"].axes
    assert all(u["visible"] for u in (loss, cka, needle)) and trajectory == {"visible": False, "__type__": "update"}
    assert missing == "No analysis files for: CKA trajectory (divergence from the start model) (cka_trajectory.json " \
        "from `biobench analyze cka-trajectory`)."
    reasons = [r for path, r in problems[["path", "reason"]].itertuples(index=False) if path.endswith("cka.json")]
    assert reasons and reasons[0].startswith("cka.json has no 'layers' list")
    assert tab.label == f"Problems ({len(board.problems)})" and f"**{len(board.problems)} problem(s)**" in header
    assert on_analysis()[0]["value"] is loss["value"]  # drawn once, then served from memory


def test_missing_analyses_are_one_line_not_empty_boxes():
    """A board without analysis files: the four figures are hidden and one line names what would draw them."""
    board = build_board([FIXTURES / "full-fr"], significance=False)
    on_analysis = next(f.fn for f in build_app(board).fns.values() if f.name == "on_analysis")
    *figures, missing, _problems, _tab, _header = on_analysis()
    assert [u["visible"] for u in figures] == [False] * 4
    assert missing.startswith("No analysis files for: Pretraining loss (train_log.jsonl") and missing.count(";") == 3


def test_refresh_fills_compare_in_its_own_response(tmp_path):
    """Refresh sets A and B and, in the same response, the note and table for that pair: the dropdowns answer
    only the visitor's picks (.input), so no pair of change events can leave a note about a stale pair."""
    from biobench.leaderboard.app import compare_note, default_pair

    empty = tmp_path / "results"
    empty.mkdir()
    board = build_board([empty], significance=False)
    rebuilt = build_board([FIXTURES], significance=False)
    app = build_app(board, rebuild=lambda: rebuilt)
    dep = next(d for d in app.fns.values() if d.name == "on_refresh")
    on_refresh = dep.fn
    start_a, start_b = default_pair(board, "fr")  # two reported rows: nothing measured yet
    assert start_a.startswith("paper:") and start_b.startswith("paper:")
    by_elem = {getattr(c, "elem_id", None) or getattr(c, "label", None): c for c in app.blocks.values()}
    # the inputs by component, as gradio passes a set of inputs (their order cannot shift them)
    inputs = set(dep.inputs)
    values = {c: {"Rows": ["measured", "reported"], "Sort by": "Avg", "lb-compare-a": start_a,
                  "lb-compare-b": start_b, "Language": "fr"}.get(c.elem_id or c.label, []) for c in inputs}
    values[by_elem["lb-include-smoke"]] = True
    updates = on_refresh(values)
    by_id = {getattr(c, "elem_id", None): v for c, v in updates.items()}
    a, b = default_pair(rebuilt, "fr")
    assert not a.startswith("paper:") and by_id["lb-compare-a"]["value"] == a and by_id["lb-compare-b"]["value"] == b
    table = by_id["lb-compare-table"].data  # a pandas Styler over the rows
    assert len(table) > 0 and {"A (%)", "B (%)"} <= set(table.columns)  # two measured models share tasks
    assert by_id["lb-compare-note"] == compare_note(rebuilt, "fr", a, b, len(table))
    triggers = {(app.blocks[t[0]].elem_id, t[1]) for d in app.fns.values() if d.name == "on_compare" for t in d.targets}
    assert triggers == {("lb-compare-a", "input"), ("lb-compare-b", "input"), ("lb-compare-allow", "input")}  # the visitor's picks only


def test_compare_lists_different_protocol_settings_and_tests_only_when_asked(tmp_path):
    """Two models trained with different settings (epochs 2 / lr 5e-5 vs epochs 3 / lr 1e-3): the Compare tab's
    default pair is two models that share their protocol; a pair that does not gets the settings listed and no
    p-value unless the visitor ticks "Test across different protocols"."""
    from biobench.leaderboard.app import default_pair
    from biobench.store import Result, result_path, run_key, write_result

    def write(slug, seed, score, epochs, lr):
        write_result(result_path(tmp_path, slug, "diamed", seed), Result(
            model={"id": slug, "slug": slug, "name": slug}, task={"id": "diamed", "lang": "fr", "kind": "classification"},
            seed=seed, protocol={"hash": f"h{epochs}", "epochs": epochs, "lr": lr},
            key=run_key("r", "d", f"h{epochs}", seed), metrics={"test": {"macro_f1": score}}),
            [{"id": i, "gold": "ab"[i % 2], "pred": "ab"[(i * seed) % 2]} for i in range(8)])

    for seed in (1, 2, 3):
        write("a-model", seed, 0.5 + seed / 100, 2, 5e-5)
        write("b-model", seed, 0.6 + seed / 100, 3, 1e-3)
        write("c-model", seed, 0.55 + seed / 100, 2, 5e-5)
    board = build_board([tmp_path], reference=False, significance=False)
    assert set(default_pair(board, "fr")) == {"a-model", "c-model"}  # the pair sharing a protocol
    app = build_app(board)
    dep = next(d for d in app.fns.values() if d.name == "on_compare")
    by_id = {c.elem_id: c for c in dep.inputs}
    values = {by_id["lb-compare-a"]: "a-model", by_id["lb-compare-b"]: "b-model", by_id["lb-compare-allow"]: False}
    values[next(c for c in dep.inputs if c.elem_id not in by_id or c.label == "Language")] = "fr"
    note, table, _ = dep.fn(values)
    assert "A and B were run with different settings" in note and "epochs 2 vs 3" in note
    assert "lr 5e-05 vs 0.001" in note and 'tick "Test across different protocols" to test anyway' in note
    assert "--allow" not in note and note.count("no significance test") == 1  # said once, no CLI flag (issue 52.4)
    assert table.data["p"].isna().all()
    values[by_id["lb-compare-allow"]] = True
    note, table, _ = dep.fn(values)
    assert "the tests were run anyway, as asked" in note and table.data["p"].notna().all()


def test_the_rank_legend_is_where_a_rank_column_is(monkeypatch):
    """The paper's table has a Rank column and says once what it means; Other tasks has none (no average to rank
    on), so its legend says only that a cell's hover holds its task's rank interval."""
    from biobench.leaderboard.tables.filters import Filters
    from biobench.leaderboard.tables.html import render_html

    board = build_board([FIXTURES], n_boot=100)
    assert ("fr", "diamed") in board.ranks
    paper = render_html(board, "fr")
    assert paper.count("Rank: the 95% interval") == 1 and 'class="rank"' in paper
    monkeypatch.setitem(board.extra, "fr", ["diamed"])  # a ranked task shown in Other tasks
    other = render_html(board, "fr", Filters(), part="other")
    assert "Rank:" not in other and 'class="rank"' not in other
    assert "Hover a cell for its task's 95% rank interval" in other and "95% rank interval 1" in other


def test_the_contamination_filter_is_a_control_of_every_table(tmp_path):
    """'Hide contaminated cells' is one of the filters every table refreshes on, and ticking it is what
    Filters.hide_contaminated means (tests/leaderboard/test_json_routes.py checks what that hides)."""
    from biobench.leaderboard.app import Controls

    app = build_app(build_board([FIXTURES], significance=False))
    by_elem = {getattr(c, "elem_id", None): c for c in app.blocks.values()}
    box = by_elem["lb-hide-contaminated"]
    refresh = next(d for d in app.fns.values() if d.name == "refresh")
    assert box in set(refresh.inputs) and box.value is False
    controls = Controls(*[object() for _ in range(9)])
    values = {controls.sources: ["measured"], controls.hide_contaminated: True}
    assert controls.filters(values).hide_contaminated is True
    assert controls.filters({**values, controls.hide_contaminated: False}).hide_contaminated is False


def test_a_smoke_run_of_a_pretrained_model_reads_right_in_the_task_and_plots_tabs(tmp_path):
    """Issue 62 item 3, on the README's path (a `biobench pretrain` checkpoint evaluated with overrides, one seed):
    the Task tab said "SD (points) 0.00" where the CLI and JSON say "–", its bar chart's legend named every model
    of the language (11 of 16 without a bar), the Plots tab labelled the pretraining curve with the fine-tuning
    smoke tag and showed "fine-tune h total 0.00"."""
    import dataclasses

    from biobench.leaderboard.tables.costs import efficiency_frame
    from biobench.leaderboard.tables.frames import display
    from biobench.store import read_result, result_path, run_key, write_result
    from biobench.store.result_files import read_predictions

    source = FIXTURES / "local__tiny-detour" / "diamed" / "seed-42.json"
    record = read_result(source, check_key=False)  # the fixture's key is its old, short one
    smoke = dataclasses.replace(record, protocol={**record.protocol, "hash": "sha256:" + "c" * 64},
                                key=run_key("sha256:" + "0" * 64, "d", "sha256:" + "c" * 64, 42),
                                details={**record.details, "overrides": {"epochs": {"run": 3, "protocol": 15}}})
    write_result(result_path(tmp_path, "local__tiny-detour", "diamed", 42, "c" * 12), smoke, read_predictions(source))
    shutil.copytree(FIXTURES / "runs", tmp_path / "runs")  # the checkpoint's run folder and its train_log.jsonl
    board = build_board([tmp_path], reference=False, significance=False)
    (entry,) = board.entries
    assert entry.smoke and "⚑" in entry.name

    seeds = task_seed_frame(board, "fr", "diamed")
    assert seeds["n seeds"].tolist() == [1] and seeds["SD (points)"].isna().all()
    shown = display(seeds, {"SD (points)": "points", "n seeds": "count"}, default="score").to_html()
    assert ">–<" in shown and ">0.00<" not in shown

    assert [label for label, _ in plots.train_logs(board)] == ["tiny-detour"]  # the model, not its smoke run

    efficiency = efficiency_frame(board, "fr")
    hours = efficiency["fine-tune h total"].item()
    assert 0 < hours < 0.01  # a CPU smoke run: seconds
    assert display(efficiency[["fine-tune h total"]], {"fine-tune h total": "hours"}).to_html().count(">0.00<") == 0

    full = build_board([FIXTURES], significance=False)
    fig = plots.task_bars(full, "fr", tasks=["quaero-emea"])  # a task 11 of the 13 French rows have
    labels = fig.axes[0].get_legend_handles_labels()[1]
    with_cell = [e for e in full.lang_entries("fr") if "quaero-emea" in e.cells]
    assert len(labels) == len(with_cell) < len(full.lang_entries("fr"))  # a legend entry per bar, no more
