"""Stop a long loop at a safe point: the first SIGINT (Ctrl-C) or SIGTERM (a scheduler's kill, `timeout`) asks the
loop to stop after the step it is in, so it can write a checkpoint that resumes exactly; a second signal acts
at once (the handler that was installed before, so Ctrl-C twice still stops a loop that is stuck).

Why not catch KeyboardInterrupt: it arrives in the middle of a step (an optimiser half-updated, a file half
written), where nothing consistent can be saved; a flag read between steps can.

A loop may also mark a stretch of work as abandonable (`StopRequest.abandonable()`): a signal that arrives
inside it raises `Abandoned` at once, because nothing of that work will be kept anyway (eval's run in flight
before its result is written: on a SLURM wall clock, `#SBATCH --signal=B:USR1@120` leaves two minutes, too
little to finish a run). Outside that stretch (writing a result) the signal only sets the flag, so a result
file is never cut short.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = tuple(s for s in (signal.SIGINT, getattr(signal, "SIGTERM", None)) if s is not None)
# what a scheduler sends before it kills a job: SIGTERM, and SIGUSR1 where the job asked for a warning
# (`#SBATCH --signal=B:USR1@120`); eval stops on these (Ctrl-C stays a KeyboardInterrupt there)
WALL_CLOCK_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGUSR1", None))
                           if s is not None)


class Abandoned(BaseException):  # noqa: N818 - not an error: the work was given up on purpose
    """Raised by a stop signal inside `StopRequest.abandonable()`: the work in that block is given up.
    A BaseException, so that no `except Exception` on the way swallows it."""

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal_name = signal_name


class StopRequest:
    """Set by the first signal; the loop reads `requested` between steps."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._abandonable = 0

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    @property
    def signum(self) -> int | None:
        return int(signal.Signals[self.signal_name]) if self.signal_name else None

    @contextmanager
    def abandonable(self) -> Iterator[None]:
        """Work that a stop signal may cut at once (it raises `Abandoned`; so does entering after one came)."""
        if self.signal_name is not None:
            raise Abandoned(self.signal_name)
        self._abandonable += 1
        try:
            yield
        finally:
            self._abandonable -= 1


@contextmanager
def stop_on_signal(announce: Callable[[str], None] | None = None, signals: tuple[int, ...] = SIGNALS,
                   message: str | None = None) -> Iterator[StopRequest]:
    """Within the block, `signals` (default SIGINT/SIGTERM) set the request (once) and restore the previous
    handlers, so a second signal interrupts at once; inside `abandonable()` the first one raises `Abandoned`.
    `message` (after '<SIGNAL>: ') is what is announced. Outside the main thread (signals cannot be caught
    there) the request never fires."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {sig: signal.getsignal(sig) for sig in signals}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def handler(signum: int, frame: FrameType | None) -> None:
        request.signal_name = signal.Signals(signum).name
        restore()
        text = f"{request.signal_name}: " + (message or "stopping after this step to save a resumable checkpoint "
                                                     "(send it again to stop at once)")
        (announce or (lambda line: print(line, file=sys.stderr, flush=True)))(text)
        if request._abandonable:
            raise Abandoned(request.signal_name)

    for sig in signals:
        signal.signal(sig, handler)
    try:
        yield request
    finally:
        restore()
