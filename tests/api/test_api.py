"""The Python API (`import biobench`): light to import, the same errors as the command line, `Results` tables
that agree with the store's summaries, and the quick-start example run end to end."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import biobench
import pytest
from biobench import store
from biobench.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_import_biobench_loads_no_torch_and_help_lists_the_surface():
    code = ("import sys, pydoc, biobench; text = pydoc.render_doc(biobench, renderer=pydoc.plaintext); "
            "print(sorted(m for m in ('torch', 'transformers', 'pandas', 'gradio') if m in sys.modules)); print(text)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "[]"
    for name in ("evaluate(", "load_results(", "compare(", "pretrain(", "contamination(", "class Results",
                 "BiobenchError"):
        assert name in out, name


def test_list_tasks_lists_the_tasks_and_tasks_is_the_package(tmp_path):
    import biobench.tasks.registry

    assert biobench.tasks.__name__ == "biobench.tasks" and not callable(biobench.tasks)  # the package, nothing else
    rows = biobench.list_tasks(lang="fr", data_dir=tmp_path)
    assert [r["id"] for r in rows] == [s.id for s in biobench.tasks.registry.list_specs("fr")]
    assert len(rows) == 8 and not any(r["available"] for r in rows)
    assert "quaero-emea" in {r["id"] for r in rows} and all(r["reason"] for r in rows)


def _write(root: Path, slug: str, task: str, seed: int, f1: float, name: str, protocol: dict | None = None,
           details: dict | None = None) -> Path:
    path = store.result_path(root, slug, task, seed)
    record = store.Result(model={"id": slug, "slug": slug, "name": name},
                          task={"id": task, "lang": "en", "kind": "classification", "labels": ["a", "b"]},
                          seed=seed, protocol=protocol or {"hash": "p"},
                          key=store.run_key("rev", "data", "p", seed),
                          metrics={"test": {"macro_f1": f1}}, details=details or {})
    gold = ["a", "b", "a", "b", "a", "a"]
    preds = ["a", "b", "b", "b", "a", "a"] if seed % 2 else ["a", "a", "a", "b", "a", "b"]
    store.write_result(path, record, [{"id": str(i), "gold": g, "pred": p} for i, (g, p) in enumerate(zip(gold, preds, strict=True))])
    return path


def test_results_summary_and_runs_match_the_store(tmp_path):
    _write(tmp_path, "m1", "gad", 42, 0.60, "Model One")
    _write(tmp_path, "m1", "gad", 43, 0.70, "Model One")
    _write(tmp_path, "m1", "gad", 44, 0.10, "Model One",
           details={"overrides": {"epochs": {"run": 1, "protocol": 10}}})
    (tmp_path / "m1" / "hoc").mkdir()
    (tmp_path / "m1" / "hoc" / "seed-1.json").write_text("{not json")
    results = biobench.load_results(tmp_path)
    assert len(results) == 3 and len(results.problems) == 1 and "corrupt result file" in results.problems[0].reason
    runs = results.to_pandas()
    assert list(runs["seed"]) == [42, 43, 44] and list(runs["smoke"].str.len() > 0) == [False, False, True]
    summary = results.summary()
    protocol, smoke = summary.iloc[0], summary.iloc[1]
    assert (protocol["model"], protocol["task"], protocol["seeds"], protocol["n"]) == ("Model One", "gad", [42, 43], 2)
    assert protocol["mean"] == pytest.approx(0.65) and protocol["std"] == pytest.approx(math.sqrt(0.005))
    assert protocol["ci_low"] < 0.65 < protocol["ci_high"] and protocol["smoke"] == ""
    assert protocol["mdd"] > 0  # from the two seeds' saved predictions
    assert smoke["seeds"] == [44] and smoke["smoke"] == "epochs 1 (protocol 10)" and smoke["mean"] == pytest.approx(0.1)
    assert math.isnan(smoke["std"]) or smoke["std"] is None
    assert results.filter(model="m1", task="gad").models == ["Model One"]


def test_a_printed_summary_leads_with_the_scores(tmp_path):
    """`print(results.summary())`, the README's example, shows model, task, mean, the 95% interval and n (pandas'
    own form printed `model ... contamination [2 rows x 15 columns]`, no score), at pandas' width for a pipe;
    every column stays the DataFrame's."""
    import pandas as pd
    from biobench.api.summary_table import Summary

    _write(tmp_path, "m1", "gad", 42, 0.60, "Model One")
    _write(tmp_path, "m1", "gad", 43, 0.70, "Model One")
    _write(tmp_path, "m1", "gad", 44, 0.10, "Model One", details={"overrides": {"epochs": {"run": 1, "protocol": 10}}})
    summary = biobench.load_results(tmp_path).summary()
    assert isinstance(summary, Summary) and isinstance(summary, pd.DataFrame)
    protocol = summary.iloc[0]
    with pd.option_context("display.width", 80, "display.max_columns", 0):
        printed = str(summary)
    lines = printed.splitlines()
    assert lines[0].split() == ["model", "task", "mean", "95%", "CI", "n", "flags"]
    assert lines[1].split() == ["Model", "One", "gad", "0.6500",
                                f"[{protocol['ci_low']:.4f},", f"{protocol['ci_high']:.4f}]", "2"]
    assert lines[2].split() == ["Model", "One", "gad", "0.1000", "–", "1", "smoke:", "epochs", "1", "(protocol", "10)"]
    assert f"all {len(biobench.api.results.SUMMARY_COLUMNS)} columns" in lines[3] and "..." not in printed
    assert repr(summary) == printed and "0.6500" in summary._repr_html_()
    assert list(summary.columns) == list(biobench.api.results.SUMMARY_COLUMNS)  # the full table is still there
    assert str(summary[summary["n"] > 1]).splitlines()[1] == lines[1]  # a filter prints the same way
    assert list(summary[["model", "mean"]].columns) == ["model", "mean"]


def test_api_errors_are_the_command_lines_one_line_messages(tmp_path, capsys):
    with pytest.raises(biobench.ConfigError) as caught:
        biobench.evaluate("all-MiniLM-L6-v2", tasks=["no-such-task"], results=tmp_path)
    assert main(["eval", "--model", "all-MiniLM-L6-v2", "--tasks", "no-such-task", "--results", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {caught.value}"
    assert isinstance(caught.value, biobench.BiobenchError) and "\n" not in str(caught.value)
    with pytest.raises(biobench.ConfigError, match="bad --epochs value 'nan'"):
        biobench.evaluate("all-MiniLM-L6-v2", tasks=["demo-cls"], results=tmp_path, epochs=float("nan"))
    with pytest.raises(biobench.ResultsError, match="no such results folder"):
        biobench.load_results(tmp_path / "missing")


@pytest.mark.slow
def test_the_quickstart_example_runs_and_prints_the_summary(tmp_path, minilm_dir):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "examples/quickstart.py"), str(tmp_path / "results")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    row = next(line for line in lines if line.startswith("all-MiniLM-L6-v2 demo-cls"))
    assert "epochs 1 (protocol 15)" in row  # the smoke flag travels with the score
    score = float(row.split()[3])
    assert 0.0 <= score <= 1.0
    assert biobench.load_results(tmp_path / "results").to_pandas()["macro_f1"].tolist() == [pytest.approx(score, abs=1e-6)]


def test_a_run_folder_of_an_earlier_version_is_recognised_by_its_settings_file(tmp_path):
    """pretrain --out on a run folder made before the ownership marker: its pretrain_config.toml (written first,
    with biobench's header) says it is biobench's; the same name written by someone else does not."""
    from biobench.api.pretraining import CONFIG_FILE, CONFIG_HEADER, legacy_run
    from biobench.errors import ConfigError
    from biobench.runtime.ownership import MARKER, check_output_folder

    old, other = tmp_path / "old-run", tmp_path / "other"
    for folder, text in ((old, f"{CONFIG_HEADER} (biobench pretrain --config THIS_FILE)\nlr = 0.001\n"),
                         (other, "lr = 0.001\n")):
        folder.mkdir()
        (folder / CONFIG_FILE).write_text(text)
    assert legacy_run(old) and not legacy_run(other)
    assert check_output_folder(old, "--out", "pretraining run", legacy=legacy_run) == old and (old / MARKER).is_file()
    with pytest.raises(ConfigError, match="is a folder biobench did not create"):
        check_output_folder(other, "--out", "pretraining run", legacy=legacy_run)
    assert sorted(p.name for p in other.iterdir()) == [CONFIG_FILE]
