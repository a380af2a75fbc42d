"""Reproduction verdicts: synthetic results placed inside and outside the interval around the paper's reported
values, per task and for the average, through the library and `biobench compare MODEL --paper`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from biobench.cli import main
from biobench.standings import scan as R
from biobench.standings.aggregate import build_board
from biobench.standings.reproduction import DIFFERS, NO_DATA, REPRODUCED, model_verdicts, reproduction
from biobench.stats import seed_summary

FIXTURE = next((Path(__file__).parents[1] / "fixtures" / "results" / "full-fr").glob("*/seed-*.json"))
REPORTED = {r.model: r for r in R.load_reference() if r.lang == "fr"}["ModernCamemBERT"]


def write_model(root: Path, scores: dict[str, list[float]], slug: str = "mcb", hub_id: str = "almanach/moderncamembert-base"):
    """Result files of a model whose hub id is the paper's ModernCamemBERT; scores in percent per seed."""
    template = json.loads(FIXTURE.read_text())
    for task, values in scores.items():
        for seed, value in enumerate(values, start=42):
            data = json.loads(json.dumps(template))
            data["model"].update(slug=slug, id=hub_id, alias=None)
            data["task"]["id"] = task
            data["seed"], data["key"] = seed, {"seed": seed}
            data["metrics"]["test"].update(macro_f1=value / 100, micro_f1=value / 100)
            folder = root / slug / task
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"seed-{seed}.json").write_text(json.dumps(data))


def around(value: float, shift: float) -> list[float]:
    """Three seeds whose mean is value + shift, spread ±0.3 (t-interval half-width about 0.75)."""
    return [value + shift - 0.3, value + shift, value + shift + 0.3]


def test_verdicts_inside_and_outside_the_interval(tmp_path):
    tasks = list(REPORTED.scores)
    scores = {t: around(REPORTED.scores[t], 0.2) for t in tasks}  # reported inside the CI
    scores[tasks[1]] = around(REPORTED.scores[tasks[1]], 3.0)  # 3 points above: outside
    scores[tasks[2]] = around(REPORTED.scores[tasks[2]], -3.0)
    write_model(tmp_path, scores)
    board = build_board([tmp_path], reference=True, significance=False)
    rows = {v.task: v for v in model_verdicts(board, "mcb")["fr"]}
    assert [rows[t].verdict for t in tasks] == [REPRODUCED, DIFFERS, DIFFERS] + [REPRODUCED] * (len(tasks) - 3)
    s = seed_summary(around(REPORTED.scores[tasks[1]], 3.0), bounds=(0, 100))
    assert rows[tasks[1]].difference == pytest.approx(3.0) and rows[tasks[1]].low == pytest.approx(s.ci_low)
    assert rows[tasks[1]].tolerance == "95% CI (3 seeds)" and rows[tasks[0]].reported == REPORTED.scores[tasks[0]]
    avg = rows["average"]
    assert avg.reported == REPORTED.paper_avg
    assert avg.measured == pytest.approx(sum(sum(v) / 3 for v in scores.values()) / len(tasks))
    half = 1.96 * math.sqrt(sum(seed_summary(v).std ** 2 / 3 for v in scores.values())) / len(tasks)
    assert avg.high - avg.low == pytest.approx(2 * half)
    assert avg.verdict == (REPRODUCED if abs(avg.measured - avg.reported) <= half else DIFFERS)


def test_missing_tasks_are_no_data_and_so_is_the_average(tmp_path):
    tasks = list(REPORTED.scores)
    write_model(tmp_path, {tasks[0]: around(REPORTED.scores[tasks[0]], 0.0)})
    board = build_board([tmp_path], reference=True, significance=False)
    rows = {v.task: v for v in model_verdicts(board, "mcb")["fr"]}
    assert rows[tasks[0]].verdict == REPRODUCED
    assert {rows[t].verdict for t in tasks[1:]} == {NO_DATA} and rows[tasks[1]].measured is None
    assert rows["average"].verdict == NO_DATA and rows["average"].tolerance == f"1/{len(tasks)} tasks measured"


def test_one_seed_uses_the_mdd_floor(tmp_path):
    tasks = list(REPORTED.scores)
    write_model(tmp_path, {t: [REPORTED.scores[t] + (1.0 if i % 2 else 4.0)] for i, t in enumerate(tasks)})
    board = build_board([tmp_path], reference=True, significance=False)
    entry = next(e for e in board.entries if e.key == "mcb")
    rows = {v.task: v for v in reproduction(board, entry, floor_of=lambda task: 2.0)}
    assert rows[tasks[0]].verdict == DIFFERS and rows[tasks[1]].verdict == REPRODUCED  # 4 > 2, 1 <= 2
    assert rows[tasks[1]].tolerance == "MDD floor ±2.00 (1 seed)" and rows[tasks[1]].low == pytest.approx(
        REPORTED.scores[tasks[1]] + 1.0 - 2.0)
    assert rows["average"].high - rows["average"].low == pytest.approx(2 * math.sqrt(len(tasks) * 4) / len(tasks))
    no_predictions = {v.task: v for v in reproduction(board, entry)}  # no floor: cannot judge one seed
    assert no_predictions[tasks[0]].verdict == NO_DATA and no_predictions["average"].verdict == NO_DATA


def test_a_model_the_paper_does_not_report_has_no_reference(tmp_path):
    tasks = list(REPORTED.scores)
    write_model(tmp_path, {t: around(50.0, 0) for t in tasks}, slug="mine", hub_id="me/mine")
    board = build_board([tmp_path], reference=True, significance=False)
    rows = model_verdicts(board, "mine")["fr"]
    assert {v.verdict for v in rows} == {NO_DATA} and all(v.reported is None for v in rows)


def test_compare_paper_cli(tmp_path, capsys):
    tasks = list(REPORTED.scores)
    write_model(tmp_path, {t: around(REPORTED.scores[t], 0.1 if t != tasks[0] else 5.0) for t in tasks})
    assert main(["compare", "mcb", "--paper", "--results", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {r["task"]: r for r in report["languages"]["fr"]}
    assert rows[tasks[0]]["verdict"] == DIFFERS and rows[tasks[0]]["difference"] == pytest.approx(5.0)
    assert rows[tasks[1]]["verdict"] == REPRODUCED and rows[tasks[1]]["reported"] == REPORTED.scores[tasks[1]]
    assert main(["compare", "mcb", "--paper", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "mcb vs the paper (fr" in out and "differs" in out and "reproduced" in out
    assert main(["compare", "mcb", "other", "--paper", "--results", str(tmp_path)]) == 2
    assert "drop B" in capsys.readouterr().err
    assert main(["compare", "mcb", "--results", str(tmp_path)]) == 2


def test_compare_paper_prints_measured_rows_only_with_bounds_clipped_to_the_score_range(tmp_path, capsys,
                                                                                          monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    tasks = list(REPORTED.scores)
    write_model(tmp_path, {tasks[0]: [0.5, 6.0, 1.0], tasks[1]: around(REPORTED.scores[tasks[1]], 0.1)})
    assert main(["compare", "mcb", "--paper", "--results", str(tmp_path), "--json"]) == 0
    rows = {r["task"]: r for r in json.loads(capsys.readouterr().out)["languages"]["fr"]}
    assert rows[tasks[0]]["low"] == 0.0 and rows[tasks[0]]["clipped"] is True  # the t-interval reaches below 0
    assert rows[tasks[1]]["clipped"] is False and rows[tasks[1]]["low"] > 0
    assert main(["compare", "mcb", "--paper", "--results", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    body = [line for line in out.splitlines() if line.startswith("│")]
    assert [line.split("│")[1].strip() for line in body] == [tasks[0], tasks[1]]  # no "no data" rows
    assert "[0.00, " in body[0] and "]*" in body[0] and "-" not in body[0].split("[")[1].split(",")[0]
    assert all(line.rstrip().endswith("│") and ("differs" in line or "reproduced" in line) for line in body)
    assert "no data" not in out
    assert f"fr: {len(tasks) - 2} of the paper's tasks not measured ({', '.join(tasks[2:])})" in err
    assert "*: the interval reached past the score's range and is clipped to [0, 100]" in err


def test_piped_tables_are_not_cut_at_80_columns(monkeypatch, capsys):
    from biobench.runtime.console import console
    from rich.table import Table

    monkeypatch.delenv("COLUMNS", raising=False)
    table = Table()
    for i in range(8):
        table.add_column(f"column {i}")
    table.add_row(*[f"[{-i:+.2f}, {i:+.2f}] value" for i in range(8)])
    console().print(table)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and len(lines[3]) > 150  # one line per row however wide, never wrapped


def test_the_papers_own_model_matches_its_clm_detour_row(tmp_path):
    """A model whose hub id is an alias's (ModernCamemBERT-bio) matches the paper's row named after that id."""
    write_model(tmp_path, {"fracco-30": [50.0, 51.0, 52.0]}, slug="bio", hub_id="almanach/ModernCamemBERT-bio-base")
    board = build_board([tmp_path], reference=True, significance=False)
    row = next(v for v in model_verdicts(board, "bio")["fr"] if v.task == "fracco-30")
    ours = {r.model: r for r in R.load_reference() if r.lang == "fr"}["CLM detour (Base, 10B) = ModernCamemBERT-bio-base"]
    assert row.reported == ours.scores["fracco-30"]
