"""Grid files (`biobench eval --config grid.toml`): parsing with clear errors, the dry run listing every run and
whether it is done, a run through the same planner as `eval --model`, and the shipped paper grids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from biobench.cli import main
from biobench.errors import ConfigError
from biobench.eval.grid import read_grid_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "grids"


def test_the_paper_grids_parse_with_the_papers_tasks_seeds_and_models():
    from biobench.protocols import task_seeds
    from biobench.tasks.registry import list_specs

    for name, lang, n_models in (("paper-fr", "fr", 5), ("paper-en", "en", 4)):
        grid = next(g for g in read_grid_file(EXAMPLES / f"{name}.toml") if g.name == name)
        assert grid.lang == lang and grid.tasks is None and len(grid.models) == n_models
        assert grid.seeds is not None and {task_seeds(s) for s in list_specs(lang)} == {tuple(grid.seeds)}
        assert grid.results == (EXAMPLES / "../../results")


def test_dry_run_of_the_paper_grid_offline_leads_with_a_task_by_model_summary_and_the_tasks_with_no_data(
        capsys, monkeypatch, tmp_path):
    """Offline, no model cached, the local-only French tasks' files here and the hub-only ones not: the dry run
    is a task x model table (?/9: runs of an unresolved model), the tasks with no data here with the command
    that says how to get them, the prefetch command for the models and the totals; one line per run only with
    --verbose."""
    import datasets

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")
    data = tmp_path / "data"
    for name in ("fracco/brat_raw.tar.gz", *(f"quaero-{c}/{s}.tar.gz" for c in ("emea", "medline")
                                             for s in ("train", "dev", "test"))):
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_bytes(b"")  # found, not read: a dry run looks for the files
    grid = ["eval", "--config", str(EXAMPLES / "paper-fr.toml"), "--dry-run", "--data-dir", str(data)]
    assert main([*grid, "--json"]) == 0
    from biobench.protocols import task_seeds
    from biobench.tasks.registry import list_specs

    rows = json.loads(capsys.readouterr().out)
    models = list(dict.fromkeys(r["model"] for r in rows))
    assert models[:2] == ["CLM detour (Base, 10B) = ModernCamemBERT-bio-base", "ModernCamemBERT"]
    hub_only = ["diamed", "meddialog-fr", "cantemist", "distemist"]
    tasks = {s.id: len(task_seeds(s)) for s in list_specs("fr") if s.id not in hub_only}
    assert len(rows) == len(models) * (sum(tasks.values()) + len(hub_only))  # runs, and one row per task with no data
    assert all(r["status"] == "revision unresolved" and "not in the local Hugging Face cache" in r["detail"]
               for r in rows if r["task"] in tasks)
    assert {r["task"] for r in rows if r["status"] == "no data"} == set(hub_only)
    assert main(grid) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) < 25 and not any("\tseed 42\t" in line for line in lines)  # no per-run lines
    assert lines[0].startswith("paper-fr: 5 model(s) x 8 task(s); each cell done/claimed/left")
    assert lines[1].split() == ["task", "[1]", "[2]", "[3]", "[4]", "[5]"]
    assert lines[2].split() == ["diamed", *["no", "data"] * 5] and lines[4].split() == ["fracco-30", *["?/9"] * 5]
    assert lines[10] == "  [1] CLM detour (Base, 10B) = ModernCamemBERT-bio-base: 36 run(s), revision unresolved"
    assert (f"no data here (4 of 8 task(s), their runs cannot start): diamed, meddialog-fr, cantemist, distemist — "
            f"`biobench data status --data-dir {data}` says how to get each") in out
    assert f"`biobench prefetch --config {EXAMPLES / 'paper-fr.toml'}` where the hub is reachable" in out
    runs = sum(tasks.values()) * len(models)
    assert (f"{runs} run(s) in 1 grid(s): 0 done, {runs} to run ({runs} with the revision unresolved); 4 task(s) "
            "with no data; 5 model(s) x 8 task(s)") in out
    assert "revision unresolved, so whether its runs are done is unknown" not in err
    assert main([*grid, "--verbose"]) == 0
    out, err = capsys.readouterr()
    per_run = [line for line in out.splitlines() if "\tseed " in line]
    assert len(per_run) == runs and per_run[0].endswith("\tfracco-30\tseed 42\trevision unresolved")
    assert err.count("revision unresolved, so whether its runs are done is unknown") == len(models)


def test_dry_run_of_one_model(tmp_path, tiny_mlm_dir, capsys, monkeypatch):
    assert main(["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1-2", "--results",
                 str(tmp_path / "out"), "--dry-run", "--verbose"]) == 0
    out, err = capsys.readouterr()
    assert [line.split("\t")[2:] for line in out.splitlines() if "\t" in line] == [["demo-cls", "seed 1", "to run"],
                                                                                  ["demo-cls", "seed 2", "to run"]]
    assert out.splitlines()[:3] == ["1 model(s) x 1 task(s); each cell done/claimed/left (?/N: N runs of a model "
                                    "whose revision is unresolved here, done or not unknown)",
                                    "  task        [1]", "  demo-cls  0/0/2"]
    assert "2 run(s): 0 done, 2 to run" in out and not (tmp_path / "out").exists()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")
    assert main(["eval", "--model", "acme/not-cached", "--tasks", "demo-cls", "--seeds", "1", "--dry-run",
                 "--verbose"]) == 0
    out, err = capsys.readouterr()
    assert [line for line in out.splitlines() if "\t" in line] == ["-\tacme/not-cached\tdemo-cls\tseed 1\t"
                                                                   "revision unresolved"]
    assert "  demo-cls  ?/1" in out and "`biobench prefetch --model acme/not-cached` where the hub" in out


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
    assert main(["eval", "--config", str(path), "--dry-run", "--verbose"]) == 0
    captured = capsys.readouterr()
    lines = [line.split("\t") for line in captured.out.splitlines() if "\t" in line]
    assert [(g, m, t, s, st) for g, m, t, s, st in lines] == [
        ("tiny", "tiny model", "demo-cls", "seed 1", "to run"), ("tiny", "tiny model", "demo-cls", "seed 2", "to run"),
        ("other", tiny_mlm_dir.name, "demo-ner", "seed 1", "to run")]
    assert "3 run(s) in 2 grid(s): 0 done, 3 to run" in captured.out
    assert not (tmp_path / "out").exists()  # a dry run writes nothing
    assert main(["eval", "--config", str(path), "--grid", "tiny", "--no-progress"]) == 0
    assert "tiny model — test macro-F1" in capsys.readouterr().out
    assert main(["eval", "--config", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "  demo-cls  2/0/0" in out and "  demo-ner  0/0/1" in out and "  [1] tiny model: 2 of 2 run(s) done" in out
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


@pytest.mark.parametrize(("seeds", "expected"), [
    ('"42-44"', [42, 43, 44]), ('"44, 42,44"', [42, 44]), ("[9, 3]", [3, 9]), ("7", [7]), ('"1-2,5"', [1, 2, 5]),
    ('""', None),  # an empty range: each task's protocol seeds, as before seeds were typed
])
def test_grid_seeds_are_integers_once_the_file_is_read(tmp_path, seeds, expected):
    path = tmp_path / "g.toml"
    path.write_text(f"[[grid]]\ntasks = ['demo-cls']\nseeds = {seeds}\nmodels = ['x']\n")
    assert read_grid_file(path)[0].seeds == expected


@pytest.mark.parametrize(("seeds", "reason"), [
    ('"9-3"', "'9-3': range 9-3 is reversed (write 3-9)"), ('[1, "x"]', "'1,x': 'x' is not a number or a range"),
    ('"0-300"', "'0-300': more than 256 values"), ('"-1"', "'-1': -1 is below 0"),
    ('"4294967296"', "'4294967296': 4294967296 is above 4294967295"),
])
def test_a_bad_grid_seed_range_is_refused_when_the_file_is_read_with_the_seeds_bounds(tmp_path, seeds, reason):
    """The bounds of --seeds (bench/ranges.parse_seeds), met before any model or task is planned; the message
    names the file and the grid, as it did when the range was parsed at plan time."""
    path = tmp_path / "g.toml"
    path.write_text(f"[[grid]]\nname = 'g'\ntasks = ['demo-cls']\nseeds = {seeds}\nmodels = ['x']\n")
    with pytest.raises(ConfigError) as err:
        read_grid_file(path)
    assert str(err.value).startswith(f"bad {path} grid 'g' seeds value {reason}; use a range like 1-4")


def test_grid_flags_need_a_config_and_an_existing_grid(tmp_path, tiny_mlm_dir, capsys):
    assert main(["eval", "--model", "x", "--grid", "tiny"]) == 2
    assert "--grid goes with --config" in capsys.readouterr().err
    assert main(["eval", "--config", str(_grid(tmp_path, tiny_mlm_dir)), "--grid", "nope", "--dry-run"]) == 2
    assert "no grid named nope (grids: tiny)" in capsys.readouterr().err


def test_relative_paths_resolve_against_the_grid_files_folder_and_absolute_ones_stay(tmp_path, monkeypatch):
    """`results = "../../results"` in examples/grids/ is the clone's results/ whatever the current folder."""
    folder = tmp_path / "clone" / "examples" / "grids"
    folder.mkdir(parents=True)
    (folder / "g.toml").write_text(f'results = "../../results"\ndata_dir = "{tmp_path / "data"}"\n'
                                   '[[grid]]\ntasks = ["demo-cls"]\nmodels = ["x"]\n')
    monkeypatch.chdir(tmp_path)  # elsewhere: ../../results from here would leave tmp_path
    grid = read_grid_file(Path("clone/examples/grids/g.toml"))[0]
    assert grid.results.resolve() == tmp_path / "clone" / "results"
    assert grid.data_dir == tmp_path / "data"


def test_a_dry_run_of_a_local_path_that_does_not_exist_says_no_such_folder(tmp_path, monkeypatch, capsys):
    """Issue 62 item 6: `eval --model runs/nothere/final --dry-run` said "revision unresolved ... `biobench
    prefetch` where the hub is reachable" for a path no hub can fetch. It says the folder is not there."""
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--model", "runs/nothere/final", "--tasks", "demo-cls", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "[1] runs/nothere/final: cannot plan: model folder runs/nothere/final: no such folder" in out
    assert "revision unresolved for" not in out and "prefetch" not in out
    assert main(["eval", "--model", "runs/nothere/final", "--tasks", "demo-cls"]) == 2  # the run: one error line
    assert capsys.readouterr().err.startswith("error: model folder runs/nothere/final: no such folder")
    assert not (tmp_path / "runs").exists()
