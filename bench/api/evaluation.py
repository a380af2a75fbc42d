"""`evaluate`: plan the runs of a model on tasks x seeds, run the pending ones, return their `Results`.

The one path from "a model and some tasks" to result files: `biobench eval` calls `plan_evaluation` and
`execute_plan` as the Python API does (the command only parses arguments and prints), so a notebook and the
command line skip, resume and refuse the same runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from biobench.api.results import Results
from biobench.errors import ConfigError, ResultsError
from biobench.eval.claims import RunClaims
from biobench.eval.parallel import execute_parallel
from biobench.eval.runner import Execution, GridPlan
from biobench.models import check_memory
from biobench.protocols import check_override
from biobench.ranges import parse_seeds
from biobench.runtime.device import resolve_device
from biobench.runtime.interrupts import StopRequest
from biobench.store import read_result
from biobench.store.metadata import check_metadata

Lang = Literal["fr", "en"]


def select_specs(tasks: str | Sequence[str] | None = None, lang: Lang | None = None,
                 task_files: Sequence[str | Path] = ()) -> tuple[list[Any], bool]:
    """The task specs to run and whether tasks without data may be skipped (only for a language or default
    selection: tasks named one by one must all load). `tasks`: ids as a list or comma-separated text."""
    # lazy: tests patch it on its module
    from biobench.tasks.registry import get_spec, list_specs

    if tasks is not None and lang is not None:
        raise ConfigError("give tasks or lang, not both")
    if tasks is not None:
        named = tasks.split(",") if isinstance(tasks, str) else list(tasks)
        ids = list(dict.fromkeys(str(t).strip() for t in named if str(t).strip()))
        if not ids:
            raise ConfigError(f"--tasks {tasks!r} names no task; give task ids (`biobench tasks`) or --lang fr|en")
        return [get_spec(t, list(task_files)) for t in ids], False
    return list_specs(lang=lang, task_files=list(task_files)), True


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


def check_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """Protocol overrides by their `eval` option names without dashes (epochs=1, limit_train=500, lr=5e-5,
    max_length=128, ...), each checked as the command line checks it."""
    return {name: check_override(name, value) for name, value in overrides.items() if value is not None}


def plan_evaluation(model: str, tasks: str | Sequence[str] | None = None, *, lang: Lang | None = None,
                    seeds: str | int | Sequence[int] | None = None, data_dir: str | Path | None = None,
                    results: str | Path = "results", name: str | None = None, task_files: Sequence[str | Path] = (),
                    overwrite: bool = False, shard: str | None = None,
                    overrides: dict[str, Any] | None = None, quick: bool = False,
                    metadata: dict[str, Any] | None = None) -> GridPlan:
    """Resolve the model, load the tasks, key every run and decide which are done (nothing is trained).
    `quick`: each task with its kind's `--quick` budget (biobench.protocols.QUICK), `overrides` winning.
    `metadata`: model metadata stated by the caller (params, license, ...; checked by
    biobench.store.metadata.check_metadata, a grid file's validator), recorded over the model card's."""
    # lazy: tests patch it on its module
    from biobench.eval.runner import parse_shard, plan_grid

    # lazy: tests patch it on its module
    from biobench.tasks.loading import load_task, resolve_data_dir

    stated = check_metadata(metadata, "metadata")  # before any model or task is loaded
    specs, lenient = select_specs(tasks, lang, task_files)
    folder = resolve_data_dir(data_dir)
    return plan_grid(model, specs, lambda spec: load_task(spec, folder), results, seeds=seed_list(seeds),
                     overrides=check_overrides(overrides or {}), overwrite=overwrite, shard=parse_shard(shard),
                     skip_unavailable=lenient, name=name, quick=quick, metadata=stated)


def execute_plan(plan: GridPlan, execution: Execution | None = None, parallel: int | str = 1,
                 threads: int | None = None, progress: bool = True, claims: RunClaims | None = None,
                 stop: StopRequest | None = None) -> GridPlan:
    """Train and write every pending run of the plan, one after the other or `parallel` at once. With `claims`
    (biobench.eval.claims.RunClaims) each run is claimed first, so several processes on one grid share it;
    `stop`: the caller's stop_on_signal request (SIGTERM/SIGUSR1 stop at a safe point, StoppedError)."""
    # lazy: tests patch it on its module
    from biobench.eval.runner import execute

    execution = execution or Execution()
    if any(r.status == "pending" for r in plan.runs):  # before any run is claimed or any process started
        check_memory(plan.model.ref, resolve_device(execution.device), training=True, limit_gb=execution.max_model_gb)
    if parallel in (1, None):
        execute(plan, device=execution.device, progress=progress, trust_remote_code=execution.trust_remote_code,
                compile_encoder=execution.compile_encoder, report_to=execution.report_to,
                micro_batch=execution.micro_batch, claims=claims, stop=stop)
    else:

        execute_parallel(plan, parallel, execution, threads=threads, progress=progress, claims=claims, stop=stop)
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
