"""The results store: one JSON per (model, task, seed) plus its test predictions (docs/FORMATS.md).

Why it is built this way: a grid of hundreds of fine-tuning runs gets killed, resharded and rerun. Every file
is written atomically (biobench.runtime.files: tmp file in the same folder + os.replace, the umask's mode)
with the predictions first and the result last, so a result file exists only for a finished run. A run is
identified by its key (model revision, data checksum, protocol hash, seed): an existing result with the same
key is skipped; one with another key is never replaced silently. `Result` is the one record that the writers
(eval grid, probe) build and every reader (compare, model cards, leaderboard) gets back. No torch here (the
leaderboard reads results).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from biobench.errors import ResultsError
from biobench.runtime.files import atomic_write

SCHEMA = "biobench.result/1"
KEY_FIELDS = ("model_revision", "data_checksum", "protocol_hash", "seed")
REQUIRED_FIELDS = ("model", "task", "seed", "protocol", "key", "metrics")
SEED_FILE = re.compile(r"^seed-(-?\d+)\.json$")
# the order of a result file's fields (docs/FORMATS.md); fields a writer leaves out are skipped
FIELD_ORDER = ("schema", "model", "task", "seed", "protocol", "key", "head", "metrics", "dev_metric", "dev_score",
               "best_epoch", "best_step", "history", "timings", "versions", "device", "created", "predictions")
_CORE = ("model", "task", "seed", "protocol", "key", "metrics")
_NOT_DETAILS = frozenset((*_CORE, "schema", "predictions"))

Decision = Literal["new", "skip", "overwrite"]


@dataclass
class Result:
    """One (model, task, seed) result as stored. The fields every reader relies on are typed; the rest
    (head, dev score, history, timings, versions, ...) stay in `details` exactly as written, so a file read
    and written again is byte-identical."""

    model: dict[str, Any]
    task: dict[str, Any]
    seed: int
    protocol: dict[str, Any]
    key: dict[str, Any]
    metrics: dict[str, Any]
    details: dict[str, Any] = field(default_factory=dict)
    predictions: str | None = None  # file name of the predictions JSONL beside the result
    schema: str = SCHEMA

    @property
    def task_id(self) -> str:
        return str(self.task["id"])

    @property
    def slug(self) -> str | None:
        return self.model.get("slug") or self.model.get("id")

    @property
    def macro_f1(self) -> float:
        """Test macro-F1 (a fraction), the headline score."""
        return self.metrics["test"]["macro_f1"]

    def to_dict(self) -> dict[str, Any]:
        values = {"schema": self.schema, **{f: getattr(self, f) for f in _CORE}, **self.details,
                  "predictions": self.predictions}
        ordered = {f: values[f] for f in FIELD_ORDER if f in values}
        return {**ordered, **{k: v for k, v in values.items() if k not in ordered}}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any, source: str | Path = "<result>", check_key: bool = True) -> Result:
        """Validate a parsed result file; ResultsError naming `source` when it is not a biobench result, lacks a
        field, or its test macro-F1 is not a fraction. `check_key=False` (readers that only aggregate scores,
        like the leaderboard) accepts an incomplete run key."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise ResultsError(f"{source}: not a biobench result (schema {found!r}, expected {SCHEMA!r})")
        task = data.get("task") if isinstance(data.get("task"), dict) else {"id": data.get("task")}
        test = data["metrics"].get("test") if isinstance(data.get("metrics"), dict) else None
        missing = [f for f in REQUIRED_FIELDS if f not in data]
        if check_key:
            missing += [f"key.{f}" for f in KEY_FIELDS
                        if not isinstance(data.get("key"), dict) or f not in data["key"]]
        missing += ["task.id"] if "task" in data and task.get("id") is None else []
        missing += ["metrics.test.macro_f1"] if "metrics" in data and not (
            isinstance(test, dict) and "macro_f1" in test) else []
        if missing:
            raise ResultsError(f"{source}: result file lacks field(s) {', '.join(missing)} (schema {SCHEMA})")
        value = test["macro_f1"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and 0.0 <= value <= 1.0):
            raise ResultsError(f"{source}: test macro_f1 {value!r} is not a fraction in [0, 1]")
        try:
            seed = int(data["seed"])
        except (TypeError, ValueError):
            raise ResultsError(f"{source}: seed {data['seed']!r} is not an integer") from None
        details = {k: v for k, v in data.items() if k not in _NOT_DETAILS}
        return cls(data["model"] if isinstance(data["model"], dict) else {"id": data["model"]}, task, seed,
                   data["protocol"], data["key"], data["metrics"], details, data.get("predictions"))


def result_path(results_dir: str | Path, model_slug: str, task_id: str, seed: int) -> Path:
    return Path(results_dir) / model_slug / task_id / f"seed-{seed}.json"


def predictions_path(path: str | Path) -> Path:
    """`seed-<n>.predictions.jsonl` beside `seed-<n>.json`."""
    path = Path(path)
    return path.with_name(path.name.removesuffix(".json") + ".predictions.jsonl")


def run_key(model_revision: str, data_checksum: str, protocol_hash: str, seed: int) -> dict[str, Any]:
    return {"model_revision": model_revision, "data_checksum": data_checksum,
            "protocol_hash": protocol_hash, "seed": seed}


def _finished(path: Path) -> str:
    """What a full disk cannot harm: the finished results of the results folder `path` belongs to."""
    root = path.parent.parent.parent
    n = sum(1 for p in root.glob("*/*/seed-*.json") if SEED_FILE.match(p.name))
    return f"{n} finished result(s) under {root} are safe"


def write_result(path: str | Path, result: Result, predictions: Sequence[Mapping[str, Any]]) -> Result:
    """Write the predictions JSONL, then the result JSON (which names it); returns the result as written.
    A full disk raises DiskFullError (one line) and leaves the folder as it was."""
    path = Path(path)
    pred_path = predictions_path(path)
    safe = lambda: _finished(path)  # noqa: E731 - counted only when the disk is full
    atomic_write(pred_path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in predictions), safe)
    result.predictions = pred_path.name
    atomic_write(path, result.to_json(), safe)
    return result


def read_result(path: str | Path, check_key: bool = True) -> Result:
    """The Result of a file; ResultsError naming the file when it is missing, not valid JSON or not a biobench
    result (see Result.from_dict for `check_key`)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such result file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path}: corrupt result file (not valid JSON: {err})") from None
    except OSError as err:
        raise ResultsError(f"{path}: unreadable result file ({err.strerror or err})") from None
    return Result.from_dict(data, path, check_key)


def read_predictions(path: str | Path) -> list[dict[str, Any]]:
    """The predictions rows of a result (pass the result's path or the .jsonl itself); blank lines are skipped."""
    path = Path(path)
    if not path.name.endswith(".jsonl"):
        path = predictions_path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ResultsError(f"{path}: predictions file is missing (rerun the seed with --overwrite)") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path}: unreadable predictions file ({err})") from None
    rows = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ResultsError(f"{path}:{lineno}: corrupt predictions line ({err})") from None
        if not isinstance(row, dict) or "gold" not in row or "pred" not in row:
            raise ResultsError(f"{path}:{lineno}: a predictions row needs 'gold' and 'pred'")
        rows.append(row)
    return rows


@dataclass
class AlignedPredictions:
    """Predictions of several models (groups) on the same test examples, ready for paired tests."""

    ids: list
    gold: list
    preds: dict[str, list[list]]  # group -> one prediction list per seed, in the order given
    dropped: list[tuple[str, str, str]] = field(default_factory=list)  # (group, source, reason)


def align_predictions(groups: Mapping[str, Sequence[tuple[str, Sequence[Mapping[str, Any]]]]],
                      strict: bool = True) -> AlignedPredictions | None:
    """Pair up predictions files: `groups` maps a model to its seeds' (source, rows). Seeds pair when their rows
    hold the same test examples (ids and gold, in order). The reference of a model is its first seed; the
    reference of all is the first model's. `strict`: a mismatch raises ResultsError naming both files
    (`biobench compare`); otherwise the seed (or, when its reference differs, the whole model) is dropped and
    listed in `dropped` (the leaderboard). None when no seed is left."""
    out = AlignedPredictions([], [], {})

    def differs(group: str, source: str, reference: str, reason: str) -> None:
        if strict:
            raise ResultsError(f"{source}: its test examples (ids/gold) differ from {reference}; the two runs were "
                               "scored on different data, so they cannot be compared pairwise")
        out.dropped.append((group, source, reason))

    examples = first_source = None
    for group, seeds in groups.items():
        own = own_source = None
        kept = []
        for source, rows in seeds:
            these = [(r.get("id"), r["gold"]) for r in rows]
            if own is None:
                own, own_source = these, source
            elif these != own:
                differs(group, source, own_source, "predictions are not aligned with the model's other seeds")
                continue
            kept.append([r["pred"] for r in rows])
        if own is None:
            continue
        if examples is None:
            examples, first_source = own, own_source
        elif own != examples:
            differs(group, own_source, first_source,
                    f"predictions use other test examples than {first_source}; left out of paired tests")
            continue
        out.preds[group] = kept
    if examples is None:
        return None
    out.ids, out.gold = [i for i, _ in examples], [g for _, g in examples]
    return out


def _key_difference(old: Result, key: Mapping[str, Any], protocol: Mapping[str, Any] | None) -> str:
    parts = []
    for name in KEY_FIELDS:
        was, now = old.key.get(name), key.get(name)
        if was == now:
            continue
        if name == "protocol_hash" and protocol is not None and isinstance(old.protocol, dict):
            changed = sorted(
                f for f in set(protocol) | set(old.protocol)
                if f != "hash" and protocol.get(f) != old.protocol.get(f)
            )
            detail = ", ".join(f"{f} {old.protocol.get(f)!r} -> {protocol.get(f)!r}" for f in changed)
            parts.append(f"protocol ({detail or 'hash differs'})")
        else:
            parts.append(f"{name} {str(was)[:19]} -> {str(now)[:19]}")
    return "; ".join(parts)


def decide(path: str | Path, key: Mapping[str, Any], overwrite: bool = False,
           protocol: Mapping[str, Any] | None = None) -> Decision:
    """What to do for a planned run whose result goes to `path`:
    "new" (nothing there), "skip" (same key, finished), "overwrite" (--overwrite and something is there).
    A corrupt file or a result of another run raises ResultsError unless `overwrite`."""
    path = Path(path)
    if not path.exists():
        return "new"
    if overwrite:
        return "overwrite"
    try:
        old = read_result(path)
    except ResultsError as err:
        raise ResultsError(f"{err}; fix or delete it, or pass --overwrite to redo this run") from None
    if all(old.key.get(f) == key.get(f) for f in KEY_FIELDS):
        return "skip"
    raise ResultsError(
        f"{path} holds a result of another run ({_key_difference(old, key, protocol)}); not overwriting it: "
        "pass --overwrite to replace it, or --results DIR to keep both"
    )


def iter_results(results_dir: str | Path, model_slug: str | None = None,
                 task_id: str | None = None) -> Iterator[tuple[Path, Result]]:
    """(path, result) for every `<results>/<slug>/<task>/seed-<n>.json`, sorted; corrupt files raise."""
    root = Path(results_dir)
    pattern = f"{model_slug or '*'}/{task_id or '*'}/seed-*.json"
    paths = [p for p in root.glob(pattern) if SEED_FILE.match(p.name)]
    for path in sorted(paths, key=lambda p: (p.parent.parent.name, p.parent.name, int(SEED_FILE.match(p.name)[1]))):
        yield path, read_result(path)
