"""The board as data: /api/v1/leaderboard, /api/v1/models/<name> and /api/v1/tasks served next to the app's pages
(over loopback), from the same board the tables read, with the smoke rows, degenerate marks, contamination and
"not measured" for the paper's rows, and no server path anywhere."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
from biobench import store
from biobench.standings.aggregate import build_board


def _write(root: Path, slug: str, task: str, seed: int, f1: float, details: dict | None = None,
           model_id: str = "/srv/private/models/my-model") -> None:
    record = store.Result(model={"id": model_id, "slug": slug, "name": "My model", "params": 22_700_000,
                                 "metadata": {"license": "apache-2.0", "open_weights": True}},
                          task={"id": task, "lang": "fr", "kind": "ner"}, seed=seed, protocol={"hash": "p"},
                          key=store.run_key("rev", "data", "p", seed), metrics={"test": {"macro_f1": f1}},
                          details=details or {})
    store.write_result(store.result_path(root, slug, task, seed), record, [{"id": "1", "gold": [], "pred": []}])


@pytest.fixture
def served(tmp_path):
    gr = pytest.importorskip("gradio")
    from biobench.leaderboard.app import build_app
    from biobench.leaderboard.json_routes import add_routes

    contamination = {"n": 13, "splits": {"test": {"examples": 100, "contaminated": 7, "share": 0.07}}}
    _write(tmp_path, "my-model--aaaa", "quaero-emea", 42, 0.50, {"contamination": contamination})
    _write(tmp_path, "my-model--aaaa", "quaero-emea", 43, 0.60, {"contamination": contamination})
    _write(tmp_path, "my-model--aaaa", "fracco-30", 42, 0.30)
    _write(tmp_path, "my-model--aaaa", "fracco-30", 44, 0.20, {"overrides": {"epochs": {"run": 1, "protocol": 15}}})
    board = build_board([tmp_path], reference=True, significance=False)
    blocks = build_app(board)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    blocks.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port)
    add_routes(blocks.app, blocks.biobench_board)
    assert isinstance(blocks, gr.Blocks)

    def get(path: str) -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{quote(path, safe='/?=&')}", timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    yield get, tmp_path
    blocks.close()


def test_json_routes_serve_the_board_with_its_marks(served):
    get, root = served
    status, body = get("/api/v1/leaderboard?lang=fr")
    # the page's count (tables.rows.row_counts): its one smoke run (fracco-30) sits under a protocol cell, so showing
    # smoke runs adds no ⚑ cell to any row: 0 hidden, as the page's table says nothing hidden (issue 52 item 3)
    assert status == 200 and body["unit"] == "percent" and body["smoke_rows_hidden"] == 0
    assert body["include_smoke"] is True and body["counts"]["table"] == len(body["rows"])
    mine = next(r for r in body["rows"] if r["key"] == "my-model--aaaa")
    emea = mine["cells"]["quaero-emea"]
    assert emea["mean"] == pytest.approx(55.0) and emea["seeds"] == 2 and emea["contamination"] == pytest.approx(0.07)
    assert emea["contaminated"] is True and mine["cells"]["fracco-30"]["contamination"] == "not measured"
    assert mine["model_id"] == "my-model" and mine["metadata"]["license"] == "apache-2.0"
    assert mine["metadata"]["parameters"] == 22_700_000 and mine["metadata"]["open_weights"] is True
    paper = next(r for r in body["rows"] if r["source"] == "reported")
    assert all(c["contamination"] == "not measured" for c in paper["cells"].values())
    _, protocol_only = get("/api/v1/leaderboard?lang=fr&include_smoke=0")
    assert not any(r["smoke_tasks"] or r.get("smoke_runs") for r in protocol_only["rows"])
    # one row per model: its smoke run of fracco-30 is a sub-entry, the table's cell keeps the protocol's seed
    _, smoke = get("/api/v1/leaderboard?lang=fr&include_smoke=1")
    assert smoke == body  # the default (issue 62 item 4)
    assert [r["key"] for r in smoke["rows"]].count("my-model--aaaa") == 1 and smoke["smoke_rows_hidden"] == 0
    mine = next(r for r in smoke["rows"] if r["key"] == "my-model--aaaa")
    assert mine["cells"]["fracco-30"]["mean"] == pytest.approx(30.0) and "smoke" not in mine["cells"]["fracco-30"]
    (sub,) = mine["smoke_runs"]
    assert sub["smoke"] == "epochs 1 (protocol 15)" and sub["cells"]["fracco-30"]["mean"] == pytest.approx(20.0)
    _, hidden = get("/api/v1/leaderboard?lang=fr&hide_contaminated=1")
    assert next(r for r in hidden["rows"] if r["key"] == "my-model--aaaa")["cells"]["quaero-emea"]["hidden"] == "contaminated"
    status, model = get("/api/v1/models/My model")
    assert status == 200 and model["key"] == "my-model--aaaa" and list(model["languages"]) == ["fr"]
    assert model["languages"]["fr"]["smoke_runs"][0]["smoke"] == "epochs 1 (protocol 15)"
    assert get("/api/v1/models/my-model--aaaa")[1] == model  # by its results folder too
    assert get("/api/v1/models/nobody")[0] == 404 and get("/api/v1/leaderboard?lang=xx")[0] == 404
    _, tasks = get("/api/v1/tasks")
    fr = {t["id"]: t for t in tasks["languages"]["fr"]}
    assert fr["quaero-emea"]["benchmark"] and fr["quaero-emea"]["measured_models"] == 1
    for path in ("/api/v1/leaderboard?lang=fr&include_smoke=1", "/api/v1/models/My model", "/api/v1/tasks"):
        text = json.dumps(get(path)[1])
        assert str(root) not in text and "/srv/private" not in text  # no server path in the JSON


def test_the_table_marks_a_contaminated_cell_and_the_filter_hides_it(served, tmp_path):
    from biobench.leaderboard.tables.filters import Filters
    from biobench.leaderboard.tables.html import render_html

    board = build_board([tmp_path], reference=True, significance=False)
    page = render_html(board, "fr")
    assert 'class="contaminated"' in page and "7.0% of the test examples share a word 13-gram" in page
    assert "contamination not measured" in page  # the paper's rows
    hidden = render_html(board, "fr", Filters(hide_contaminated=True))
    assert "hidden by the filter" in hidden and ">55.0<" not in hidden
