"""Per-task seed summaries and the minimum detectable difference, in the results' unit (fractions).

Why one home: `eval`'s summary, the model card's `model-index` and the leaderboard's cells all group a model's
results by task and summarise the seeds (mean, std, t-interval clipped to the metric's range); the eval summary
and the leaderboard both report the minimum detectable difference. Written once here, in fractions; a reader
that shows percent scales at the edge (`TaskScores.summary(scale=100)`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biobench.errors import DataError, ResultsError
from biobench.stats import (
    DetectableDifference,
    SeedSummary,
    minimum_detectable_difference,
    prediction_metric,
    seed_summary,
)
from biobench.store.pairing import align_predictions
from biobench.store.record import Result
from biobench.store.result_files import read_predictions


@dataclass
class TaskScores:
    """One model's headline scores on one task, per seed (fractions), with what a summary row shows of the
    task."""

    task: str
    lang: str = ""
    kind: str = ""
    metric: str = "macro_f1"
    scores: dict[int, float] = field(default_factory=dict)  # seed -> score
    paths: dict[int, Path] = field(default_factory=dict)  # seed -> its result file, when read from one

    def add(self, seed: int, value: float, path: Path | None = None) -> None:
        """Record one seed's score; ResultsError when the seed has one already. Why: a second score silently took
        the first one's place, so two checkpoints grouped as one model showed one of their two scores (issue 57
        item 2); a model's seed is one run, and a second is the caller's to list as a problem."""
        if seed in self.scores:
            first = self.paths.get(seed)
            raise ResultsError(f"{path or self.task}: a second result for seed {seed} of {self.task} of one model"
                               + (f" (the first: {first})" if first else "") + "; left out (remove one of the two, "
                               "or keep them in two results folders)")
        self.scores[seed] = float(value)
        if path is not None:
            self.paths[seed] = path

    def summary(self, scale: float = 1.0) -> SeedSummary:
        """Mean, std and 95% t-interval over seeds, clipped to [0, scale] (scale 100: percent)."""
        return seed_summary([scale * v for v in self.scores.values()], bounds=(0.0, scale))


def task_scores(results: Iterable[tuple[Path | None, Result]], metric: str | None = None) -> dict[str, TaskScores]:
    """Results grouped by task id, in order of first appearance: each seed's test `metric` (default: the
    protocol's headline metric, macro-F1). A result without that metric is left out."""
    out: dict[str, TaskScores] = {}
    for path, result in results:
        name = metric or result.metric
        value = result.metrics["test"].get(name)
        if value is None:
            continue
        task = out.setdefault(result.task_id, TaskScores(result.task_id, str(result.task.get("lang", "")),
                                                         str(result.task.get("kind", "")), name))
        task.add(result.seed, value, path)
    return out


def detectable_difference(gold: Sequence, preds: Sequence[Sequence], kind: str, labels: Sequence = (),
                          n_boot: int = 1000, seed: int = 0, metric: str = "macro_f1") -> DetectableDifference:
    """The minimum detectable difference at 80% power (`stats.minimum_detectable_difference`) of one model on
    one task from its seeds' aligned predictions, in fractions of the task's `metric`."""
    return minimum_detectable_difference(
        gold, preds, prediction_metric(gold, *preds, kind=kind, labels=labels, metric=metric), n_boot, seed)


def files_detectable_difference(paths: Sequence[Path], kind: str, labels: Sequence = (),
                                problems: list[str] | None = None, metric: str = "macro_f1"
                                ) -> DetectableDifference | None:
    """`detectable_difference` from these seeds' predictions files; None when a file is missing or unreadable,
    or the seeds were scored on different examples. A file that is there but refused (a link out of its
    folder, over what its task can produce, a duplicate key) is added to `problems` as its one line: the MDD
    was NaN with no problem listed (issue 51 §5)."""
    try:
        aligned = align_predictions({"seeds": [(str(p), read_predictions(p)) for p in paths]})
    except ResultsError as err:
        if problems is not None and "is missing" not in str(err):
            problems.append(str(err))
        return None
    if aligned is None or not aligned.gold:
        return None
    return detectable_difference(aligned.gold, aligned.preds["seeds"], kind, labels, metric=metric)


def summary_row(scores: TaskScores, expected: int | None = None, mdd: bool = True,
                labels: Sequence = (), problems: list[str] | None = None) -> dict[str, Any]:
    """The JSON row of one task in `eval`'s summary: n, per-seed scores, mean/std/CI and the MDD (fractions)."""
    row: dict[str, Any] = {"task": scores.task, "lang": scores.lang, "kind": scores.kind,
                           "seeds_expected": len(scores.scores) if expected is None else expected,
                           "n": len(scores.scores), "scores": dict(scores.scores)}
    if scores.scores:
        s = scores.summary()
        row.update(mean=float(s.mean), std=float(s.std), ci_low=float(s.ci_low), ci_high=float(s.ci_high))
        found = (files_detectable_difference(list(scores.paths.values()), scores.kind, labels, problems,
                                             scores.metric)
                 if mdd else None)
        if found is not None:
            row.update(mdd=found.mdd, mdd_many_seeds=found.mdd_many_seeds, test_se=found.test_se)
    return row


def language_average(rows: Sequence[dict[str, Any]], benchmark: Sequence[str]) -> dict[str, Any]:
    """The average of one language's task means (`rows`: summary_row rows of that language).

    When the rows hold a task of the language's benchmark (`benchmark`: the paper's tasks of that language, in
    paper order) the average is the paper's: over exactly those tasks, and None (with the `missing` ones named)
    unless every one of them has a mean: a mean over 7 of the 8 French tasks is not the French average and
    is never printed as one. Rows of extra tasks only (the generated demo tasks): the mean of those present."""
    means = {r["task"]: r["mean"] for r in rows if "mean" in r}
    if any(r["task"] in benchmark for r in rows):
        missing = [t for t in benchmark if t not in means]
        mean = None if missing else sum(means[t] for t in benchmark) / len(benchmark)
        return {"mean": mean, "n_tasks": len(benchmark) - len(missing), "tasks_expected": len(benchmark),
                "benchmark": True, "missing": missing}
    present = list(means.values())
    return {"mean": sum(present) / len(present) if present else None, "n_tasks": len(present),
            "tasks_expected": len(rows), "benchmark": False, "missing": [r["task"] for r in rows if "mean" not in r]}


def model_summaries(results: Iterable[Result], where: str) -> list[dict[str, Any]]:
    """Per task of one model's `results`, sorted by task id: the headline test metric (the protocol's `metric`,
    macro-F1 by default) per seed and its mean over seeds, as the model card's `model-index` rows (task_id, kind,
    lang, metric, values, seeds, value). DataError naming `where` when there is no result."""
    per_task = task_scores((None, r) for r in results)
    if not per_task:
        raise DataError(f"no results for {where} (run `biobench eval --model ...` first)")
    return [{"task_id": t.task, "kind": t.kind, "lang": t.lang, "metric": t.metric, "values": list(t.scores.values()),
             "seeds": list(t.scores), "value": t.summary().mean} for _, t in sorted(per_task.items())]
