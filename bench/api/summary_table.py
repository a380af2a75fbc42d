"""`Summary`: what `Results.summary()` returns, a pandas DataFrame whose printed form leads with the scores.

Why a class of its own: pandas prints a frame of 15 columns as `model ... contamination [1 rows x 15 columns]`
on a terminal of 80 characters, so `print(results.summary())`, the README's own example, showed no number (issue
62 item 2). Printed (and in a notebook cell) a `Summary` shows model, task, mean, the 95% interval and n first,
then the trust flags; every column stays the DataFrame's, for indexing and export. Imported when a table is asked
for (pandas), never by `import biobench`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

LEAD_COLUMNS = ("model", "task", "mean", "95% CI", "n", "flags")
# the columns the lead table is made from; a selection without them prints as pandas does
_NEEDED = frozenset({"model", "task", "mean", "ci_low", "ci_high", "n", "smoke", "degenerate", "contamination"})
_FLAG_WIDTH = 60  # a degenerate note can be long: the table stays readable, the column keeps the whole text


def _number(value: Any) -> str:
    """A fraction with 4 decimals, "–" where there is none (one seed has no interval)."""
    return "–" if value is None or value != value else f"{float(value):.4f}"


def _flags(row: Any) -> str:
    contamination = row["contamination"]
    said = [f"smoke: {row['smoke']}" if row["smoke"] else "",
            f"degenerate: {row['degenerate']}" if row["degenerate"] else "",
            "" if contamination is None or contamination != contamination
            else f"contamination {float(contamination):.1%}"]
    text = "; ".join(part for part in said if part)
    return text if len(text) <= _FLAG_WIDTH else text[:_FLAG_WIDTH - 1] + "…"


def _aligned(table: pd.DataFrame) -> str:
    """The lead table as text: words left-aligned, numbers right-aligned, two spaces between columns."""
    right = {"mean", "n"}
    cells = [[str(c) for c in table.columns], *([str(v) for v in row] for row in table.itertuples(index=False))]
    widths = [max(len(row[i]) for row in cells) for i in range(len(table.columns))]
    return "\n".join("  ".join(cell.rjust(w) if name in right else cell.ljust(w)
                               for cell, w, name in zip(row, widths, table.columns, strict=True)).rstrip()
                     for row in cells)


class Summary(pd.DataFrame):
    """`Results.summary()`: a DataFrame with every summary column (index, filter and export it as any other:
    `summary["mdd"]`, `.to_csv`, `.to_string()`); `print(summary)` and a notebook cell show model, task, mean,
    95% interval and n first, then the flags, and name the other columns."""

    @property
    def _constructor(self) -> type[Summary]:  # a filter or a sort keeps the printed form
        return Summary

    def lead(self) -> pd.DataFrame:
        """The printed table: model, task, mean, "[low, high]" (fractions, 4 decimals; "–" for one seed), n and
        the flags (smoke overrides, degenerate seeds, contamination share)."""
        rows = [{"model": row["model"], "task": row["task"], "mean": _number(row["mean"]),
                 "95% CI": "–" if _number(row["ci_low"]) == "–" else f"[{_number(row['ci_low'])}, {_number(row['ci_high'])}]",
                 "n": int(row["n"]), "flags": _flags(row)} for _, row in self.iterrows()]
        return pd.DataFrame(rows, columns=list(LEAD_COLUMNS), index=self.index)

    def _leads(self) -> bool:
        return _NEEDED <= set(self.columns) and not self.empty

    def __repr__(self) -> str:
        if not _NEEDED <= set(self.columns):  # a selection of columns: pandas' own form
            return pd.DataFrame(self).__repr__()
        if self.empty:
            return "no results (columns: " + ", ".join(map(str, self.columns)) + ")"
        lead = self.lead()
        if not lead["flags"].str.len().any():
            lead = lead.drop(columns="flags")
        return (f"{_aligned(lead)}\n({len(self)} row(s), scores as fractions; all {len(self.columns)} columns: "
                "summary.columns, summary.to_string())")

    __str__ = __repr__

    def _repr_html_(self) -> str | None:
        return self.lead().to_html(index=False) if self._leads() else pd.DataFrame(self)._repr_html_()
