"""Read results folders (docs/FORMATS.md) and the paper's reference rows, tolerantly.

Files are read by the results store's one reader (`biobench.store`); every file that cannot be used becomes
a `Problem` (path + the reader's reason) instead of an exception: one corrupt or half-written result must never
take the leaderboard down. No torch here (the leaderboard starts fast).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from biobench import store
from biobench.errors import BiobenchError, ResultsError
from biobench.names import display_name
from biobench.runtime.jsonfile import read_json
from biobench.runtime.paths import LANG_CODE, UnsafePathError, hide_paths, safe_name
from biobench.store import trust
from biobench.store.analysis import ANALYSIS_FILES


@dataclass(frozen=True)
class Problem:
    path: str
    reason: str

    def public(self, roots: Sequence[str | Path]) -> Problem:
        """This problem as a public page shows it: its file relative to the results folder it lies in, and any
        path in its reason likewise (a path outside every results folder by its last part, runtime.paths.hide_paths).
        Why: the Problems tab showed /tmp/.../cache/results/<sha>/model/task/seed-1.json to every visitor."""
        return Problem(public_path(self.path, roots), public_text(self.reason, roots))


def _root_prefixes(roots: Sequence[str | Path]) -> list[str]:
    """Each results folder as written and resolved (a symlinked /tmp), longest first, with a trailing separator."""
    found = {str(p).rstrip(os.sep) + os.sep for root in roots for p in (Path(root), Path(root).resolve())}
    return sorted(found, key=len, reverse=True)


def public_path(path: str, roots: Sequence[str | Path]) -> str:
    """A file named relative to the results folder holding it (`model--1234abcd/task/seed-1.json`); a results
    folder itself by its name; anything else by its last part."""
    text = str(path)
    for prefix in _root_prefixes(roots):
        if text.startswith(prefix):
            return text[len(prefix):]
        if text + os.sep == prefix:
            return Path(text).name
    return hide_paths(text)


def public_text(text: str, roots: Sequence[str | Path]) -> str:
    for prefix in _root_prefixes(roots):
        text = text.replace(prefix, "")
    return hide_paths(text)


PROBLEMS_LIKE_THIS = 5  # lines shown per kind of problem before "... and N more like this"
_ROW = re.compile(r" \(row \d+\)$")
_VALUE = re.compile(r"'[^']*'|\"[^\"]*\"|\S*/\S*|\d+")  # quoted values, paths, numbers


def collapse(problems: Sequence[Problem], keep: int = PROBLEMS_LIKE_THIS) -> list[Problem]:
    """`problems` with each kind past its first `keep` folded into one "... and N more like this" line, in first-
    seen order. A kind: the same reason once its quoted values, paths and numbers are blanked (a file's path is
    not part of it: 200,000 copies of one result are one kind). Why: a 1.2 MB results dataset of 200,000 rows
    printed 199,999 warning lines (`duplicate of ...`) and filled the Problems tab; one problem repeated tells
    nothing a count does not."""
    kinds: dict[str, list[Problem]] = {}
    for problem in problems:
        kinds.setdefault(_VALUE.sub("_", problem.reason), []).append(problem)
    out: list[Problem] = []
    for same in kinds.values():
        out += same[:keep]
        if len(same) > keep:
            out.append(Problem(_ROW.sub("", same[keep].path), f"... and {len(same) - keep:,} more like this"))
    return out


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
    smoke: str = ""  # a smoke run's protocol overrides (biobench.store.trust.describe_overrides); "" = the protocol's
    degenerate: str = ""  # degenerate test predictions and their likely reason (store.trust.degenerate_text)


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
    analyses: dict[str, list[Path]] = field(default_factory=lambda: {k: [] for k in (*ANALYSIS_FILES, "train_log")})
    listings: list[Listing] = field(default_factory=list)  # the walks; build_board keeps their stamps on the Board


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


def _check_ids(path: Path, task_id: str, lang: Any, predictions: Any) -> None:
    """A task id, language and predictions file name from a result become tabs, element ids and file names:
    each must look like the ones biobench writes, or the file is a Problem (never a tab, never a path)."""
    if not isinstance(lang, str) or not LANG_CODE.fullmatch(lang):
        raise ResultsError(f"{path}: task.lang {str(lang)[:80]!r} is not a language code (like fr, en)")
    try:
        safe_name(task_id, "task.id")
        if predictions:
            safe_name(predictions, "predictions file")
    except UnsafePathError as err:
        raise ResultsError(f"{path}: {err}") from None


def parse_result(path: Path, known_langs: dict[str, str] | None = None, data: dict[str, Any] | None = None,
                 listing: Listing | None = None) -> Run:
    """One result file -> Run through the results store's reader (`biobench.store.read_result`), which
    raises ResultsError naming what is wrong. An incomplete run key is accepted (the board only aggregates
    scores), and a task without `lang` takes the language of the known task of that id. `data`: the file's
    content as the scan index kept it (the board's fields only), instead of reading the file; `listing`: the
    scan's one directory walk, which says whether the predictions file exists without asking the disk again."""
    result = (store.read_result(path, check_key=False) if data is None
              else store.Result.from_dict(data, path, check_key=False))
    task = result.task
    lang = task.get("lang") or (known_langs or {}).get(result.task_id)
    if not lang:
        raise ResultsError(f"{path}: no task.lang and task {result.task_id!r} is not a known task")
    _check_ids(path, result.task_id, lang, result.predictions)
    slug = str(result.slug or path.parent.parent.name)
    pred_path = path.parent / result.predictions if result.predictions else store.predictions_path(path)
    note = trust.degenerate(result)
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
        predictions=pred_path if (pred_path.is_file() if listing is None else listing.has(pred_path)) else None,
        model_meta=dict(result.model),
        labels=tuple(task.get("labels") or ()),
        details={"key": result.key, "protocol": result.protocol,
                 **{k: result.details[k] for k in BOARD_DETAILS if k in result.details}},
        smoke=trust.describe_overrides(trust.overrides(result)),
        degenerate=trust.degenerate_text(note) if note else "",
    )


BOARD_DETAILS = ("timings", "device", "dev_score", "created", "contamination")
TRUST_FIELDS = ("overrides", "degenerate")  # what store.trust reads besides the protocol
TRAIN_LOG = "train_log.jsonl"  # a `biobench pretrain` run's per-step log (docs/FORMATS.md)
INDEX_VERSION = 2  # 2: the trust fields (overrides, degenerate) are kept


def _board_fields(path: Path) -> dict[str, Any] | None:
    """What `parse_result` reads of a result file (history, dev metrics and versions left out), or None when
    the bounded reader refuses the file or it is not a JSON object (the full reader then reports why)."""
    try:
        data = store.read_json_file(path)
    except ResultsError:
        return None
    if not isinstance(data, dict):
        return None
    keep = {k: data[k] for k in ("schema", "model", "task", "seed", "protocol", "key", "predictions", *BOARD_DETAILS,
                                 *TRUST_FIELDS) if k in data}
    metrics = data.get("metrics")
    test = metrics.get("test") if isinstance(metrics, dict) else None
    if isinstance(test, dict):
        keep["metrics"] = {"test": {k: test[k] for k in ("macro_f1", "per_label") if k in test}}
    elif "metrics" in data:
        keep["metrics"] = metrics
    return keep


MAX_INDEX_BYTES = 2**30  # ~2 KB per result: half a million results


def _index_entry(entry: Any) -> bool:
    """Whether a scan index entry has the shape this version writes: [size, mtime_ns, {board fields}]."""
    return (isinstance(entry, list) and len(entry) == 3 and all(isinstance(v, int) and not isinstance(v, bool)
                                                                 for v in entry[:2]) and isinstance(entry[2], dict))


class ScanIndex:
    """The board's fields of every result file of one results folder, on disk under the leaderboard cache and
    keyed per file by (size, mtime_ns): a warm start reads one JSON file instead of thousands, and a changed
    or new result file is read again on its own. JSON, never pickle; written with the one atomic writer."""

    def __init__(self, root: Path, cache_dir: str | Path | None):
        self.path = None
        self.files: dict[str, list[Any]] = {}
        self.changed = False
        if cache_dir is None:
            return
        digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
        self.path = Path(cache_dir) / f"scan-{digest}.json"
        try:  # another version, a damaged or foreign file of another shape: a miss, rewritten at save()
            data = read_json(self.path, MAX_INDEX_BYTES)
        except (OSError, BiobenchError):
            return
        if isinstance(data, dict) and data.get("v") == INDEX_VERSION and isinstance(data.get("files"), dict):
            self.files = data["files"]

    def fields(self, path: Path, rel: str, stamp: tuple[int, int] | None) -> dict[str, Any] | None:
        """The board's fields of `path` from the index when its (size, mtime_ns) `stamp` still matches."""
        if self.path is None or stamp is None:
            return None
        entry = self.files.get(rel)
        if _index_entry(entry) and entry[0] == stamp[0] and entry[1] == stamp[1]:
            return entry[2]
        data = _board_fields(path)
        if data is not None:
            self.files[rel] = [stamp[0], stamp[1], data]
            self.changed = True
        return data

    def save(self, present: set[str]) -> None:
        if self.path is None:
            return
        gone = set(self.files) - present
        for rel in gone:
            del self.files[rel]
        if not (self.changed or gone):
            return
        from biobench.errors import DiskFullError
        from biobench.runtime.files import atomic_write

        try:
            atomic_write(self.path, json.dumps({"v": INDEX_VERSION, "files": self.files}))
        except (OSError, DiskFullError):  # a read-only or full cache folder only costs the next start its speed
            pass


class Listing:
    """One walk of a results folder: every file under it, and the (size, mtime_ns) of the result and
    predictions files, taken once. Why: a warm start of a large board otherwise spent most of its time in three
    pathlib `stat`s per result (the scan index check, the predictions file, the significance fingerprint)."""

    def __init__(self, root: Path):
        self.files: set[str] = set()
        self.stamps: dict[str, tuple[int, int]] = {}
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                self.files.add(path)
                if name.endswith(".json") or name.endswith(".jsonl"):
                    try:
                        st = os.stat(path)
                    except OSError:  # removed while walking
                        continue
                    self.stamps[path] = (st.st_size, st.st_mtime_ns)

    def has(self, path: Path) -> bool:
        return str(path) in self.files

    def stamp(self, path: Path) -> tuple[int, int] | None:
        return self.stamps.get(str(path))

    def wanted(self) -> list[str]:
        """Every .json and train_log.jsonl, in the order sorted(Path.rglob) gives (by path parts)."""
        return sorted((p for p in self.files if p.endswith(".json") or os.path.basename(p) == TRAIN_LOG),
                      key=lambda p: p.split(os.sep))


def scan_results(dirs: Iterable[str | Path], known_langs: dict[str, str] | None = None,
                 cache_dir: str | Path | None = None) -> Scan:
    """Every `seed-<n>.json` under each folder (any depth), plus analysis outputs and pretraining logs.
    Duplicates of a (model, task, seed) across folders keep the first and report the others; a smoke run
    (protocol overrides) and a protocol run of the same seed are not duplicates (separate rows). With
    `cache_dir`, result files are read through the folder's ScanIndex."""
    scan = Scan()
    seen: dict[tuple[str, str, str, int], Path] = {}
    for root in map(Path, dirs):
        if not root.is_dir():
            scan.problems.append(Problem(str(root), "results folder does not exist"))
            continue
        index, present, listing = ScanIndex(root, cache_dir), set(), Listing(root)
        scan.listings.append(listing)
        prefix = len(str(root).rstrip(os.sep)) + 1
        for name_str in listing.wanted():
            name = os.path.basename(name_str)
            if name == TRAIN_LOG:
                scan.analyses["train_log"].append(Path(name_str))
                continue
            kind = next((k for k, fname in ANALYSIS_FILES.items() if name == fname), None)
            if kind:
                scan.analyses[kind].append(Path(name_str))
                continue
            if not store.SEED_FILE.fullmatch(name):
                continue
            path, rel = Path(name_str), name_str[prefix:]
            present.add(rel)
            try:
                run = parse_result(path, known_langs, index.fields(path, rel, listing.stamp(path)), listing)
            except ResultsError as err:
                scan.problems.append(Problem(str(path), _reason(err, path)))
                continue
            key = (run.model, run.smoke, run.task, run.seed)
            if key in seen:
                scan.problems.append(Problem(str(path), f"duplicate of {seen[key]} (kept the first)"))
                continue
            seen[key] = path
            scan.runs.append(run)
        index.save(present)
    return scan


@lru_cache(maxsize=512)
def _predictions(path: str, mtime_ns: int) -> store.PredictionColumns:
    rows = store.read_predictions(Path(path))
    if not rows:
        raise ResultsError(f"{path}: no predictions")
    return store.PredictionColumns.of(rows)


def load_predictions(path: Path) -> store.PredictionColumns:
    """A predictions file (`biobench.store.read_predictions`, its checks) as columns, cached while the file is
    unchanged: comparisons and MDDs read the same files many times."""
    try:
        return _predictions(str(path), path.stat().st_mtime_ns)
    except OSError as err:
        raise ResultsError(f"{path}: unreadable predictions file ({err.strerror or err})") from None


def problem_of(err: ResultsError, path: Path, what: str) -> Problem:
    return Problem(str(path), f"{what}: {_reason(err, path)}")


def reference_csv() -> Path:
    return Path(str(resources.files("biobench.board") / "reference" / "paper_results.csv"))


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
