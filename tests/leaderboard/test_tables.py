"""Leaderboard aggregation on the handmade result files: means, CIs, partial averages, significance
groups, tolerant scanning of corrupt files."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from biobench.leaderboard.tables.filters import Filters, select
from biobench.leaderboard.tables.frames import language_frame
from biobench.leaderboard.tables.html import render_html
from biobench.leaderboard.tables.text import render_text
from biobench.standings import scan as R
from biobench.standings.aggregate import build_board, lineage_text, size_bucket
from biobench.standings.entry_pairs import compare
from scipy import stats as sps

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"


@pytest.fixture(scope="module")
def board():
    return build_board([FIXTURES], n_boot=300)


def _scores(slug, task):
    return [json.loads(p.read_text())["metrics"]["test"]["macro_f1"] for p in sorted((FIXTURES / slug / task).glob("seed-*.json"))]


def test_cell_is_mean_over_seeds_with_t_interval(board):
    cell = board.entry("local__tiny-detour", "fr").cells["diamed"]
    values = 100 * np.array(_scores("local__tiny-detour", "diamed"))
    low, high = sps.t.interval(0.95, df=2, loc=values.mean(), scale=sps.sem(values))
    assert sorted(cell.seeds) == [42, 43, 44]
    assert cell.mean == pytest.approx(values.mean())
    assert (cell.summary.ci_low, cell.summary.ci_high) == pytest.approx((low, min(high, 100.0)))  # clipped to F1 range
    assert set(cell.per_label) == {"cardio", "neuro", "onco"}


def test_complete_average_and_round_numbers(board):
    e = board.entry("full-fr", "fr")
    avg = e.average(board.benchmark["fr"])
    # task i: seeds 0.50 + 0.02 i and 0.52 + 0.02 i -> mean 51 + 2 i, average over i = 0..7 -> 58.0
    assert (avg.k, avg.n, avg.partial) == (8, 8, False)
    assert avg.value == pytest.approx(58.0)
    assert e.cells["distemist"].mean == pytest.approx(57.0)
    assert (e.size, e.context, e.recipe) == ("base", 8192, "baseline")


def test_partial_average_is_marked_everywhere(board):
    e = board.entry("local__tiny-detour", "fr")
    avg = e.average(board.benchmark["fr"])
    assert (avg.k, avg.n, avg.partial) == (2, 8, True)
    assert avg.value == pytest.approx((e.cells["diamed"].mean + e.cells["quaero-emea"].mean) / 2)
    assert "fracco-30" in avg.missing
    frame = language_frame(board, "fr")
    row = frame[frame.model == "tiny-detour"].iloc[0]
    assert row.partial and row.avg_tasks == "2/8"
    html = render_html(board, "fr")
    assert f"{avg.value:.1f}<sup" in html and "tiny-detour: average over 2/8 tasks" in html
    text = render_text(board, ["fr"])
    assert f"{avg.value:.1f}*" in text and "tiny-detour: partial average over 2/8 tasks" in text


def test_best_bold_second_underlined_on_complete_averages(board):
    html = render_html(board, "fr", Filters(sources=["reported"]))
    assert "<b>64.2</b>" in html and "<u>63.0</u>" in html  # Avg column of Table 1
    assert "<b>80.7</b>" in html and "<u>79.4</u>" in html  # fracco-30
    # partial averages are never ranked: tiny-detour's 89.0 is not bold although it is the largest number
    full = render_html(board, "fr")
    avg = board.entry("local__tiny-detour", "fr").average(board.benchmark["fr"]).value
    assert f"<b>{avg:.1f}</b>" not in full


def test_lineage_size_and_seed_ranges(board):
    e = board.entry("local__tiny-detour", "fr")
    assert e.recipe == "detour" and e.size == "tiny"  # 4.2M parameters
    assert e.lineage == "detour · from preset:tiny · CLM 2M + MLM 200k tokens · frozen 0-1 (clm)"
    assert lineage_text(None) == "" and lineage_text({"recipe": "mlm"}) == "mlm"
    assert [size_bucket(p) for p in (None, 240_000, 22_700_000, 149_000_000, 395_000_000)] == [
        "?", "tiny", "small", "base", "large"]
    frame = language_frame(board, "fr")
    assert frame[frame.model == "tiny-detour"].n_seeds.item() == "2-3"


def test_significance_groups_from_predictions(board):
    g = board.groups[("fr", "diamed")]
    assert g.best == "local__tiny-detour"
    assert g.top == frozenset({"local__tiny-detour", "local__tiny-mlm"})  # 90.6 vs 87.4 on 60 examples: a tie
    assert g.vs_best["minilm"].p_value < 0.05
    assert "broken" not in g.vs_best  # its predictions file is corrupt
    assert board.groups[("fr", "quaero-emea")].top == frozenset({"local__tiny-detour"})
    html = render_html(board, "fr")
    assert 'class="top"' in html and "Shaded: top significance group" in html


def test_corrupt_files_become_problems(board):
    reasons = {Path(p.path).name: p.reason for p in board.problems}
    # the reasons of the results store's one reader (biobench.store.read_result), without the path
    assert reasons["seed-42.json"].startswith("corrupt result file (not valid JSON: Expecting ',' delimiter")
    assert reasons["seed-43.json"] == "result file lacks field(s) metrics (schema biobench.result/1)"
    assert reasons["seed-44.json"] == "test macro_f1 81.0 is not a fraction in [0, 1]"
    assert reasons["seed-45.predictions.jsonl"].startswith("unreadable predictions: line 2")
    assert len(board.problems) == 4
    # the valid seed of the same model still counts
    assert board.entry("broken", "fr").cells["diamed"].seeds == {45: 30.0}


def test_scan_tolerates_missing_folder_partial_write_and_duplicates(tmp_path):
    shutil.copytree(FIXTURES / "full-fr", tmp_path / "a" / "full-fr")
    shutil.copytree(FIXTURES / "full-fr", tmp_path / "b" / "full-fr")
    (tmp_path / "a" / "full-fr" / "diamed" / "seed-44.json").write_text("")  # crash mid-write
    scan = R.scan_results([tmp_path / "a", tmp_path / "b", tmp_path / "absent"])
    reasons = [p.reason for p in scan.problems]
    assert len(scan.runs) == 16
    assert sum(r.startswith("duplicate of") for r in reasons) == 16
    assert "results folder does not exist" in reasons
    assert any(p.path.endswith("seed-44.json") and "not valid JSON" in p.reason for p in scan.problems)


def test_filters_and_sorting(board):
    measured = select(board, "fr", Filters(sources=["measured"]))
    assert {e.source for e in measured} == {"measured"}
    assert measured[0].name == "full-fr"  # complete averages before partial ones
    by_task = select(board, "fr", Filters(sources=["measured"], sort_by="diamed"))
    assert by_task[0].name == "tiny-detour"
    assert [e.name for e in select(board, "fr", Filters(recipes=["mlm"], sources=["measured"]))] == ["tiny-mlm"]
    assert {e.size for e in select(board, "fr", Filters(sizes=["large"]))} == {"large"}
    assert not select(board, "fr", Filters(sources=[]))
    assert 'id="lb-table-fr"' in render_html(board, "fr", Filters(sources=[]))


def test_compare_view_methods(board):
    boot = compare(board, "fr", "local__tiny-detour", "minilm", n_boot=200)
    assert list(boot.task) == ["diamed", "quaero-emea"]
    assert boot.method.str.startswith("paired bootstrap").all()
    assert (boot.ci_low > 0).all() and (boot.p_value < 0.05).all()
    welch = compare(board, "fr", "local__tiny-detour", "full-fr")
    assert welch.method.eq("Welch t over seeds").all()
    ref = compare(board, "fr", "paper:DrBERT", "local__tiny-detour")
    assert ref.method.eq("reported means only").all() and ref.p_value.isna().all()
    assert ref.set_index("task").loc["diamed", "diff"] == pytest.approx(57.0 - board.entry("local__tiny-detour", "fr").cells["diamed"].mean)
    assert compare(board, "fr", "nope", "minilm").empty


def test_no_reference_hides_paper_rows():
    board = build_board([FIXTURES], reference=False, significance=False)
    assert {e.source for e in board.entries} == {"measured"}
    assert board.benchmark["fr"][0] == "fracco-30"  # the benchmark's tasks still come from the paper


def test_compare_tab_task_average_and_task_view_mdd(board):
    from biobench.leaderboard.app import task_seed_frame
    from biobench.standings.entry_pairs import average_markdown, compare_average, task_mdd

    per_task = compare(board, "fr", "local__tiny-detour", "minilm", n_boot=200).set_index("task")
    avg = compare_average(board, "fr", "local__tiny-detour", "minilm", n_boot=300)
    assert avg["tasks"] == ["diamed", "quaero-emea"]
    assert avg["diff"] == pytest.approx(per_task["diff"].mean())  # the average of the per-task differences
    assert avg["ci_low"] > 0 and avg["p_value"] < 0.05
    assert "Task average** over 2 task(s)" in average_markdown(avg)
    assert compare_average(board, "fr", "local__tiny-detour", "full-fr") is None  # no predictions on one side
    mdd = task_mdd(board, "fr", "diamed", n_boot=300)
    m = mdd["local__tiny-detour"]
    assert m.n_seeds == 3 and m.mdd > m.mdd_many_seeds > 0
    frame = task_seed_frame(board, "fr", "diamed").set_index("Model")
    assert frame.loc["tiny-detour", "MDD at 80% power (points)"] == pytest.approx(100 * m.mdd, abs=0.5)


def test_board_does_not_import_compare():
    import subprocess
    import sys

    code = ("import sys, biobench.standings.aggregate; "
            "assert 'biobench.standings.entry_pairs' not in sys.modules and 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_board_metric_is_the_headline_macro_f1_over_the_recorded_inventory(tmp_path):
    """A multilabel label in the task's inventory but absent from gold and predictions counts 0, as in the
    result's own macro-F1 (biobench.metrics.score)."""
    from biobench.metrics import score
    from biobench.stats import prediction_macro_f1

    gold, pred = [["x"], ["x", "y"], []], [["x"], ["y"], ["y"]]
    inventory = ("x", "y", "never")
    assert prediction_macro_f1(gold, pred, kind="multilabel", labels=inventory)(gold, pred) == pytest.approx(score("multilabel", gold, pred, inventory)["macro_f1"])


def test_scan_reads_every_seed_file_the_writer_writes(tmp_path):
    """The leaderboard finds results by the store's own seed-file pattern (negative seeds included)."""
    from biobench.store import Result, result_path, run_key, write_result

    for seed in (-1, 7):
        write_result(result_path(tmp_path, "m", "diamed", seed), Result(
            model={"id": "m", "slug": "m"}, task={"id": "diamed", "lang": "fr", "kind": "classification"},
            seed=seed, protocol={"hash": "p"}, key=run_key("r", "d", "p", seed), metrics={"test": {"macro_f1": 0.5}}),
            [{"id": 1, "gold": "a", "pred": "a"}])
    scan = R.scan_results([tmp_path])
    assert sorted(r.seed for r in scan.runs) == [-1, 7] and scan.problems == []


def test_scan_walks_once_in_rglob_order_and_keeps_the_stamps(tmp_path):
    """The one directory walk lists files in the order sorted(Path.rglob) gives ('m/…' before 'm-1/…', unlike
    string order), and its (size, mtime) stamps are what the significance cache keys on."""
    for folder in ("m", "m-1", "m.b", "m/sub"):
        (tmp_path / folder / "t").mkdir(parents=True)
        (tmp_path / folder / "t" / "seed-1.json").write_text("{}")
        (tmp_path / folder / "t" / "seed-1.predictions.jsonl").write_text("x\n")
    (tmp_path / "m" / "train_log.jsonl").write_text("")
    listing = R.Listing(tmp_path)
    expected = sorted(p for p in tmp_path.rglob("*") if p.suffix == ".json" or p.name == "train_log.jsonl")
    assert [Path(p) for p in listing.wanted()] == expected
    assert [p.relative_to(tmp_path).as_posix() for p in expected][:3] == ["m/sub/t/seed-1.json", "m/t/seed-1.json", "m/train_log.jsonl"]
    pred = tmp_path / "m" / "t" / "seed-1.predictions.jsonl"
    st = pred.stat()
    assert listing.has(pred) and not listing.has(tmp_path / "m" / "t" / "seed-2.predictions.jsonl")
    assert listing.stamp(pred) == (st.st_size, st.st_mtime_ns) == (2, st.st_mtime_ns)


def test_the_board_is_built_with_the_collector_paused_and_restored(monkeypatch):
    import gc

    from biobench.standings import aggregate as B

    seen = []
    real = B.R.scan_results
    monkeypatch.setattr(B.R, "scan_results", lambda *a, **k: seen.append(gc.isenabled()) or real(*a, **k))
    assert gc.isenabled()
    B.build_board([], significance=False)
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        B.build_board([], significance=False)
        assert seen == [False, False] and not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_a_board_measured_on_one_task_shows_that_column_first(tmp_path):
    """Issue 62 item 3: the README's quick check measures one French task (quaero-emea, the paper's 7th column);
    at 900 px its only measured column was off-screen behind the reported ones. The tasks a measured model has
    a score on come first; the others keep the paper's order, and a board measured everywhere keeps it all."""
    import re

    from biobench.store import Result, result_path, run_key, write_result

    write_result(result_path(tmp_path, "quick--1", "quaero-emea", 42), Result(
        model={"id": "quick--1", "slug": "quick--1", "name": "quick"},
        task={"id": "quaero-emea", "lang": "fr", "kind": "ner"}, seed=42, protocol={"hash": "p"},
        key=run_key("r", "d", "p", 42), metrics={"test": {"macro_f1": 0.5}}), [{"id": 1, "gold": [], "pred": []}])
    board = build_board([tmp_path], reference=True, significance=False)
    paper = board.benchmark["fr"]
    assert paper.index("quaero-emea") > 0
    headers = re.findall(r'<th class="task"><abbr title="([\w-]+):', render_html(board, "fr"))
    assert headers == ["quaero-emea", *(t for t in paper if t != "quaero-emea")]
    full = build_board([FIXTURES], significance=False)  # measured on every French task: the paper's order
    assert re.findall(r'<th class="task"><abbr title="([\w-]+):', render_html(full, "fr")) == full.benchmark["fr"]
