"""Results as a Hugging Face dataset: one parquet row per (model, task, seed), a dataset card, the push to the
hub, and reading such a dataset back as a results folder.

Why rows carry the whole result: a shared dataset must rebuild the same leaderboard (averages, CIs and the
significance shading, which needs the test predictions), so every row keeps the result JSON and its predictions
next to the flat columns people query with `datasets`/pandas (run key, protocol hash, name, task, seed, metrics,
timings). Reading back writes them out as an ordinary results folder (docs/FORMATS.md) under the cache, so the
leaderboard reads one format only. No torch here.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from biobench.errors import ConfigError, ResultsError
from biobench.lineage import Lineage
from biobench.names import distinct_names
from biobench.runtime.files import EXPAND_FLOOR, EXPAND_RATIO, atomic_write, cache_home, disk_full_guard
from biobench.runtime.jsonfile import UnsafeJSONError, parse_json, read_bytes, read_json
from biobench.runtime.ownership import mark_created, remove_owned
from biobench.runtime.paths import HF_DATASETS, UnsafePathError, inside, public_model, safe_join, safe_name
from biobench.standings.scan import Problem, collapse
from biobench.store import predictions_path, read_json_file, result_path
from biobench.store.result_files import MAX_RESULT_BYTES, published_predictions
from biobench.store.trust import protocol_label

PARQUET = "results.parquet"
CARD = "README.md"
HF_PREFIX = HF_DATASETS
SCHEMA = "biobench.results-dataset/1"
# Flat columns, in order; `result` (the whole result JSON) and `predictions` (its JSONL) follow.
COLUMNS = ["model", "model_slug", "model_id", "model_revision", "lang", "task", "kind", "seed", "data_checksum",
           "protocol_hash", "protocol_name", "protocol", "metric", "score", "macro_f1", "micro_f1", "weighted_f1", "dev_score", "train_s",
           "total_s", "tokens_per_s", "device", "params", "context", "recipe", "created", "biobench_version"]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def result_row(run: Any, problems: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """One parquet row from a leaderboard `Run` (its result file is re-read whole). A predictions file that is
    refused (a link out of its folder, not a regular file, over what its task can produce) leaves the row's
    predictions empty and is added to `problems` as (path, reason), as the board lists it; without `problems`
    it raises."""
    data = read_json_file(run.path)  # the store's bounded reader (the board validated this file already)
    model, key = data.get("model") or {}, data.get("key") or {}
    protocol = data.get("protocol") or {}
    test = (data.get("metrics") or {}).get("test") or {}
    timings = data.get("timings") or {}
    lineage = Lineage.from_dict(model.get("lineage"))
    return {
        "model": run.name, "model_slug": run.model, "model_id": public_model(str(model.get("id") or "")),
        "model_revision": str(key.get("model_revision") or model.get("revision") or ""),
        "lang": run.lang, "task": run.task, "kind": run.kind, "seed": int(run.seed),
        "data_checksum": str(key.get("data_checksum") or (data.get("task") or {}).get("data_checksum") or ""),
        "protocol_hash": str(key.get("protocol_hash") or protocol.get("hash") or ""),
        "protocol_name": str(protocol.get("name") or ""),
        "protocol": protocol_label(getattr(run, "smoke", "")),  # 'protocol', or 'smoke: <overrides>'
        # the task's headline metric and its score (what the board ranks), then the F1s every result records
        "metric": str(protocol.get("metric") or "macro_f1"), "score": float(run.score),
        "macro_f1": float(test["macro_f1"]), "micro_f1": _number(test.get("micro_f1")),
        "weighted_f1": _number(test.get("weighted_f1")), "dev_score": _number(data.get("dev_score")),
        "train_s": _number(timings.get("train_s")), "total_s": _number(timings.get("total_s")),
        "tokens_per_s": _number(timings.get("tokens_per_s")),
        "device": str(data.get("device") or ""), "params": _number(model.get("params")),
        "context": _number(model.get("context")), "recipe": lineage.recipe if lineage else "baseline",
        "created": str(data.get("created") or ""), "biobench_version": str((data.get("versions") or {}).get("biobench") or ""),
        "result": json.dumps(data, ensure_ascii=False, sort_keys=True),
        "predictions": _predictions_or_problem(run.predictions, problems) if run.predictions else None,
    }


def _predictions_or_problem(path: str | Path, problems: list[tuple[str, str]] | None) -> str | None:
    try:
        return _predictions_text(path)
    except ResultsError as err:
        if problems is None:
            raise
        problems.append((str(path), str(err).removeprefix(f"{path}: ")))
        return None


def _predictions_text(path: str | Path) -> str:
    """A predictions file read for publishing by the store's one rule (`store.result_files.published_predictions`:
    a regular file with one link, inside its folder, bounded, JSONL rows of the format); ResultsError naming it
    otherwise."""
    try:
        return published_predictions(path)
    except ResultsError as err:
        raise ResultsError(f"{err}; rerun that seed or remove it") from None


def results_frame(runs: Iterable[Any], problems: list[tuple[str, str]] | None = None) -> pd.DataFrame:
    """Per-seed rows (COLUMNS + result + predictions), sorted by language, task, model and seed; refused
    predictions files are left out into `problems` (`result_row`)."""
    rows = [result_row(r, problems) for r in runs]
    frame = pd.DataFrame(rows, columns=[*COLUMNS, "result", "predictions"])
    frame = frame.astype({"seed": "int64"}).sort_values(["lang", "task", "model_slug", "seed"], kind="stable")
    return frame.reset_index(drop=True)


def board_runs(board: Any) -> list[Any]:
    """Every measured run of a Board (reported rows are the paper's numbers, not results)."""
    return [run for e in board.entries if e.source == "measured" for task_runs in e.runs.values() for run in task_runs]


def write_parquet(runs: Iterable[Any], path: str | Path, problems: list[tuple[str, str]] | None = None) -> Path:
    """The parquet, written by the one atomic writer (a full disk: one line, no `.tmp` left); `problems`: as
    `results_frame`'s."""
    path = Path(path)
    buffer = io.BytesIO()
    results_frame(runs, problems).to_parquet(buffer, index=False)
    atomic_write(path, buffer.getvalue())
    return path


def card_text(frame: pd.DataFrame, repo_id: str | None = None) -> str:
    """A dataset card (README.md): YAML metadata the hub reads (parquet config, tags, size) and a body that says
    what a row is and how to load or browse it."""
    from huggingface_hub import DatasetCard, DatasetCardData

    n = len(frame)
    size = "n<1K" if n < 1_000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000 else "100K<n<1M"
    data = DatasetCardData(
        pretty_name="biobench results", size_categories=size, tags=["biobench", "biomedical", "evaluation", "leaderboard"],
        language=sorted(set(frame["lang"])) or None,
        configs=[{"config_name": "default", "data_files": [{"split": "train", "path": PARQUET}]}],
        biobench_schema=SCHEMA,
    )
    lines = [
        "# biobench results", "",
        "Fine-tuning results of biomedical encoders scored with [biobench](https://arxiv.org/abs/2605.12438): one row "
        "per (model, task, seed); `score` is the test score of the task's headline metric (`metric`, macro-F1 unless "
        "the task says otherwise) as a fraction.", "",
        f"{n} run{'' if n == 1 else 's'}: {frame['model_slug'].nunique()} models, {frame['task'].nunique()} tasks.", "",
    ]
    lines += summary_lines(frame)
    where = f"hf://datasets/{repo_id}" if repo_id else "<this dataset>"
    lines += [
        "", "## Columns",
        "`model_revision`, `data_checksum`, `protocol_hash` and `seed` are the run key (the exact weights, data, "
        "protocol and seed); `model` is the display name, `model_id` where the weights came from. `result` holds "
        "the whole result JSON (docs/FORMATS.md of biobench: per-label scores, protocol, timings, versions) and "
        "`predictions` the test predictions (JSON lines), so the leaderboard's significance tests can be redone. "
        "`protocol` is `protocol` for a run of the task's own protocol, else `smoke: <overrides>` (e.g. `smoke: "
        "epochs 1 (protocol 15), limit_train 200`): a smoke run's score is not the protocol's, and the averages "
        "above leave it out.", "",
        "## Use", "```python",
        "from datasets import load_dataset",
        f"rows = load_dataset({repo_id!r}, split='train')" if repo_id else
        f"rows = load_dataset('parquet', data_files='{PARQUET}', split='train')",
        "```",
        f"Browse it: `biobench leaderboard --results {where}`.", "",
    ]
    return str(DatasetCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines)))


def summary_lines(frame: pd.DataFrame) -> list[str]:
    """Per language, one row per model: its tasks and seeds, and the mean of its task means over the tasks
    *every* model of that language has — so the averages compare like with like (a model with an extra easy task
    does not look better); a model's tasks beyond those are counted, not averaged. Smoke runs (protocol
    overrides, the `protocol` column) are counted per language, never averaged with the protocol's runs."""
    lines: list[str] = []
    smoke = frame["protocol"].ne("protocol") if "protocol" in frame else pd.Series(False, index=frame.index)
    for lang, smoke_rows in frame[smoke].groupby("lang", sort=True):
        lines += [f"{lang}: {len(smoke_rows)} smoke run(s) of {smoke_rows['model_slug'].nunique()} model(s) (protocol "
                  "overrides) left out of the averages below.", ""]
    frame = frame[~smoke]
    for lang, rows in frame.groupby("lang", sort=True):
        # a model is its results folder (`model_slug`, store.model_group), its name told apart by it where two
        # share one (names.distinct_names): two checkpoints named alike were one row of the card
        slugs = list(dict.fromkeys(rows.sort_values(["model", "model_slug"])["model_slug"]))
        names = dict(zip(slugs, distinct_names([(str(rows.loc[rows.model_slug == s, "model"].iloc[0]), s)
                                                for s in slugs]), strict=True))
        task_sets = {slug: set(r["task"]) for slug, r in rows.groupby("model_slug", sort=True)}
        common = sorted(set.intersection(*task_sets.values()))
        lines += [f"### {lang}: mean over the {len(common)} task(s) every model has"
                  + (f" ({', '.join(common)})" if common else " (none: no average)"), "",
                  "| model | tasks | seeds per task | mean score (%) |", "|---|---|---|---|"]
        for slug in slugs:
            model_rows = rows[rows.model_slug == slug]
            per_task = model_rows.groupby("task")["seed"].nunique()
            seeds = f"{per_task.min()}" if per_task.min() == per_task.max() else f"{per_task.min()}-{per_task.max()}"
            task_means = model_rows.groupby("task")["score"].mean()  # each task's headline metric
            mean = f"{100 * task_means[common].mean():.1f}" if common else "–"
            lines.append(f"| {names[slug]} | {len(task_sets[slug])} | {seeds} | {mean} |")
        lines.append("")
    return lines


def build_folder(runs: Iterable[Any], out: str | Path, repo_id: str | None = None,
                 problems: list[tuple[str, str]] | None = None) -> Path:
    """The folder a push uploads: results.parquet + README.md; `problems`: as `results_frame`'s."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = write_parquet(runs, out / PARQUET, problems)
    (out / CARD).write_text(card_text(pd.read_parquet(path, columns=COLUMNS), repo_id), encoding="utf-8")
    return out


def _hub_error(action: str, err: Exception | None = None) -> str:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}:
        why = "HF_HUB_OFFLINE=1 is set"
    elif err is None:
        why = "no Hugging Face token is configured (run `hf auth login` or set HF_TOKEN)"
    else:
        why = f"the hub did not answer ({type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else 'no detail'})"
    return f"cannot {action}: {why}"


def push(runs: Sequence[Any], repo_id: str, private: bool = False, token: str | None = None,
         message: str = "biobench results", problems: list[tuple[str, str]] | None = None) -> str:
    """Create (or reuse) the dataset repo and upload results.parquet + README.md; returns the commit URL.
    `problems`: as `results_frame`'s."""
    from huggingface_hub import HfApi, get_token

    if not runs:
        raise ResultsError("no results to push: the results folder(s) hold no readable seed-*.json")
    action = f"push results to hf://datasets/{repo_id} (write the folder with --dry-run OUT and upload it later)"
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}:
        raise ResultsError(_hub_error(action))
    token = token or get_token()
    if not token:
        raise ResultsError(_hub_error(action))
    api = HfApi(token=token)
    with tempfile.TemporaryDirectory(prefix="biobench-push-") as tmp:
        folder = build_folder(runs, tmp, repo_id, problems)
        try:
            api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
            info = api.upload_folder(repo_id=repo_id, repo_type="dataset", folder_path=folder, commit_message=message)
        except Exception as err:  # network, auth, permissions: one line
            raise ResultsError(_hub_error(action, err)) from None
    return str(getattr(info, "commit_url", info))


def cache_root() -> Path:
    return cache_home("results")


def download(spec: str) -> Path:
    """hf://datasets/ORG/NAME[@REVISION] -> the local snapshot folder holding results.parquet."""
    from huggingface_hub import snapshot_download

    repo, _, revision = spec.removeprefix(HF_PREFIX).strip("/").partition("@")
    if repo.count("/") != 1:
        raise ConfigError(f"--results {spec}: expected hf://datasets/ORG/NAME (a dataset pushed with `biobench "
                          "results push`)")
    try:
        return Path(snapshot_download(repo, repo_type="dataset", revision=revision or None,
                                      allow_patterns=[PARQUET, CARD], etag_timeout=5))
    except Exception as err:  # offline, unknown repo, network
        raise ResultsError(f"cannot read results from {spec}: not in the local Hugging Face cache and "
                           f"{_hub_error('download', err).split(': ', 1)[1]}; download it where the hub is reachable "
                           f"(`hf download {repo} --repo-type dataset --local-dir DIR`) and pass --results DIR") from None


MARKER = ".complete"  # JSON: the parquet's digest and the rows that were not written (Problems lines)
MAX_MARKER_BYTES = 64 * 2**20  # the digest plus one Problems line per bad row
# A results dataset is a stranger's file that becomes files on this disk (one result + one predictions file per
# row): a 1.2 MB parquet of 200,000 rows once wrote 403k files (1.6 GB) and used 4.4 GB of memory. Bounded as
# archives are: rows counted from the parquet's footer before any is read; every byte written out counts against
# EXPAND_RATIO x the parquet's size (EXPAND_FLOOR at least, biobench.runtime.files); rows read in batches.
MAX_DATASET_ROWS = 100_000  # 200 models x 50 tasks x 10 seeds; a real board is a few thousand runs
MAX_DATASET_BYTES = 4 * 2**30  # the parquet itself (read whole for its digest)
ROW_BATCH = 256  # rows in memory at once (a row holds a result and its predictions)


def _row_folder(out: Path, row: Any) -> tuple[Path, int]:
    """<out>/<model_slug>/<task> and the seed of one parquet row; UnsafePathError when a value would not be
    a plain name (`../../x`, an absolute path) or the seed is not an integer."""
    seed = row.seed
    if isinstance(seed, float) and seed.is_integer():
        seed = int(seed)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise UnsafePathError(f"seed {str(seed)[:40]!r} is not an integer")
    if not 0 <= int(seed) < 2**32:  # biobench.ranges.SEED_MAX; 1e300 would be a 300-digit file name
        raise UnsafePathError(f"seed {str(seed)[:40]!r} is outside 0..4294967295")
    folder = safe_join(out, row.model_slug, what="model_slug") / safe_name(row.task, "task")
    inside(out, folder)
    return folder, int(seed)


def _write_row(out: Path, row: Any) -> int:
    """One row's seed-<n>.json (+ predictions) under `out`, returning the bytes written; UnsafePathError /
    ValueError when it cannot be."""
    folder, seed = _row_folder(out, row)
    if isinstance(row.result, str) and len(row.result) > MAX_RESULT_BYTES:  # the result reader's own bound
        raise ValueError(f"its result of {len(row.result):,} characters is over the {MAX_RESULT_BYTES:,} limit")
    try:  # depth-checked before parsing (biobench.runtime.jsonfile): never a RecursionError
        result = parse_json(row.result, "result")
    except UnsafeJSONError as err:
        raise ValueError(f"its result is not usable: {err.reason}") from None
    if not isinstance(result, dict):
        raise ValueError(f"its result is a JSON {type(result).__name__}, not an object")
    key = result["key"] if isinstance(result.get("key"), dict) else {}
    smoke = str(key.get("protocol_hash", "")) if result.get("overrides") else None  # beside the protocol run's seed
    path = result_path(out, row.model_slug, row.task, seed, smoke)  # ValueError: a smoke row without a hex hash
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    if isinstance(row.predictions, str):
        written += predictions_path(path).write_text(row.predictions, encoding="utf-8")
        result["predictions"] = predictions_path(path).name
    else:
        result["predictions"] = None
    return written + path.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")


def _marker(out: Path, digest: str) -> list[Problem] | None:
    """The rows a complete earlier write left out, or None when `out` is not a complete write of `digest`."""
    try:
        data = read_json(out / MARKER, MAX_MARKER_BYTES)  # bounded, depth-checked: never a hang or RecursionError
        if data["digest"] == digest:
            return [Problem(str(p["path"]), str(p["reason"])) for p in data["problems"]]
    except (OSError, ValueError, KeyError, TypeError, UnsafeJSONError):
        pass
    return None


def _rows(parquet: Path, columns: list[str]) -> Iterator[tuple[int, Any]]:
    """(row number, row) of a results parquet, ROW_BATCH rows in memory at a time; ResultsError when it is not
    a biobench results parquet or holds more than MAX_DATASET_ROWS rows (counted from its footer, before any
    row is read)."""
    import pyarrow.parquet as pq

    try:
        source = pq.ParquetFile(parquet)
        rows = source.metadata.num_rows
        missing = [c for c in columns if c not in source.schema_arrow.names]
        if missing:
            raise KeyError(f"no column {missing[0]!r}")
        batches = source.iter_batches(batch_size=ROW_BATCH, columns=columns)
    except Exception as err:  # not parquet, or not a biobench results dataset
        raise ResultsError(f"{parquet}: not a biobench results parquet ({type(err).__name__}: {str(err)[:160]}); "
                           "write one with `biobench leaderboard --results DIR --export results.parquet`") from None
    if rows > MAX_DATASET_ROWS:
        raise ResultsError(f"{parquet}: {rows:,} rows is over the {MAX_DATASET_ROWS:,}-row limit of a results "
                           "dataset; nothing was written (split it, or read the results folders it came from)")
    i = 0
    try:
        for batch in batches:
            for row in batch.to_pandas().itertuples(index=False):
                yield i, row
                i += 1
    except (OSError, ValueError) as err:  # pyarrow's errors (a cut or corrupt file) subclass these
        raise ResultsError(f"{parquet}: cannot read row {i} ({type(err).__name__}: {str(err)[:160]})") from None


def materialize(parquet: str | Path, problems: list[Problem] | None = None) -> Path:
    """Write a results.parquet back out as a results folder (<slug>/<task>/seed-<n>.json + predictions) under
    $BIOBENCH_CACHE/results/<sha256 of the parquet>, reused while the parquet is unchanged. A row whose slug,
    task or seed is not a plain name (`../../x`, `/tmp/x`), or whose result is not a JSON object, is not
    written: it is appended to `problems` (and remembered with the write, so a warm start lists it too). A
    parquet past the bounds above (rows, bytes written out) is one ResultsError and leaves nothing behind."""
    parquet = Path(parquet)
    try:  # a regular file, bounded: a FIFO or /dev/zero named x.parquet is one line, never a hang
        raw = read_bytes(parquet, MAX_DATASET_BYTES)
    except UnsafeJSONError as err:
        raise ResultsError(f"--results {parquet}: {err.reason}") from None
    digest = hashlib.sha256(raw).hexdigest()[:20]
    budget = max(EXPAND_FLOOR, int(EXPAND_RATIO * len(raw)))
    del raw
    out = cache_root() / digest
    left_out = _marker(out, digest)
    if left_out is not None:
        (problems if problems is not None else []).extend(left_out)
        return out
    rows = _rows(parquet, ["model_slug", "task", "seed", "result", "predictions"])
    first = next(rows, None)  # the row count and the schema are checked before anything is written
    if out.exists():  # an interrupted earlier write (no marker): start over; only a folder of biobench's cache
        remove_owned(out, legacy=lambda folder: folder.parent == cache_root())
    left_out = []
    written = 0
    # the marker is written last: a killed or full-disk write leaves no marker and is started over next time
    with disk_full_guard(out, parquet.stat().st_size, lambda: f"{parquet} is unchanged",
                         cleanup=lambda: remove_owned(out)):
        mark_created(out, "results dataset written out")
        try:
            for i, row in itertools.chain([first] if first else [], rows):
                try:
                    written += _write_row(out, row)
                except (UnsafePathError, ValueError, TypeError) as err:
                    left_out.append(Problem(f"{parquet} (row {i})", f"row not used: {err}"))
                if written > budget:
                    raise ResultsError(
                        f"{parquet}: expands to over {budget:,} bytes written out ({EXPAND_RATIO:g}x its size, as "
                        f"archives are bounded) by row {i}; nothing was kept (a decompression bomb, or split it)")
        except BaseException:
            remove_owned(out)
            raise
        left_out = collapse(left_out)  # the marker and the Problems tab: a few lines per kind, then a count
        atomic_write(out / MARKER, json.dumps({"digest": digest, "problems": [vars(p) for p in left_out]}))
    (problems if problems is not None else []).extend(left_out)
    return out


def resolve_sources(dirs: Iterable[str | Path], problems: list[Problem] | None = None) -> list[Path]:
    """--results values -> folders to scan: hf://datasets/ORG/NAME is downloaded, a .parquet file or a folder
    whose top holds results.parquet (a dataset's local copy) is written out as a results folder (rows that
    cannot be written safely go to `problems`)."""
    out = []
    for item in dirs:
        text = str(item)
        if text.startswith(HF_PREFIX):
            snapshot = download(text)
            if not (snapshot / PARQUET).is_file():
                raise ResultsError(f"{text} holds no {PARQUET}: not a results dataset of `biobench results push`")
            out.append(materialize(snapshot / PARQUET, problems))
        elif text.endswith(".parquet") and Path(text).is_file():
            out.append(materialize(text, problems))
        elif Path(text).exists() and not Path(text).is_dir():
            # a FIFO, a device (/dev/zero) or any other file was scanned as an empty folder: exit 0, "does not exist"
            kind = "a regular file" if Path(text).is_file() else "a FIFO, device or socket"
            raise ResultsError(f"--results {text}: {kind}, not a results folder or a .parquet results dataset; pass "
                               "a folder written by `biobench eval --results DIR`, a results.parquet or "
                               "hf://datasets/ORG/NAME")
        elif (Path(text) / PARQUET).is_file() and not any(Path(text).glob("*/*/seed-*.json")):
            # a dataset's local copy; a results folder that also holds an exported parquet is read as a folder
            out.append(materialize(Path(text) / PARQUET, problems))
        else:
            out.append(Path(text))
    return out
