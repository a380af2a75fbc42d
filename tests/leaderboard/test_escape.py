"""leaderboard.tables.escape and css: every string shown may come from a stranger's result file, so HTML and
Markdown escaping is one function each; the style sheet styles only classes the tables write."""

import re
from pathlib import Path

from biobench.leaderboard.tables.css import CSS
from biobench.leaderboard.tables.escape import esc, md, md_code

LEADERBOARD = Path(__file__).resolve().parents[2] / "leaderboard"


def test_html_escaping_closes_every_way_out_of_text_and_attributes():
    assert esc('<img src=x onerror="alert(1)">') == "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"
    assert esc("O'Brien & co") == "O&#x27;Brien &amp; co" and esc(71.5) == "71.5"


def test_markdown_text_cannot_open_a_tag_a_link_or_a_cell():
    assert md("[click](http://x) | <b>*bold*</b>") == r"\[click\](http://x) \| &lt;b&gt;\*bold\*&lt;/b&gt;"
    assert md("two\nlines\t here") == "two lines here"


def test_markdown_code_keeps_tags_but_not_backticks_pipes_or_line_breaks():
    assert md_code("a`b|c\n<d>") == r"`a'b\|c <d>`"


def test_every_class_the_style_sheet_styles_is_one_the_leaderboard_writes():
    styled = set(re.findall(r"\.([a-z][\w-]*)", CSS))
    source = "\n".join(p.read_text(encoding="utf-8") for p in LEADERBOARD.rglob("*.py") if p.name != "css.py")
    assert {"lb-table", "lb-banner", "contaminated", "smoke"} <= styled
    assert sorted(c for c in styled if not re.search(rf"\b{re.escape(c)}\b", source)) == []
