"""runtime.interrupts: the first signal asks the loop to stop at a safe point, a second acts at once, and a signal
inside an abandonable stretch gives that work up at once."""

import os
import signal

import pytest
from biobench.runtime.interrupts import Abandoned, StopRequest, stop_on_signal


def test_the_first_signal_sets_the_request_and_restores_the_previous_handler():
    before = signal.getsignal(signal.SIGUSR1)
    said: list[str] = []
    with stop_on_signal(said.append, signals=(signal.SIGUSR1,), message="saving") as request:
        assert not request.requested and request.signum is None
        assert signal.getsignal(signal.SIGUSR1) is not before
        os.kill(os.getpid(), signal.SIGUSR1)
        assert request.requested and request.signal_name == "SIGUSR1" and request.signum == signal.SIGUSR1
        assert signal.getsignal(signal.SIGUSR1) is before  # a second signal reaches the previous handler
    assert said == ["SIGUSR1: saving"]
    assert signal.getsignal(signal.SIGUSR1) is before


def test_a_signal_inside_an_abandonable_stretch_gives_it_up_and_a_later_one_cannot_start():
    with stop_on_signal(lambda line: None, signals=(signal.SIGUSR1,)) as request:
        kept = []
        with pytest.raises(Abandoned) as err:
            with request.abandonable():
                os.kill(os.getpid(), signal.SIGUSR1)
                kept.append("never")  # the handler raised before this line
        assert err.value.signal_name == "SIGUSR1" and kept == []
        with pytest.raises(Abandoned):
            with request.abandonable():
                pass


def test_outside_an_abandonable_stretch_the_signal_only_sets_the_flag():
    request = StopRequest()
    with request.abandonable():
        pass
    assert not request.requested
