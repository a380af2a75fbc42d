"""The task catalogue as the API and `biobench tasks` list it: each task's spec facts, the protocol it resolves
to, and where (or why not) its data was found; split sizes on request.

Why two speeds: reading every data set takes a minute (NER corpora, the BioCreative rebuild of ChemProt), so
the listing comes from the specs and file checks alone; `counts=True` reads the data for the split sizes and
keeps them in a small cache keyed by the data files' fingerprint (tasks.loading.source_fingerprint), so the
second call is quick again. Only local and generated data is counted: the hub fallback is named but not
contacted, so the listing works offline.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

from biobench.errors import DataError
from biobench.protocols import resolve_task_protocol
from biobench.runtime.files import atomic_write, cache_home
from biobench.tasks.loading import load_task, locate, missing_message, resolve_data_dir, source_fingerprint
from biobench.tasks.registry import TaskCatalogue, builtin_catalogue


def cache_dir() -> Path:
    return cache_home("tasks")


def _counts(spec: Any, data_dir: Any) -> dict[str, Any]:
    """Split sizes, labels and checksum of a task's data: from the cache when its files are unchanged."""
    fingerprint = source_fingerprint(spec, data_dir)
    path = cache_dir() / f"{fingerprint.split(':')[-1][:32]}.json" if fingerprint else None
    if path is not None and path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass  # unreadable cache entry: counted again below
    task = load_task(spec, data_dir)
    counts = {"source": task.source, "checksum": task.checksum, "n_labels": len(task.labels),
              "labels": list(task.labels), "splits": {k: len(v) for k, v in task.splits.items()}}
    if path is not None:
        try:
            atomic_write(path, json.dumps(counts))
        except OSError:
            pass  # a read-only or full cache only costs the next call its speed
    return counts


def task_status(spec: Any, data_dir: Any, counts: bool = False) -> dict[str, Any]:
    """One row of the listing: the spec's facts (with the head, metric and dev metric it resolves to, and the
    spec's label inventory) plus where the data was found (files checked, not read). With `counts`, the data is
    read (or its cached counts reused): split sizes, checksum and the labels found in it. A bad head or metric
    in the spec is one ConfigError naming the spec file."""
    protocol = resolve_task_protocol(spec)
    row: dict[str, Any] = {
        "id": spec.id, "lang": spec.lang, "kind": spec.kind, "max_length": spec.max_length,
        "protocol": spec.protocol, "head": protocol.head, "metric": protocol.metric,
        "dev_metric": protocol.dev_metric, "labels": list(spec.labels) if spec.labels else None,
        "paper_task": spec.paper_task, "credentialed": spec.credentialed,
        "available": False, "source": None, "splits": None, "reason": None,
    }
    source, where = locate(spec, data_dir)
    if source is None:
        row["reason"] = missing_message(spec, data_dir, where)
        return row
    row.update(available=True, source=where)
    if counts:
        try:
            row.update(_counts(spec, data_dir))
        except DataError as err:
            row.update(available=False, reason=str(err))
    return row


def task_rows(lang: Literal["fr", "en"] | None = None, data_dir: str | Path | None = None,
              catalogue: TaskCatalogue | None = None, include_extra: bool = False,
              counts: bool | Collection[str] = False) -> list[dict[str, Any]]:
    """`task_status` of every task (the paper's 19, or one language's; `include_extra`: also the demo and extra
    tasks; `catalogue`: with your own task specs too, default the built-ins). `counts`: True reads every listed task's data for its split
    sizes, a collection of ids only those tasks' (`tasks --task-file F --counts` counts the file's tasks, not the
    20 built-ins: 67 s for one small task before)."""
    folder = resolve_data_dir(data_dir)
    return [task_status(spec, folder, counts is True or not isinstance(counts, bool) and spec.id in counts)
            for spec in (catalogue or builtin_catalogue()).tasks(lang, include_extra=include_extra)]
