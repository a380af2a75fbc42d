"""biobench's Python API, its front door (`biobench.api` and `import biobench` hand these names out on first use):
the functions the `biobench` commands call, for notebooks and other tools.

    import biobench
    results = biobench.evaluate("all-MiniLM-L6-v2", tasks=["ncbi-disease"], seeds=[42], data_dir="data/")
    print(results.summary())

- `tasks(lang=None, data_dir=None, ...)`: the tasks, the protocol each resolves to and where its data is.
- `evaluate(model, tasks=None, seeds=None, data_dir=None, results="results", **overrides) -> Results`.
- `load_results(folder_or_hf_url) -> Results`: a results folder, a results.parquet or hf://datasets/ORG/NAME.
- `compare(a, b, results="results", ...)`: paired bootstrap of A - B per task (what `biobench compare` prints).
- `pretrain(model, corpus, tokens, out, recipe="detour", ...)`: continued pretraining.
- `contamination(corpus, tasks=None, lang=None, n=13, ...)`: shared word n-grams between a corpus and tasks.
- `study(path, out=None) -> StudyHandle`: a study file (docs/STUDIES.md) checked; `.plan()`, `.run()`,
  `.submit()`, `.status()`, `.report()` as `biobench study run | status | report`.
- `Results`: `.records`, `.summary()` (pandas: one row per model and task), `.to_pandas()` (one row per run).
- Errors: every failure a user can fix is a `BiobenchError` (ConfigError, DataError, ModelLoadError,
  ResultsError, DiskFullError) whose message is the command line's one line.

Nothing heavy is imported here: torch and transformers load when a model is trained (docs/API.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

# loaded first so that `contamination` below stays the function: a later first import of this submodule (the
# `contamination` command's) rebound the package's attribute to the module, and `biobench.contamination(...)`
# after it raised "'module' object is not callable"
from biobench.api.catalog import task_rows
from biobench.api.contamination import attach_to_plan, check_tasks
from biobench.api.evaluation import execute_plan, plan_evaluation, plan_results
from biobench.api.pretraining import pretrain
from biobench.api.results import RefusedFile, Results
from biobench.api.study import load_study
from biobench.api.study_run import StudyHandle
from biobench.errors import BiobenchError, ConfigError, DataError, DiskFullError, ModelLoadError, ResultsError
from biobench.eval.claims import RunClaims
from biobench.eval.runner import Execution
from biobench.standings.folder_pairs import compare as compare_folders
from biobench.standings.scan import Problem as ScanProblem
from biobench.store import SEED_FILE, seed_paths
from biobench.tasks.registry import TaskCatalogue

__all__ = ["BiobenchError", "ConfigError", "DataError", "DiskFullError", "ModelLoadError", "Results",
           "ResultsError", "compare", "contamination", "evaluate", "list_tasks", "load_results", "pretrain", "study"]


def list_tasks(lang: Literal["fr", "en"] | None = None, data_dir: str | Path | None = None, *,
          task_files: Sequence[str | Path] = (), include_extra: bool = False,
          counts: bool = False) -> list[dict[str, Any]]:
    """The benchmark's tasks (the paper's 19, or one language's), one dict each: id, lang, kind, max_length,
    protocol, head, metric, dev_metric, labels, available (data found under `data_dir` or $BIOBENCH_DATA),
    source, reason (what is missing and the command that fixes it), splits (sizes, with `counts=True`, which
    reads the data). `task_files`: your own task specs (docs/TASKS.md); `include_extra`: also the demo tasks."""
    return task_rows(lang, data_dir, TaskCatalogue.build(task_files), include_extra=include_extra, counts=counts)


def evaluate(model: str, tasks: str | Sequence[str] | None = None, *, lang: Literal["fr", "en"] | None = None,
             seeds: str | int | Sequence[int] | None = None, data_dir: str | Path | None = None,
             results: str | Path = "results", name: str | None = None, task_files: Sequence[str | Path] = (),
             overwrite: bool = False, device: str | None = None, parallel: int | str = 1,
             progress: bool = True, trust_remote_code: bool = False,
             check_contamination: bool = False, claims: bool = True, metadata: dict[str, Any] | None = None,
             quick: bool = False, threads: int | None = None, **overrides: Any) -> Results:
    """Fine-tune and score `model` (an alias from `biobench models`, a hub id or a local Hugging Face folder) on
    `tasks` (ids; default: every task of `lang`, or all, that has data) x `seeds` (default: each task's protocol
    seeds), writing one result file per run under `results/<name>--<revision>/<task>/seed-<n>.json`. Finished
    runs are skipped, so a rerun resumes. `overrides` change the protocol by `biobench eval`'s option names
    (epochs=1, limit_train=500, limit_eval=200, max_length=128, lr=5e-5, batch_size=8, ...): such runs are
    smoke runs, flagged in `Results.summary()`. `quick=True` is `eval --quick`: each task kind's budget that
    learns in minutes on a CPU (biobench.protocols.QUICK), `overrides` winning. `check_contamination`: for a `biobench pretrain` checkpoint,
    also measure the n-gram overlap of each task with the corpus its model card records and store it in each
    run's record. `claims` (default): each run is claimed next to its result before it trains, so a notebook and
    an `eval` (or several) on the same runs never train one twice. `metadata`: what you state about the model
    (params, context, license, base_model, training_data, open_weights; as a grid file's `metadata`), recorded
    over its model card's and marked as stated. `threads`: torch's CPU threads (default on a CPU: the cores not
    already busy by the load average, `eval`'s and `pretrain`'s rule). Returns the grid's results (this call's
    and those already there)."""
    plan = plan_evaluation(model, tasks, lang=lang, seeds=seeds, data_dir=data_dir, results=results, name=name,
                           catalogue=TaskCatalogue.build(task_files), overwrite=overwrite, overrides=overrides, metadata=metadata,
                           quick=quick, rename=True)
    if check_contamination:

        attach_to_plan(plan)
    held = RunClaims() if claims else None
    try:
        execute_plan(plan, Execution(device, trust_remote_code), parallel=parallel, threads=threads,
                     progress=progress, claims=held)
    finally:
        if held is not None:
            held.close()
    return plan_results(plan)


def load_results(source: str | Path | Sequence[str | Path] = "results") -> Results:
    """The results of a results folder (as `biobench eval` writes it), a results.parquet, a folder holding one,
    or a published results dataset (hf://datasets/ORG/NAME); several sources as a list. Files the store's
    reader refuses are listed in `Results.problems`, never fatal."""
    # lazy: loads pandas
    from biobench.standings.dataset import resolve_sources

    sources = [source] if isinstance(source, str | Path) else list(source)
    refused: list[ScanProblem] = []
    folders = resolve_sources(sources, refused)
    for folder in folders:
        if not folder.is_dir():
            raise ResultsError(f"{folder}: no such results folder (give a folder written by `biobench eval`, a "
                               "results.parquet or hf://datasets/ORG/NAME)")
    # through real folders only (store.seed_paths: the board's rule, so every export counts the same runs)
    seeds = {p: int(found[1]) for folder in folders for p in seed_paths(folder) if (found := SEED_FILE.match(p.name))}
    paths = sorted(seeds, key=lambda p: (str(p.parent.parent), p.parent.name, seeds[p]))
    out = Results.from_files(paths)
    out.problems.extend(RefusedFile(p.path, p.reason) for p in refused)
    return out


def compare(a: str, b: str, results: str | Path = "results", *, tasks: Sequence[str] | None = None,
            lang: Literal["fr", "en"] | None = None, n_boot: int = 1000, average: bool = False,
            allow_different_protocols: bool = False) -> dict[str, Any]:
    """A - B task by task from the two models' saved test predictions in `results`: the difference of
    seed-mean macro-F1, its 95% paired-bootstrap interval and p-value (fractions); `average`: also the task
    average per language. `a` and `b`: display names, aliases, hub ids, local model folders or results
    sub-folder names. A task whose runs differ in protocol settings gets no test unless
    `allow_different_protocols`. What `biobench compare A B` prints."""
    if n_boot < 1:
        raise ConfigError(f"--n-boot {n_boot}: give at least 1 bootstrap replicate (the paper uses 1000)")
    return compare_folders(Path(results), a, b, list(tasks) if tasks else None, lang, n_boot, average,
                           allow_different_protocols)


def contamination(corpus: str | Path, tasks: str | Sequence[str] | None = None, *,
                  lang: Literal["fr", "en"] | None = None, data_dir: str | Path | None = None, n: int = 13,
                  task_files: Sequence[str | Path] = (), text_field: str = "text") -> dict[str, Any]:
    """Per task and split, the share of examples that share a word `n`-gram with `corpus` (any form
    `pretrain` reads) and the longest shared run of words, streaming the corpus once (docs/API.md)."""
    return check_tasks(corpus, tasks, lang=lang, data_dir=data_dir, n=n, catalogue=TaskCatalogue.build(task_files),
                       text_field=text_field)


def study(path: str | Path, out: str | Path | None = None) -> Any:
    """The study file `path` (docs/STUDIES.md) read and checked, as `biobench study` reads it (every bad input a
    one-line ConfigError before anything runs); `out` replaces its study folder. The handle's `.plan()` lists the
    steps, `.run(jobs=1, threads=None, steps=None)` runs those not done here, `.submit(SlurmSettings(...))` as
    SLURM jobs with afterok dependencies, `.status()` says each step's state, `.report()` writes the report."""
    retry = f"biobench study run {path}" + (f" --out {out}" if out is not None else "")
    return StudyHandle(load_study(path, out), retry)
