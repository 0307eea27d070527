"""Long-running commands (``serve``, ``exporter``) stop on SIGTERM or SIGINT: one place that
turns those signals into an event and puts the previous handlers back."""

from __future__ import annotations

import contextlib
import signal
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
