"""Long-running commands (``serve``, ``exporter``) stop on SIGTERM or SIGINT: one place that
turns those signals into an event and puts the previous handlers back.  (A command run for
the user, ``lab exec``, gets the signals this process is sent: ``host.process.run_forwarding``.)"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from dtnkit.host.signals import handling


@contextlib.contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT while the block runs (handlers only in the main
    thread, where Python allows them); the previous handlers are restored after."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    with handling((signal.SIGTERM, signal.SIGINT), on_signal):
        yield stop


def wait(stop: threading.Event) -> None:
    """Block until ``stop`` is set (in steps, so signals are handled promptly)."""
    while not stop.wait(0.5):
        pass
