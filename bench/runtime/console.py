"""What every command's output shares: the one rich Console (the terminal's width on a terminal, no width limit off
one) and the help formatter (each option's default said once).

Why: rich falls back to 80 columns when stdout is not a terminal (a pipe, a log file, `| less`), so tables of
CIs and paths wrapped mid-cell in exactly the places people keep output. Off a terminal nothing is wrapped; a
reader's pager or editor handles long lines. $COLUMNS still wins, as rich documents.
"""

from __future__ import annotations

import argparse
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


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help already says it or there is none to say
    (None, off): `biobench eval --help` answers "what happens if I leave this out" for every option."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (action.option_strings and default is not None and default is not False and default != []
                and default is not argparse.SUPPRESS and "default" not in text.lower()):
            text += " (default: %(default)s)"
        return text


class RawDescriptionHelpFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """For subcommands whose description or examples are laid out by hand."""


class CommandParser(argparse.ArgumentParser):
    """Every parser biobench builds: a flag is taken only as written, never from a unique start of it
    (`allow_abbrev`: a study's analysis key `devi` became `--device`). Subparsers inherit the class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
