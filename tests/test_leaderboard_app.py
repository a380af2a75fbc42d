"""The Gradio app builds from handmade results without importing torch; its views and plots render."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
from biobench.leaderboard import plots
from biobench.leaderboard.app import build_app, task_label_frame, task_seed_frame
from biobench.leaderboard.board import build_board

FIXTURES = Path(__file__).parent / "fixtures" / "results"


def test_leaderboard_never_imports_torch():
    code = (
        "import sys, json\n"
        "from biobench.commands import leaderboard as cmd\n"
        "from biobench.leaderboard import app, board, compare, plots, results, tables\n"
        f"b = board.build_board([{str(FIXTURES)!r}], n_boot=50)\n"
        "app.build_app(b)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_app_builds_and_views_render():
    board = build_board([FIXTURES], n_boot=100)
    app = build_app(board)
    assert app.title == "biobench leaderboard"
    seeds = task_seed_frame(board, "fr", "diamed")
    detour = seeds[seeds.model == "tiny-detour"].iloc[0]
    assert (detour.n, detour["top group"]) == (3, "yes")
    assert {"seed 42", "seed 43", "seed 44"} <= set(seeds.columns)
    assert seeds[seeds.model == "all-MiniLM-L6-v2"]["top group"].item() == "no"
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
    build_app(board)
    assert isinstance(task_seed_frame(board, "fr", "diamed"), pd.DataFrame)


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
    from biobench.leaderboard.results import scan_results

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
