"""The one rich Console of the commands: the terminal's width on a terminal, no width limit off one.

Why: rich falls back to 80 columns when stdout is not a terminal (a pipe, a log file, `| less`), so tables of
CIs and paths wrapped mid-cell in exactly the places people keep output. Off a terminal nothing is wrapped; a
reader's pager or editor handles long lines. $COLUMNS still wins, as rich documents.
"""

from __future__ import annotations

import os
import sys
from typing import Any

UNBOUNDED = 1_000  # wide enough for any table the commands print; rich pads nothing to it


def console(file: Any = None) -> Any:
    """A rich Console writing to `file` (default stdout): terminal width on a terminal, else unbounded."""
    from rich.console import Console

    stream = file or sys.stdout
    on_terminal = hasattr(stream, "isatty") and stream.isatty()
    width = None if on_terminal or os.environ.get("COLUMNS") else UNBOUNDED
    return Console(file=file, width=width)
