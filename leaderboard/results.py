"""Read results folders (docs/FORMATS.md) and the paper's reference rows, tolerantly.

Every file that cannot be used becomes a `Problem` (path + reason) instead of an exception: one corrupt or
half-written result must never take the leaderboard down. No torch here (the leaderboard starts fast).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from biobench.names import display_name

SEED_FILE = re.compile(r"^seed-(\d+)\.json$")
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


def _fraction(value: Any) -> float:
    x = float(value)
    if not math.isfinite(x) or not 0.0 <= x <= 1.0:
        raise ValueError(f"macro_f1 {value!r} is not a fraction in [0, 1]")
    return x


def _per_label_f1(per_label: Any) -> dict[str, float]:
    if not isinstance(per_label, dict):
        return {}
    out = {}
    for label, v in per_label.items():
        f1 = v.get("f1") if isinstance(v, dict) else v
        if isinstance(f1, int | float) and math.isfinite(f1):
            out[str(label)] = float(f1)
    return out


def parse_result(path: Path, known_langs: dict[str, str] | None = None) -> Run:
    """One result file -> Run; raises ValueError/KeyError/TypeError/json errors with a reason."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    model, task = data["model"], data["task"]
    task_id = str(task["id"] if isinstance(task, dict) else task)
    slug = str(model.get("slug") or model.get("id") or path.parent.parent.name)
    lang = (task.get("lang") if isinstance(task, dict) else None) or (known_langs or {}).get(task_id)
    if not lang:
        raise ValueError(f"no task.lang and task {task_id!r} is not a known task")
    test = data["metrics"]["test"]
    pred_name = data.get("predictions")
    pred_path = path.parent / pred_name if pred_name else path.with_name(path.stem + ".predictions.jsonl")
    return Run(
        path=path,
        model=slug,
        name=display_name(model),  # the stored name; older files: built from alias / lineage / id
        lang=str(lang),
        task=task_id,
        kind=str(task.get("kind", "classification")) if isinstance(task, dict) else "classification",
        seed=int(data["seed"]),
        score=_fraction(test["macro_f1"]),
        per_label=_per_label_f1(test.get("per_label")),
        predictions=pred_path if pred_path.is_file() else None,
        model_meta=dict(model),
        details={k: data[k] for k in ("key", "protocol", "timings", "device", "dev_score", "created") if k in data},
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
            if not SEED_FILE.match(path.name):
                continue
            try:
                run = parse_result(path, known_langs)
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
                reason = f"{type(err).__name__}: {err}" if not isinstance(err, KeyError) else f"missing field {err}"
                scan.problems.append(Problem(str(path), reason))
                continue
            key = (run.model, run.task, run.seed)
            if key in seen:
                scan.problems.append(Problem(str(path), f"duplicate of {seen[key]} (kept the first)"))
                continue
            seen[key] = path
            scan.runs.append(run)
    return scan


@dataclass(frozen=True)
class Predictions:
    ids: list
    gold: list
    pred: list


def read_predictions(path: Path) -> Predictions:
    """A predictions JSONL (one {"id", "gold", "pred"} per test example); raises ValueError naming the line."""
    ids, gold, pred = [], [], []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                ids.append(row.get("id", lineno))
                gold.append(row["gold"])
                pred.append(row["pred"])
            except (json.JSONDecodeError, KeyError, AttributeError) as err:
                raise ValueError(f"line {lineno}: {type(err).__name__}: {err}") from err
    if not ids:
        raise ValueError("no predictions")
    return Predictions(ids, gold, pred)


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
