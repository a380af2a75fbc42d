"""Scores a reader can trust, on the board: a smoke run (protocol overrides) is its own marked row, never merged
into the protocol row's seeds, left out of the ranking and averages unless "include smoke runs" is ticked, and
named as such in the exports; degenerate test predictions carry a mark and their likely reason."""

from __future__ import annotations

import json

import pytest
from biobench.leaderboard.tables.export import export_frame
from biobench.leaderboard.tables.filters import Filters, select
from biobench.leaderboard.tables.frames import language_frame
from biobench.leaderboard.tables.html import render_html
from biobench.leaderboard.tables.rows import model_rows
from biobench.leaderboard.tables.text import render_text
from biobench.standings.aggregate import build_board
from biobench.standings.dataset import results_frame, summary_lines
from biobench.store import Result, result_path, run_key, write_result

SMOKE = {"epochs": {"run": 1, "protocol": 15}, "limit_train": {"run": 200, "protocol": None}}
DEGENERATE = {"finding": "the same class (a) for every one of the 2 test examples",
              "reason": "the classifier collapsed to one class: the budget (13 steps) is far below the protocol's "
                        "11,250 steps"}


def _write(root, slug, task, seed, score, **details):
    write_result(result_path(root, slug, task, seed), Result(
        model={"id": slug, "slug": slug, "name": slug}, task={"id": task, "lang": "fr", "kind": "classification"},
        seed=seed, protocol={"hash": "smoke" if "overrides" in details else "p"},
        key=run_key("r", "d", "p", seed), metrics={"test": {"macro_f1": score}}, details=details),
        [{"id": 1, "gold": "a", "pred": "a"}, {"id": 2, "gold": "b", "pred": "a"}])


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    protocol, smoke = tmp_path_factory.mktemp("protocol"), tmp_path_factory.mktemp("smoke")
    _write(protocol, "m", "diamed", 42, 0.60)
    _write(protocol, "m", "diamed", 43, 0.62)
    _write(protocol, "n", "diamed", 42, 0.50, degenerate=DEGENERATE)
    _write(smoke, "m", "diamed", 42, 0.99, overrides=SMOKE)  # same model and seed as a protocol run
    _write(smoke, "m", "fracco-30", 42, 0.192, overrides=SMOKE)
    return build_board([protocol, smoke], significance=False)


def test_a_smoke_run_is_its_own_row_never_merged_into_the_protocols_seeds(board):
    plain = board.entry("m", "fr")
    assert sorted(plain.cells["diamed"].seeds) == [42, 43] and "fracco-30" not in plain.cells
    assert plain.cells["diamed"].mean == pytest.approx(61.0) and not plain.smoke
    (smoke,) = [e for e in board.lang_entries("fr") if e.smoke]
    assert smoke.name == "m ⚑ smoke" and smoke.key.startswith("m~smoke-")
    assert smoke.smoke == "epochs 1 (protocol 15), limit_train 200"
    assert smoke.cells["fracco-30"].mean == pytest.approx(19.2) and smoke.cells["diamed"].seeds == {42: 99.0}
    assert not any(board.problems)  # not a duplicate of the protocol run of seed 42


def test_one_row_per_model_its_smoke_cells_marked_and_ranked_only_when_shown(board):
    measured = Filters(sources=("measured",), include_smoke=False)  # "Show smoke runs" unticked
    assert [e.name for e in select(board, "fr", measured)] == ["m", "n"]
    html = render_html(board, "fr", measured)
    assert "⚑" not in html.split("</table>")[0] and "<b>61.0</b>" in html
    assert "⚑ 1 smoke result of 1 model hidden (protocol overrides)" in html
    # the hidden smoke cell says what is hidden where the protocol has nothing
    assert ('title="no protocol run; a smoke run (epochs 1 (protocol 15), limit_train 200) scored 19.2, not shown: '
            'tick Show smoke runs to see it">—</td>') in html
    included = Filters(sources=("measured",), include_smoke=True)
    rows = model_rows(board, "fr", Filters(sources=("measured",), include_smoke=True, sort_by="Model"))
    assert [r.name for r in rows] == ["m", "n"]  # one row per model, named as the model is
    m = rows[0]
    assert m.entry.cells["diamed"].mean == pytest.approx(61.0) and m.smoke("diamed") == ""  # the protocol's cell
    assert m.smoke("fracco-30") == "epochs 1 (protocol 15), limit_train 200" and m.entry.cells["fracco-30"].mean == \
        pytest.approx(19.2)
    html = render_html(board, "fr", included)
    assert html.count('<tr class="measured"') == 2 and "~smoke" not in html
    cell = next(td for td in html.split("<td") if "19.2" in td)
    assert cell.startswith(' class="top"') is False and '<span class="smoke">⚑</span>' in cell
    assert "smoke run: protocol overrides epochs 1 (protocol 15), limit_train 200" in cell
    diamed = next(td for td in html.split("<td") if "61.0" in td)  # the smoke seed beside it: in the tooltip
    assert "a smoke run (epochs 1 (protocol 15), limit_train 200) scored 99.0, not shown" in diamed
    assert "<b>19.2</b>" in html and "shown (and bolded with the others) where the model has no protocol" in html
    assert render_html(board, "fr", Filters(sources=("measured",))) == html  # the page opens so (issue 62 item 4)


def test_exports_carry_a_protocol_column(board):
    frame = language_frame(board, "fr", Filters(sources=("measured",), include_smoke=True))
    assert dict(zip(frame.model, frame.protocol, strict=True)) == {
        "m": "protocol + smoke: epochs 1 (protocol 15), limit_train 200", "n": "protocol"}
    export = export_frame(board)  # one row per model and protocol: the file never mixes them
    measured = export[export.source == "measured"]
    assert sorted(zip(measured.model, measured.protocol, strict=True)) == [
        ("m", "protocol"), ("m", "smoke: epochs 1 (protocol 15), limit_train 200"), ("n", "protocol")]
    assert set(export[export.source == "reported"].protocol) == {"reported"}
    runs = [r for e in board.entries if e.source == "measured" for rs in e.runs.values() for r in rs]
    rows = results_frame(runs)
    assert sorted(rows.protocol) == ["protocol"] * 3 + ["smoke: epochs 1 (protocol 15), limit_train 200"] * 2
    lines = summary_lines(rows)
    assert "fr: 2 smoke run(s) of 1 model(s) (protocol overrides) left out of the averages below." in lines
    assert "| m | 1 | 2 | 61.0 |" in lines  # the protocol seeds only


def test_degenerate_predictions_are_marked_with_their_reason(board):
    html = render_html(board, "fr")
    cell = next(td for td in html.split("<td") if "the same class (a)" in td)
    assert "seed 42: degenerate: the same class (a) for every one of the 2 test examples (likely: the classifier " \
           "collapsed to one class: the budget (13 steps) is far below the protocol&#x27;s 11,250 steps)" in cell
    assert '<span class="degenerate">⚠</span>' in cell and "degenerate test predictions" in html
    text = render_text(board, ["fr"], include_smoke=True)
    assert "50.0⚠" in text and "⚑ m · fracco-30: protocol overrides epochs 1 (protocol 15), limit_train 200" in text
    # the CLI's default is the page's: m's smoke cell where m has no protocol result is shown, its smoke run
    # under m's protocol cell is not; --hide-smoke leaves out the smoke cells and counts them as the page does
    assert render_text(board, ["fr"]) == text
    hidden = render_text(board, ["fr"], include_smoke=False)
    assert "⚑ m · fracco-30" not in hidden
    assert hidden.endswith("2 measured model rows, as on the page; ⚑ 1 smoke result of 1 model hidden "
                           "(drop --hide-smoke to show them)")


def test_verdicts_against_the_paper_read_the_protocol_row(board):
    from biobench.standings.reproduction import model_verdicts

    (smoke,) = [e for e in board.lang_entries("fr") if e.smoke]
    assert (smoke.slug, smoke.base_name) == ("m", "m")
    diamed = next(v for v in model_verdicts(board, "m")["fr"] if v.task == "diamed")
    assert diamed.measured == pytest.approx(61.0) and diamed.seeds == 2  # not the smoke seed's 99.0


def test_the_task_view_names_the_smoke_row_and_the_degenerate_seed(board):
    from biobench.leaderboard.app import task_degenerate_notes, task_seed_frame

    frame = task_seed_frame(board, "fr", "diamed")
    # Mean before the per-seed columns, the short Degenerate mark last; the finding under the table (issue 52.6)
    assert list(frame.columns).index("Mean (%)") < list(frame.columns).index("Seed 42 (%)")
    assert frame.columns[-1] == "Degenerate"
    frame = frame.set_index("Model")
    assert frame.loc["m ⚑ smoke", "Seed 42 (%)"] == 99.0 and frame.loc["m", "n seeds"] == 2
    assert frame.loc["n", "Degenerate"] == "⚠ seed 42"
    assert "⚠ **n** seed 42: degenerate: the same class (a)" in task_degenerate_notes(board, "fr", "diamed")


def test_the_smoke_box_starts_ticked_only_when_every_measured_row_is_smoke(board, tmp_path):
    from biobench.leaderboard.app import smoke_only

    assert not smoke_only(board)
    _write(tmp_path, "q", "diamed", 42, 0.4, overrides=SMOKE)
    assert smoke_only(build_board([tmp_path], significance=False))
    assert not smoke_only(build_board([], significance=False))  # the paper's rows only: nothing to include


def test_compare_tab_lists_the_settings_a_smoke_row_differs_in_and_runs_no_test(board):
    """The function the Compare tab calls (`board.entry_pairs.compare_entries`): a protocol row against its own
    smoke row differs in the smoke overrides, so the task gets its difference and no p-value."""
    from biobench.standings.entry_pairs import compare, compare_entries, same_protocol

    (smoke,) = [e for e in board.lang_entries("fr") if e.smoke]
    pair = compare_entries(board, "fr", "m", smoke.key, n_boot=50)
    assert pair.refused == ("diamed",) and pair.average is None
    assert [d.text() for d in pair.differences["diamed"]] == [
        "smoke overrides none vs epochs 1, limit_train 200"]
    assert pair.warning().startswith("A and B were run with different settings (diamed: smoke overrides none vs "
                                     "epochs 1, limit_train 200); no significance test on 1 task(s)")
    frame = compare(board, "fr", "m", smoke.key, n_boot=50)
    assert frame["method"].tolist() == ["no test: different protocols"] and frame["diff"].iloc[0] == pytest.approx(-38.0)
    assert not same_protocol(board, "fr", "m", smoke.key) and same_protocol(board, "fr", "m", "n")
    allowed = compare_entries(board, "fr", "m", smoke.key, n_boot=50, allow_different_protocols=True)
    assert allowed.refused == () and allowed.tasks[0].comparison.method == "paired bootstrap"


def test_compare_paper_marks_smoke_and_degenerate_measured_rows(tmp_path, capsys):
    """Issue 39: `compare --paper` listed a degenerate 0.00 smoke run as "measured" with no mark. Now the
    measured cell carries ⚑ / ⚠ and the lines below say what they stand for."""
    from biobench import cli

    _write(tmp_path, "s", "diamed", 42, 0.0, overrides=SMOKE, degenerate=DEGENERATE)
    assert cli.main(["compare", "s", "--paper", "--results", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "0.00 ⚑⚠" in out
    assert "⚑ smoke run: epochs 1 (protocol 15), limit_train 200" in err
    assert ("⚠ diamed seed 42: degenerate: the same class (a) for every one of the 2 test examples (likely: the "
            "classifier collapsed to one class: the budget (13 steps) is far below the protocol's 11,250 steps)") in err
    assert cli.main(["compare", "s", "--paper", "--results", str(tmp_path), "--json"]) == 0
    (diamed,) = [r for r in json.loads(capsys.readouterr().out)["languages"]["fr"] if r["task"] == "diamed"]
    assert diamed["marks"] == "⚑⚠" and diamed["notes"][0] == "smoke run: epochs 1 (protocol 15), limit_train 200"


def test_an_empty_rank_says_why(board):
    """Issue 52 item 3: Rank was "—" on every row with no word why ("Significance groups: 0 tasks" was only in the
    server log). Here two protocol models share one of the 8 French tasks: no rank on the average, said once
    under the table and in each cell's hover; a smoke row's own reason."""
    from biobench.leaderboard.tables.rows import unranked_reason

    html = render_html(board, "fr", Filters(sources=("measured",), include_smoke=True))
    assert html.count("Rank —: a rank needs at least two measured models with protocol runs") == 1
    assert 'class="rank" title="smoke runs are never ranked (ranks use protocol runs only)">—</td>' in html
    assert "every one of the 8 benchmark tasks" in unranked_reason(board, "fr", None)
