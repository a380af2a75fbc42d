"""The board as data: JSON routes served next to the app's pages, from the same board model the tables read.

    GET /api/v1/leaderboard?lang=fr[&include_smoke=1][&hide_contaminated=1]   one row per model, the table's order
    GET /api/v1/models/<name>                                                  one model per language, with metadata
    GET /api/v1/tasks                                                          the tasks per language

Why here, from `tables.rows.model_rows`: the JSON has the table's rows, one per model (issue #39's rule): a cell the
page hides (a smoke run unless asked for) is missing from the JSON too, in the same order, with the same marks:
a cell's `smoke` (the overrides of the smoke run it shows, ⚑ on the page), `degenerate` (seed -> finding and reason),
`contamination` (share of test examples in the pretraining corpus; `contaminated` above the board's threshold;
"not measured" for the paper's rows). Scores are percentages as on the page. No server path is ever sent: a
model that came from a local folder is named by the folder's name. docs/LEADERBOARD.md documents the schema.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from biobench.leaderboard.tables.filters import Filters
from biobench.leaderboard.tables.rows import ModelRow, model_key, model_rows, row_counts
from biobench.names import folder_name
from biobench.runtime.paths import display_text, is_hub_id
from biobench.standings.entries import CONTAMINATION_THRESHOLD, Board, Cell, Entry
from biobench.store.trust import SMOKE_MARK

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


def entry_json(board: Board, entry: Entry, with_runs: bool = False, metadata_from: list[Entry] | None = None
               ) -> dict[str, Any]:
    bench = board.benchmark.get(entry.lang, [])
    avg = entry.average(bench)
    reported = entry.source == "reported"
    out: dict[str, Any] = {
        "key": entry.key, "name": entry.name, "lang": entry.lang, "source": entry.source,
        "average": {"value": _number(avg.value), "tasks": avg.k, "of": avg.n, "partial": avg.partial,
                    "missing": list(avg.missing)},
        "smoke": entry.smoke or None, "params": entry.params, "context": entry.context, "size": entry.size,
        "recipe": entry.recipe, "lineage": entry.lineage, "model_id": public_model_id(entry.model_id),
        "metadata": model_metadata(metadata_from or [entry]),
        "cells": {t: cell_json(c, reported) for t, c in entry.cells.items()},
    }
    if reported:
        out["paper_average"] = _number(entry.paper_avg)
        out["reported_seeds"] = entry.reported_seeds
    return out


# a result's metadata field -> its name in the JSON and on the Model tab
METADATA_NAMES = {"params": "parameters", "context": "context_length", "license": "license",
                  "base_model": "base_model", "training_data": "training_data", "open_weights": "open_weights"}
_MAX_TEXT, _MAX_NAMES = 200, 50  # what biobench.store.metadata allows a stated value; a card's is cut to it


def _text(value: Any) -> str | None:
    text = " ".join(value.split())[:_MAX_TEXT] if isinstance(value, str) else ""
    return text or None


def _shown(field: str, value: Any) -> Any:
    """A recorded metadata value as the board may show it: results are untrusted (a public dataset), so a text
    is one line of at most 200 characters, training data at most 50 of them, open weights a boolean; anything
    else (a number where a text belongs, a table) is None, unknown."""
    if field == "open_weights":
        return value if isinstance(value, bool) else None
    if field == "training_data" and isinstance(value, list):
        return [t for v in value[:_MAX_NAMES] if (t := _text(v))] or None
    return _text(value)


def model_metadata(entries: list[Entry]) -> dict[str, Any]:
    """What a reader needs to judge a model (docs/LEADERBOARD.md): parameters, context length, license, base
    model, training data, open weights (None when unknown) and `stated`, the fields its submitter stated (a grid
    file, `--metadata`, the Submit form) rather than read from its model card or config. Read from the results
    of `entries` (one model: its protocol entry first, then its smoke entries), the first run that records them;
    the one home of this view, for the JSON and the Model tab."""
    first = next((e for e in entries if e.params is not None or e.context is not None), entries[0])
    meta: dict[str, Any] = {"parameters": first.params, "context_length": first.context}
    recorded: dict[str, Any] = {}
    for e in entries:
        found = next((runs[0].model_meta.get("metadata") for runs in e.runs.values() if runs), None)
        if isinstance(found, dict):
            recorded = found
            break
    for field in ("license", "base_model", "training_data", "open_weights"):
        meta[field] = _shown(field, recorded.get(field))
    stated = recorded["stated"] if isinstance(recorded.get("stated"), list) else []
    meta["stated"] = [METADATA_NAMES[f] for f in METADATA_NAMES if f in stated]
    return meta


def _model_entries(board: Board, lang: str, key: str) -> list[Entry]:
    """A model's entries in a language (its results folder's protocol and smoke entries), protocol first."""
    found = [e for e in board.lang_entries(lang) if model_key(e) == key]
    return sorted(found, key=lambda e: (bool(e.smoke), e.smoke))


def row_json(board: Board, row: ModelRow, include_smoke: bool) -> dict[str, Any]:
    """One model of a language as the table shows it (`tables.rows.model_rows`, issue #39's rule: one row per model):
    its cells, a smoke run's cell marked `smoke` (its overrides, ⚑ on the page) and listed in `smoke_tasks`;
    with `include_smoke`, `smoke_runs` holds each of its smoke runs (overrides and cells) as a sub-entry."""
    entries = _model_entries(board, row.entry.lang, row.key) or [row.entry]
    out = entry_json(board, row.entry, metadata_from=entries)
    out["smoke"] = None
    for task, origin in row.origin.items():
        if origin.smoke:
            out["cells"][task]["smoke"] = origin.smoke
    out["smoke_tasks"] = [t for t in out["cells"] if row.smoke(t)]
    if include_smoke:
        reported = row.entry.source == "reported"
        out["smoke_runs"] = [{"key": e.key, "smoke": e.smoke, "cells": {t: cell_json(c, reported)
                                                                         for t, c in e.cells.items()}}
                             for e in entries if e.smoke]
    return out


def leaderboard_json(board: Board, lang: str, include_smoke: bool | None = None,
                     hide_contaminated: bool = False) -> dict[str, Any]:
    """The language's table as data: one row per model in the table's order (`tables.rows.model_rows`). Smoke runs
    by the page's default unless asked (`include_smoke` None: a smoke cell where its model has no protocol
    result), and the page's counts (`tables.rows.row_counts`): `counts.table` rows in the language's table,
    `counts.other_only` the rows the page shows under Other tasks only, `counts.smoke_hidden` /
    `counts.smoke_hidden_models` the smoke results left out and their models (`smoke_rows_hidden`: those models)."""
    if lang not in board.langs:
        return {"error": f"no language {lang!r} on this board; languages: {', '.join(board.langs)}"}
    counts = row_counts(board, lang, include_smoke)
    include_smoke = counts["include_smoke"]
    rows = [row_json(board, r, include_smoke) for r in model_rows(board, lang, Filters(include_smoke=include_smoke))]
    if hide_contaminated:
        for row in rows:
            row["cells"] = {t: c if not c["contaminated"] else {"hidden": "contaminated", "contamination": c["contamination"]}
                            for t, c in row["cells"].items()}
    return {"lang": lang, "benchmark_tasks": board.benchmark.get(lang, []), "extra_tasks": board.extra.get(lang, []),
            "unit": "percent", "contamination_threshold": CONTAMINATION_THRESHOLD, "include_smoke": include_smoke,
            "smoke_rows_hidden": counts["smoke_hidden_models"], "counts": counts, "rows": rows}


def model_row_json(board: Board, lang: str, key: str) -> dict[str, Any] | None:
    """The row of the model `key` (its results folder, `tables.rows.model_key`) in `lang`, smoke runs included: what
    /api/v1/models/<name> gives per language and the Model tab shows; None when it has no results there."""
    row = next((r for r in model_rows(board, lang, Filters(include_smoke=True)) if r.key == key), None)
    return None if row is None else row_json(board, row, include_smoke=True)


def model_choices(board: Board, lang: str) -> list[tuple[str, str]]:
    """(label, key) of every model of a language, one per model as the table lists them (smoke-only models
    included, marked), measured models first, for the Model tab's dropdown."""
    rows = sorted(model_rows(board, lang, Filters(include_smoke=True, sort_by="Model")),
                  key=lambda r: r.entry.source == "reported")
    return [(r.name + (" (reported)" if r.entry.source == "reported" else "")
             + (f" {SMOKE_MARK} smoke runs only" if all(o.smoke for o in r.origin.values()) else ""),
             r.key) for r in rows]


def model_json(board: Board, name: str) -> dict[str, Any] | None:
    """One model: per language its row (`row_json`, smoke runs included as sub-entries), found by its display
    name, its key, its results folder or the key of one of its rows; None when no model has that name."""
    found = [e for e in board.entries if name in (e.key, e.name, e.base_name, e.slug)]
    if not found:
        return None
    keys = {(e.lang, model_key(e)) for e in found}
    languages = {}
    for lang in board.langs:
        rows = [r for r in model_rows(board, lang, Filters(include_smoke=True)) if (lang, r.key) in keys]
        row = min(rows, key=lambda r: r.entry.source != "measured", default=None)  # measured before the paper's
        if row is not None:
            languages[lang] = row_json(board, row, include_smoke=True)
    if not languages:
        return None
    first = next(iter(languages.values()))
    return {"name": first["name"], "key": first["key"], "languages": languages}


def tasks_json(board: Board) -> dict[str, Any]:
    return {"languages": {lang: [{"id": t, "benchmark": t in board.benchmark.get(lang, []),
                                  "measured_models": sum(t in e.cells for e in board.lang_entries(lang)
                                                         if e.source == "measured")}
                                 for t in board.columns(lang)] for lang in board.langs}}


def add_routes(app: Any, current: Callable[[], Board]) -> None:
    """Register the JSON routes on the FastAPI app that serves the Gradio pages; `current` returns the board
    the pages show now (a refresh replaces it)."""
    from fastapi.responses import JSONResponse

    def leaderboard(lang: str = "fr", include_smoke: bool | None = None, hide_contaminated: bool = False
                    ) -> JSONResponse:
        body = leaderboard_json(current(), lang, include_smoke, hide_contaminated)
        return JSONResponse(body, status_code=404 if "error" in body else 200)

    def model(name: str) -> JSONResponse:
        body = model_json(current(), name)
        if body is None:
            # the name as the visitor sent it, cut and without control characters: a 100 KB name came back whole
            shown = display_text(name, 120)
            return JSONResponse({"error": f"no model named {shown!r} on this board"}, status_code=404)
        return JSONResponse(body)

    def tasks() -> JSONResponse:
        return JSONResponse(tasks_json(current()))

    app.add_api_route(f"{API_PREFIX}/leaderboard", leaderboard, methods=["GET"])
    app.add_api_route(f"{API_PREFIX}/models/{{name:path}}", model, methods=["GET"])
    app.add_api_route(f"{API_PREFIX}/tasks", tasks, methods=["GET"])


def serve(blocks: Any, announce: bool = False, **launch_options: Any) -> None:
    """Launch the Gradio app built by `app.build_app`, add the JSON routes (reading the board its pages show) to
    its FastAPI app, and block: what `biobench leaderboard` (`app.launch`, which `announce`s its address) and the
    Space's app.py do. The one place the pages and their JSON are started together."""
    blocks.launch(prevent_thread_lock=True, **launch_options)
    add_routes(blocks.app, blocks.biobench_board)
    if announce:
        print(f"leaderboard at {blocks.local_url} (Ctrl+C stops it)", flush=True)
    blocks.block_thread()
