"""`evaluate`: plan the runs of a model on tasks x seeds, run the pending ones, return their `Results`.

The one path from "a model and some tasks" to result files: `biobench eval` calls `plan_evaluation` (a model
with tasks or a language and seeds), `plan_grid_model` (each model of a grid file), the dry runs of both and
`execute_plan` as the Python API does (the command only parses arguments and prints), so a notebook, a grid file
and the command line skip, resume and refuse the same runs. Which tasks and seeds a model runs is decided in one
place (`choose_runs`, `grid_choice`: a `RunChoice`), whether the model resolves or not (a dry run offline).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from biobench.api.results import Results
from biobench.errors import BiobenchError, ConfigError, ResultsError
from biobench.eval.claims import RunClaims
from biobench.eval.grid import Grid, GridModel, RunStatus, cannot_plan, grid_catalogue, grid_specs, plan_rows
from biobench.eval.parallel import execute_parallel
from biobench.eval.runner import Execution, GridPlan, execute, parse_shard, plan_grid
from biobench.models import check_memory
from biobench.protocols import check_override, task_seeds
from biobench.ranges import parse_seeds
from biobench.runtime.device import resolve_device, use_cpu_threads
from biobench.runtime.interrupts import StopRequest
from biobench.runtime.ownership import check_output_folder
from biobench.runtime.paths import check_text
from biobench.store import read_result
from biobench.store.layout import legacy_results
from biobench.store.metadata import check_metadata
from biobench.tasks.fetch import task_status
from biobench.tasks.loading import load_task, resolve_data_dir
from biobench.tasks.registry import TaskCatalogue, TaskSpec, builtin_catalogue

Lang = Literal["fr", "en"]


def select_specs(tasks: str | Sequence[str] | None = None, lang: Lang | None = None,
                 catalogue: TaskCatalogue | None = None) -> tuple[list[TaskSpec], bool]:
    """The task specs to run and whether tasks without data may be skipped (only for a language or default
    selection: tasks named one by one must all load). `tasks`: ids as a list or comma-separated text, looked up
    in `catalogue` (the built-ins and the caller's task files; default the built-ins)."""
    catalogue = catalogue or builtin_catalogue()
    if tasks is not None and lang is not None:
        raise ConfigError("give tasks or lang, not both")
    if tasks is not None:
        named = tasks.split(",") if isinstance(tasks, str) else list(tasks)
        ids = list(dict.fromkeys(str(t).strip() for t in named if str(t).strip()))
        if not ids:
            raise ConfigError(f"--tasks {tasks!r} names no task; give task ids (`biobench tasks`) or --lang fr|en")
        return [catalogue.get(t) for t in ids], False
    return catalogue.tasks(lang=lang), True


def seed_list(seeds: str | int | Sequence[int] | None) -> list[int] | None:
    """'42-44', '42,44', 42 or [42, 43] -> a list of seeds (None: each task's protocol seeds)."""
    if seeds is None:
        return None
    if isinstance(seeds, str):
        return parse_seeds(seeds)
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        return [seeds]
    values: list[Any] = [seeds] if isinstance(seeds, bool) else list(seeds)  # a bool is refused just below
    if not values or not all(isinstance(s, int) and not isinstance(s, bool) for s in values):
        raise ConfigError(f"seeds {values!r}: give integers, e.g. [42, 43] or '42-50'")
    return values


@dataclass(frozen=True)
class RunChoice:
    """What one model runs, decided once (for its plan, and for a dry run's list when the model cannot be
    resolved here): the task specs, whether a task without data is skipped (a language's tasks) or an error
    (tasks named one by one), the seeds (None: each task's protocol seeds) and the data folder tasks load from."""

    specs: list[Any]
    skip_unavailable: bool
    seeds: list[int] | None
    data_dir: str | Path | None


def choose_runs(tasks: str | Sequence[str] | None = None, lang: Lang | None = None,
                seeds: str | int | Sequence[int] | None = None, catalogue: TaskCatalogue | None = None,
                data_dir: str | Path | None = None) -> RunChoice:
    """The runs of `--tasks`/`--lang`, `--seeds` and `--data-dir` (or their API arguments), checked in that order."""
    specs, lenient = select_specs(tasks, lang, catalogue)
    folder = resolve_data_dir(data_dir)
    return RunChoice(specs, lenient, seed_list(seeds), folder)


def grid_choice(grid: Grid, catalogue: TaskCatalogue | None = None,
                data_dir: str | Path | None = None) -> RunChoice:
    """The runs of a grid file's grid: its tasks or its language (eval.grid.grid_specs: in `catalogue` with the
    grid's task files), its seeds (integers since the file was read) and its data folder, else `data_dir` (as given:
    a grid's tasks load from it unresolved, as they always have)."""
    return RunChoice(grid_specs(grid, catalogue), grid.lang is not None, grid.seeds,
                     grid.data_dir or data_dir)


def unresolved_runs(choice: RunChoice) -> list[tuple[str, int | None, str | None]]:
    """(task, seed, None) of every run a model would make, for a dry run whose model cannot be resolved here;
    a task whose data is not here is one (task, None, what is missing and its fix) instead, as for a model
    that resolves (the files are looked for, not hashed)."""

    folder = resolve_data_dir(choice.data_dir)
    out: list[tuple[str, int | None, str | None]] = []
    for spec in choice.specs:
        status = task_status(spec, folder, checksums=False)
        if status.state in ("found", "generated", "hub"):
            out += [(spec.id, seed, None) for seed in (choice.seeds or task_seeds(spec))]
        else:
            out.append((spec.id, None, f"{status.detail}; fix: {status.fix}"))
    return out


def check_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """Protocol overrides by their `eval` option names without dashes (epochs=1, limit_train=500, lr=5e-5,
    max_length=128, ...), each checked as the command line checks it."""
    return {name: check_override(name, value) for name, value in overrides.items() if value is not None}


def plan_evaluation(model: str, tasks: str | Sequence[str] | None = None, *, lang: Lang | None = None,
                    seeds: str | int | Sequence[int] | None = None, data_dir: str | Path | None = None,
                    results: str | Path = "results", name: str | None = None,
                    catalogue: TaskCatalogue | None = None, overwrite: bool = False, shard: str | None = None,
                    overrides: dict[str, Any] | None = None, quick: bool = False,
                    metadata: dict[str, Any] | None = None,
                    chosen: Callable[[RunChoice], None] | None = None, rename: bool = False) -> GridPlan:
    """Resolve the model, load the tasks, key every run and decide which are done (nothing is trained).
    `quick`: each task with its kind's `--quick` budget (biobench.protocols.QUICK), `overrides` winning.
    `metadata`: model metadata stated by the caller (params, license, ...; checked by
    biobench.store.metadata.check_metadata, a grid file's validator), recorded over the model card's.
    `chosen`: told the RunChoice before the model is resolved (what a dry run lists when it cannot be).
    `rename`: `name` renames these weights' results found under another name (eval.runner.plan_grid; a run,
    never a dry run)."""

    stated = check_metadata(metadata, "metadata")  # before any model or task is loaded
    if name is not None:  # a display name with an invisible character passes for another model's (issue 58)
        check_text(name, "--name")
    choice = choose_runs(tasks, lang, seeds, catalogue, data_dir)
    if chosen is not None:
        chosen(choice)
    return plan_runs(model, choice, results, overrides=check_overrides(overrides or {}), overwrite=overwrite,
                     shard=shard, name=name, quick=quick, metadata=stated, rename=rename)


def plan_grid_model(grid: Grid, entry: GridModel, *, catalogue: TaskCatalogue | None = None,
                    data_dir: str | Path | None = None, overrides: dict[str, Any] | None = None,
                    overwrite: bool = False, shard: str | None = None, quick: bool = False,
                    chosen: Callable[[RunChoice], None] | None = None, rename: bool = False) -> GridPlan:
    """One model of a grid file planned as `plan_evaluation` plans `--model` (`biobench eval --config`, a study's
    eval step): its grid's choice of runs (`grid_choice`), the grid's then the model's then `overrides` (the
    command line's, already checked) protocol overrides, the model's name and stated metadata."""
    choice = grid_choice(grid, catalogue, data_dir)
    if chosen is not None:
        chosen(choice)
    return plan_runs(entry.model, choice, grid.results,
                     overrides={**grid.overrides, **entry.overrides, **(overrides or {})}, overwrite=overwrite,
                     shard=shard, name=entry.name, quick=quick, metadata=entry.metadata, rename=rename)


def plan_runs(model: str, choice: RunChoice, results: str | Path, *, overrides: dict[str, Any], overwrite: bool = False,
              shard: str | None = None, name: str | None = None, quick: bool = False,
              metadata: dict[str, Any] | None = None, rename: bool = False) -> GridPlan:
    """The plan of `model` on a RunChoice with checked `overrides` and `metadata`: the model resolved, the tasks
    loaded, every run keyed and decided (eval.runner.plan_grid)."""
    folder = choice.data_dir
    return plan_grid(model, choice.specs, lambda spec: load_task(spec, folder), results, seeds=choice.seeds,
                     overrides=overrides, overwrite=overwrite, shard=parse_shard(shard),
                     skip_unavailable=choice.skip_unavailable, name=name, quick=quick, metadata=metadata,
                     rename=rename)


def dry_run_evaluation(model: str, tasks: str | Sequence[str] | None = None, *, lang: Lang | None = None,
                       seeds: str | int | Sequence[int] | None = None, data_dir: str | Path | None = None,
                       results: str | Path = "results", name: str | None = None,
                       catalogue: TaskCatalogue | None = None, shard: str | None = None,
                       overrides: dict[str, Any] | None = None, quick: bool = False,
                       metadata: dict[str, Any] | None = None) -> list[RunStatus]:
    """Every run plan_evaluation would plan, with its status (done, to run, claimed, ...; eval.grid.plan_rows),
    nothing trained or written: a model that cannot be resolved here lists its runs as 'revision unresolved',
    a selection that cannot be planned is one 'cannot plan' row. A --name with an invisible character is refused
    in one line (it would head the listing)."""
    if name is not None:
        check_text(name, "--name")
    chosen: list[RunChoice] = []
    return plan_rows("-", name or model, lambda: plan_evaluation(
        model, tasks, lang=lang, seeds=seeds, data_dir=data_dir, results=results, name=name, catalogue=catalogue,
        overwrite=True, shard=shard, overrides=overrides, quick=quick, metadata=metadata, chosen=chosen.append),
        lambda: unresolved_runs(chosen[-1]))


def dry_run_grids(grids: Sequence[Grid], *, catalogue: TaskCatalogue | None = None, data_dir: str | Path | None = None,
                  overrides: dict[str, Any] | None = None, shard: str | None = None,
                  quick: bool = False) -> list[RunStatus]:
    """dry_run_evaluation for every model of every grid (`eval --config G --dry-run`), as plan_grid_model plans
    them; each grid's task files are read once (grid_catalogue), not once per model."""
    rows: list[RunStatus] = []
    for grid in grids:
        try:
            tasks = grid_catalogue(grid, catalogue)
        except BiobenchError as err:  # a grid's broken task file: its models' rows say so, as their plans would
            rows += [cannot_plan(grid.name, entry.name or entry.model, err) for entry in grid.models]
            continue
        for entry in grid.models:
            chosen: list[RunChoice] = []
            rows += plan_rows(grid.name, entry.name or entry.model,
                              lambda g=grid, e=entry, c=chosen, t=tasks: plan_grid_model(
                                  g, e, catalogue=t, data_dir=data_dir, overrides=overrides, overwrite=True,
                                  shard=shard, quick=quick, chosen=c.append),
                              lambda c=chosen: unresolved_runs(c[-1]))
    return rows


def execute_plan(plan: GridPlan, execution: Execution | None = None, parallel: int | str = 1,
                 threads: int | None = None, progress: bool = True, claims: RunClaims | None = None,
                 stop: StopRequest | None = None, before_runs: Callable[[int], None] | None = None) -> GridPlan:
    """Train and write every pending run of the plan, one after the other or `parallel` at once. With `claims`
    (biobench.eval.claims.RunClaims) each run is claimed first, so several processes on one grid share it;
    `stop`: the caller's stop_on_signal request (SIGTERM/SIGUSR1 stop at a safe point, StoppedError).
    `before_runs`: called once the model is known to fit the device (the one memory check of the plan), before
    any run is claimed or started, with the CPU threads chosen (`threads`, else the idle cores on a CPU:
    `runtime.device.use_cpu_threads`, pretrain's rule too): where `biobench eval` says what it will do, so a model
    too big is refused before anything is said."""
    execution = execution or Execution()
    if any(r.status == "pending" for r in plan.runs):  # before any run is claimed or any process started
        # the results folder: new, or biobench's (a marker, or an earlier eval's result files), never the user's
        check_output_folder(plan.results_dir, "--results", "results", legacy=legacy_results)
        check_memory(plan.model.ref, resolve_device(execution.device), training=True, limit_gb=execution.max_model_gb)
    n_threads = use_cpu_threads(threads, execution.device)  # with --parallel N, shared among the N processes
    if before_runs is not None:
        before_runs(n_threads)
    if parallel in (1, None):
        execute(plan, device=execution.device, progress=progress, trust_remote_code=execution.trust_remote_code,
                compile_encoder=execution.compile_encoder, report_to=execution.report_to,
                micro_batch=execution.micro_batch, claims=claims, stop=stop)
    else:

        execute_parallel(plan, parallel, execution, threads=n_threads, progress=progress, claims=claims, stop=stop)
    return plan


def plan_results(plan: GridPlan) -> Results:
    """The results of the plan's whole grid found on disk with the plan's run keys (whichever shard wrote them)."""

    out = Results()
    for run in plan.grid:
        if run.path.exists():
            try:
                record = read_result(run.path)
            except ResultsError:
                continue
            if record.key == run.key:
                out.add(record, run.path)
    return out
