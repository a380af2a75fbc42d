"""The one escaping of values from results into HTML (`esc`) and Markdown (`md`, `md_code`): every string shown may come from a stranger's result file."""

from __future__ import annotations

import html
from typing import Any


def esc(value: Any) -> str:
    """The one escaping of a value put into HTML (text or a quoted attribute): every string here may come
    from a stranger's result file (model names, ids, task ids, labels, lineage, error messages)."""
    return html.escape(str(value), quote=True)


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]|#!~"})


def md(value: Any) -> str:
    """A value shown as plain text inside Markdown (the detail view): `<`, `>`, `&` escaped and Markdown's
    markup characters backslash-escaped, so a name can neither open a tag nor a link nor a table cell."""
    return html.escape(" ".join(str(value).split()).translate(_MD_SPECIAL), quote=False)


def md_code(value: Any) -> str:
    """A value shown as `code` in a Markdown table cell: backticks and line breaks removed, `|` escaped (a table
    splits cells before it sees code spans); a code span shows the rest as is, tags included."""
    return "`" + " ".join(str(value).replace("`", "'").replace("|", "\\|").split()) + "`"
