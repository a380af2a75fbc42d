"""The result record: one (model, task, seed) run as stored, its validation and where it lives (docs/FORMATS.md).

Why validation lives with the record: results folders and results datasets come from other people. A record is
accepted only when every field a reader relies on is there and sane: an integer seed, a test macro-F1 in [0, 1],
every number finite and within 64-bit range (a `seed: Infinity`, `lineage.tokens.seen: NaN`, `model.params:
10**400` or `timings.tokens_per_s: inf` crashed the leaderboard), so no reader has to guard against them again.
No torch here (the leaderboard reads results).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from biobench.errors import ResultsError
from biobench.runtime.jsonfile import object_at
from biobench.runtime.paths import SAFE_NAME

SCHEMA = "biobench.result/1"
KEY_FIELDS = ("model_revision", "data_checksum", "protocol_hash", "seed")
REQUIRED_FIELDS = ("model", "task", "seed", "protocol", "key", "metrics")
# seed-<n>.json: a run of the task's own protocol; seed-<n>.smoke-<12 hex>.json: a run with protocol overrides
# (a smoke run), named by its protocol's hash, so a check and the real run of one seed sit side by side.
# \Z, not $: "seed-1.json\n" is no seed file
SEED_FILE = re.compile(r"seed-(-?\d+)(?:\.smoke-([0-9a-f]{12}))?\.json\Z")
SMOKE_NAME_DIGITS = 12
# the order of a result file's fields (docs/FORMATS.md); fields a writer leaves out are skipped
FIELD_ORDER = ("schema", "model", "task", "seed", "protocol", "key", "head", "metrics", "dev_metric", "dev_score",
               "best_epoch", "best_step", "history", "budget", "overrides", "degenerate", "timings", "versions", "device", "created", "predictions")
_CORE = ("model", "task", "seed", "protocol", "key", "metrics")
_NOT_DETAILS = frozenset((*_CORE, "schema", "predictions"))
# fields whose numbers are not checked: a diverged run's losses are recorded as they were (NaN), and no reader
# of results folders uses them
_UNCHECKED = frozenset(("history",))
INT_LIMIT = 2**63  # larger integers are no count biobench writes; float() of 10**400 raises OverflowError


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

    @property
    def metric(self) -> str:
        """The protocol's headline metric name (macro_f1 unless the protocol says otherwise)."""
        return str((self.protocol or {}).get("metric", "macro_f1"))

    @property
    def score(self) -> float:
        """The test score of the task's headline metric (`metric`, a fraction, checked by `from_dict`): what ranks,
        averages and is compared everywhere (the board, `compare`, `load_results`, the export, the card). A task
        spec's `metric = "micro_f1"` was recorded and picked the dev checkpoint, yet the board ranked by
        macro-F1 (issue 57 item 3)."""
        return float(self.metrics["test"][self.metric])

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
        field, holds a number that is not finite or out of range, a seed that is not an integer, or a test
        macro-F1 that is not a fraction. `check_key=False` (readers that only aggregate scores, like the
        leaderboard) accepts an incomplete run key."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise ResultsError(f"{source}: not a biobench result (schema {found!r}, expected {SCHEMA!r})")
        raw_task = data.get("task")
        task: dict[str, Any] = raw_task if isinstance(raw_task, dict) else {"id": raw_task}
        test = object_at(data, "metrics").get("test")
        missing = [f for f in REQUIRED_FIELDS if f not in data]
        if check_key:
            missing += [f"key.{f}" for f in KEY_FIELDS
                        if not isinstance(data.get("key"), dict) or f not in data["key"]]
        missing += ["task.id"] if "task" in data and task.get("id") is None else []
        missing += ["metrics.test.macro_f1"] if "metrics" in data and not (
            isinstance(test, dict) and "macro_f1" in test) else []
        if missing:
            raise ResultsError(f"{source}: result file lacks field(s) {', '.join(missing)} (schema {SCHEMA})")
        assert isinstance(test, dict)  # checked above: a result without metrics.test.macro_f1 was refused
        value = test["macro_f1"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and 0.0 <= value <= 1.0):
            raise ResultsError(f"{source}: test macro_f1 {value!r} is not a fraction in [0, 1]")
        metric = object_at(data, "protocol").get("metric", "macro_f1")
        headline = test.get(metric) if isinstance(metric, str) else None
        if isinstance(headline, bool) or not isinstance(headline, int | float) or not (
                math.isfinite(headline) and 0.0 <= headline <= 1.0):
            raise ResultsError(f"{source}: test {str(metric)[:40]!r} (the protocol's headline metric) is "
                               f"{str(headline)[:40]}, not a fraction in [0, 1]")
        seed = _seed(data["seed"])
        if seed is None:
            raise ResultsError(f"{source}: seed {data['seed']!r} is not an integer")
        _check_file_name(source, seed, task.get("id"), object_at(data, "model").get("slug"))
        bad = first_bad_number(data)
        if bad is not None:
            raise ResultsError(f"{source}: {bad[0]} is {bad[1]}, not a finite number in range; refused")
        details = {k: v for k, v in data.items() if k not in _NOT_DETAILS}
        return cls(data["model"] if isinstance(data["model"], dict) else {"id": data["model"]}, task, seed,
                   data["protocol"], data["key"], data["metrics"], details, data.get("predictions"))


def _check_file_name(source: str | Path, seed: int, task_id: Any, slug: Any) -> None:
    """A result read from a file (`source` a Path named like `result_path` writes it) must say the seed its name
    says, and, when it sits in the results layout (`<model slug>/<task>/`, its model's slug naming the folder
    above), the task its folder says: a `seed-42.json` claiming seed 43 replaced the genuine `seed-43.json` as a
    duplicate (issue 51 §7). ResultsError naming both and the fix."""
    if not isinstance(source, Path):
        return
    named = SEED_FILE.fullmatch(source.name)
    if named and int(named.group(1)) != seed:
        raise ResultsError(f"{source}: holds seed {seed}, but its file name says seed {named.group(1)}; "
                           "rename or remove it")
    # a task id that is no plain name is the scan's to report (`task.id ... is not a plain name`)
    if (named and isinstance(task_id, str) and SAFE_NAME.fullmatch(task_id) and slug == source.parent.parent.name
            and source.parent.name != task_id):
        raise ResultsError(f"{source}: holds task {task_id[:80]!r}, but it sits in the folder of task "
                           f"{source.parent.name!r}; move or remove it")


def _seed(value: Any) -> int | None:
    """An integer seed from an int, an integral float or a decimal string (older files); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,18}\s*", value):
        return int(value)
    return None


def _may_hold_bad_number(data: Any) -> bool:
    """False when no number anywhere in `data` is non-finite or outside +-2**63 (history included), walking
    values only. Why: a board validates thousands of result files, nearly all clean; building every dotted
    path up front cost a quarter of a cold scan (profiled), so paths are built only for a file this flags."""
    stack = [data]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is float:
            if not math.isfinite(value):
                return True
        elif kind is int:
            if not -INT_LIMIT < value < INT_LIMIT:
                return True
        elif kind is dict:
            stack.extend(value.values())
        elif kind is list:
            stack.extend(value)
        elif kind not in (str, bool, type(None)):
            return True  # another type (a subclass, numpy): the full walk decides
    return False


def first_bad_number(data: Any) -> tuple[str, Any] | None:
    """(dotted path, value) of the first number that is not finite or not within +-2**63, walking the parsed
    JSON without recursion (its depth is bounded by the reader anyway); `history` is not checked."""
    if not _may_hold_bad_number(data):
        return None
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                return where, value
        elif isinstance(value, int):
            if not -INT_LIMIT < value < INT_LIMIT:
                return where, f"{str(value)[:12]}... ({len(str(abs(value)))} digits)"
        elif isinstance(value, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in value.items()
                         if where or k not in _UNCHECKED)
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
    return None


def new_result(model: dict[str, Any], task: dict[str, Any], seed: int, protocol: dict[str, Any],
               key: dict[str, Any], metrics: dict[str, Any], details: dict[str, Any]) -> Result:
    """The record a writer (the eval grid, the linear probe) stores: its fields plus the creation time, UTC
    to the second, last among the details."""
    created = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Result(model, task, seed, protocol, key, metrics, {**details, "created": created})


def result_path(results_dir: str | Path, model_slug: str, task_id: str, seed: int, smoke_protocol: str | None = None
                ) -> Path:
    """Where the result of one run lives: `<results>/<model>/<task>/seed-<n>.json` for a run of the task's own
    protocol; for a smoke run (protocol overrides, `smoke_protocol`: its protocol hash, hex)
    `seed-<n>.smoke-<12 hex of that hash>.json` beside it. Why: results of different protocols for the same seed
    never collide (a 1-epoch check, then the protocol run of that seed, keep both), while a protocol run keeps
    the name older folders use; `--overwrite` is left for redoing the same run. The one home of this layout:
    anything stored next to a result (claims, predictions) derives its name from this path."""
    folder = Path(results_dir) / model_slug / task_id
    if smoke_protocol is None:
        return folder / f"seed-{seed}.json"
    digits = smoke_protocol[:SMOKE_NAME_DIGITS].lower()
    if len(digits) < SMOKE_NAME_DIGITS or digits.strip("0123456789abcdef"):
        raise ValueError(f"a smoke run's protocol hash must be hex (at least {SMOKE_NAME_DIGITS} digits), "
                         f"not {smoke_protocol[:40]!r}")
    return folder / f"seed-{seed}.smoke-{digits}.json"


def predictions_path(path: str | Path) -> Path:
    """`seed-<n>.predictions.jsonl` beside `seed-<n>.json`."""
    path = Path(path)
    return path.with_name(path.name.removesuffix(".json") + ".predictions.jsonl")


def claim_path(path: str | Path) -> Path:
    """`seed-<n>.claim/` beside `seed-<n>.json`: the folder of the run's claim (a runtime.leases lease folder,
    bench/eval/claims.py), derived from the result's path so that claims follow results wherever they live."""
    path = Path(path)
    return path.with_name(path.name.removesuffix(".json") + ".claim")


class RunKey(TypedDict):
    """What identifies a run (KEY_FIELDS): the same key means the same weights, data, protocol and seed."""

    model_revision: str
    data_checksum: str
    protocol_hash: str
    seed: int


def run_key(model_revision: str, data_checksum: str, protocol_hash: str, seed: int) -> RunKey:
    return {"model_revision": model_revision, "data_checksum": data_checksum,
            "protocol_hash": protocol_hash, "seed": seed}
