"""`biobench leaderboard --export`: file format, and the reference rows reproduce the paper's Avg column."""

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
from biobench import cli

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"
FR8 = ["fracco-30", "fracco-100", "cantemist", "distemist", "meddialog-fr", "diamed", "quaero-emea", "quaero-medline"]
EN11 = ["chemprot", "phenotyping", "cos", "social-history", "deid", "anatem", "bc5cdr", "jnlpba", "ncbi-disease", "gad", "hoc"]


@pytest.fixture(scope="module")
def reference_export(tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "t.csv"
    assert cli.main(["leaderboard", "--export", str(path)]) == 0
    return pd.read_csv(path)


def test_export_columns_and_rows(reference_export):
    df = reference_export
    assert list(df.columns) == ["lang", "model", *FR8, *EN11, "avg", "n_seeds", "source", "protocol", "avg_partial",
                                "avg_tasks", "paper_avg", "avg_rank", *(f"{t}_rank" for t in FR8 + EN11)]
    assert len(df) == 17 and set(df.source) == {"reported"}
    assert (df[df.lang == "fr"].n_seeds == 9).all() and (df[df.lang == "en"].n_seeds == 5).all()
    assert df[df.lang == "fr"][EN11].isna().all().all()


def test_reference_rows_reproduce_the_paper_avg(reference_export):
    df = reference_export.set_index(["lang", "model"])
    assert df.loc[("fr", "CLM detour (Base, 10B) = ModernCamemBERT-bio-base"), "avg"].round(1) == 61.6
    assert df.loc[("fr", "MLM baseline (Base, 10B)"), "avg"].round(1) == 58.9
    assert df.loc[("en", "CLM detour (Large, 50B) = ModernBERT-bio-large"), "avg"].round(1) == 78.7
    # every row: per-task rounding moves the mean by <= 0.05 and the paper's Avg is itself rounded (<= 0.05)
    assert ((df.avg - df.paper_avg).abs() <= 0.1 + 1e-9).all()
    # and rounds to it, except one row where the paper averaged unrounded scores: 77.245 -> 77.2, paper 77.3
    mismatched = df[df.avg.round(1) != df.paper_avg].index.tolist()
    assert mismatched == [("en", "MLM baseline (Base, 10B)")]
    assert df.loc[mismatched[0], "avg"] == pytest.approx(849.7 / 11, abs=1e-4)


def test_export_with_measured_rows_csv_and_json(tmp_path, capsys):
    csv_path, json_path = tmp_path / "t.csv", tmp_path / "t.json"
    assert cli.main(["leaderboard", "--results", str(FIXTURES), "--export", str(csv_path)]) == 0
    out = capsys.readouterr().out
    assert "warning: " in out and "seed-44.json: test macro_f1 81.0 is not a fraction" in out
    rows = {(r["lang"], r["model"]): r for r in csv.DictReader(csv_path.open())}
    full = rows[("fr", "full-fr")]
    assert (full["avg"], full["n_seeds"], full["source"], full["avg_tasks"], full["avg_partial"]) == ("58.0", "2", "measured", "8/8", "")
    tiny = rows[("fr", "tiny-detour")]
    assert tiny["avg"] == "" and tiny["avg_tasks"] == "2/8" and float(tiny["avg_partial"]) > 80  # never a silent avg
    assert rows[("en", "en-model")]["chemprot"] == "89.0"
    assert cli.main(["leaderboard", "--results", str(FIXTURES), "--no-reference", "--export", str(json_path)]) == 0
    records = json.loads(json_path.read_text())
    assert {r["source"] for r in records} == {"measured"}
    assert {(r["lang"], r["model"]) for r in records} == {k for k, v in rows.items() if v["source"] == "measured"}


def test_export_rejects_unknown_suffix(tmp_path, capsys):
    assert cli.main(["leaderboard", "--export", str(tmp_path / "t.xlsx")]) == 2
    assert "use a .csv or .json file name" in capsys.readouterr().err


def test_print_table(capsys):
    assert cli.main(["leaderboard", "--print", "--results", str(FIXTURES)]) == 0
    out = capsys.readouterr().out
    assert "French (macro-F1 %, mean over seeds)" in out and "English" in out
    assert "tiny-detour: partial average over 2/8 tasks" in out


def test_a_missing_results_folder_is_an_error_not_an_empty_board(tmp_path, capsys):
    from biobench.cli import main

    assert main(["leaderboard", "--results", str(tmp_path / "nope"), "--print"]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: --results {tmp_path / 'nope'}: no such folder or file; pass a folder written by "
                   "`biobench eval --results DIR`, a results.parquet or hf://datasets/ORG/NAME\n")


def test_serving_loads_the_app_during_the_scan_and_leaves_the_groups_to_the_app(tmp_path, monkeypatch):
    """`biobench leaderboard` (serving) builds its board with the app's modules loaded while the scan reads the
    result files, and its groups and results index's save deferred until the app is built (build_app starts them;
    tests/standings/test_cache.py); a refresh's board starts its groups at once."""
    from biobench.commands import leaderboard as command
    from biobench.leaderboard import app as app_module
    from biobench.standings import aggregate

    calls: list[dict] = []
    real = aggregate.build_board

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **{**kwargs, "significance": False})

    launched: dict = {}
    monkeypatch.setattr(aggregate, "build_board", spy)
    monkeypatch.setattr(app_module, "launch", lambda board, **options: launched.update(options, board=board))
    assert cli.main(["leaderboard", "--results", str(FIXTURES), "--no-cache"]) == 0
    assert [(c["significance"], c["meanwhile"]) for c in calls] == [("deferred", command.load_app)]
    launched["rebuild"]()
    assert calls[-1]["significance"] == "background"
    assert launched["board"].entries
