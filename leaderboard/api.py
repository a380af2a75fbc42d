"""The board as data: JSON routes served next to the app's pages, from the same board model the tables read.

    GET /api/v1/leaderboard?lang=fr[&include_smoke=1][&hide_contaminated=1]   rows in the table's order
    GET /api/v1/models/<name>                                                  one model (display name or key)
    GET /api/v1/tasks                                                          the tasks per language

Why here, from `tables.select`: a row the page hides (a smoke run unless asked for) is missing from the JSON too,
in the same order, with the same marks: `smoke` (the overrides), `degenerate` (seed -> finding and reason),
`contamination` (share of test examples in the pretraining corpus; `contaminated` above the board's threshold;
"not measured" for the paper's rows). Scores are percentages as on the page. No server path is ever sent: a
model that came from a local folder is named by the folder's name. docs/LEADERBOARD.md documents the schema.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from biobench.board.entries import CONTAMINATION_THRESHOLD, Board, Cell, Entry
from biobench.leaderboard.tables import Filters, select
from biobench.names import folder_name, is_hub_id

API_PREFIX = "/api/v1"
NOT_MEASURED = "not measured"


def _number(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else round(float(value), 4)


def public_model_id(model_id: str) -> str:
    """A hub id as it is; a local folder by its name only (a public page never reveals server paths)."""
    if not model_id or is_hub_id(model_id) or model_id.startswith("preset:"):
        return model_id
    return folder_name(model_id)


def cell_json(cell: Cell, reported: bool) -> dict[str, Any]:
    s = cell.summary
    out: dict[str, Any] = {"mean": _number(cell.mean)}
    if s is not None:
        out.update(seeds=s.n, std=_number(s.std) if s.n > 1 else None,
                   ci_low=_number(s.ci_low) if s.n > 1 else None, ci_high=_number(s.ci_high) if s.n > 1 else None,
                   scores={str(seed): _number(v) for seed, v in sorted(cell.seeds.items())})
    if cell.degenerate:
        out["degenerate"] = {str(seed): why for seed, why in sorted(cell.degenerate.items())}
    out["contamination"] = NOT_MEASURED if reported or cell.contamination is None else _number(cell.contamination)
    out["contaminated"] = cell.contaminated()
    return out


def entry_json(board: Board, entry: Entry, with_runs: bool = False) -> dict[str, Any]:
    bench = board.benchmark.get(entry.lang, [])
    avg = entry.average(bench)
    reported = entry.source == "reported"
    out: dict[str, Any] = {
        "key": entry.key, "name": entry.name, "lang": entry.lang, "source": entry.source,
        "average": {"value": _number(avg.value), "tasks": avg.k, "of": avg.n, "partial": avg.partial,
                    "missing": list(avg.missing)},
        "smoke": entry.smoke or None, "params": entry.params, "context": entry.context, "size": entry.size,
        "recipe": entry.recipe, "lineage": entry.lineage, "model_id": public_model_id(entry.model_id),
        "metadata": entry_metadata(entry),
        "cells": {t: cell_json(c, reported) for t, c in entry.cells.items()},
    }
    if reported:
        out["paper_average"] = _number(entry.paper_avg)
        out["reported_seeds"] = entry.reported_seeds
    return out


def entry_metadata(entry: Entry) -> dict[str, Any]:
    """What a reader needs to judge a model (docs/LEADERBOARD.md): parameters, context, licence, base model,
    training data, open weights; recorded in the model's results (`model.metadata`), None when unknown."""
    meta = {"parameters": entry.params, "context_length": entry.context}
    recorded = next((runs[0].model_meta.get("metadata") for runs in entry.runs.values() if runs), None)
    if isinstance(recorded, dict):
        for field in ("license", "base_model", "training_data", "open_weights"):
            if recorded.get(field) is not None:
                meta[field] = recorded[field]
    for field in ("license", "base_model", "training_data", "open_weights"):
        meta.setdefault(field, None)
    return meta


def leaderboard_json(board: Board, lang: str, include_smoke: bool = False,
                     hide_contaminated: bool = False) -> dict[str, Any]:
    if lang not in board.langs:
        return {"error": f"no language {lang!r} on this board; languages: {', '.join(board.langs)}"}
    rows = [entry_json(board, e) for e in select(board, lang, Filters(include_smoke=include_smoke))]
    if hide_contaminated:
        for row in rows:
            row["cells"] = {t: c if not c["contaminated"] else {"hidden": "contaminated", "contamination": c["contamination"]}
                            for t, c in row["cells"].items()}
    hidden = 0 if include_smoke else sum(bool(e.smoke) for e in board.lang_entries(lang))
    return {"lang": lang, "benchmark_tasks": board.benchmark.get(lang, []), "extra_tasks": board.extra.get(lang, []),
            "unit": "percent", "contamination_threshold": CONTAMINATION_THRESHOLD, "smoke_rows_hidden": hidden,
            "rows": rows}


def model_json(board: Board, name: str) -> dict[str, Any] | None:
    found = [e for e in board.entries if name in (e.key, e.name, e.base_name, e.slug)]
    if not found:
        return None
    return {"name": found[0].base_name or found[0].name, "entries": [entry_json(board, e) for e in found]}


def tasks_json(board: Board) -> dict[str, Any]:
    return {"languages": {lang: [{"id": t, "benchmark": t in board.benchmark.get(lang, []),
                                  "measured_models": sum(t in e.cells for e in board.lang_entries(lang)
                                                         if e.source == "measured")}
                                 for t in board.columns(lang)] for lang in board.langs}}


def add_routes(app: Any, current: Callable[[], Board]) -> None:
    """Register the JSON routes on the FastAPI app that serves the Gradio pages; `current` returns the board
    the pages show now (a refresh replaces it)."""
    from fastapi.responses import JSONResponse

    def leaderboard(lang: str = "fr", include_smoke: bool = False, hide_contaminated: bool = False) -> JSONResponse:
        body = leaderboard_json(current(), lang, include_smoke, hide_contaminated)
        return JSONResponse(body, status_code=404 if "error" in body else 200)

    def model(name: str) -> JSONResponse:
        body = model_json(current(), name)
        if body is None:
            return JSONResponse({"error": f"no model named {name!r} on this board"}, status_code=404)
        return JSONResponse(body)

    def tasks() -> JSONResponse:
        return JSONResponse(tasks_json(current()))

    app.add_api_route(f"{API_PREFIX}/leaderboard", leaderboard, methods=["GET"])
    app.add_api_route(f"{API_PREFIX}/models/{{name:path}}", model, methods=["GET"])
    app.add_api_route(f"{API_PREFIX}/tasks", tasks, methods=["GET"])


def serve(blocks: Any, **launch_options: Any) -> None:
    """Launch the Gradio app built by `app.build_app`, add the JSON routes (reading the board its pages show) to
    its FastAPI app, and block: what `biobench leaderboard` and the Space's app.py do."""
    blocks.launch(prevent_thread_lock=True, **launch_options)
    add_routes(blocks.app, blocks.biobench_board)
    blocks.block_thread()
