"""The one parser of integer ranges on the command line (--seeds, --sample-seeds, --layers, --lengths)."""

from __future__ import annotations

import pytest
from biobench.errors import ConfigError
from biobench.ranges import parse_ranges

HINT = "; use a range like 1-4, a list like 1,3,8 or both (1-4,8)"


def test_ranges_lists_and_both():
    assert parse_ranges("42-50", "--seeds") == list(range(42, 51))
    assert parse_ranges("1,3,5-7", "--layers") == [1, 3, 5, 6, 7]
    assert parse_ranges("44,42, 42", "--seeds") == [42, 44]  # sorted, unique, blanks ignored
    assert parse_ranges("42 - 43,50,", "--seeds") == [42, 43, 50]
    assert parse_ranges("7", "--layers") == [7]


def test_negative_values_only_where_allowed():
    assert parse_ranges("-2-1", "--seeds", minimum=None) == [-2, -1, 0, 1]
    with pytest.raises(ConfigError) as err:
        parse_ranges("-1,3", "--layers")
    assert str(err.value) == f"bad --layers value '-1,3': -1 is below 0{HINT}"


@pytest.mark.parametrize(("bad", "reason"), [
    ("50-42", "range 50-42 is reversed (write 42-50)"),
    ("a", "'a' is not a number or a range"),
    ("4 2", "'4 2' is not a number or a range"),
    ("42-", "'42-' is not a number or a range"),
    ("", "no value given"),
    (" , ", "no value given"),
])
def test_bad_input_gets_one_message_style(bad, reason):
    with pytest.raises(ConfigError) as err:
        parse_ranges(bad, "--seeds", minimum=None)
    assert str(err.value) == f"bad --seeds value {bad!r}: {reason}{HINT}"


def test_eval_and_analyze_use_this_parser():
    from biobench.commands import analyze

    assert analyze.parse_ranges is parse_ranges
    from biobench.eval import runner

    assert not hasattr(runner, "parse_seeds")


def test_optional_seeds_are_none_when_left_out_and_bounded_otherwise():
    """A grid file's `seeds` and a queued request's: left out or empty is each task's protocol seeds (None)."""
    from biobench.ranges import optional_seeds

    assert optional_seeds(None) is None and optional_seeds("") is None
    assert optional_seeds("43,42-43") == [42, 43]
    with pytest.raises(ConfigError) as err:
        optional_seeds("0-256", "grid 'g' seeds")
    assert str(err.value) == f"bad grid 'g' seeds value '0-256': more than 256 values{HINT}"
