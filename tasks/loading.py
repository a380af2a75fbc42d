"""Load a task's examples from the first usable source in its spec, normalised and checksummed.

Local paths in built-in specs are relative to the data dir (`--data-dir`, else $BIOBENCH_DATA), which
mirrors the shared layout `<data>/<task>/...`; paths in a `--task-file` spec are relative to that file.
When no local copy is found, a hub source (if any) is tried; credentialed and hub-only tasks fail with a
DataError that says what to download and where to put it. Loaded tasks are cached per process.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from biobench.errors import DataError
from biobench.tasks import synthetic
from biobench.tasks.formats import FORMATS, EntryRead, resolve_path
from biobench.tasks.options import LOCAL_FORMATS
from biobench.tasks.readers import hf, rows, tabular
from biobench.tasks.registry import SPLITS, Source, TaskSpec, spec_from_dict
from biobench.tasks.schema import MultilabelExample, NerExample, TaskData

# source options that name a further file the source needs (relative like the split paths)
PATH_OPTIONS = ("path", "split_file", "notes", "masked")


DEFAULT_DATA_DIR = "data"  # ./data, where every README example puts the data
NO_DATA_DIR = "no data dir (pass --data-dir DIR or set BIOBENCH_DATA)"
PASS_DATA_DIR = " (pass --data-dir DIR or set BIOBENCH_DATA)"


def resolve_data_dir(value: str | Path | None) -> Path | None:
    """The --data-dir value, else $BIOBENCH_DATA, else ./data when that folder exists here (issue 52 item 7:
    every README example uses it, and bare `biobench tasks` said "no data dir" 21 times), else None."""
    value = value or os.environ.get("BIOBENCH_DATA") or None
    if not value and Path(DEFAULT_DATA_DIR).is_dir():
        return Path(DEFAULT_DATA_DIR)
    return Path(value).expanduser() if value else None


def without_data_dir_hints(reason: str) -> str:
    """A task's missing-data reason with the per-task 'pass --data-dir' hints taken out, for a listing that says
    once that no data folder was given."""
    return (reason.replace(f"({NO_DATA_DIR}; ", "(").replace(f" ({NO_DATA_DIR})", "").replace(NO_DATA_DIR, "")
            .replace(PASS_DATA_DIR, ""))


# ---------------------------------------------------------------------------------------------- locating
def _entries(value: Any) -> list[tuple[str, str]]:
    """A split value (path | {"path", "member_prefix", "format"} | list of those) -> [(path, member_prefix)]."""
    return [(entry.path, entry.member_prefix) for entry in _format_entries(value, "")]


@dataclass(frozen=True)
class _Entry:
    """One file of a split: its path, the archive sub-folder, its format, and (IOB only) the standoff whose
    mention types it takes (`types_from`: {"path", "member_prefix"}; see brat.type_from_standoff)."""

    path: str
    member_prefix: str = ""
    format: str = ""
    types_from: Mapping[str, str] | None = None


def _format_entries(value: Any, fmt: str) -> list[_Entry]:
    """Like _entries, with each file's format: its own "format" (a split in another format than the rest of
    the source, e.g. typed JNLPBA's IOB train typed from a standoff beside IOB dev/test), else the source's."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, Mapping):
            out.append(_Entry(item["path"], item.get("member_prefix", ""), item.get("format", fmt), item.get("types_from")))
        else:
            out.append(_Entry(str(item), "", fmt))
    return out


def _source_paths(source: Source) -> list[str]:
    paths = [p for v in source.splits.values() for p, _ in _entries(v)]
    paths += [e.types_from["path"] for v in source.splits.values() for e in _format_entries(v, "") if e.types_from]
    for key in PATH_OPTIONS:
        if key in source.options:
            paths.append(source.options[key])
    return paths


def _base(spec: TaskSpec, data_dir: Path | None) -> Path | None:
    return Path(spec.base_dir) if spec.base_dir else data_dir


def data_stamps(spec: TaskSpec, data_dir: str | Path | None) -> list[Any] | None:
    """What the task's data is, without reading it: (path, size, mtime_ns) of each file of its local source
    (files of a folder source included), the generator of a generated one, why there is none when nothing is
    found; None when it would come from the hub (no stamp to trust). A cache of anything computed from the
    loaded data (its checksum) is valid while these are equal (api/study_run's plan cache)."""
    root = resolve_data_dir(data_dir)
    source, where = locate(spec, root)
    if source is None:
        return None if any(s.type == "hub" for s in spec.sources) else ["missing", where]
    if source.type == "generated":
        return ["generated", where]
    base = _base(spec, root)
    assert base is not None  # locate finds a local source only where there is a base folder
    stamps: list[Any] = []
    for rel in sorted(_source_paths(source)):
        path = resolve_path(base, rel)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            stat = file.stat()
            stamps.append([str(file), stat.st_size, stat.st_mtime_ns])
    return stamps


def locate(spec: TaskSpec, data_dir: Path | None) -> tuple[Source | None, str]:
    """The first local/generated source whose files all exist, with where it is; else (None, why not)."""
    reasons = []
    for source in spec.sources:
        if source.type == "generated":
            return source, f"generated:{source.generator}"
        if source.type != "local":
            continue
        base = _base(spec, data_dir)
        if base is None:
            reasons.append(NO_DATA_DIR)
            continue
        try:
            missing = [p for p in _source_paths(source) if not resolve_path(base, p).exists()]
        except DataError as err:  # a path leading out of the data folder: this source is unusable, said once
            reasons.append(str(err))
            continue
        if not missing:
            return source, str(base / os.path.commonpath(_source_paths(source)))
        if spec.base_dir:  # a task file's paths: named as written there, relative to the file's folder
            reasons.append(f"missing {', '.join(missing[:3])}" + (" ..." if len(missing) > 3 else "")
                           + f" (relative to the task file's folder {base})")
        else:
            reasons.append(f"missing {', '.join(str(base / m) for m in missing[:3])}"
                           + (" ..." if len(missing) > 3 else ""))
    hubs = [s.describe() for s in spec.sources if s.type == "hub"]
    if hubs:
        reasons.append(f"not local; hub fallback {', '.join(hubs)}")
    return None, "; ".join(dict.fromkeys(reasons)) or "no local source"  # two sources: one 'no data dir'


def source_fingerprint(spec: TaskSpec, data_dir: Path | None) -> str | None:
    """A cheap stand-in for the data checksum: sha256 of the spec and the (name, size, mtime) of every file
    of its first usable local or generated source (folders walked), None when the data is not local. Equal
    fingerprints mean the same files, so what was counted from them (split sizes) can be reused."""
    source, _ = locate(spec, data_dir)
    if source is None:
        return None
    digest = hashlib.sha256(json.dumps(spec.to_dict(), sort_keys=True, default=str).encode())
    base = _base(spec, data_dir)
    for rel in _source_paths(source) if source.type == "local" and base is not None else []:
        assert base is not None  # the loop runs with a base only
        path = resolve_path(base, rel)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            stat = file.stat()
            digest.update(f"{file}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return "sha256:" + digest.hexdigest()


def missing_message(spec: TaskSpec, data_dir: Path | None, why: str) -> str:
    """What is missing, and exactly how to get it and where to put it."""
    kind = "credentialed data" if spec.credentialed else "data"
    where = f" under {data_dir}" if data_dir else PASS_DATA_DIR
    local = [s for s in spec.sources if s.type == "local"]
    layout = ", ".join(_source_paths(local[0])) if local else ""
    msg = f"task '{spec.id}': {kind} not found ({why})."
    if spec.access:
        msg += f" {spec.access}"
    if spec.base_dir:  # --data-dir does not move a task file's paths: the file or its folder needs the fix
        return msg + (" Put the file(s) there, or correct the path(s) in the task file (its local paths are "
                      "relative to its own folder; --data-dir does not apply to them)")
    if layout:
        msg += f" Expected layout{where}: {layout}."
    return msg


# ---------------------------------------------------------------------------------------------- reading
def _read_local(spec: TaskSpec, source: Source, base: Path) -> dict[str, list]:
    opts = source.options
    if "split_file" in opts:
        everything = _read_entries(spec, source, base, "all", [_Entry(opts["path"], opts.get("member_prefix", ""), source.format)])
        return _partition(everything, resolve_path(base, opts["split_file"]), opts.get("split_map", {}))
    splits = {s: _read_entries(spec, source, base, s, _format_entries(v, source.format)) for s, v in source.splits.items()}
    if opts.get("top_k_scope") == "corpus" and "random_split" not in opts:
        raise DataError(f"task '{spec.id}': \"top_k_scope\": \"corpus\" counts codes before a random_split; the "
                        "source has none (use \"train\", the default, for sources with their own splits)")
    if "random_split" in opts:
        pool = splits.pop("all", [])
        if opts.get("top_k_scope") == "corpus":  # the label set (and the documents kept) decided before splitting
            keep = _top_labels(pool, int(opts["top_k"]), ties="first_seen")
            pool = [ex for ex in _only_labels(pool, keep) if ex.labels]
        return random_split(pool, opts["random_split"], spec.id)
    if "dev" not in splits and "dev_from_train" in opts:
        splits["train"], splits["dev"] = _carve(splits["train"], float(opts["dev_from_train"]))
    return splits


def _read_entries(spec: TaskSpec, source: Source, base: Path, split: str, entries: list[_Entry]) -> list:
    """The examples of a split's entries, each read by its format's reader (tasks/formats.py)."""
    out: list = []
    for entry in entries:
        fmt = FORMATS.get(entry.format)
        if fmt is None:
            raise DataError(f"task '{spec.id}': unknown local format {entry.format!r}; use one of "
                            f"{', '.join(LOCAL_FORMATS)}")
        out += fmt.read(EntryRead(spec.id, spec.kind, split, resolve_path(base, entry.path), base, entry.member_prefix,
                                  entry.types_from, source.options, len(out)))
    return out


def _partition(examples: list, split_file: Path, split_map: Mapping[str, list[str]]) -> dict[str, list]:
    """Assign whole-corpus examples to splits by id using a `doc_id<TAB>split` file (header line)."""
    assignment = {}
    for lineno, line in list(tabular.numbered_lines(split_file))[1:]:
        if line.strip():
            doc, _, name = line.partition("\t")
            if not name:
                raise DataError(f"{split_file}:{lineno}: expected 'doc_id<TAB>split', got {line!r}")
            assignment[doc] = name.strip()
    ours = {theirs: ours for ours, names in split_map.items() for theirs in names} or {s: s for s in SPLITS}
    out: dict[str, list] = {s: [] for s in dict.fromkeys([*split_map] or SPLITS)}
    for ex in examples:
        split = ours.get(assignment.get(ex.id, ""))
        if split:
            out[split].append(ex)
    return out


def _index_split(n: int, fraction: float, seed: int, library: str) -> tuple[list[int], list[int]]:
    """(kept, held-out) positions of a random split exactly as the protocol's library makes it."""
    if library == "datasets":  # Dataset.train_test_split(test_size, seed): what the protocol calls for HF datasets
        from datasets import Dataset

        parts = Dataset.from_dict({"i": list(range(n))}).train_test_split(test_size=fraction, seed=seed)
        return list(parts["train"]["i"]), list(parts["test"]["i"])
    if library == "sklearn":
        from sklearn.model_selection import train_test_split

        kept, held = train_test_split(list(range(n)), test_size=fraction, random_state=seed)
        return list(kept), list(held)
    raise DataError(f"random_split library {library!r} is not 'datasets' or 'sklearn'")


def largest_remainder_counts(total: int, fractions: list[float]) -> list[int]:
    """Split `total` by `fractions` as tabib's FRACCO adapters do (`_split_counts`): floor each share, then
    hand the remaining units one by one to the parts with the largest fractional share (ties: first part
    first; zero fractions get none)."""
    shares = [total * f for f in fractions]
    counts = [int(x) for x in shares]
    order = sorted((i for i, f in enumerate(fractions) if f > 0), key=lambda i: shares[i] - math.floor(shares[i]), reverse=True)
    for n in range(total - sum(counts)):
        counts[order[n % len(order)]] += 1
    return counts


def _shuffle_fractions(examples: list, fractions: list[float], seed: int, task_id: str, counts: str = "floor") -> dict[str, list]:
    """The French harness's document split: ids sorted, shuffled by `random.Random(seed)`, then cut into
    train/dev/test. counts "floor" (tabib's FRASIMED adapters): floor(n * train) train, floor(n * dev) dev,
    the rest test. counts "largest_remainder" (tabib's FRACCO adapters, `_compute_doc_splits`): the test
    fraction is what train and dev leave (1 - train - dev in floating point, as `SplitRatios.resolve` computes
    it) and the sizes come from largest_remainder_counts."""
    if len(fractions) != 3 or abs(sum(fractions) - 1) > 0.01:
        raise DataError(f"task '{task_id}': random_split fractions {fractions} must be three numbers summing to 1")
    order = sorted(range(len(examples)), key=lambda i: examples[i].id)
    random.Random(seed).shuffle(order)  # the permutation depends only on the length: same as shuffling the ids
    if counts == "floor":
        n_train, n_dev = int(len(order) * fractions[0]), int(len(order) * fractions[1])
    elif counts == "largest_remainder":
        rest = max(0.0, 1.0 - fractions[0] - fractions[1])
        n_train, n_dev, _ = largest_remainder_counts(len(order), [fractions[0], fractions[1], rest])
    else:
        raise DataError(f"task '{task_id}': random_split counts {counts!r} is not 'floor' or 'largest_remainder'")
    parts = {"train": order[:n_train], "dev": order[n_train:n_train + n_dev], "test": order[n_train + n_dev:]}
    return {split: [examples[i] for i in idx] for split, idx in parts.items()}


def random_split(examples: list, how: Mapping[str, Any], task_id: str) -> dict[str, list]:
    """train/dev/test from one pool, as the English protocol's dataloader splits sources that ship none.

    `how`: {"library": "datasets"|"sklearn", "seed": 42, "holdout": f1, "second": f2, "mode": m}. First
    `holdout` of the pool is held out; mode "test_then_dev": held-out = test, then `second` of the rest = dev;
    mode "halve_holdout": rest = train, and the held-out part is split again by `second` into dev (kept) and
    test (held-out). Mode "shuffle_fractions" with `fractions` [train, dev, test] and `counts` ("floor" or
    "largest_remainder"): the French harness's split (see _shuffle_fractions)."""
    if not examples:
        raise DataError(f"task '{task_id}': no examples to split (the spec's 'all' source is empty)")
    library, seed = how.get("library", "datasets"), int(how.get("seed", 42))
    if how.get("mode") == "shuffle_fractions":
        return _shuffle_fractions(examples, [float(f) for f in how["fractions"]], seed, task_id, how.get("counts", "floor"))
    kept, held = _index_split(len(examples), float(how["holdout"]), seed, library)
    if how.get("mode") == "test_then_dev":
        a, b = _index_split(len(kept), float(how["second"]), seed, library)
        parts = {"train": [kept[i] for i in a], "dev": [kept[i] for i in b], "test": held}
    elif how.get("mode") == "halve_holdout":
        a, b = _index_split(len(held), float(how["second"]), seed, library)
        parts = {"train": kept, "dev": [held[i] for i in a], "test": [held[i] for i in b]}
    else:
        raise DataError(f"task '{task_id}': random_split mode {how.get('mode')!r} is not 'test_then_dev' or 'halve_holdout'")
    return {split: [examples[i] for i in idx] for split, idx in parts.items()}


def _carve(train: list, fraction: float) -> tuple[list, list]:
    """A deterministic dev split (seed 0) for sources that ship none."""
    idx = list(range(len(train)))
    random.Random(0).shuffle(idx)
    n_dev = max(1, round(len(train) * fraction))
    dev = set(idx[:n_dev])
    return [e for i, e in enumerate(train) if i not in dev], [e for i, e in enumerate(train) if i in dev]


def _read_hub(spec: TaskSpec, source: Source) -> dict[str, list]:
    assert source.dataset is not None  # a hub source names its dataset (checked when the spec is read)
    dd = hf.load_hub(source.dataset, source.revision, source.config)
    split_rows = hf.hub_split_rows(dd, source.splits, source.describe())
    return {s: rows.rows_to_examples(r, spec.kind, s, source.options) for s, r in split_rows.items()}


def _read_generated(source: Source) -> dict[str, list]:
    assert source.generator is not None  # a generated source names its generator (checked when the spec is read)
    return synthetic.generate_task(source.generator, **dict(source.options))


# ---------------------------------------------------------------------------------------------- normalising
def _example_labels(ex: Any) -> list[str]:
    if isinstance(ex, NerExample):
        return [e.label for e in ex.entities]
    if isinstance(ex, MultilabelExample):
        return list(ex.labels)
    return [ex.label]


def _top_labels(examples: list[MultilabelExample], k: int, ties: str = "name") -> set[str]:
    """The k labels with the highest document frequency in `examples`.

    ties "name": equal frequencies ordered by label. ties "first_seen": by the first document (ids sorted)
    holding the label, then by label: the order tabib's document adapters (FRACCO and FRASIMED) get from a
    stable sort of a frequency dict filled while walking the sorted documents (inside one document their
    order is Python's set order, which depends on the hash seed; by label here)."""
    freq: Counter[str] = Counter()
    first: dict[str, int] = {}
    for rank, ex in enumerate(sorted(examples, key=lambda e: e.id)):
        for lab in sorted(set(ex.labels)):
            freq[lab] += 1
            first.setdefault(lab, rank)
    if ties == "first_seen":
        order = sorted(freq, key=lambda lab: (-freq[lab], first[lab], lab))
    else:
        order = sorted(freq, key=lambda lab: (-freq[lab], lab))
    return set(order[:k])


def _only_labels(examples: list[MultilabelExample], keep: set[str]) -> list[MultilabelExample]:
    return [MultilabelExample(ex.id, ex.text, tuple(lab for lab in ex.labels if lab in keep)) for ex in examples]


def _top_k(splits: dict[str, list], k: int) -> dict[str, list]:
    """Keep the k most frequent labels (document frequency on train; ties by name) in every split."""
    keep = _top_labels(splits["train"], k)
    return {s: _only_labels(exs, keep) for s, exs in splits.items()}


def checksum(task: TaskData) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"kind": task.kind, "labels": task.labels}, sort_keys=True).encode())
    for split in sorted(task.splits):
        for ex in task.splits[split]:
            h.update(split.encode())
            h.update(json.dumps(asdict(ex), sort_keys=True, ensure_ascii=False).encode())
    return "sha256:" + h.hexdigest()


def _finish(spec: TaskSpec, source: Source, splits: dict[str, list], where: str) -> TaskData:
    if "top_k" in source.options and source.options.get("top_k_scope", "train") == "train":
        splits = _top_k(splits, int(source.options["top_k"]))
    for split in SPLITS:
        if not splits.get(split):
            raise DataError(
                f"task '{spec.id}': split '{split}' is empty ({where}); check the spec's paths for {split}, "
                "or set \"dev_from_train\": 0.1 in the source options when the data has no dev split"
            )
    if spec.labels is not None:
        allowed = set(spec.labels)
        for split, exs in splits.items():
            for ex in exs:
                bad = [lab for lab in _example_labels(ex) if lab not in allowed]
                if bad:
                    raise DataError(
                        f"task '{spec.id}': example {ex.id!r} in split '{split}' ({where}) has label {bad[0]!r}, "
                        f"which is not in the spec's label scheme {list(spec.labels)}; fix the data or the spec's labels"
                    )
        labels = sorted(allowed)
    else:
        labels = sorted({lab for exs in splits.values() for ex in exs for lab in _example_labels(ex)})
    task = TaskData(spec.id, spec.kind, {s: splits[s] for s in SPLITS}, labels, where, data_version=source.version)
    task.checksum = checksum(task)
    return task


def load_task(spec: TaskSpec, data_dir: Path | str | None = None) -> TaskData:
    """Examples of `spec` from its first usable source (cached per process; do not mutate the result)."""
    data_dir = resolve_data_dir(data_dir)
    return _load_cached(json.dumps(spec.to_dict()), str(data_dir) if data_dir else None)


@lru_cache(maxsize=32)
def _load_cached(spec_json: str, data_dir: str | None) -> TaskData:
    raw = json.loads(spec_json)
    spec = spec_from_dict(raw, raw["id"], base_dir=raw.get("base_dir"))
    root = Path(data_dir) if data_dir else None
    source, where = locate(spec, root)
    if source is not None and source.type == "generated":
        return _finish(spec, source, _read_generated(source), where)
    if source is not None:
        base = _base(spec, root)
        assert base is not None  # locate finds a local source only where there is a base folder
        return _finish(spec, source, _read_local(spec, source, base), where)
    errors = []
    for hub in (s for s in spec.sources if s.type == "hub"):
        try:
            return _finish(spec, hub, _read_hub(spec, hub), hub.describe())
        except DataError as err:
            errors.append(str(err))
    raise DataError(missing_message(spec, root, "; ".join([where, *errors])))
