"""Progress for long runs: a bar on a terminal, plain lines in a log file.

Why: a tqdm bar written to a SLURM log leaves hundreds of carriage-return frames per run, unreadable for a
9-seed grid. On a terminal the bar updates in place; anywhere else (a file, a pipe) the loops print one plain
line per evaluation / checkpoint of progress instead. bench/ and training/ both use this module.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

HEARTBEAT_S = 30.0  # off a terminal, a long loop says where it is this often


def on_terminal() -> bool:
    """True when progress goes to an interactive terminal (stderr is a TTY)."""
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def progress_bar(enabled: bool, **kwargs: Any):
    """A tqdm bar when `enabled` and on a terminal, else a disabled one (its methods do nothing)."""
    from tqdm.auto import tqdm

    return tqdm(disable=not (enabled and on_terminal()), dynamic_ncols=True, **kwargs)


def log_line(enabled: bool, message: str) -> None:
    """One plain progress line on stderr when `enabled` and NOT on a terminal (the bar shows it there)."""
    if enabled and not on_terminal():
        print(message, file=sys.stderr, flush=True)


class Ticker:
    """Progress of one long loop (scoring a test set of thousands of documents): on a terminal a bar that goes
    away when done; anywhere else one plain line every `every` seconds ("<label>: 1,200/5,000 (31 s)"), so a
    log shows the run is alive instead of nothing for minutes. Nothing at all when not `enabled`. `bar=False`:
    the lines only (a loop that has its own bar, like training's)."""

    def __init__(self, enabled: bool, label: str, total: int, every: float | None = None, bar: bool = True) -> None:
        self.label, self.total, self.every = label, total, HEARTBEAT_S if every is None else every
        self.lines = enabled and not on_terminal()
        self.bar = progress_bar(enabled and bar, total=total, desc=label, leave=False)
        self.started = self.last = time.monotonic()

    def update(self, done: int) -> None:
        """`done` of `total` units finished (absolute, not an increment)."""
        self.bar.n = done
        self.bar.refresh()
        now = time.monotonic()
        if self.lines and now - self.last >= self.every:
            self.last = now
            print(f"{self.label}: {done:,}/{self.total:,} ({now - self.started:.0f} s)", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.bar.close()


def finished_line(message: str) -> None:
    """One plain line on stderr per finished unit of work (a run of an evaluation grid), whatever the progress
    setting: `--no-progress` hides bars, never the record that a run finished, so a grid of several minutes is
    not silent. On a terminal the line goes above the bar instead of breaking it."""
    from tqdm.auto import tqdm

    tqdm.write(message, file=sys.stderr)
    sys.stderr.flush()


def quiet_library_bars() -> None:
    """Unless both stdout and stderr are terminals, silence the libraries' own bars too (transformers'
    "Loading weights" and "Writing model shards", the hub's downloads), which would otherwise fill a log file
    with carriage-return frames. Called by `biobench` before any command runs, so it holds for every command
    and for the processes they start: HF_HUB_DISABLE_PROGRESS_BARS is read by huggingface_hub when it is
    imported, and transformers takes its own bar switch from it; libraries already imported are told directly
    (nothing is imported here that was not: the leaderboard's process never loads transformers)."""
    if on_terminal() and getattr(sys.stdout, "isatty", lambda: False)():
        return
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
