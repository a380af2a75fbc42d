"""Results in the Every Eval Ever schema (evaleval/every_eval_ever, `eval.schema.json`, version 0.3.0), so that
other tools read biobench's scores: `biobench results export --format every-eval-ever`.

Why this shape: the schema's datastore keeps one aggregate file per (collection, developer, model) at
`data/<collection>/<developer>/<model>/<uuid>.json`; ours is the collection `biobench`, one file per model with
one `evaluation_results` entry per (task, smoke overrides). The score is the seed mean of the task's headline
metric (its spec's `metric`, macro-F1 unless it says otherwise; a fraction), with the seeds' standard deviation and 95% t-interval from the store's own summary
(`Results.summary_rows`, what `eval` and the leaderboard print). A smoke run's overrides and a degenerate run's
finding travel in `score_details.details` (the schema's free-form strings), with the seeds, the protocol hash and
the metric, so a reader never takes a smoke score for the protocol's. No server path is written: model ids go
through `runtime.paths.public_model`, and result file paths are never copied. The file's uuid is derived from
the model's results folder, so exporting again replaces the file instead of adding a second one.
A copy of the schema, its license and source: bench/api/schemas/ (tests/api/test_export.py validates against it).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from biobench import __version__
from biobench.api.results import Results, _model_name
from biobench.errors import ConfigError
from biobench.runtime.files import atomic_write
from biobench.runtime.ownership import check_output_folder
from biobench.runtime.paths import public_model
from biobench.store import model_group

SCHEMA_VERSION = "0.3.0"
COLLECTION = "biobench"
Format = Literal["every-eval-ever"]
FORMATS: tuple[Format, ...] = ("every-eval-ever",)
_NAMESPACE = uuid.UUID("6f1c3d0e-8a5b-4b8e-9f0a-5b1e0c2d7a41")  # biobench's own uuid5 namespace for file names
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _component(text: str, fallback: str) -> str:
    """A path component of the datastore layout: letters, digits, '.', '_' and '-' only, never hidden."""
    cleaned = _UNSAFE.sub("-", text).strip("-.")
    return cleaned[:100] or fallback


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def _strings(values: Mapping[str, Any]) -> dict[str, str]:
    """The schema's `additional_details`: string values only; unknown (None / '') values left out."""
    return {k: _text(v) for k, v in values.items() if v is not None and v != "" and v != []}


def _availability(open_weights: Any) -> str:
    return "open_weights" if open_weights is True else "closed_weights" if open_weights is False else "unknown"


def model_id(record: Any, group: str | None = None) -> str:
    """The model's public id: a hub id as it is (its revision beside it); a local folder (whose path stays
    private) by its results folder (`group`, `store.model_group`), `<name>--<8 digits of the weights' sha256>`,
    because its last path part alone is not unique (every pretraining ends in `final/`: three models exported
    as "final")."""
    model_path = str(record.model.get("id") or "")
    if model_path and not model_path.startswith(("/", "~", ".")):
        return model_path
    return str(group or model_group(record) or public_model(model_path) or "unknown")


def model_info(record: Any, name: str | None = None, group: str | None = None) -> dict[str, Any]:
    """The schema's `model_info` from a result's `model` object (`name`: the name `Results.names` shows, its
    display name told apart by its results folder where two models share one; public id, metadata)."""
    model = record.model
    public_id = model_id(record, group)
    meta = model.get("metadata") if isinstance(model.get("metadata"), dict) else {}
    info: dict[str, Any] = {"name": name or _model_name(record), "id": public_id}
    if "/" in public_id:
        info["developer"] = public_id.split("/", 1)[0]
    info["additional_details"] = {
        "deployment_type": "self_deployed", "model_availability": _availability(meta.get("open_weights")),
        **_strings({"revision": model.get("revision"), "params": model.get("params"), "context": model.get("context"),
                    "architecture": model.get("architecture"), "license": meta.get("license"),
                    "base_model": meta.get("base_model"), "training_data": meta.get("training_data"),
                    "results_folder": group or model_group(record)}),
    }
    return info


def _protocol_details(record: Any) -> dict[str, str]:
    """The protocol settings that produced a run (epochs, lr, batch size, ...): the schema's generation_config
    is about text generation, so they go in its free-form `additional_details`."""
    protocol = record.protocol if isinstance(record.protocol, dict) else {}
    return _strings({k: v for k, v in sorted(protocol.items()) if isinstance(v, str | int | float | bool | list)})


def _settings(records: list[Any], field: str) -> str:
    """One key field (protocol hash, data checksum) of the runs an entry summarises: their distinct values."""
    return ", ".join(dict.fromkeys(str(r.key.get(field) or "") for r in records if r.key.get(field)))


def _metric_id(metric: str) -> str:
    """The schema's metric id of a task's headline metric (the score exported): 'micro_f1' -> 'f1_micro'."""
    return f"f1_{metric.removesuffix('_f1')}" if metric.endswith("_f1") else metric


def evaluation_result(row: dict[str, Any], records: list[Any]) -> dict[str, Any]:
    """One `evaluation_results` entry: a summary row of `Results.summary_rows` and the records of the runs it
    summarises (same model, task and smoke overrides): their protocol hash and settings, never another run's."""
    smoke, task = row["smoke"], row["task"]
    first = records[0]
    details = _strings({
        "seeds": ",".join(str(s) for s in row["seeds"]), "lang": row["lang"], "kind": row["kind"],
        "protocol": "protocol" if not smoke else f"smoke: {smoke}", "smoke_overrides": smoke,
        "degenerate": row["degenerate"], "contamination_share": row["contamination"],
        "protocol_hash": _settings(records, "protocol_hash") or first.protocol.get("hash"),
        "data_checksum": _settings(records, "data_checksum") or first.task.get("data_checksum"),
    })
    score: dict[str, Any] = {"score": float(row["mean"]), "details": details}
    uncertainty: dict[str, Any] = {"num_samples": int(row["n"])}
    if row.get("std") is not None:
        uncertainty["standard_deviation"] = float(row["std"])
    if row.get("ci_low") is not None and row.get("ci_high") is not None:
        uncertainty["confidence_interval"] = {"lower": float(row["ci_low"]), "upper": float(row["ci_high"]),
                                              "confidence_level": 0.95, "method": "t-interval over seeds"}
    score["uncertainty"] = uncertainty
    return {
        "evaluation_result_id": f"{task}/{first.metric}" + (f"/smoke:{smoke}" if smoke else ""),
        "evaluation_name": task if not smoke else f"{task} (smoke run: {smoke})",
        "source_data": {"dataset_name": task, "source_type": "other",
                        "additional_details": _strings({"lang": row["lang"], "kind": row["kind"]})},
        "metric_config": {
            "evaluation_description": f"test {first.metric} of a fine-tuned encoder, mean over seeds "
                                      "(biobench, arXiv 2605.12438)",
            "metric_id": _metric_id(first.metric), "metric_name": first.metric, "metric_kind": "f1", "metric_unit": "proportion",
            "lower_is_better": False, "score_type": "continuous", "min_score": 0.0, "max_score": 1.0,
        },
        "score_details": score,
        "generation_config": {"additional_details": _protocol_details(first)},
    }


def every_eval_ever_records(results: Results, retrieved: float | None = None) -> dict[str, dict[str, Any]]:
    """{datastore-relative path: the aggregate record} for each model of `results`: a model is its results
    folder (`Results.groups`, the one identity the board and `compare` use), so two checkpoints that share a
    display name are two files, each with its own revision, id and scores (issue 57 item 2)."""
    stamp = str(int(time.time() if retrieved is None else retrieved))
    rows = results.summary_rows(mdd=False)
    summarised = {key: [results.records[i] for i in members] for key, members in results.summarised().items()}
    names = results.names()
    out: dict[str, dict[str, Any]] = {}
    for group in results.groups():
        first_record = summarised[next(k for k in summarised if k[0] == group)][0]
        info = model_info(first_record, names[group], group)
        entries = [evaluation_result(row, summarised[(group, row["task"], row["smoke"])])
                   for row in rows if row["slug"] == group]
        name = _component(info["id"].rsplit("/", 1)[-1] if "/" in info["id"] else _model_name(first_record), "model")
        developer = _component(info.get("developer", ""), "unknown")
        file_id = uuid.uuid5(_NAMESPACE, f"{COLLECTION}/{group}")
        out[f"data/{COLLECTION}/{developer}/{name}/{file_id}.json"] = {
            "schema_version": SCHEMA_VERSION,
            "evaluation_id": f"{COLLECTION}/{info['id']}/{stamp}",
            "retrieved_timestamp": stamp,
            "source_metadata": {"source_name": "biobench", "source_type": "evaluation_run",
                                "source_organization_name": "biobench", "evaluator_relationship": "third_party",
                                "additional_details": {"paper": "https://arxiv.org/abs/2605.12438"}},
            "eval_library": {"name": "biobench", "version": __version__},
            "model_info": info,
            "evaluation_results": entries,
        }
    return out


def export(results: Results, out: str | Path, fmt: Format = "every-eval-ever",
           retrieved: float | None = None) -> list[Path]:
    """Write `results` under `out` in `fmt` (`data/biobench/<developer>/<model>/<uuid>.json`, one file per
    model); the paths written."""
    if fmt not in FORMATS:

        raise ConfigError(f"unknown export format {fmt!r} (choose from {', '.join(FORMATS)})")
    # a new folder, or one biobench made (marker, or an earlier export's data/biobench/ alone): never a folder of
    # the user's, whose files an export of the same ids would replace
    root = check_output_folder(out, "--out", "results export", legacy=lambda folder: sorted(
        p.name for p in folder.iterdir()) == ["data"] and (folder / "data").is_dir() and [p.name for p in (folder / "data").iterdir()] == ["biobench"],
        mark=False)  # no marker: the folder is what gets published
    written = []
    for relative, record in every_eval_ever_records(results, retrieved).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(record, ensure_ascii=False, indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written
