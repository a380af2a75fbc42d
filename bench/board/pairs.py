"""Two models' results folders compared task by task: which folder a model name means, its runs per task, the
aligned test predictions of two models and the paired bootstrap of A - B (per task and on the task average).

What `biobench compare` computes; the command only parses and prints. Torch-free: a local model folder is
matched to its results by the sha256 of its weights (biobench.eval.models, imported lazily, loads no model).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biobench.errors import ConfigError
from biobench.store import Result

if TYPE_CHECKING:
    from biobench.stats import TaskPredictions

TaskRuns = dict[int, tuple[Path, Result]]  # seed -> (result file, result) of one model on one task


def model_folder(results: Path, name: str) -> Path:
    """The results sub-folder of a model given as a results folder name, a display name (`--name`, alias,
    'recipe · base · tokens'), a hub id or a local model folder (found by its weights, wherever they lie now)."""
    if not Path(name).is_absolute() and (results / name).is_dir():  # results / "/abs/model" is the model itself
        return results / name
    from biobench.eval.models import inspect_model, resolve_model
    from biobench.store.layout import folders_of_revision, model_slug

    found = sorted(p for p in results.iterdir() if p.is_dir()) if results.is_dir() else []
    slug = model_slug(name)
    named = [p for p in found if p.name.split("--")[0].lower() == slug.lower() and "--probe" not in p.name]
    if len(named) == 1:
        return named[0]
    try:
        ref = resolve_model(name)
    except Exception:  # noqa: BLE001 - not a model biobench can resolve here: the names are all there is
        ref = None
    if ref is not None and ref.path is None and not named:  # the hub id the results record: no hub needed
        recorded = _folders_recording(found, ref.hub_id)
        if len(recorded) == 1:
            return recorded[0]
    if ref is not None and (ref.path is not None or not named):  # a hub model is inspected only when needed
        with contextlib.suppress(Exception):  # no weights, hub offline: the old layout's name is left
            by_weights = folders_of_revision(results, inspect_model(ref).revision)
            if by_weights:
                return by_weights[0]
        if (results / ref.legacy_slug).is_dir():
            return results / ref.legacy_slug
    if len(named) > 1:
        raise ConfigError(f"'{name}' names {len(named)} models in {results} ({', '.join(p.name for p in named)}): "
                          "pass the results folder name, or the model folder itself")
    raise ConfigError(f"no results for model '{name}' in {results}; models there: "
                      f"{', '.join(p.name for p in found) or 'none'}")


def _folders_recording(folders: list[Path], hub_id: str | None) -> list[Path]:
    """The results folders whose results name the hub model `hub_id` (the id their result files record): a
    model named by alias or hub id is found without asking the hub for its revision."""
    from biobench.errors import ResultsError
    from biobench.store import read_result

    def recorded_id(folder: Path) -> str | None:
        for path in sorted(folder.glob("*/seed-*.json")):
            with contextlib.suppress(ResultsError):  # an unreadable file: another one of the folder may say
                return str(read_result(path, check_key=False).model.get("id") or "")
        return None

    return [f for f in folders if hub_id and (recorded_id(f) or "").lower() == hub_id.lower()]


def display_of(folder: Path) -> str:
    """The display name of the model whose results are in `folder` (as the leaderboard shows it)."""
    from biobench.names import display_name
    from biobench.store import iter_results

    first = next(iter_results(folder.parent, folder.name), None)
    return display_name(first[1].model) if first else folder.name


def _load_task_runs(folder: Path) -> dict[str, TaskRuns]:
    from biobench.store import iter_results

    runs: dict[str, TaskRuns] = {}
    for path, result in iter_results(folder.parent, folder.name):
        runs.setdefault(result.task_id, {})[result.seed] = (path, result)
    return runs


def task_predictions(task: str, runs_a: TaskRuns, runs_b: TaskRuns) -> TaskPredictions:
    """The two models' aligned test predictions on `task` with the task's macro-F1, from the runs' predictions
    files, which must share their test examples (else ResultsError naming both files)."""
    from biobench.stats import TaskPredictions, prediction_macro_f1
    from biobench.store import align_predictions, read_predictions

    aligned = align_predictions({side: [(str(path), read_predictions(path)) for path, _ in
                                        (runs[seed] for seed in sorted(runs))]
                                 for side, runs in (("a", runs_a), ("b", runs_b))})
    first = next(iter(runs_a.values()))[1]
    preds_a, preds_b = aligned.preds["a"], aligned.preds["b"]
    metric = prediction_macro_f1(aligned.gold, *preds_a, *preds_b, kind=first.task["kind"],
                                 labels=first.task.get("labels") or ())
    return TaskPredictions(task, aligned.gold, preds_a, preds_b, metric)


def _scores(runs: TaskRuns) -> list[float]:
    return [runs[seed][1].macro_f1 for seed in sorted(runs)]


def compare_task(task: str, runs_a: TaskRuns, runs_b: TaskRuns, n_boot: int) -> dict[str, Any]:
    from biobench.store.compare import compare_task as compare_scores

    paired = task_predictions(task, runs_a, runs_b)
    c = compare_scores(_scores(runs_a), _scores(runs_b), paired, n_boot)
    first = next(iter(runs_a.values()))[1]
    return {"task": task, "lang": first.task["lang"], "kind": first.task["kind"],
            "n_test": len(paired.gold), "seeds_a": sorted(runs_a), "seeds_b": sorted(runs_b),
            "mean_a": c.mean_a, "mean_b": c.mean_b, "diff": c.diff, "ci_low": c.ci_low,
            "ci_high": c.ci_high, "p_value": c.p_value, "n_boot": c.n_boot}


def compare_average(tasks: list[str], runs_a: dict[str, TaskRuns], runs_b: dict[str, TaskRuns],
                    n_boot: int) -> dict[str, Any]:
    """A - B on the task-averaged macro-F1 over `tasks` (biobench.store.compare.compare_average)."""
    from biobench.store.compare import compare_average as compare_tasks

    c = compare_tasks([task_predictions(t, runs_a[t], runs_b[t]) for t in tasks], n_boot)
    return {"tasks": list(c.tasks), "mean_a": c.mean_a, "mean_b": c.mean_b, "diff": c.diff, "ci_low": c.ci_low,
            "ci_high": c.ci_high, "p_value": c.p_value, "n_boot": c.n_boot}


def compare(results: Path, model_a: str, model_b: str, tasks: list[str] | None = None, lang: str | None = None,
            n_boot: int = 1000, average: bool = False) -> dict[str, Any]:
    folder_a, folder_b = model_folder(results, model_a), model_folder(results, model_b)
    runs_a, runs_b = _load_task_runs(folder_a), _load_task_runs(folder_b)
    common = [t for t in runs_a if t in runs_b]
    if tasks:
        missing = [t for t in tasks if t not in common]
        if missing:
            raise ConfigError(f"task(s) {', '.join(missing)} lack results for both models in {results} "
                              f"(tasks both have: {', '.join(common) or 'none'})")
        common = tasks
    if lang:
        common = [t for t in common if next(iter(runs_a[t].values()))[1].task["lang"] == lang]
    if not common:
        raise ConfigError(f"{display_of(folder_a)} and {display_of(folder_b)} have no task in common in {results}")
    rows = [compare_task(t, runs_a[t], runs_b[t], n_boot) for t in common]
    report = {"a": display_of(folder_a), "b": display_of(folder_b), "folder_a": folder_a.name,
              "folder_b": folder_b.name, "results_dir": str(results), "tasks": rows}
    if average:
        langs = sorted({r["lang"] for r in rows})
        report["averages"] = {lg: compare_average([r["task"] for r in rows if r["lang"] == lg], runs_a, runs_b, n_boot)
                              for lg in langs}
    return report
