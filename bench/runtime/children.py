"""Child processes that never outlive their parent.

Why: a grid that trains several runs at once in child processes (biobench.eval.parallel) must not leave them
training on — holding a GPU, writing result files — when the parent is killed (`kill -9`, an OOM killer, a
SLURM time limit). Two guards, because neither is enough alone: PR_SET_PDEATHSIG asks Linux to SIGKILL the
child when its parent dies (immediate, but Linux only, and lost if the parent died before the call), and a
watcher thread that polls the parent's pid (portable, and covers that race) and ends the child within a second.
Ctrl-C reaches the whole foreground process group; children ignore it and let the parent stop them in order,
so one clean stop is reported once instead of a traceback per child.
"""

from __future__ import annotations

import os
import signal
import threading

WATCH_INTERVAL_S = 0.5


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (Linux PR_SET_PDEATHSIG; a no-op elsewhere)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def watch_parent(parent_pid: int, interval_s: float = WATCH_INTERVAL_S) -> threading.Thread:
    """End this process at once (no cleanup: the parent owns the run) when `parent_pid` is no longer its
    parent; a daemon thread, started and returned."""
    def watch() -> None:
        while True:
            if os.getppid() != parent_pid:
                os._exit(1)
            threading.Event().wait(interval_s)

    thread = threading.Thread(target=watch, name="watch-parent", daemon=True)
    thread.start()
    return thread


def become_child(parent_pid: int) -> None:
    """The first thing a child process does: die with `parent_pid`, leave Ctrl-C to it."""
    die_with_parent()
    watch_parent(parent_pid)  # also covers a parent that died before prctl
    signal.signal(signal.SIGINT, signal.SIG_IGN)
