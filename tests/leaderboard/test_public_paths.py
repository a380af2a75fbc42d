"""A public page never names a server path (issue 40): the Problems tab named /tmp/.../cache/results/<sha>/...
files; it now names them relative to the results folder they lie in. The rendered Problems content, the
analysis problems drawn on page load, the app's whole page config and the JSON API's answers are scanned for
the absolute results path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from biobench.standings.aggregate import build_board

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"


def _hostile_results(tmp_path: Path) -> tuple[Path, Path]:
    """Two results folders deep under a server path: a malformed result, a duplicate of a run in the other folder
    (its reason names the first file), an unreadable analysis file."""
    first, second = tmp_path / "srv" / "cache" / "results" / "a", tmp_path / "srv" / "cache" / "results" / "b"
    shutil.copytree(FIXTURES / "full-fr", first)
    shutil.copytree(FIXTURES / "full-fr", second)
    victim = next(first.rglob("seed-*.json"))
    bad = victim.with_name("seed-999.json")
    bad.write_text('{"model": "not a result"')
    (first / "cka.json").write_text('{"layers": "nope"}')
    return first, second


def test_the_problems_tab_names_files_relative_to_their_results_folder(tmp_path):
    from biobench.leaderboard.app import build_app, problems_frame

    first, second = _hostile_results(tmp_path)
    board = build_board([first, second], significance=False)
    assert any(str(first) in p.path or str(first) in p.reason for p in board.problems)  # the operator's view
    app = build_app(board)
    on_analysis = next(f.fn for f in app.fns.values() if f.name == "on_analysis")
    *_, problems, _tab, header = on_analysis()
    shown = problems_frame(board)
    for frame in (shown, problems):
        text = frame.to_csv()
        assert str(tmp_path) not in text and "/srv/" not in text, text
    paths = list(shown["path"])
    assert any(p.endswith("seed-999.json") and not p.startswith("/") and "/" in p for p in paths), paths
    assert "cka.json" in paths and any("duplicate of" in r for r in shown["reason"]), shown
    assert str(tmp_path) not in json.dumps(app.config, default=str) and str(tmp_path) not in header


def test_the_json_api_names_no_server_path(tmp_path):
    from biobench.leaderboard.json_routes import leaderboard_json, model_json, tasks_json

    first, second = _hostile_results(tmp_path)
    board = build_board([first, second], significance=False)
    answers = [leaderboard_json(board, lang, True, False) for lang in board.langs]
    answers += [model_json(board, e.key) for e in board.entries] + [tasks_json(board)]
    text = json.dumps(answers, default=str)
    assert board.problems and str(tmp_path) not in text and "/srv/" not in text


def test_public_path_is_relative_inside_a_root_and_a_last_part_outside():
    from biobench.standings.scan import Problem

    problem = Problem("/srv/r/m--1/t/seed-1.json", "duplicate of /srv/r2/m--1/t/seed-1.json; see /etc/passwd")
    shown = problem.public(["/srv/r", "/srv/r2"])
    assert shown == Problem("m--1/t/seed-1.json", "duplicate of m--1/t/seed-1.json; see passwd")
    assert Problem("/srv/r", "results folder does not exist").public(["/srv/r"]).path == "r"
