"""Stop a long loop at a safe point: the first SIGINT (Ctrl-C) or SIGTERM (a scheduler's kill, `timeout`) asks the
loop to stop after the step it is in, so it can write a checkpoint that resumes exactly; a second signal acts
at once (the handler that was installed before, so Ctrl-C twice still stops a loop that is stuck).

Why not catch KeyboardInterrupt: it arrives in the middle of a step (an optimiser half-updated, a file half
written), where nothing consistent can be saved; a flag read between steps can.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = tuple(s for s in (signal.SIGINT, getattr(signal, "SIGTERM", None)) if s is not None)


class StopRequest:
    """Set by the first signal; the loop reads `requested` between steps."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    @property
    def requested(self) -> bool:
        return self.signal_name is not None


@contextmanager
def stop_on_signal(announce: Callable[[str], None] | None = None) -> Iterator[StopRequest]:
    """Within the block, SIGINT/SIGTERM set the request (once) and restore the previous handlers, so a second
    signal interrupts at once. Outside the main thread (signals cannot be caught there) the request never fires."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def handler(signum: int, frame: FrameType | None) -> None:
        request.signal_name = signal.Signals(signum).name
        restore()
        message = (f"{request.signal_name}: stopping after this step to save a resumable checkpoint "
                   f"(send it again to stop at once)")
        (announce or (lambda text: print(text, file=sys.stderr, flush=True)))(message)

    for sig in SIGNALS:
        signal.signal(sig, handler)
    try:
        yield request
    finally:
        restore()
