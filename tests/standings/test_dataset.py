"""Results as a Hugging Face dataset: --export results.parquet loads with `datasets`, `results push --dry-run`
writes a folder whose card the hub tools parse, the leaderboard reads that folder back into the same table, and
every hub path fails offline with one clear line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from biobench import cli
from biobench.leaderboard.tables.export import export_frame
from biobench.leaderboard.tables.html import render_html
from biobench.standings import dataset
from biobench.standings.aggregate import build_board

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "cache"))


def test_parquet_export_round_trips_through_datasets(tmp_path, capsys):
    from datasets import load_dataset

    out = tmp_path / "results.parquet"
    assert cli.main(["leaderboard", "--results", str(FIXTURES), "--export", str(out)]) == 0
    assert f"wrote {out} (30 rows)" in capsys.readouterr().out
    rows = load_dataset("parquet", data_files=str(out), split="train", cache_dir=str(tmp_path / "hf"))
    assert rows.num_rows == 30 and set(dataset.COLUMNS) <= set(rows.column_names)
    row = next(r for r in rows if r["model_slug"] == "local__tiny-detour" and r["task"] == "diamed" and r["seed"] == 42)
    original = json.loads((FIXTURES / "local__tiny-detour" / "diamed" / "seed-42.json").read_text())
    assert row["model"] == "tiny-detour" and row["lang"] == "fr" and row["macro_f1"] == original["metrics"]["test"]["macro_f1"]
    assert row["protocol_hash"] == original["protocol"]["hash"] and row["model_revision"] == original["model"]["revision"]
    assert json.loads(row["result"]) == original
    assert row["predictions"] == (FIXTURES / "local__tiny-detour" / "diamed" / "seed-42.predictions.jsonl").read_text()
    assert "broken" not in {r["model_slug"] for r in rows if r["task"] == "diamed" and r["seed"] == 44}


def test_dry_run_folder_card_and_local_copy_give_the_same_table(tmp_path, capsys):
    from datasets import load_dataset
    from huggingface_hub import DatasetCard

    out = tmp_path / "push"
    assert cli.main(["results", "push", "acme/biobench-results", "--results", str(FIXTURES), "--dry-run", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "(30 rows)" in printed
    # a corrupt predictions file is no predictions file of the format: left out with a warning, never published
    assert any(line.startswith("warning: ") and "broken/diamed/seed-45.predictions.jsonl" in line
               for line in printed.splitlines()), printed
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "results.parquet"]
    card = DatasetCard.load(out / "README.md")
    assert card.data.configs == [{"config_name": "default", "data_files": [{"split": "train", "path": "results.parquet"}]}]
    assert card.data.language == ["en", "fr"] and "biobench" in card.data.tags
    assert "| tiny-detour | 2 | 2-3 |" in card.text and "hf://datasets/acme/biobench-results" in card.text
    # the hub's own reading of the folder (the card's configs) finds the parquet split
    assert load_dataset(str(out), split="train", cache_dir=str(tmp_path / "hf")).num_rows == 30

    original = build_board([FIXTURES], n_boot=200)
    copy = build_board([out], n_boot=200)
    for lang in ("fr", "en"):
        assert render_html(copy, lang) == render_html(original, lang)
    assert export_frame(copy).equals(export_frame(original))
    assert copy.groups.keys() == original.groups.keys() and copy.groups
    # unreadable result files and the corrupt predictions file were left out when the dataset was built
    assert copy.problems == []
    mixed = tmp_path / "mixed"  # a results folder with an export inside is still read as a results folder
    shutil.copytree(FIXTURES, mixed)
    shutil.copy(out / "results.parquet", mixed)
    assert dataset.resolve_sources([mixed]) == [mixed]
    again = dataset.resolve_sources([out / "results.parquet"])[0]
    assert again == dataset.resolve_sources([out])[0] and (again / ".complete").is_file()  # written once, reused


def test_hub_paths_fail_offline_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert cli.main(["results", "push", "acme/x", "--results", str(FIXTURES)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: cannot push results to hf://datasets/acme/x (write the folder with --dry-run OUT and "
                   "upload it later): HF_HUB_OFFLINE=1 is set"]
    assert cli.main(["leaderboard", "--results", "hf://datasets/acme/x", "--print"]) == 2
    assert "error: cannot read results from hf://datasets/acme/x: not in the local Hugging Face cache and " \
           "HF_HUB_OFFLINE=1 is set; download it" in capsys.readouterr().err
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no stored token
    assert cli.main(["results", "push", "acme/x", "--results", str(FIXTURES)]) == 2
    assert "no Hugging Face token is configured (run `hf auth login` or set HF_TOKEN)" in capsys.readouterr().err
    assert cli.main(["leaderboard", "--results", "hf://datasets/acme", "--print"]) == 2
    assert "expected hf://datasets/ORG/NAME" in capsys.readouterr().err


def test_not_a_results_parquet(tmp_path):
    bad = tmp_path / "results.parquet"
    bad.write_text("not parquet")
    with pytest.raises(Exception, match=r"results.parquet: not a biobench results parquet"):
        build_board([tmp_path], reference=False)


def test_card_averages_compare_like_with_like():
    import pandas as pd
    from biobench.standings.dataset import summary_lines

    rows = [("A", "fr", t, s, f) for t, f in (("t1", 0.5), ("t2", 0.7), ("t3", 0.9), ("t4", 0.99)) for s in (1, 2)]
    rows += [("B", "fr", t, 1, f) for t, f in (("t1", 0.6), ("t2", 0.6), ("t3", 0.6))]
    rows += [("C", "en", "e1", 1, 0.4)]
    # a model is its results folder (model_slug); the card averages each task's headline score (`score`)
    frame = pd.DataFrame([(m, m.lower(), *rest) for m, *rest in rows],
                         columns=["model", "model_slug", "lang", "task", "seed", "score"])
    lines = summary_lines(frame)
    assert "### fr: mean over the 3 task(s) every model has (t1, t2, t3)" in lines
    assert "| A | 4 | 2 | 70.0 |" in lines and "| B | 3 | 1 | 60.0 |" in lines  # t4 (A only) is not averaged
    assert "### en: mean over the 1 task(s) every model has (e1)" in lines and "| C | 1 | 1 | 40.0 |" in lines
