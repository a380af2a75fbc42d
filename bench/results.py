"""The results store: one JSON per (model, task, seed) plus its test predictions (docs/FORMATS.md).

Why it is built this way: a grid of hundreds of fine-tuning runs gets killed, resharded and rerun. Every file
is written atomically (tmp file in the same folder + os.replace) with the predictions first and the result
last, so a result file exists only for a finished run. A run is identified by its key (model revision, data
checksum, protocol hash, seed): an existing result with the same key is skipped; one with another key is
never replaced silently. No torch here (the leaderboard reads results).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from biobench.errors import ResultsError

SCHEMA = "biobench.result/1"
KEY_FIELDS = ("model_revision", "data_checksum", "protocol_hash", "seed")
REQUIRED_FIELDS = ("model", "task", "seed", "protocol", "key", "metrics")
_SEED_FILE = re.compile(r"^seed-(-?\d+)\.json$")

Decision = Literal["new", "skip", "overwrite"]


def result_path(results_dir: str | Path, model_slug: str, task_id: str, seed: int) -> Path:
    return Path(results_dir) / model_slug / task_id / f"seed-{seed}.json"


def predictions_path(path: str | Path) -> Path:
    """`seed-<n>.predictions.jsonl` beside `seed-<n>.json`."""
    path = Path(path)
    return path.with_name(path.name.removesuffix(".json") + ".predictions.jsonl")


def run_key(model_revision: str, data_checksum: str, protocol_hash: str, seed: int) -> dict[str, Any]:
    return {"model_revision": model_revision, "data_checksum": data_checksum,
            "protocol_hash": protocol_hash, "seed": seed}


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` to `path` so that readers see either the old file or the complete new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_result(path: str | Path, result: Mapping[str, Any], predictions: Sequence[Mapping[str, Any]]) -> dict:
    """Write the predictions JSONL, then the result JSON (which names it); returns the result as written."""
    path = Path(path)
    pred_path = predictions_path(path)
    atomic_write_text(pred_path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in predictions))
    result = {"schema": SCHEMA, **result, "predictions": pred_path.name}
    atomic_write_text(path, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return result


def read_result(path: str | Path) -> dict[str, Any]:
    """A result dict; ResultsError naming the file when it is not valid JSON or not a biobench result."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such result file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path}: corrupt result file (not valid JSON: {err})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ResultsError(f"{path}: not a biobench result (schema {found!r}, expected {SCHEMA!r})")
    missing = [f for f in REQUIRED_FIELDS if f not in data]
    missing += [f"key.{f}" for f in KEY_FIELDS if not isinstance(data.get("key"), dict) or f not in data["key"]]
    if missing:
        raise ResultsError(f"{path}: result file lacks field(s) {', '.join(missing)} (schema {SCHEMA})")
    return data


def read_predictions(path: str | Path) -> list[dict[str, Any]]:
    """The predictions rows of a result (pass the result's path or the .jsonl itself)."""
    path = Path(path)
    if not path.name.endswith(".jsonl"):
        path = predictions_path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ResultsError(f"{path}: predictions file is missing (rerun the seed with --overwrite)") from None
    rows = []
    for lineno, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ResultsError(f"{path}:{lineno}: corrupt predictions line ({err})") from None
        if not isinstance(row, dict) or "gold" not in row or "pred" not in row:
            raise ResultsError(f"{path}:{lineno}: a predictions row needs 'gold' and 'pred'")
        rows.append(row)
    return rows


def _key_difference(old: Mapping[str, Any], key: Mapping[str, Any], protocol: Mapping[str, Any] | None) -> str:
    parts = []
    for field in KEY_FIELDS:
        was, now = old["key"].get(field), key.get(field)
        if was == now:
            continue
        if field == "protocol_hash" and protocol is not None and isinstance(old.get("protocol"), dict):
            changed = sorted(
                f for f in set(protocol) | set(old["protocol"])
                if f != "hash" and protocol.get(f) != old["protocol"].get(f)
            )
            detail = ", ".join(f"{f} {old['protocol'].get(f)!r} -> {protocol.get(f)!r}" for f in changed)
            parts.append(f"protocol ({detail or 'hash differs'})")
        else:
            parts.append(f"{field} {str(was)[:19]} -> {str(now)[:19]}")
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
    if all(old["key"].get(f) == key.get(f) for f in KEY_FIELDS):
        return "skip"
    raise ResultsError(
        f"{path} holds a result of another run ({_key_difference(old, key, protocol)}); not overwriting it: "
        "pass --overwrite to replace it, or --results DIR to keep both"
    )


def iter_results(results_dir: str | Path, model_slug: str | None = None,
                 task_id: str | None = None) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(path, result) for every `<results>/<slug>/<task>/seed-<n>.json`, sorted; corrupt files raise."""
    root = Path(results_dir)
    pattern = f"{model_slug or '*'}/{task_id or '*'}/seed-*.json"
    paths = [p for p in root.glob(pattern) if _SEED_FILE.match(p.name)]
    for path in sorted(paths, key=lambda p: (p.parent.parent.name, p.parent.name, int(_SEED_FILE.match(p.name)[1]))):
        yield path, read_result(path)
