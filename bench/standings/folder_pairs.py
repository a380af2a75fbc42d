"""Two models' results folders compared task by task: which folder a model name means, its runs per task and
the aligned test predictions of two models, handed to the one A-vs-B computation
(`biobench.store.comparison.compare_pair`: per task, the task average, the protocol settings that differ).

What `biobench compare` prints; the command only parses and formats. Torch-free: a local model folder is
matched to its results by the sha256 of its weights (biobench.models, imported lazily, loads no model).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError, ResultsError
from biobench.models import inspect_model, resolve_model
from biobench.names import display_name
from biobench.stats import TaskPredictions, prediction_metric
from biobench.store import Result, align_predictions, iter_results, model_group, read_predictions, read_result
from biobench.store.comparison import TaskComparison, compare_pair, run_settings
from biobench.store.comparison import TaskRuns as PairRuns
from biobench.store.layout import folders_of_revision, model_slug
from biobench.store.trust import describe_overrides, overrides

TaskRuns = dict[int, tuple[Path, Result]]  # seed -> (result file, result) of one model on one task


def model_folder(results: Path, name: str) -> Path:
    """The results sub-folder of a model given as a results folder name, a display name (`--name`, alias,
    'recipe · base · tokens'), a hub id or a local model folder (found by its weights, wherever they lie now)."""
    if not Path(name).is_absolute() and (results / name).is_dir():  # results / "/abs/model" is the model itself
        return results / name

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

    def recorded_id(folder: Path) -> str | None:
        for path in sorted(folder.glob("*/seed-*.json")):
            with contextlib.suppress(ResultsError):  # an unreadable file: another one of the folder may say
                return str(read_result(path, check_key=False).model.get("id") or "")
        return None

    return [f for f in folders if hub_id and (recorded_id(f) or "").lower() == hub_id.lower()]


def display_of(folder: Path) -> str:
    """The display name of the model whose results are in `folder` (as the leaderboard shows it)."""
    first = next(iter_results(folder.parent, folder.name), None)
    return display_name(first[1].model) if first else folder.name


def _load_task_runs(folder: Path) -> dict[str, TaskRuns]:
    """The runs of the one model whose results folder is `folder` (`store.model_group`, the identity the board and
    the export use); ConfigError when it holds results of several (files copied in from another model's folder):
    one model's seeds are never compared mixed with another's."""
    runs: dict[str, TaskRuns] = {}
    groups: dict[str, Path] = {}
    for path, result in iter_results(folder.parent, folder.name):
        groups.setdefault(model_group(result, path), path)
        runs.setdefault(result.task_id, {})[result.seed] = (path, result)
    if len(groups) > 1:
        raise ConfigError(f"{folder} holds results of {len(groups)} models ("
                          + ", ".join(f"{g}: {p.relative_to(folder)}" for g, p in groups.items())
                          + "); move each into its own results folder")
    return runs


def task_predictions(task: str, runs_a: TaskRuns, runs_b: TaskRuns) -> TaskPredictions:
    """The two models' aligned test predictions on `task` with the task's macro-F1, from the runs' predictions
    files, which must share their test examples (else ResultsError naming both files)."""
    aligned = align_predictions({side: [(str(path), read_predictions(path)) for path, _ in
                                        (runs[seed] for seed in sorted(runs))]
                                 for side, runs in (("a", runs_a), ("b", runs_b))})
    assert aligned is not None  # both sides have runs, and a mismatch raised (strict)
    first = next(iter(runs_a.values()))[1]
    preds_a, preds_b = aligned.preds["a"], aligned.preds["b"]
    metric = prediction_metric(aligned.gold, *preds_a, *preds_b, kind=first.task["kind"],
                               labels=first.task.get("labels") or (), metric=first.metric)
    return TaskPredictions(task, aligned.gold, preds_a, preds_b, metric)


def _scores(runs: TaskRuns) -> list[float]:
    return [runs[seed][1].score for seed in sorted(runs)]  # the task's headline metric (Result.score)


def _settings(runs: TaskRuns) -> list[dict[str, str]]:
    return [run_settings(result.protocol, describe_overrides(overrides(result)), result.key.get("data_checksum"))
            for _, result in (runs[seed] for seed in sorted(runs))]


def _row(task: str, runs_a: TaskRuns, runs_b: TaskRuns, compared: TaskComparison, n_test: int) -> dict[str, Any]:
    c = compared.comparison
    first = next(iter(runs_a.values()))[1]
    return {"task": task, "lang": first.task["lang"], "kind": first.task["kind"],
            "n_test": n_test, "seeds_a": sorted(runs_a), "seeds_b": sorted(runs_b),
            "mean_a": c.mean_a, "mean_b": c.mean_b, "diff": c.diff, "ci_low": c.ci_low,
            "ci_high": c.ci_high, "p_value": c.p_value, "n_boot": c.n_boot, "method": c.method,
            "differences": [d.text() for d in compared.differences]}


def compare(results: Path, model_a: str, model_b: str, tasks: list[str] | None = None, lang: str | None = None,
            n_boot: int = 1000, average: bool = False, allow_different_protocols: bool = False) -> dict[str, Any]:
    """What `biobench compare A B` prints: per task (and with `average`, per language) A - B from
    `biobench.store.comparison.compare_pair`, the settings in which the two models' runs differ, and the tasks
    left without a test because of them (unless `allow_different_protocols`)."""
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
    by_lang: dict[str, list[str]] = {}
    for t in common:
        by_lang.setdefault(str(next(iter(runs_a[t].values()))[1].task["lang"]), []).append(t)
    refused: list[str] = []
    rows, averages, differences, warnings = {}, {}, {}, []
    for lg, lang_tasks in sorted(by_lang.items()):
        paired = {t: task_predictions(t, runs_a[t], runs_b[t]) for t in lang_tasks}
        pair = compare_pair([PairRuns(t, _scores(runs_a[t]), _scores(runs_b[t]), _settings(runs_a[t]),
                                      _settings(runs_b[t]), paired[t]) for t in lang_tasks], n_boot, average=average,
                            allow_different_protocols=allow_different_protocols)
        for compared in pair.tasks:
            rows[compared.task] = _row(compared.task, runs_a[compared.task], runs_b[compared.task], compared,
                                         len(paired[compared.task].gold))
        if pair.average is not None:
            c = pair.average
            averages[lg] = {"tasks": list(c.tasks), "mean_a": c.mean_a, "mean_b": c.mean_b, "diff": c.diff,
                            "ci_low": c.ci_low, "ci_high": c.ci_high, "p_value": c.p_value, "n_boot": c.n_boot}
        refused += pair.refused
        differences.update({t: [d.text() for d in diffs] for t, diffs in pair.differences.items()})
        if pair.warning():
            warnings.append(pair.warning())
    report = {"a": display_of(folder_a), "b": display_of(folder_b), "folder_a": folder_a.name,
              "folder_b": folder_b.name, "results_dir": str(results), "tasks": [rows[t] for t in common],
              "same_protocol": not differences, "differences": differences, "refused": refused,
              "warning": " ".join(warnings)}
    if average:
        report["averages"] = averages
    return report
