"""What a newcomer sees first: the Task tab opens on a task with results (or says there are none), the Compare
tab on a pair it can test, one display format per kind of figure, and a detail table with a real header."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from biobench.board.board import build_board
from biobench.leaderboard.app import default_pair, first_measured_task
from biobench.leaderboard.tables import display, model_detail

FIXTURES = Path(__file__).parent / "fixtures" / "results"


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
