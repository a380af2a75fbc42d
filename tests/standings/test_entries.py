"""standings.entries: the board's data model. A row's average covers the benchmark tasks it has and says which
are missing; a cell is contaminated above the threshold; the languages come in the board's order."""

import math

from biobench.standings.entries import CONTAMINATION_THRESHOLD, Average, Board, Cell, Entry, fmt


def _entry(key: str, lang: str, **means: float) -> Entry:
    return Entry(key, key, lang, "measured", {t: Cell(m) for t, m in means.items()})


def test_the_average_covers_what_the_row_has_and_names_what_it_misses():
    row = _entry("m", "fr", t1=80.0, t2=70.0)
    assert row.average(["t1", "t2"]) == Average(75.0, 2, 2, ())
    partial = row.average(["t1", "t2", "t3"])
    assert (partial.value, partial.partial, partial.missing) == (75.0, True, ("t3",))
    assert row.average(["t9"]) == Average(None, 0, 1, ("t9",))


def test_a_cell_is_contaminated_only_above_the_threshold_and_when_measured():
    assert not Cell(50.0).contaminated()
    assert not Cell(50.0, contamination=CONTAMINATION_THRESHOLD).contaminated()
    assert Cell(50.0, contamination=0.02).contaminated() and not Cell(50.0, contamination=0.02).contaminated(0.05)


def test_the_board_lists_french_then_english_then_the_others_and_finds_rows():
    board = Board([_entry("a", "es", t=1.0), _entry("b", "en", t=2.0), _entry("b", "fr", t=3.0)],
                  benchmark={"fr": ["t"], "en": ["t"]}, extra={"fr": ["x"]}, problems=[], analyses={})
    assert board.langs == ["fr", "en", "es"]
    assert board.columns("fr") == ["t", "x"] and board.columns("es") == [] and board.columns("de") == []
    assert [e.key for e in board.lang_entries("en")] == ["b"]
    assert board.entry("b", "fr").cells["t"].mean == 3.0 and board.entry("b", "es") is None


def test_numbers_are_shown_with_a_dash_for_none_and_nan():
    assert (fmt(None), fmt(math.nan), fmt(71.234), fmt(71.25, 2)) == ("—", "—", "71.2", "71.25")
