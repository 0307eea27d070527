"""dtnkit.host.signals: a block handles signals its own way, and the handlers it replaced
are back however it ends; SIGTERM can unwind a block as Ctrl-C does (cp, tune apply).
Real signals, sent to this process."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

import pytest

from dtnkit.host.signals import handling, interrupting


def test_sigterm_unwinds_the_block_as_ctrl_c_does_and_the_old_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    reached_after_kill = False
    with pytest.raises(KeyboardInterrupt), interrupting(signal.SIGTERM) as installed:
        assert installed
        os.kill(os.getpid(), signal.SIGTERM)
        reached_after_kill = True  # Python runs the handler before this line
    assert not reached_after_kill
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_handler_gets_each_signal_and_the_previous_ones_are_restored() -> None:
    got: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        got.append(signum)

    before = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2)}
    with handling((signal.SIGUSR1, signal.SIGUSR2), note):
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR2)
    assert got == [signal.SIGUSR1, signal.SIGUSR2]
    assert {s: signal.getsignal(s) for s in before} == before


def test_the_handlers_come_back_when_the_block_raises() -> None:
    before = signal.getsignal(signal.SIGUSR1)
    with pytest.raises(RuntimeError), handling([signal.SIGUSR1], lambda s, f: None):
        raise RuntimeError("the block's own failure")
    assert signal.getsignal(signal.SIGUSR1) is before


def test_outside_the_main_thread_the_block_runs_with_the_handlers_it_has() -> None:
    """Python allows handlers only in the main thread: elsewhere nothing is installed
    (and nothing raises), which the block is told."""
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def worker() -> None:
        with interrupting(signal.SIGTERM) as installed:
            seen.append(installed)
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [False, before]
