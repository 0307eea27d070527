"""Long-running commands (``serve``, ``exporter``) stop on SIGTERM or SIGINT: one place that
turns those signals into an event and puts the previous handlers back; and a command run
for the user (``lab exec``) gets the signals this process is sent, as under ``sudo``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any


@contextlib.contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT while the block runs (handlers only in the main
    thread, where Python allows them); the previous handlers are restored after."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, on_signal)
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def wait(stop: threading.Event) -> None:
    """Block until ``stop`` is set (in steps, so signals are handled promptly)."""
    while not stop.wait(0.5):
        pass


FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _terminal_signals_reach(child_pgid: int) -> bool:
    """True when a Ctrl-C at the controlling terminal reaches the child by itself (the child
    is in the terminal's foreground process group): forwarding it too would deliver it
    twice, and a second Ctrl-C means "give up now" to many tools."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == child_pgid
    except OSError:
        return False
    finally:
        os.close(fd)


def run_forwarding(argv: list[str]) -> int:
    """Run *argv* to its end, as ``sudo`` and ``ip netns exec`` do for their command: SIGINT,
    SIGTERM and SIGHUP sent to this process go to the child, which is waited for, so it can
    save its state (a copy's resume journal, a server's drain).  The exit status is the
    child's, 128 + N when signal N ended it."""
    child = subprocess.Popen(argv)

    def forward(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and _terminal_signals_reach(os.getpgid(child.pid)):
            return  # the terminal sent it to the child's whole group already
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in FORWARDED:
            previous[signum] = signal.signal(signum, forward)
    try:
        code = child.wait()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 128 - code if code < 0 else code
