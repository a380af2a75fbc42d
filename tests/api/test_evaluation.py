"""bench/api/evaluation.py: the one planner of `biobench eval` (a model with tasks and seeds, each model of a grid
file), its dry runs, and execute_plan's one memory check."""

from __future__ import annotations

import json

import biobench.api.evaluation as evaluation
import biobench.eval.runner as runner
import biobench.models as models
import pytest
from biobench.cli import main
from biobench.eval.grid import read_grid_file


def _grid(tmp_path, model, seeds='"2-3"', tasks='["demo-cls", "demo-ner"]'):
    path = tmp_path / "g.toml"
    path.write_text(f'results = "res"\n[[grid]]\nname = "g"\ntasks = {tasks}\nseeds = {seeds}\n'
                    f'models = [{{ model = "{model}", name = "m" }}]\n')
    return read_grid_file(path)


def test_a_grid_model_and_the_same_model_on_the_command_line_choose_the_same_runs(tmp_path):
    grid = _grid(tmp_path, "acme/x")[0]
    by_grid = evaluation.grid_choice(grid)
    by_flags = evaluation.choose_runs("demo-cls,demo-ner", seeds="2-3")
    assert [s.id for s in by_grid.specs] == [s.id for s in by_flags.specs] == ["demo-cls", "demo-ner"]
    assert by_grid.seeds == by_flags.seeds == [2, 3]
    assert not by_grid.skip_unavailable and not by_flags.skip_unavailable  # named tasks must all load
    assert evaluation.choose_runs(lang="fr").skip_unavailable  # a language's tasks: those without data are listed


def test_the_plans_of_a_grid_model_and_of_the_same_flags_have_the_same_run_keys(tmp_path, tiny_mlm_dir):
    """plan_grid_model and plan_evaluation share plan_runs: the same keys, so a grid file and a single command
    skip each other's finished runs."""
    grid = _grid(tmp_path, tiny_mlm_dir)[0]
    from_grid = evaluation.plan_grid_model(grid, grid.models[0])
    from_flags = evaluation.plan_evaluation(str(tiny_mlm_dir), ["demo-cls", "demo-ner"], seeds=[2, 3], name="m",
                                            results=grid.results)
    assert [(r.task.id, r.seed, r.key) for r in from_grid.grid] == [(r.task.id, r.seed, r.key) for r in from_flags.grid]
    assert [(r.task.id, r.seed) for r in from_grid.grid] == [(t, s) for t in ("demo-cls", "demo-ner") for s in (2, 3)]


def test_an_unresolvable_model_lists_the_runs_its_choice_makes(tmp_path, monkeypatch):
    """Offline, a hub model cannot be resolved: its dry-run rows are the runs of the same choice (the grid's
    typed seeds, the flags' range), none keyed; a task with no data here is one 'no data' row."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rows = evaluation.dry_run_grids(_grid(tmp_path, "acme/not-cached", seeds="[5, 7]"))
    assert [(r.grid, r.model, r.task, r.seed, r.status) for r in rows] == [
        ("g", "m", t, s, "revision unresolved") for t in ("demo-cls", "demo-ner") for s in (5, 7)]
    rows = evaluation.dry_run_evaluation("acme/not-cached", "demo-cls,quaero-emea", seeds="5-6", data_dir=tmp_path)
    assert [(r.task, r.seed, r.status) for r in rows] == [("demo-cls", 5, "revision unresolved"),
                                                          ("demo-cls", 6, "revision unresolved"),
                                                          ("quaero-emea", None, "no data")]


def test_a_bad_selection_is_one_cannot_plan_row_of_the_dry_run(tmp_path):
    rows = evaluation.dry_run_evaluation("acme/x", "demo-cls", seeds="5-1")
    assert [(r.task, r.status) for r in rows] == [("*", "cannot plan")]
    assert "range 5-1 is reversed" in rows[0].detail


def test_eval_checks_the_models_memory_once_then_says_what_it_runs(tmp_path, tiny_mlm_dir, monkeypatch, capsys):
    """One memory check per plan (execute_plan's; the command used to check a second time first), and the
    command's 'N run(s)' line only once the model is known to fit."""
    checks: list[bool] = []
    real = models.check_memory

    def counting(*args, **kwargs):
        if kwargs.get("training", True):
            checks.append(True)
        return real(*args, **kwargs)

    for module in (models, evaluation):  # wherever execute_plan finds it (a top-level import or the module's)
        if hasattr(module, "check_memory"):
            monkeypatch.setattr(module, "check_memory", counting)
    for module in (runner, evaluation):
        if hasattr(module, "execute"):
            monkeypatch.setattr(module, "execute", lambda plan, **kwargs: None)  # train nothing
    argv = ["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1-2", "--results",
            str(tmp_path / "res"), "--no-progress"]
    assert main(argv) == 0
    assert len(checks) == 1
    assert "2 run(s) in this shard, 0 already done" in capsys.readouterr().err
    assert main([*argv, "--max-model-gb", "0.000001"]) == 2
    err = capsys.readouterr().err
    assert "over this machine's limit of 1e-06 GB" in err and "run(s) in this shard" not in err


@pytest.mark.parametrize(("options", "expected"), [
    ({}, []),
    ({"threads": 2, "device": "cuda", "report_to": "none", "compile": True, "no_claims": False},
     ["--threads", "2", "--device", "cuda", "--compile"]),
    ({"parallel": "auto", "max_model_gb": 4.0, "overwrite": True, "batch_size": "Auto", "trust_remote_code": True},
     ["--parallel", "auto", "--max-model-gb", "4.0", "--trust-remote-code", "--overwrite", "--batch-size", "auto"]),
    ({"batch_size": "16", "claim_seconds": 600.0, "no_claims": True},  # a batch size is a protocol override: in the grid
     ["--claim-seconds", "600.0", "--no-claims"]),
])
def test_a_slurm_worker_runs_the_resolved_grid_with_the_execution_options(tmp_path, options, expected):
    from biobench.eval.grid_launch import worker_argv

    grid = tmp_path / "grid.toml"
    assert worker_argv(grid, options) == ["eval", "--config", str(grid), "--no-progress", *expected]


def test_a_grid_dry_run_reads_the_grids_task_file_once_not_once_per_model_and_task(tmp_path, monkeypatch):
    """Issue 61 item 3: the grid's catalogue is built once (its task file read once) and passed to every model's
    plan; before, each lookup of each model read the file again (3 models x 2 tasks = 6 reads)."""
    import biobench.tasks.registry as registry

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "mine.json").write_text(json.dumps({
        "id": "my-cls", "lang": "fr", "kind": "classification", "max_length": 64, "protocol": "fr",
        "sources": [{"type": "generated", "generator": "demo-cls", "options": {"seed": 0}}]}))
    path = tmp_path / "g.toml"
    path.write_text('task_files = ["mine.json"]\n[[grid]]\nname = "g"\ntasks = ["my-cls", "demo-cls"]\nseeds = "1"\n'
                    'models = ["acme/a", "acme/b", "acme/c"]\n')
    reads: list[str] = []
    real = registry.read_spec_file
    monkeypatch.setattr(registry, "read_spec_file", lambda p: reads.append(str(p)) or real(p))
    rows = evaluation.dry_run_grids(read_grid_file(path))
    assert [(r.model, r.task, r.status) for r in rows] == [
        (m, t, "revision unresolved") for m in ("acme/a", "acme/b", "acme/c") for t in ("my-cls", "demo-cls")]
    assert reads == [str(tmp_path / "mine.json")]
