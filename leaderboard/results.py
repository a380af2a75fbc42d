"""Read results folders (docs/FORMATS.md) and the paper's reference rows, tolerantly.

Files are read by the results store's one reader (`biobench.results`); every file that cannot be used becomes
a `Problem` (path + the reader's reason) instead of an exception: one corrupt or half-written result must never
take the leaderboard down. No torch here (the leaderboard starts fast).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from biobench import results as store
from biobench.errors import ResultsError
from biobench.names import display_name

ANALYSIS_FILES = {"cka": "cka.json", "needle": "needle_results.json", "cka_trajectory": "cka_trajectory.json"}


@dataclass(frozen=True)
class Problem:
    path: str
    reason: str


@dataclass(frozen=True)
class Run:
    """One measured (model, task, seed) result. `score` is the test macro-F1 as a fraction."""

    path: Path
    model: str  # slug: the identity of a model across tasks and folders
    name: str
    lang: str
    task: str
    kind: str
    seed: int
    score: float
    per_label: dict[str, float]
    predictions: Path | None
    model_meta: dict[str, Any]
    labels: tuple[str, ...] = ()  # the task's label inventory, when the result records it
    details: dict[str, Any] = field(default_factory=dict)  # run key, protocol, timings, device, dev_score


@dataclass(frozen=True)
class ReferenceRow:
    """The paper's published per-task numbers for one (language, model): percentages, means over seeds."""

    lang: str
    model: str
    recipe: str
    size: str
    context: int | None
    scores: dict[str, float]
    seeds: int
    paper_avg: float | None
    source: str


@dataclass
class Scan:
    runs: list[Run] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    analyses: dict[str, list[Path]] = field(default_factory=lambda: {k: [] for k in ANALYSIS_FILES})


def _per_label_f1(per_label: Any) -> dict[str, float]:
    if not isinstance(per_label, dict):
        return {}
    out = {}
    for label, v in per_label.items():
        f1 = v.get("f1") if isinstance(v, dict) else v
        if isinstance(f1, int | float) and math.isfinite(f1):
            out[str(label)] = float(f1)
    return out


def _reason(err: Exception, path: Path) -> str:
    """A store error's message without the file name (the Problem names the file): 'path:2: x' -> 'line 2: x'."""
    message = str(err).removeprefix(f"{path}: ")
    return re.sub(r"^(\d+): ", r"line \1: ", message.removeprefix(f"{path}:"))


def parse_result(path: Path, known_langs: dict[str, str] | None = None) -> Run:
    """One result file -> Run through the results store's reader (`biobench.results.read_result`), which
    raises ResultsError naming what is wrong. An incomplete run key is accepted (the board only aggregates
    scores), and a task without `lang` takes the language of the known task of that id."""
    result = store.read_result(path, check_key=False)
    task = result.task
    lang = task.get("lang") or (known_langs or {}).get(result.task_id)
    if not lang:
        raise ResultsError(f"{path}: no task.lang and task {result.task_id!r} is not a known task")
    slug = str(result.slug or path.parent.parent.name)
    pred_path = path.parent / result.predictions if result.predictions else store.predictions_path(path)
    return Run(
        path=path,
        model=slug,
        name=display_name(result.model),  # the stored name; older files: built from alias / lineage / id
        lang=str(lang),
        task=result.task_id,
        kind=str(task.get("kind", "classification")),
        seed=result.seed,
        score=float(result.macro_f1),
        per_label=_per_label_f1(result.metrics["test"].get("per_label")),
        predictions=pred_path if pred_path.is_file() else None,
        model_meta=dict(result.model),
        labels=tuple(task.get("labels") or ()),
        details={"key": result.key, "protocol": result.protocol,
                 **{k: result.details[k] for k in ("timings", "device", "dev_score", "created") if k in result.details}},
    )


def scan_results(dirs: Iterable[str | Path], known_langs: dict[str, str] | None = None) -> Scan:
    """Every `seed-<n>.json` under each folder (any depth), plus analysis outputs. Duplicates of a
    (model, task, seed) across folders keep the first and report the others."""
    scan = Scan()
    seen: dict[tuple[str, str, int], Path] = {}
    for root in map(Path, dirs):
        if not root.is_dir():
            scan.problems.append(Problem(str(root), "results folder does not exist"))
            continue
        for path in sorted(root.rglob("*.json")):
            kind = next((k for k, name in ANALYSIS_FILES.items() if path.name == name), None)
            if kind:
                scan.analyses[kind].append(path)
                continue
            if not store.SEED_FILE.match(path.name):
                continue
            try:
                run = parse_result(path, known_langs)
            except ResultsError as err:
                scan.problems.append(Problem(str(path), _reason(err, path)))
                continue
            key = (run.model, run.task, run.seed)
            if key in seen:
                scan.problems.append(Problem(str(path), f"duplicate of {seen[key]} (kept the first)"))
                continue
            seen[key] = path
            scan.runs.append(run)
    return scan


@lru_cache(maxsize=512)
def _predictions(path: str, mtime_ns: int) -> tuple[dict[str, Any], ...]:
    rows = store.read_predictions(Path(path))
    if not rows:
        raise ResultsError(f"{path}: no predictions")
    return tuple(rows)


def load_predictions(path: Path) -> list[dict[str, Any]]:
    """The rows of a predictions file (`biobench.results.read_predictions`), cached while the file is
    unchanged: significance groups, comparisons and MDDs read the same files many times."""
    try:
        return list(_predictions(str(path), path.stat().st_mtime_ns))
    except OSError as err:
        raise ResultsError(f"{path}: unreadable predictions file ({err.strerror or err})") from None


def problem_of(err: ResultsError, path: Path, what: str) -> Problem:
    return Problem(str(path), f"{what}: {_reason(err, path)}")


def reference_csv() -> Path:
    return Path(str(resources.files("biobench.leaderboard") / "reference" / "paper_results.csv"))


def load_reference(path: str | Path | None = None) -> list[ReferenceRow]:
    """The paper's Tables 1-2 (shipped with the package), one row per (language, model), file order."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    with open(path or reference_csv(), encoding="utf-8", newline="") as fh:
        for r in csv.DictReader(fh):
            entry = rows.setdefault(
                (r["lang"], r["model"]),
                {"recipe": r["recipe"], "size": r["size"], "context": int(r["context"]) if r["context"] else None,
                 "scores": {}, "seeds": int(r["seeds"]), "paper_avg": float(r["paper_avg"]) if r["paper_avg"] else None,
                 "source": r["source"]},
            )
            entry["scores"][r["task"]] = float(r["macro_f1"])
    return [ReferenceRow(lang=k[0], model=k[1], **v) for k, v in rows.items()]


def task_order(reference: Sequence[ReferenceRow]) -> dict[str, list[str]]:
    """The benchmark's tasks per language, in the paper's column order."""
    order: dict[str, list[str]] = {}
    for row in reference:
        for task in row.scores:
            if task not in order.setdefault(row.lang, []):
                order[row.lang].append(task)
    return order
