"""Evaluation results of one model, summarised per task for its model card's `model-index`."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from biobench.errors import DataError
from biobench.models import folders_of_revision
from biobench.results import Result, iter_results


def model_results(results_dir: str | Path, revision: str) -> list[Result]:
    """Every result of the weights with this revision, in whichever results sub-folder it lies (the folder
    named after the model, one written under another name or location of the same weights, the old layout)."""
    return [result for folder in folders_of_revision(results_dir, revision)
            for _, result in iter_results(results_dir, folder.name) if result.model.get("revision") == revision]


def task_summaries(results: list[Result], where: str) -> list[dict[str, Any]]:
    """Per task: the headline test metric (the protocol's `metric`, macro-F1 by default) averaged over seeds."""
    per_task: dict[str, dict[str, Any]] = {}
    for result in results:
        task = result.task
        metric = (result.protocol or {}).get("metric", "macro_f1")
        value = result.metrics["test"].get(metric)
        if value is None:
            continue
        entry = per_task.setdefault(task["id"], {"task_id": task["id"], "kind": task.get("kind", ""),
                                                 "lang": task.get("lang", ""), "metric": metric,
                                                 "values": [], "seeds": []})
        entry["values"].append(float(value))
        entry["seeds"].append(result.seed)
    if not per_task:
        raise DataError(f"no results for {where} (run `biobench eval --model ...` first)")
    return [{**e, "value": statistics.fmean(e["values"])} for e in sorted(per_task.values(), key=lambda e: e["task_id"])]
