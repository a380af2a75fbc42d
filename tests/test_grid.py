"""Grid files (`biobench eval --config grid.toml`): parsing with clear errors, the dry run listing every run and
whether it is done, a run through the same planner as `eval --model`, and the shipped paper grids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from biobench.cli import main
from biobench.errors import ConfigError
from biobench.eval.grid import read_grid_file

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "grids"


def test_the_paper_grids_parse_with_the_papers_tasks_seeds_and_models():
    from biobench.eval.protocols import task_seeds
    from biobench.ranges import parse_ranges
    from biobench.tasks.registry import list_specs

    for name, lang, n_models in (("paper-fr", "fr", 5), ("paper-en", "en", 4)):
        grid = next(g for g in read_grid_file(EXAMPLES / f"{name}.toml") if g.name == name)
        assert grid.lang == lang and grid.tasks is None and len(grid.models) == n_models
        assert {task_seeds(s) for s in list_specs(lang)} == {tuple(parse_ranges(grid.seeds, "seeds"))}
        assert grid.results == (EXAMPLES / "../../results")


def test_dry_run_of_the_paper_grid_offline_lists_every_run_with_the_revision_unresolved(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")
    assert main(["eval", "--config", str(EXAMPLES / "paper-fr.toml"), "--dry-run", "--json"]) == 0
    from biobench.eval.protocols import task_seeds
    from biobench.tasks.registry import list_specs

    rows = json.loads(capsys.readouterr().out)
    models = list(dict.fromkeys(r["model"] for r in rows))
    assert models[:2] == ["CLM detour (Base, 10B) = ModernCamemBERT-bio-base", "ModernCamemBERT"]
    tasks = {s.id: len(task_seeds(s)) for s in list_specs("fr")}
    assert len(rows) == len(models) * sum(tasks.values())  # every task x seed of every model
    assert all(r["status"] == "revision unresolved" and "not in the local Hugging Face cache" in r["detail"]
               for r in rows)
    assert main(["eval", "--config", str(EXAMPLES / "paper-fr.toml"), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == len(rows) and max(len(line) for line in out.splitlines()) < 120
    assert out.splitlines()[0].endswith("\tseed 42\trevision unresolved")
    assert err.count("revision unresolved, so whether its runs are done is unknown") == len(models)
    assert f"{len(rows)} run(s) in 1 grid(s): 0 done, {len(rows)} to run ({len(rows)} with the revision unresolved)" in err


def test_dry_run_of_one_model(tmp_path, tiny_mlm_dir, capsys, monkeypatch):
    assert main(["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1-2", "--results",
                 str(tmp_path / "out"), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert [line.split("\t")[2:] for line in out.splitlines()] == [["demo-cls", "seed 1", "to run"],
                                                                    ["demo-cls", "seed 2", "to run"]]
    assert "2 run(s): 0 done, 2 to run" in err and not (tmp_path / "out").exists()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")
    assert main(["eval", "--model", "acme/not-cached", "--tasks", "demo-cls", "--seeds", "1", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["-\tacme/not-cached\tdemo-cls\tseed 1\trevision unresolved"]


def _grid(tmp_path: Path, model: Path, extra: str = "") -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(f'''results = "out"
[[grid]]
name = "tiny"
tasks = ["demo-cls"]
seeds = [1, 2]
overrides = {{ epochs = 1, limit_train = 24, max_length = 32, batch_size = 8 }}
models = [{{ model = "{model}", name = "tiny model" }}]
{extra}''')
    return path


def test_dry_run_lists_every_run_then_a_run_marks_them_done(tmp_path, tiny_mlm_dir, capsys):
    path = _grid(tmp_path, tiny_mlm_dir, '[[grid]]\nname = "other"\ntasks = ["demo-ner"]\nseeds = "1"\n'
                 'models = ["' + str(tiny_mlm_dir) + '"]\n')
    assert main(["eval", "--config", str(path), "--dry-run"]) == 0
    captured = capsys.readouterr()
    lines = [line.split("\t") for line in captured.out.splitlines()]
    assert [(g, m, t, s, st) for g, m, t, s, st in lines] == [
        ("tiny", "tiny model", "demo-cls", "seed 1", "to run"), ("tiny", "tiny model", "demo-cls", "seed 2", "to run"),
        ("other", tiny_mlm_dir.name, "demo-ner", "seed 1", "to run")]
    assert "3 run(s) in 2 grid(s): 0 done, 3 to run" in captured.err
    assert not (tmp_path / "out").exists()  # a dry run writes nothing
    assert main(["eval", "--config", str(path), "--grid", "tiny", "--no-progress"]) == 0
    assert "tiny model — test macro-F1" in capsys.readouterr().out
    assert main(["eval", "--config", str(path), "--dry-run"]) == 0
    statuses = [line.split("\t")[4] for line in capsys.readouterr().out.splitlines()]
    assert statuses == ["done", "done", "to run"]
    # the same run as a single command is found done too: grid files and commands share results
    assert main(["eval", "--model", str(tiny_mlm_dir), "--name", "tiny model", "--tasks", "demo-cls", "--seeds", "1",
                 "--results", str(tmp_path / "out"), "--epochs", "1", "--limit-train", "24", "--max-length", "32",
                 "--batch-size", "8", "--json"]) == 0
    assert "1 already done" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "message"), [
    ("[[grid]]\ntasks = ['gad']\nlang = 'en'\nmodels = ['x']\n", "give either tasks"),
    ("[[grid]]\ntasks = ['gad']\nmodels = []\n", "models must be a non-empty list"),
    ("[[grid]]\ntasks = ['gad']\nmodels = ['x']\noverrides = { epoch = 1 }\n", "unknown override 'epoch'"),
    ("[[grid]]\ntasks = ['gad']\nmodels = ['x']\nmodel = 'y'\n", "unknown key(s) model"),
    ("[[grid]]\nname = 'a'\ntasks = ['gad']\nmodels = ['x']\n[[grid]]\nname = 'a'\ntasks = ['gad']\nmodels = ['x']\n",
     "grid name 'a' is used twice"),
    ("results = 'r'\n", "no [[grid]] table"),
    ("[[grid]\n", "not valid TOML"),
])
def test_bad_grid_files_are_one_clear_error(tmp_path, text, message):
    path = tmp_path / "g.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_grid_file(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_grid_flags_need_a_config_and_an_existing_grid(tmp_path, tiny_mlm_dir, capsys):
    assert main(["eval", "--model", "x", "--grid", "tiny"]) == 2
    assert "--grid goes with --config" in capsys.readouterr().err
    assert main(["eval", "--config", str(_grid(tmp_path, tiny_mlm_dir)), "--grid", "nope", "--dry-run"]) == 2
    assert "no grid named nope (grids: tiny)" in capsys.readouterr().err
